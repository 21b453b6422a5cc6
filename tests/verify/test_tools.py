"""External tools as bounded subprocesses (``verify.tools``): exit codes, the wall-clock timeout
that kills the tool's whole process group, and ``wait_exit``, which wakes at the tool's exit on
a pidfd (Linux) and falls back to ``Popen.wait`` elsewhere (issue 12: the poll it replaces
slept up to 50 ms past nvcc's end in every ``ledger verify``)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from verify.tools import RunningTool, run_tool, wait_exit

WAYS = ["pidfd", "poll"]  # wait_exit with os.pidfd_open, and without it


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pidfd" and not hasattr(os, "pidfd_open"):
        pytest.skip("this Python or kernel has no os.pidfd_open")
    if request.param == "poll":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    return str(request.param)


def test_exit_codes_and_output(tmp_path: Path, way: str) -> None:
    res = run_tool(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"], tmp_path, timeout=60)
    assert (res.returncode, res.ok, res.timed_out) == (3, False, False)
    assert (res.stdout, res.stderr) == ("out\n", "err\n")
    assert run_tool(["/bin/true"], tmp_path, timeout=60).ok


def test_wait_exit_returns_at_the_exit_and_reaps(way: str) -> None:
    proc = subprocess.Popen(["/bin/sh", "-c", "exit 7"])
    wait_exit(proc, 60)
    assert proc.returncode == 7
    wait_exit(proc, 60)  # already reaped: returns at once, the code kept
    assert proc.returncode == 7


def test_wait_exit_raises_at_the_timeout(way: str) -> None:
    proc = subprocess.Popen(["/bin/sleep", "30"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(proc, 0.2)
        assert proc.poll() is None  # still running: the caller decides what to do
    finally:
        proc.kill()
        proc.wait()


def test_a_timeout_kills_the_tools_whole_process_group(tmp_path: Path, way: str) -> None:
    # the tool leaves a grandchild (as nvcc leaves cicc): both are stopped at the timeout
    tool = RunningTool(["/bin/sh", "-c", "sleep 30 & sleep 30"], tmp_path, timeout=0.5)
    assert tool.proc is not None
    group = tool.proc.pid  # start_new_session: the tool leads its own process group
    res = tool.result()
    assert res.timed_out and res.returncode is None and not res.ok
    assert tool.proc.returncode is not None
    # the grandchild got SIGKILL with the group: nothing of the group runs any more (a killed
    # grandchild may stay a zombie until init reaps it, and dies a moment after the signal)
    for _ in range(400):
        if not _living_in_group(group):
            break
        time.sleep(0.025)
    assert _living_in_group(group) == []


def _living_in_group(group: int) -> list[int]:
    """Pids of the processes in process group ``group`` that are not zombies (from /proc)."""
    living = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state not in ("Z", "X"):
            living.append(int(entry.name))
    return living


def test_a_tool_that_cannot_start_is_reported(tmp_path: Path) -> None:
    res = run_tool([str(tmp_path / "no-such-tool")], tmp_path, timeout=60)
    assert res.returncode == 127 and "could not start" in res.stderr


def test_wait_exit_with_over_a_thousand_open_files(way: str) -> None:
    """The pidfd may be numbered over 1,023, which ``select`` cannot watch; ``poll`` can."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1100:
        if hard != resource.RLIM_INFINITY and hard < 1100:
            pytest.skip(f"at most {hard} open files here")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1100, hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1030)]
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", "exit 5"], close_fds=True)
        wait_exit(proc, 60)
        assert proc.returncode == 5
        slow = subprocess.Popen(["/bin/sleep", "30"])
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                wait_exit(slow, 0.1)
        finally:
            slow.kill()
            slow.wait()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_wait_exit_takes_a_timeout_longer_than_polls_limit(way: str) -> None:
    proc = subprocess.Popen(["/bin/sh", "-c", "exit 0"])
    wait_exit(proc, 1e9)  # ~31 years: more milliseconds than poll's C int holds
    assert proc.returncode == 0


def test_a_tool_that_ended_in_time_is_not_late_when_collected_after_its_deadline(
    tmp_path: Path, way: str
) -> None:
    """The runner collects nvcc after the falsification tests, which may outlast nvcc's
    timeout: a tool that ended well within it is reported as it ended, not as timed out."""
    tool = RunningTool(["/bin/sh", "-c", "exit 4"], tmp_path, timeout=0.3)
    assert tool.proc is not None
    for _ in range(400):  # until it has ended (it is not reaped: poll() would reap it)
        if os.waitid(os.P_PID, tool.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
            break
        time.sleep(0.025)
    time.sleep(0.4)  # past the deadline
    res = tool.result()
    assert (res.returncode, res.timed_out) == (4, False)
    proc = subprocess.Popen(["/bin/sh", "-c", "exit 6"])
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped
    wait_exit(proc, 0)  # a timeout of 0 still looks once
    assert proc.returncode == 6
