"""Kernel ledger: an append-only, tamper-evident log of proof-carrying GPU kernel bundles.

The product spec is ``../shared/SPEC.md``; docs/design.md and docs/formats-crypto.md describe
the formats and decisions. The pure security core (``merkle``, ``note``, ``canonical``,
``tiles``, ``entries``, ``encoding``) does no I/O; ``store`` owns SQLite; the shell ``ledger_cli``
(the command line, and ``ledger_cli.wiring``) is the one layer that joins the log to the verifier
package ``verify``: no other module of ``ledger`` imports ``verify`` or the shell.
"""

__version__ = "0.1.0"
