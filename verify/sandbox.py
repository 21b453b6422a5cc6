"""Run a bundle's own reference (``kernel.reference: {file, function}``) in a sandbox (SPEC 3).

Code from a bundle never runs in the verifier's process. ``run_reference`` runs it in a child
process, and only inside bubblewrap (``bwrap``):

- ``--unshare-all``: new user, pid, network, ipc, uts and cgroup namespaces (the network namespace
  holds only its own loopback: no socket reaches the host or beyond, no name resolves);
- ``--cap-drop ALL``, ``--new-session`` (no terminal injection), ``--die-with-parent``, a cleared
  environment (``HOME=/tmp``; no ``LEDGER_HOME``, no keys, no user files);
- its only files: ``/usr`` and the Python interpreter's prefix, read-only; numpy's package
  directory, read-only, at ``/site``; the job directory, read-only, at ``/job`` (a scratch copy of
  the bundle and the input ``.npy`` files); a private ``/tmp`` tmpfs of ``Limits.tmp_bytes``;
- a seccomp filter (``--seccomp``) that refuses to create processes (``fork``, ``vfork``, ``clone``
  without ``CLONE_THREAD``; ``clone3`` answers ENOSYS so threads fall back to ``clone``): the
  reference is one process, and a fork bomb gets EAGAIN. This is the process limit: RLIMIT_NPROC
  does not bind a process whose real uid is root, which is how this tool often runs;
- rlimits: CPU seconds, address space, file size, open files, no core dumps; a wall-clock timeout
  per batch after which the child's whole process group is killed (the pid namespace dies with
  it);
- bounded output: what the reference prints goes to a log stream cut at ``Limits.log_bytes`` (more
  kills the run); results come back on stdout as ``.npy`` records (``numpy.save`` bytes), at most
  ``Limits.result_bytes`` in all (more kills the run). The child never writes to the host's disk.

Results are validated here with ``numpy.load(allow_pickle=False)``: each a plain numeric array
(bool, int, uint or float; never object, string, complex or structured), named as an output of the
contract, with exactly the contract's element count (any shape of at most ``MAX_DIMS`` dimensions,
read in row-major order, as the trusted references return e.g. ``(rows, cols)``).

One ``Session`` is one sandbox start for one bundle: it starts when the bundle's falsify checks
begin, imports numpy and the reference while the kernel runs, and then serves every test's batch of
cases (inputs written as ``.npy`` into the read-only job directory, the batch named on the child's
stdin, results read back up to a batch-end record). ``run_reference`` is one session with one
batch. Costs: docs/benchmarks.md, "Sandboxed bundle references".

Without bubblewrap, where it cannot set up its namespaces, or with ``LEDGER_SANDBOX=off`` in the
environment, ``SandboxUnavailable`` (a ``CannotCheck``) says why and the caller reports
``skipped``. ``trust=True`` (the CLI's ``--trust-bundle-code``) runs the same runner without a
sandbox where none is available, with the rlimits only, and the ``how`` text says so (a sandbox,
when there is one, is still used).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import platform
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ledger.core.errors import CannotCheck
from verify.confine import base_argv, private_dirs
from verify.confine import sandbox_status as sandbox_status  # callers found it here first
from verify.tools import lower_limit

MAX_MESSAGE = 300  # characters of an error the reference raised
MAX_DIMS = 8  # dimensions of a returned array


class SandboxUnavailable(CannotCheck):
    """No sandbox can be set up here (and bundle code was not trusted explicitly)."""


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 120.0  # all cases of one start together
    cpu_seconds: int = 120
    mem_bytes: int = 4 << 30  # address space of the reference's process
    result_bytes: int = 1 << 30  # all result records together
    log_bytes: int = 1 << 20  # what the reference prints; more kills the run
    tmp_bytes: int = 16 << 20  # its private /tmp (tmpfs)
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE
    open_files: int = 64


DEFAULT_LIMITS = Limits()


class OutputView(Protocol):
    """What a case expects back, as the sandbox reads it (``verify.oracle.OutputSpec``: the
    oracle sits above this module and loads it lazily)."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...  # element counts


@dataclass(frozen=True)
class Case:
    inputs: Mapping[str, np.ndarray[Any, Any]]  # pointer inputs and scalars (0-d) by name
    sizes: Mapping[str, int]
    outputs: Sequence[OutputView]
    # out/inout pointers passed as null in this launch: a reference that returns one anyway
    # (it cannot tell an output is null) has it dropped, not compared and not refused
    nulled: frozenset[str] = frozenset()


@dataclass
class CaseResult:
    outputs: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    error: str = ""  # "" when the reference computed this case


@dataclass
class RunResult:
    how: str  # "bubblewrap 0.8.0 sandbox" or "no sandbox (--trust-bundle-code): rlimits only"
    cases: list[CaseResult]
    seconds: float
    log: str  # the head of what the reference printed


# --- availability -----------------------------------------------------------------------------


# --- seccomp: no new processes ------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# (fork, vfork, clone, clone3) system call numbers; None where the call does not exist.
_NR = {"x86_64": (57, 58, 56, 435), "aarch64": (None, None, 220, 435)}
_CLONE_THREAD = 0x00010000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL = 0x80000000
_EAGAIN, _ENOSYS = 11, 38


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A classic-BPF seccomp filter refusing process creation, or None for an unknown arch."""
    arch = machine or platform.machine()
    if arch not in _AUDIT_ARCH:
        return None
    fork, vfork, clone, clone3 = _NR[arch]
    ins: list[tuple[int, int, int, int]] = []  # (code, jt, jf, k) with jt/jf as labels first

    def ld(off: int) -> None:
        ins.append((0x20, 0, 0, off))

    def jeq(k: int, jt: str, jf: str = "") -> None:
        ins.append((0x15, jt, jf, k))  # type: ignore[arg-type]

    def ret(k: int) -> None:
        ins.append((0x06, 0, 0, k))

    labels: dict[str, int] = {}
    ld(4)
    jeq(_AUDIT_ARCH[arch], "", "kill")
    ld(0)
    if arch == "x86_64":
        ins.append((0x35, "deny", "", 0x40000000))  # type: ignore[arg-type]  # x32 ABI: refuse
    for nr in (fork, vfork):
        if nr is not None:
            jeq(nr, "deny")
    jeq(clone3, "nosys")
    jeq(clone, "clone")
    ret(_RET_ALLOW)
    labels["clone"] = len(ins)
    ld(16)  # args[0], low 32 bits: the clone flags
    ins.append((0x45, "allow", "deny", _CLONE_THREAD))  # type: ignore[arg-type]
    labels["allow"] = len(ins)
    ret(_RET_ALLOW)
    labels["deny"] = len(ins)
    ret(_RET_ERRNO | _EAGAIN)
    labels["nosys"] = len(ins)
    ret(_RET_ERRNO | _ENOSYS)
    labels["kill"] = len(ins)
    ret(_RET_KILL)

    def rel(target: object, pc: int) -> int:
        return 0 if target in ("", 0) else labels[str(target)] - pc - 1

    out = b""
    for pc, (code, jt, jf, k) in enumerate(ins):
        out += struct.pack("<HBBI", code, rel(jt, pc), rel(jf, pc), k)
    return out


# --- the runner (executed inside the sandbox; stdlib + numpy only) ------------------------------

RUNNER = r"""
import io, json, os, struct, sys
job, site = sys.argv[1], sys.argv[2]
if site:
    sys.path.insert(0, site)
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)  # what the reference prints goes to the log stream, never to the results
stdin = os.fdopen(os.dup(0), "r")
os.close(0)
def rec(kind, case, name, payload):
    nb = name.encode("utf-8", "replace")[:200]
    out.write(kind + struct.pack("<IH", case, len(nb)) + nb + struct.pack("<Q", len(payload)))
    out.write(payload)
def err(e):
    return (type(e).__name__ + ": " + str(e))[:300].encode("utf-8", "replace")
failure = None
try:
    import importlib.util
    import numpy as np
    spec = json.load(open(os.path.join(job, "reference.json")))
    path = os.path.join(job, "bundle", spec["file"])
    sys.path.insert(0, os.path.dirname(path))
    ms = importlib.util.spec_from_file_location("bundle_reference", path)
    mod = importlib.util.module_from_spec(ms)
    ms.loader.exec_module(mod)
    fn = getattr(mod, spec["function"])
except BaseException as e:
    failure = err(e)
for line in stdin:
    batch = os.path.join(job, "batch", line.strip())
    if failure is not None:
        rec(b"F", 0, "", failure)
    else:
        cases = json.load(open(os.path.join(batch, "cases.json")))
        for i, case in enumerate(cases):
            try:
                inputs = {n: np.load(os.path.join(batch, str(i), n + ".npy"), allow_pickle=False)
                          for n in case["inputs"]}
                res = fn(inputs, dict(case["sizes"]))
                if not isinstance(res, dict):
                    raise TypeError("returned " + type(res).__name__ + ", not a dict of arrays")
                for name, arr in res.items():
                    buf = io.BytesIO()
                    np.save(buf, np.asarray(arr), allow_pickle=False)
                    rec(b"A", i, str(name), buf.getvalue())
                rec(b"D", i, "", b"")
            except BaseException as e:
                rec(b"E", i, "", err(e))
    rec(b"Z", 0, "", b"")
    out.flush()
os._exit(0)
"""


# --- running --------------------------------------------------------------------------------


def _numpy_dirs() -> list[tuple[Path, str]]:
    """numpy's package directory (and its bundled libraries) with their names under /site."""
    pkg = Path(np.__file__).resolve().parent
    dirs = [(pkg, "numpy")]
    libs = pkg.parent / "numpy.libs"
    if libs.is_dir():
        dirs.append((libs, "numpy.libs"))
    return dirs


def _bwrap_argv(
    bwrap: str,
    job: Path,
    seccomp_fd: int | None,
    command: Sequence[str],
    tmp_bytes: int = DEFAULT_LIMITS.tmp_bytes,
) -> list[str]:
    argv = base_argv(bwrap, {
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    })
    for src, name in _numpy_dirs():
        argv += ["--ro-bind", str(src), f"/site/{name}"]
    argv += ["--ro-bind", str(job), "/job", "--chdir", "/job/bundle"]
    argv += private_dirs(tmp_bytes)
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + list(command)


def _set_limits(limits: Limits) -> None:
    # only ever lowered: a limit the user set lower stays, none fails the run (issue 9 item 21)
    lower_limit(resource.RLIMIT_AS, limits.mem_bytes)
    lower_limit(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)
    lower_limit(resource.RLIMIT_FSIZE, limits.file_bytes)
    lower_limit(resource.RLIMIT_NOFILE, limits.open_files)
    lower_limit(resource.RLIMIT_CORE, 0)


def _chmod_tree(root: Path) -> None:
    for p in [root, *root.rglob("*")]:  # readable by whatever uid the sandbox maps to
        p.chmod(0o755 if p.is_dir() else 0o644)


class Session:
    """One sandbox start for one bundle reference, serving any number of batches of cases.

    The child starts at once and imports numpy and the reference while the caller does other
    work (the falsification runner launches the kernel first); each ``run(cases)`` writes the
    inputs as .npy files into the job directory (bound read-only inside), sends the batch's name
    on the child's stdin, and reads the results back until the batch's end record. A limit hit
    (time, output) kills the child; later batches then fail with that reason."""

    def __init__(
        self,
        files: Mapping[str, bytes],
        ref_file: str,
        function: str,
        *,
        trust: bool = False,
        limits: Limits | None = None,
    ) -> None:
        self.limits = limits or DEFAULT_LIMITS
        bwrap, version = sandbox_status()
        if bwrap is None and not trust:
            raise SandboxUnavailable(version)
        self._job = Path(tempfile.mkdtemp(prefix="ledger-sandbox-"))
        self._seccomp: Any = None
        self._batches = 0
        self._log = bytearray()
        self._logged = 0
        self._dead = ""
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            self._start(files, ref_file, function, bwrap, version, trust)
        except BaseException:
            self.close()
            raise
        # A caller that never closes the session (or dies first) still leaves nothing behind:
        # the child is killed and the job directory removed when the session is collected or
        # the interpreter exits.
        self._finalizer = weakref.finalize(self, _cleanup, self.proc, self._job, self._seccomp)

    def _start(
        self,
        files: Mapping[str, bytes],
        ref_file: str,
        function: str,
        bwrap: str | None,
        version: str,
        trust: bool,
    ) -> None:
        job, lim = self._job, self.limits
        for path, data in files.items():
            target = job / "bundle" / path  # bundle paths are checked relative paths
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (job / "batch").mkdir()
        (job / "reference.json").write_text(json.dumps({"file": ref_file, "function": function}))
        (job / "runner.py").write_text(RUNNER)
        _chmod_tree(job)
        exe = str(Path(sys.executable).resolve())
        pass_fds: tuple[int, ...] = ()
        if bwrap is not None:
            program = seccomp_program()
            fd = None
            if program is not None:
                self._seccomp = tempfile.TemporaryFile()
                self._seccomp.write(program)
                self._seccomp.seek(0)
                fd = self._seccomp.fileno()
                pass_fds = (fd,)
            cmd = [exe, "-I", "-S", "-B", "/job/runner.py", "/job", "/site"]
            argv = _bwrap_argv(bwrap, job, fd, cmd, tmp_bytes=lim.tmp_bytes)
            nproc = "one process (seccomp)" if program is not None else "no process limit"
            self.how = f"{version} sandbox (no network, scratch copy only, {nproc})"
            env = {"PATH": "/usr/bin:/bin"}
            cwd = job
        else:
            site = str(_numpy_dirs()[0][0].parent)
            argv = [exe, "-I", "-S", "-B", str(job / "runner.py"), str(job), site]
            self.how = "no sandbox (--trust-bundle-code): bundle code ran with rlimits only"
            env = {"PATH": "/usr/bin:/bin", "HOME": str(job), "LANG": "C.UTF-8",
                   "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # fmt: skip
            cwd = job / "bundle"
            cwd.mkdir(exist_ok=True)
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=pass_fds,
                preexec_fn=lambda: _set_limits(lim),
            )
        except OSError as e:
            raise CannotCheck(f"could not start the reference process: {e}") from e

    @property
    def log(self) -> str:
        return self._log.decode("utf-8", "replace")

    def run(self, cases: Sequence[Case]) -> RunResult:
        """Every case through the reference; never raises for what the reference does."""
        t0 = time.perf_counter()
        if self._dead:
            return RunResult(self.how, [CaseResult(error=self._dead) for _ in cases], 0.0, self.log)
        k = str(self._batches)
        self._batches += 1
        batch = self._job / "batch" / k
        batch.mkdir()
        spec = []
        for i, case in enumerate(cases):
            d = batch / str(i)
            d.mkdir()
            for name, arr in case.inputs.items():
                np.save(d / f"{name}.npy", np.asarray(arr), allow_pickle=False)
            spec.append({"inputs": sorted(case.inputs), "sizes": dict(case.sizes)})
        (batch / "cases.json").write_text(json.dumps(spec))
        _chmod_tree(batch)
        data, problem = self._exchange(k, answer_budget(cases, self.limits.result_bytes))
        shutil.rmtree(batch, ignore_errors=True)
        raws = _parse(data, len(cases))
        for r in raws:
            if not r.error and (problem or not r.done):
                r.error = problem or "the reference gave no result for this case"
        if problem:
            self._dead = problem
            self._kill()
        checked = [_validate(r, c) for r, c in zip(raws, cases, strict=True)]
        return RunResult(self.how, checked, time.perf_counter() - t0, self.log)

    def _exchange(self, k: str, budget: tuple[int, str]) -> tuple[memoryview, str]:
        """Send batch ``k``; read its records up to the end record, never more than ``budget``
        bytes (the most the contract lets these cases return: ``answer_budget``): one byte more
        and the child is killed, before anything beyond is read. (records, problem or '')."""
        proc, lim = self.proc, self.limits
        most, why = budget
        assert proc is not None and proc.stdin and proc.stdout and proc.stderr
        try:
            proc.stdin.write(f"{k}\n".encode())
            proc.stdin.flush()
        except OSError:
            return memoryview(b""), self._ended()
        buf = bytearray()
        scan = 0
        deadline = time.monotonic() + lim.wall_seconds
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "log")
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    late = f"ran past the {lim.wall_seconds:g} s time limit and was killed"
                    return memoryview(buf), late
                for key, _ in sel.select(timeout=min(left, 1.0)):
                    if key.data == "out":  # never a byte beyond the budget (+1 to see excess)
                        chunk = os.read(key.fd, min(1 << 16, most + 1 - len(buf)))
                    else:
                        chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        if key.data == "out":
                            return memoryview(buf), self._ended()
                    elif key.data == "out":
                        buf += chunk
                        if len(buf) > most:
                            return memoryview(b""), f"returned more than {most} bytes{why}"
                        scan, done = _scan_to_end(buf, scan)
                        if done:
                            return memoryview(buf), ""
                    else:
                        self._logged += len(chunk)
                        if len(self._log) < 4096:
                            self._log += chunk[: 4096 - len(self._log)]
                        if self._logged > lim.log_bytes:
                            loud = f"printed more than {lim.log_bytes} bytes and was killed"
                            return memoryview(buf), loud
        finally:
            sel.close()

    def _ended(self) -> str:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the reference process closed its results and was killed"
        what = f"signal {-rc} ({_signame(-rc)})" if rc < 0 else f"status {rc}"
        return f"the reference process ended with {what}"

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def close(self) -> None:
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        else:
            _cleanup(self.proc, self._job, self._seccomp)
        self._seccomp = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cleanup(proc: subprocess.Popen[bytes] | None, job: Path, seccomp: Any) -> None:
    """Stop the child (its whole process group) and remove the job directory."""
    if proc is not None:
        for f in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    if seccomp is not None:
        seccomp.close()
    shutil.rmtree(job, ignore_errors=True)


def run_reference(
    files: Mapping[str, bytes],
    ref_file: str,
    function: str,
    cases: Sequence[Case],
    *,
    trust: bool = False,
    limits: Limits | None = None,
) -> RunResult:
    """Run ``function`` of the bundle file ``ref_file`` on every case: one sandbox start, one batch.

    Raises ``SandboxUnavailable`` when no sandbox can be set up and ``trust`` is False. Never
    raises for what the reference does: its errors, a limit it hits, output it should not give
    are in the case results (``error``)."""
    t0 = time.perf_counter()
    with Session(files, ref_file, function, trust=trust, limits=limits) as session:
        res = session.run(cases)
    res.seconds = time.perf_counter() - t0
    return res


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown"


@dataclass
class _RawCase:
    error: str = ""
    done: bool = False
    arrays: dict[str, memoryview] = field(default_factory=dict)  # unvalidated .npy payloads


_HEADER = struct.Struct("<cIH")
_LENGTH = struct.Struct("<Q")


# What one result record costs beyond its payload: kind, case, name length, name, payload length.
RECORD_BYTES = 1 + 4 + 2 + 200 + 8
NPY_HEADER_BYTES = 4096  # an .npy header (magic, version, dict of dtype, order, shape; padded)
MAX_ITEMSIZE = 8  # bytes per element of a returned array: f64, i64, u64 at most


def answer_budget(cases: Sequence[Case], result_bytes: int) -> tuple[int, str]:
    """The most a batch's answer may hold, computed from the contract before anything is read:
    per case, each output the contract names as one record (``NPY_HEADER_BYTES`` of header and
    its element count at ``MAX_ITEMSIZE`` bytes) plus the case's end or error record; one end
    record for the batch. Never more than ``result_bytes``. Returns (bytes, why in words)."""
    total = 2 * RECORD_BYTES + MAX_MESSAGE  # the end record; a load failure's record
    for case in cases:
        total += 2 * RECORD_BYTES + MAX_MESSAGE
        for spec in case.outputs:
            total += RECORD_BYTES + NPY_HEADER_BYTES + MAX_ITEMSIZE * math.prod(spec.shape)
    if total >= result_bytes:
        return result_bytes, " and was killed"
    return total, (
        f", the most the contract's outputs allow for {len(cases)} case(s), and was killed"
    )


def _scan_to_end(buf: bytearray, pos: int) -> tuple[int, bool]:
    """Walk whole records from ``pos``: (where the next incomplete record starts, end seen)."""
    while pos + _HEADER.size <= len(buf):
        kind, _, nlen = _HEADER.unpack_from(buf, pos)
        at = pos + _HEADER.size + nlen
        if at + _LENGTH.size > len(buf):
            break
        (plen,) = _LENGTH.unpack_from(buf, at)
        end = at + _LENGTH.size + plen
        if end > len(buf):
            break
        pos = end
        if kind == b"Z":
            return pos, True
    return pos, False


def _parse(data: memoryview, n_cases: int) -> list[_RawCase]:
    """Records ``kind(1) case(u32) name_len(u16) name len(u64) payload``; bounded, never trusted."""
    results = [_RawCase() for _ in range(n_cases)]
    pos = 0
    while pos + _HEADER.size <= len(data):
        kind, case, nlen = _HEADER.unpack_from(data, pos)
        pos += _HEADER.size
        name = bytes(data[pos : pos + nlen]).decode("utf-8", "replace")
        pos += nlen
        if pos + _LENGTH.size > len(data):
            break
        (plen,) = _LENGTH.unpack_from(data, pos)
        pos += _LENGTH.size
        payload = data[pos : pos + plen]
        pos += plen
        if kind == b"Z":
            break
        if kind == b"F":
            for r in results:
                r.error = r.error or f"the reference could not be loaded: {_message(payload)}"
            continue
        if case >= n_cases or results[case].error or results[case].done:
            continue
        r = results[case]
        if kind == b"E":
            r.error = f"the reference raised {_message(payload)}"
        elif kind == b"A":
            if name in r.arrays:
                r.error = f"output {name!r} returned twice"
            elif len(r.arrays) >= 64:
                r.error = "more than 64 outputs returned"
            else:
                r.arrays[name] = payload
        elif kind == b"D":
            r.done = True
    return results


def _message(payload: bytes | memoryview) -> str:
    text = bytes(payload[:MAX_MESSAGE]).decode("utf-8", "replace")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def _validate(r: _RawCase, case: Case) -> CaseResult:
    if r.error:
        return CaseResult(error=r.error)
    want = {o.name: o for o in case.outputs}
    out: dict[str, np.ndarray[Any, Any]] = {}
    for name, payload in r.arrays.items():
        spec = want.get(name)
        if spec is None and name in case.nulled:
            continue
        if spec is None:
            return CaseResult(error=f"returned {name!r}, which is not an output of the contract")
        try:
            arr = np.load(io.BytesIO(payload), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            return CaseResult(
                error=f"output {name!r} is not a plain .npy array: {_message(str(e).encode())}"
            )
        if not isinstance(arr, np.ndarray) or arr.dtype.hasobject:
            return CaseResult(error=f"output {name!r} is an object array")
        if arr.dtype.kind not in "biuf" or arr.dtype.fields is not None:
            return CaseResult(error=f"output {name!r} has dtype {arr.dtype}, not a number type")
        if arr.dtype.itemsize > MAX_ITEMSIZE:  # the answer's budget counts 8 bytes an element
            return CaseResult(error=f"output {name!r} has dtype {arr.dtype}, wider than 64 bits")
        count = math.prod(spec.shape)
        if arr.size != count or arr.ndim > MAX_DIMS:
            return CaseResult(
                error=f"output {name!r} has shape {arr.shape}, the contract gives {spec.shape}"
            )
        out[name] = arr.reshape(spec.shape)  # row-major, as the trusted references return them
    return CaseResult(outputs=out)
