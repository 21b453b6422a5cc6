"""The independent verifier (SPEC 8).

It needs only a bundle (files in memory), an entry or receipt, and public keys. It may use the
pure pieces of ``ledger`` (Merkle maths, canonical JSON, signed notes, bundle manifests) but never
``ledger.store.sqlite``.
"""
