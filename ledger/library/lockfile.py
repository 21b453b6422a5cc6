"""A program's lock file of kernels (SPEC 7 ``ledger lock``), as ``go.sum`` is for Go modules.

Format (``kernels.lock`` by default), UTF-8 text, one kernel per line, sorted, ``#`` comments:

    NAME@VERSION <64 hex bundle digest> <log origin>

``ledger lock add NAME@VERSION`` verifies the kernel under the policy and records the line (the
same name again replaces its line); ``ledger lock verify`` verifies every locked kernel again and
fails, one line per kernel, when it is missing from the log, its digest changed, it is below the
policy (signer, checks, obligations, verdict) or the log rolled back. The loaders
(``load_ptx``, ``load_cupy``) given a lock file refuse a kernel not in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.errors import BadInput, CannotCheck, LedgerError, PolicyError
from ledger.core.fsutil import read_small, write_atomic

if TYPE_CHECKING:
    from ledger.library.certificate import Certificate
    from ledger.library.verifier import Verifier

DEFAULT_FILE = "kernels.lock"
MAX_LOCK_BYTES = 1 << 20


@dataclass(frozen=True)
class Locked:
    """One locked kernel."""

    name: str
    version: str
    digest: str  # hex
    origin: str

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def line(self) -> str:
        return f"{self.ref} {self.digest} {self.origin}\n"


@dataclass(frozen=True)
class Problem:
    """A locked kernel that failed ``lock verify``, and the exit code its failure maps to."""

    ref: str
    reason: str
    exit_code: int

    def line(self) -> str:
        return f"{self.ref}: {self.reason}"


@dataclass(frozen=True)
class LockFile:
    path: Path
    kernels: tuple[Locked, ...]

    @classmethod
    def read(cls, path: Path, missing_ok: bool = False) -> LockFile:
        if missing_ok and not path.exists():
            return cls(path, ())
        text = read_small(path, MAX_LOCK_BYTES, "lock file").decode("utf-8", "replace")
        out: list[Locked] = []
        seen: set[tuple[str, str]] = set()
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(" ")
            ref = parts[0]
            name, at, version = ref.rpartition("@")
            digest = parts[1] if len(parts) > 1 else ""
            if (len(parts) != 3 or not at or not name or not version or len(digest) != 64
                    or any(c not in "0123456789abcdef" for c in digest)):
                raise BadInput(f"{path}:{n}: expected 'NAME@VERSION DIGEST ORIGIN'")
            if (name, version) in seen:  # two digests for one kernel: which one holds?
                raise BadInput(f"{path}:{n}: {ref} is locked twice; keep one line for it")
            seen.add((name, version))
            out.append(Locked(name, version, digest, parts[2]))
        return cls(path, tuple(out))

    def find(self, name: str, version: str) -> Locked | None:
        return next((k for k in self.kernels if (k.name, k.version) == (name, version)), None)

    def with_kernel(self, cert: Certificate, origin: str) -> LockFile:
        if " " in cert.kernel or "\n" in cert.kernel or " " in origin:
            raise BadInput(f"{cert.kernel!r}: a name, version or origin with a space cannot be "
                           "locked")
        new = Locked(cert.kernel_name, cert.kernel_version, cert.bundle_digest, origin)
        rest = [k for k in self.kernels if (k.name, k.version) != (new.name, new.version)]
        return LockFile(self.path, tuple(sorted([*rest, new], key=lambda k: k.ref)))

    def write(self) -> None:
        text = "# kernel ledger lock file: NAME@VERSION DIGEST ORIGIN (ledger lock add)\n"
        text += "".join(k.line() for k in self.kernels)
        write_atomic(self.path, text.encode("utf-8"), 0o644, exclusive=False)

    def admit(self, cert: Certificate) -> None:
        """``PolicyError`` rule ``lock`` unless ``cert``'s kernel is locked with its digest."""
        k = self.find(cert.kernel_name, cert.kernel_version)
        if k is None:
            raise PolicyError("lock", f"{cert.kernel} is not in the lock file {self.path}")
        if k.digest != cert.bundle_digest:
            raise PolicyError("lock", f"{cert.kernel} is locked at {k.digest} in {self.path}, "
                              f"not {cert.bundle_digest}")

    def verify(self, verifier: Verifier) -> list[Problem]:
        """Verify every locked kernel again; the problems, one per failing kernel."""
        problems: list[Problem] = []
        for k in self.kernels:
            try:
                cert = verifier.verify(k.ref)
            except LedgerError as e:
                code = e.exit_code if isinstance(e, CannotCheck) else 1
                problems.append(Problem(k.ref, _why(e), code))
                continue
            if cert.bundle_digest != k.digest:
                problems.append(Problem(k.ref, f"digest changed: locked {k.digest}, the log has "
                                        f"{cert.bundle_digest}", 1))
        return problems


def _why(e: LedgerError) -> str:
    from ledger.core.errors import UnknownHash

    if isinstance(e, UnknownHash):
        return f"missing from the log ({e})"
    return str(e)
