"""Kernel ledger: an append-only, tamper-evident log of proof-carrying GPU kernel bundles, and
the library a program uses to launch a kernel only when the ledger vouches for it (SPEC 10).

The public API is exactly ``__all__`` (docs/using-verified-kernels.md; reference in docs/api/)::

    import ledger

    policy = ledger.load_policy("policy.json")            # or ledger.Policy(log=..., ...)
    log = ledger.open_log("/srv/ledger")                  # a ledger, a server URL, a mirror
    cert = ledger.Verifier(policy, log).verify("vector_add@1.0.0")
    ptx, cert = ledger.load_ptx("vector_add@1.0.0", policy, log=log)

A policy not met raises ``PolicyError`` (``rule``, ``reason``); tampering raises the rest of the
``VerificationFailed`` tree; every error is a ``LedgerError``. The names load on first use
(module ``__getattr__``), so ``import ledger.core.merkle`` loads none of them.

The product spec is ``../shared/SPEC.md``; docs/design.md and docs/formats-crypto.md describe
the formats and decisions. The pure security core (``ledger.core``) does no I/O; ``ledger.store``
owns the databases; the shell ``ledger_cli`` and the library ``ledger.library`` are the layers
that join the log to the verifier package ``verify``: no other module of ``ledger`` imports
``verify`` or the shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Cache",
    "Certificate",
    "CheckResult",
    "LedgerError",
    "LocalLog",
    "LockFile",
    "MirrorLog",
    "Obligation",
    "Policy",
    "PolicyError",
    "ReadLog",
    "ServerLog",
    "Signer",
    "VerificationFailed",
    "Verifier",
    "__version__",
    "attest",
    "load_cupy",
    "load_policy",
    "load_ptx",
    "open_log",
]

if TYPE_CHECKING:
    from ledger.core.errors import LedgerError, PolicyError, VerificationFailed
    from ledger.library.attestation import attest
    from ledger.library.cache import Cache
    from ledger.library.certificate import Certificate, CheckResult, Obligation, Signer
    from ledger.library.loaders import load_cupy, load_ptx
    from ledger.library.lockfile import LockFile
    from ledger.library.logs import LocalLog, MirrorLog, ReadLog, ServerLog, open_log
    from ledger.library.public import load_policy
    from ledger.library.verifier import Verifier
    from ledger.trust import Policy

_WHERE = {
    "LedgerError": "ledger.core.errors", "PolicyError": "ledger.core.errors",
    "VerificationFailed": "ledger.core.errors", "Cache": "ledger.library.cache",
    "Certificate": "ledger.library.certificate", "CheckResult": "ledger.library.certificate",
    "Obligation": "ledger.library.certificate", "Signer": "ledger.library.certificate",
    "load_cupy": "ledger.library.loaders", "load_ptx": "ledger.library.loaders",
    "LockFile": "ledger.library.lockfile", "LocalLog": "ledger.library.logs",
    "MirrorLog": "ledger.library.logs", "ReadLog": "ledger.library.logs",
    "ServerLog": "ledger.library.logs", "open_log": "ledger.library.logs",
    "Verifier": "ledger.library.verifier", "Policy": "ledger.trust",
    "load_policy": "ledger.library.public", "attest": "ledger.library.attestation",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
