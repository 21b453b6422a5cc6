"""Kernels handed out only after verification (SPEC 10 "Library"): ``load_ptx`` gives a bundle's
PTX bytes with its certificate, ``load_cupy`` a CuPy ``RawModule`` (or ``RawKernel``).

Both verify first (``Verifier.verify`` under the policy, through the verified cache, so a second
load of the same ref needs no log), and with a lock file refuse any kernel not locked in it, or
locked with another digest (``PolicyError`` rule ``lock``). Where no log is given, the one at
``$LEDGER_LOG`` (a ledger directory, a server URL or a static mirror) is used, else the ledger at
``$LEDGER_HOME`` (else ``~/.local/share/kernel-ledger``); a log named by its location is opened
only when the cache cannot answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ledger.core.errors import BadInput, CannotCheck, PolicyError

if TYPE_CHECKING:
    from ledger.library.cache import Cache
    from ledger.library.certificate import Certificate
    from ledger.library.logs import ReadLog
    from ledger.trust import Policy

LOG_ENV = "LEDGER_LOG"


class _LazyLog:
    """The default log, opened on first use (a cached ref never opens it)."""

    def __init__(self, location: str, policy: Policy) -> None:
        self.location = location
        self.policy = policy
        self.where = location
        self._log: ReadLog | None = None

    def _open(self) -> ReadLog:
        if self._log is None:
            from ledger.library.logs import open_log

            self._log = open_log(self.location, self.policy.log)
        return self._log

    def checkpoint(self) -> bytes:
        return self._open().checkpoint()

    def resolve(self, text: str) -> int:
        return self._open().resolve(text)

    def lookup(self, name: str, version: str) -> list[int]:
        return self._open().lookup(name, version)

    def evidence(self, index: int) -> Any:
        return self._open().evidence(index)

    def files(self, index: int, entry: bytes) -> dict[str, bytes] | None:
        return self._open().files(index, entry)

    def prover(self) -> Any:
        return self._open().prover()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


def default_location() -> str:
    env = os.environ.get(LOG_ENV) or os.environ.get("LEDGER_HOME")
    return env or str(Path("~/.local/share/kernel-ledger").expanduser())


def verified_files(
    ref: str | Path, policy: Policy, log: ReadLog | str | Path | None = None,
    lock: str | Path | None = None, cache: Cache | None = None,
) -> tuple[dict[str, bytes], Certificate]:
    """Verify ``ref`` (through the cache) and return the bundle's files and the certificate."""
    from ledger.library.cache import Cache
    from ledger.library.verifier import Verifier

    if log is None or isinstance(log, (str, Path)):  # opened only when the cache cannot answer
        read: Any = _LazyLog(default_location() if log is None else str(log), policy)
    else:
        read = log
    cache = cache or Cache.default()
    try:
        cert = Verifier(policy, read, cache=cache).verify(ref)
    finally:
        if log is None or isinstance(log, (str, Path)):
            read.close()
    if lock is not None:
        from ledger.library.lockfile import LockFile

        LockFile.read(Path(lock)).admit(cert)
    found = cache.lookup(cert.bundle_digest, policy)
    if found is None or found.files is None:
        raise CannotCheck(f"{cert.kernel}: verified, but its files are not in the cache "
                          f"{cache.root}")
    return found.files, cert


def load_ptx(
    ref: str | Path, policy: Policy, *, log: ReadLog | str | Path | None = None,
    lock: str | Path | None = None, file: str | None = None, cache: Cache | None = None,
) -> tuple[bytes, Certificate]:
    """The PTX of the kernel ``ref`` names and its certificate, only once it verified under
    ``policy`` (and is in ``lock``). ``file``: which ``*.ptx`` when the bundle has several."""
    files, cert = verified_files(ref, policy, log, lock, cache)
    ptx = sorted(p for p in files if p.endswith(".ptx"))
    if file is not None:
        if file not in ptx:
            raise BadInput(f"{cert.kernel} has no PTX file {file!r} (it has {', '.join(ptx)})")
        return files[file], cert
    if len(ptx) != 1:
        raise BadInput(f"{cert.kernel} has {len(ptx)} PTX files ({', '.join(ptx)}): name one "
                       "with file=")
    return files[ptx[0]], cert


def load_cupy(
    ref: str | Path, policy: Policy, *, kernel: str | None = None,
    log: ReadLog | str | Path | None = None, lock: str | Path | None = None,
    file: str | None = None, cache: Cache | None = None, cupy: Any = None,
) -> tuple[Any, Certificate]:
    """A CuPy ``RawModule`` of the verified PTX (``RawKernel`` of entry ``kernel`` when named)
    and the certificate. ``CannotCheck`` (exit 3) without CuPy or a CUDA device. ``cupy``: the
    module to use (default: ``import cupy``)."""
    ptx, cert = load_ptx(ref, policy, log=log, lock=lock, file=file, cache=cache)
    cp = cupy if cupy is not None else _import_cupy()
    try:
        count = int(cp.cuda.runtime.getDeviceCount())
    except Exception as e:  # CUDA's own errors (no driver, no device) are not ours to name
        raise CannotCheck(f"no CUDA device for {cert.kernel}: {e}") from e
    if count < 1:
        raise CannotCheck(f"no CUDA device for {cert.kernel}")
    module = cp.RawModule(code=ptx.decode("utf-8"))
    if kernel is None:
        return module, cert
    return module.get_function(kernel), cert


def _import_cupy() -> ModuleType:
    try:
        import cupy  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        raise CannotCheck("CuPy is not installed: load_ptx gives the verified PTX without it")\
            from e
    mod: ModuleType = cupy
    return mod


def refuse_unlocked(cert: Certificate, reason: str) -> PolicyError:
    return PolicyError("lock", f"{cert.kernel} ({cert.bundle_digest}): {reason}")
