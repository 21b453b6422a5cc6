"""External tools: find them, and run them as bounded subprocesses (SPEC 8, issue 3 "How it runs").

Tools run with an explicit argv (never a shell), a wall-clock timeout, resource limits (address
space, CPU seconds, output file size, no core dumps), a scrubbed environment, and a working
directory that is a temporary copy of the bundle. Their stdout and stderr are captured and cut to a
bound. A tool that is absent is reported as such so the caller can mark its check ``skipped``.
"""

from __future__ import annotations

import contextlib
import glob
import math
import os
import resource
import select
import shutil
import signal
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

OUTPUT_LIMIT = 1 << 20  # bytes of stdout/stderr kept from one tool run


@dataclass(frozen=True)
class ToolResult:
    argv: tuple[str, ...]
    returncode: int | None  # None when the run timed out
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def lower_limit(which: int, soft: int, hard: int | None = None) -> None:
    """Set a resource limit to at most (``soft``, ``hard``), never above what the process has
    already: a limit the user set lower (``ulimit -v 4000000``) stays lower, and a limit that
    cannot be raised is lowered instead of failing the run (issue 9 item 21). Never raises."""
    want_hard = soft if hard is None else hard
    try:
        cur_soft, cur_hard = resource.getrlimit(which)
        inf = resource.RLIM_INFINITY
        new_hard = want_hard if cur_hard == inf else min(want_hard, cur_hard)
        new_soft = min(soft, new_hard)
        if cur_soft != inf:
            new_soft = min(new_soft, cur_soft)
        resource.setrlimit(which, (new_soft, new_hard))
    except (ValueError, OSError):
        pass


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """``proc.wait(timeout)``, woken when the process exits. ``Popen.wait`` with a timeout polls,
    sleeping up to 50 ms between looks, so a tool that ends just after a look costs that much
    wall time (25 ms on average at the end of every ``ledger verify``, issue 12); where Linux
    gives a pidfd (5.3 and later), ``poll`` on it returns at the exit itself. Raises
    ``subprocess.TimeoutExpired`` as ``Popen.wait`` does."""
    if proc.returncode is None and hasattr(os, "pidfd_open"):
        try:  # before the child is reaped its pid is still its own, so the pidfd is the child's
            fd = os.pidfd_open(proc.pid)
        except OSError:
            fd = -1
        if fd >= 0:
            deadline = time.monotonic() + timeout
            try:  # poll, not select: a process with over 1,024 open files has such fds
                waiter = select.poll()
                waiter.register(fd, select.POLLIN)
                while True:  # looks at least once: a tool that ended in time is not late
                    left = max(0.0, deadline - time.monotonic())
                    ready = waiter.poll(min(math.ceil(left * 1000), 2**31 - 1))  # a C int
                    if ready or left == 0:
                        break
            finally:
                os.close(fd)
            if not ready:
                raise subprocess.TimeoutExpired(proc.args, timeout)
    proc.wait(timeout=timeout)  # reaps it (returns at once when the pidfd said it exited)


def _limits(mem_bytes: int, cpu_seconds: int, fsize_bytes: int) -> None:
    lower_limit(resource.RLIMIT_AS, mem_bytes)
    lower_limit(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
    lower_limit(resource.RLIMIT_FSIZE, fsize_bytes)
    lower_limit(resource.RLIMIT_CORE, 0)


class RunningTool:
    """One tool run started now and collected later (``result``), so that a caller can do other
    work while it runs (``verify.runner`` lets ptxas and nvcc run beside the falsification tests).

    Its stdout and stderr go to anonymous temporary files, not pipes: a tool that writes a lot
    never blocks on a full pipe while nobody reads it (``RLIMIT_FSIZE`` bounds the files). The
    wall-clock ``timeout`` counts from the start."""

    def __init__(
        self,
        argv: Sequence[str],
        cwd: Path,
        timeout: float = 120.0,
        mem_bytes: int = 8 << 30,
        fsize_bytes: int = 512 << 20,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._done: ToolResult | None = None
        self._out = tempfile.TemporaryFile()
        self._err = tempfile.TemporaryFile()
        base_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(cwd),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
        }
        if env:
            base_env.update(env)
        cpu = max(1, int(timeout) + 5)
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            # A new session makes the tool the leader of its own process group, so a timeout
            # kills everything it started (nvcc's cicc, a compiler's passes), not only the child.
            self.proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=base_env,
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=self._err,
                start_new_session=True,
                preexec_fn=lambda: _limits(mem_bytes, cpu, fsize_bytes),
            )
        except OSError as e:
            self._finish(ToolResult(self.argv, 127, "", f"could not start {argv[0]}: {e}", False))

    def _finish(self, res: ToolResult) -> ToolResult:
        self._done = res
        self._out.close()
        self._err.close()
        return res

    def _read(self, f: IO[bytes]) -> str:
        f.seek(0)
        return _cut(f.read(OUTPUT_LIMIT))

    def result(self) -> ToolResult:
        """Wait for the tool (at most until ``timeout`` seconds after its start; then it and
        its process group are killed) and return what it did."""
        if self._done is not None:
            return self._done
        assert self.proc is not None
        try:
            wait_exit(self.proc, max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._stop()
            return self._finish(
                ToolResult(self.argv, None, self._read(self._out), self._read(self._err), True)
            )
        return self._finish(
            ToolResult(
                self.argv,
                self.proc.returncode,
                self._read(self._out),
                self._read(self._err),
                False,
            )
        )

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def kill(self) -> None:
        """Stop the tool and everything it started (a run abandoned half-way)."""
        self._stop()
        if self._done is None:
            self._finish(ToolResult(self.argv, None, "", "stopped: the run was abandoned", False))


def run_tool(
    argv: Sequence[str],
    cwd: Path,
    timeout: float = 120.0,
    mem_bytes: int = 8 << 30,
    fsize_bytes: int = 512 << 20,
    env: dict[str, str] | None = None,
) -> ToolResult:
    """Run ``argv`` in ``cwd`` with limits; never raises for the tool's own failure."""
    return RunningTool(argv, cwd, timeout, mem_bytes, fsize_bytes, env).result()


def _cut(data: bytes) -> str:
    return data[:OUTPUT_LIMIT].decode("utf-8", errors="replace")


def _cuda_dirs() -> list[Path]:
    dirs: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "bin")
    dirs.extend(Path(p) / "bin" for p in sorted(glob.glob("/usr/local/cuda*"), reverse=True))
    # The nvidia-cuda-nvcc wheel puts ptxas under site-packages/nvidia/cuda_nvcc/bin (CUDA 12)
    # or nvidia/cu13/bin (CUDA 13).
    purelib = Path(sysconfig.get_paths()["purelib"])
    dirs.extend(Path(p) for p in sorted(glob.glob(str(purelib / "nvidia" / "*" / "bin"))))
    return dirs


def find_tool(name: str, cuda: bool = False) -> str | None:
    """Absolute path of ``name`` on PATH, or (with ``cuda``) in the CUDA locations; else None."""
    found = shutil.which(name)
    if found:
        return found
    if cuda:
        for d in _cuda_dirs():
            cand = d / name
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


def tool_version(path: str, flag: str = "--version", cwd: Path | None = None) -> str:
    """The last non-empty line a tool prints for ``flag`` (cut to 200 chars), or ''."""
    lines = _printed_lines(run_tool([path, flag], cwd=cwd or Path("/"), timeout=30))
    return lines[-1][:200] if lines else ""


def _printed_lines(res: ToolResult) -> list[str]:
    """The non-empty lines a tool printed (stdout, then stderr), stripped."""
    return [ln.strip() for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]


_RELEASES: dict[str, str] = {}


def _release_text(res: ToolResult) -> str:
    lines = _printed_lines(res)
    for ln in lines:
        if "release" in ln:
            return ln[:200]
    return lines[-1][:200] if lines else ""


def start_release(path: str) -> Callable[[], str]:
    """``tool_release(path)`` with ``--version`` started now and read when called."""
    if path in _RELEASES:
        known = _RELEASES[path]
        return lambda: known
    tool = RunningTool([path, "--version"], cwd=Path("/"), timeout=30)

    def get() -> str:
        if path not in _RELEASES:
            _RELEASES[path] = _release_text(tool.result())
        return _RELEASES[path]

    return get


def tool_release(path: str) -> str:
    """The ``release`` line a CUDA tool prints for ``--version`` (else its last line)."""
    return start_release(path)()
