"""Kernel ledger: an append-only, tamper-evident log of proof-carrying GPU kernel bundles.

The product spec is ``../shared/SPEC.md``; docs/design.md and docs/formats-crypto.md describe
the formats and decisions. The pure security core (``merkle``, ``note``, ``canonical``,
``tiles``, ``entries``, ``encoding``) does no I/O; ``store`` owns SQLite; ``wiring`` (used only
by the CLI) joins the log to the verifier package ``verify``.
"""

__version__ = "0.1.0"
