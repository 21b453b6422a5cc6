"""docs/onboarding-a-node.md followed as written (issue 34): its shell blocks run in order, each
on the machine it names (log, witness, node: each its own ``HOME``, so its own LEDGER_HOME,
trust policy and checkpoint memory, and its own working directory), with real CLI subprocesses,
a real ``ledger serve --accept-submissions`` and a real ``ledger witness serve`` on loopback
(the guide's ports swapped for free ones). "Send FILE" is a copy of the public files the guide
names between working directories. Before the operator registers the node, the node's submission
is refused with exit 2 naming the exact command the guide's next block runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.ledgers import REPO

GUIDE = REPO / "docs" / "onboarding-a-node.md"
BLOCK = re.compile(r"<!-- machine: (\w+)(, background)? -->\n```sh\n(.*?)```", re.S)
SENT = ("log.vkey", "witness.vkey", "*.node.json")  # the public files the guide sends
MACHINES = ("log", "witness", "node")


@dataclass(frozen=True)
class Block:
    machine: str
    background: bool
    script: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def blocks(text: str) -> list[Block]:
    return [Block(m, bool(bg), script) for m, bg, script in BLOCK.findall(text)]


class Machines:
    """One HOME and working directory per machine, ``ledger`` on PATH through a shim."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shim = root / "bin"
        shim.mkdir()
        ledger = shim / "ledger"
        ledger.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ledger_cli "$@"\n')
        ledger.chmod(ledger.stat().st_mode | stat.S_IXUSR)
        self.path = f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"
        for m in MACHINES:
            (root / m / "home").mkdir(parents=True)
            (root / m / "work").mkdir()
        self.background: list[subprocess.Popen[bytes]] = []

    def env(self, machine: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "XDG_"))}
        env.update(HOME=str(self.root / machine / "home"), PATH=self.path, CHECKOUT=str(REPO))
        env.pop("COLUMNS", None)
        return env

    def work(self, machine: str) -> Path:
        return self.root / machine / "work"

    def run(self, machine: str, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work(machine),
                              env=self.env(machine), capture_output=True, text=True,
                              timeout=900, check=False)

    def start(self, machine: str, script: str, log: Path) -> None:
        with log.open("wb") as out:
            self.background.append(subprocess.Popen(
                ["bash", "-c", "exec " + script.strip()], cwd=self.work(machine),
                env=self.env(machine), stdout=out, stderr=subprocess.STDOUT))

    def send(self, machine: str) -> None:
        """Copy the public files the guide sends from ``machine`` to the others."""
        for pattern in SENT:
            for f in self.work(machine).glob(pattern):
                for other in MACHINES:
                    if other != machine and not (self.work(other) / f.name).exists():
                        shutil.copy2(f, self.work(other) / f.name)

    def stop(self) -> None:
        for p in self.background:
            p.terminate()
        for p in self.background:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def wait_listening(port: int, log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}: {log.read_text()}")


@pytest.fixture()
def machines(tmp_path: Path) -> Iterator[Machines]:
    m = Machines(tmp_path)
    try:
        yield m
    finally:
        m.stop()


def test_the_guide_runs_as_written(machines: Machines, tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash to run the guide's blocks")
    log_port, witness_port = free_port(), free_port()
    text = GUIDE.read_text().replace("8080", str(log_port)).replace("8081", str(witness_port))
    steps = blocks(text)
    assert [b.machine for b in steps] == [
        "log", "witness", "witness", "log", "log", "node", "node", "log", "node", "node"
    ]
    outputs: list[str] = []
    for n, b in enumerate(steps):
        if b.background:
            port = witness_port if b.machine == "witness" else log_port
            log = tmp_path / f"{b.machine}-server.log"
            machines.start(b.machine, b.script, log)
            wait_listening(port, log, machines.background[-1])
            continue
        if "ledger keys register" in b.script:
            refused = _submit_before_registration(machines, log_port)
            assert "ledger keys register alice.node.json" in b.script, b.script
            assert "`ledger keys register alice.node.json`" in refused
        res = machines.run(b.machine, b.script)
        assert res.returncode == 0, (n, b.script, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        outputs.append(res.stdout + res.stderr)
        machines.send(b.machine)
    server_log = (tmp_path / "log-server.log").read_text()
    assert "asking witnesses to cosign each new checkpoint: witness.example" in server_log
    submitted, verified = outputs[-2], outputs[-1]
    assert "receipt cosigned: 1 cosignature(s)" in submitted, submitted
    receipt = json.loads((machines.work("node") / "my-kernel" / "ledger-receipt.json").read_text())
    assert "\u2014 witness.example " in receipt["checkpoint"]
    assert re.search(r"verdict: (verified|partial)", verified), verified
    # the same verification as JSON: the checkpoint it rests on carries the witness's line
    res = machines.run("node", f"ledger verify {receipt['index']} --receipt "
                       "my-kernel/ledger-receipt.json --no-gpu --json")
    assert res.returncode == 0, res.stderr
    [cp] = [c for c in json.loads(res.stdout)["checks"] if c["id"] == "integrity.checkpoint"]
    assert "1 of 1 witnesses cosigned (quorum 1)" in cp["detail"], cp
    # the log's own `ledger checkpoint` shows the cosignature GET /checkpoint serves
    res = machines.run("log", "ledger checkpoint --json")
    obj = json.loads(res.stdout)
    assert [c["name"] for c in obj["cosignatures"]] == ["witness.example"]
    assert obj["size"] == receipt["index"] + 1


def _submit_before_registration(machines: Machines, port: int) -> str:
    """The node's submission before the operator registered its key: exit 2, one line naming
    the commands the node and the operator run; nothing appended."""
    work = machines.work("node")
    if not (work / "early").exists():
        shutil.copytree(REPO / "bundles" / "vector_add", work / "early",
                        ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    before = machines.run("log", "ledger log --json")
    res = machines.run("node", f"ledger submit early --server http://127.0.0.1:{port} --key alice")
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "does not accept node key alice" in lines[0]
    assert "`ledger keys export alice --out alice.node.json`" in lines[0]
    assert not (work / "early" / "ledger-receipt.json").exists()
    assert machines.run("log", "ledger log --json").stdout == before.stdout
    return lines[0]
