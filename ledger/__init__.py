"""Kernel ledger: an append-only, tamper-evident log of proof-carrying GPU kernel bundles.

See ../shared/SPEC.md (copied in spirit into docs/) for the formats. The pure security core
(``merkle``, ``note``, ``canonical``, ``bundle``, ``encoding``) does no I/O; ``store`` owns SQLite;
``cli`` wires the log to the verifier package ``verify``.
"""

__version__ = "0.1.0"
