"""Test helpers: small bundles on disk, ledgers with registered node keys, and the CLI run as a
real subprocess (its exit code, stdout and stderr exactly as a user sees them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nacl.signing

from ledger.core.bundle import Bundle
from ledger.keys import load_node_secret, new_node_key
from ledger.log import Log

REPO = Path(__file__).resolve().parents[2]


def write_bundle(
    root: Path, name: str = "b", salt: str = "", extra: dict[str, bytes] | None = None
) -> Path:
    """A structurally valid bundle (its checks need not pass) with distinct content per salt."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "contract.yaml": f"metadata:\n  version: '1.0.0'\n  description: test {salt}\n".encode(),
        "k.ptx": f"// ptx {salt}\n".encode(),
        "proof.lean": f"-- lean {salt}\ntheorem t : 1 = 1 := rfl\n".encode(),
        "spec.fut": f"-- fut {salt}\nentry main (x: i32) = x\n".encode(),
    }
    files.update(extra or {})
    for rel, data in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return d


def new_ledger(home: Path, origin: str = "test.example/log") -> Log:
    return Log.init(home, origin)


def add_node(log: Log, name: str = "node") -> nacl.signing.SigningKey:
    pub = new_node_key(log.keydir, name)
    log.register(pub)
    sk, _ = load_node_secret(log.keydir, name)
    return sk


def fake_fields(salt: str = "") -> dict[str, Any]:
    return {
        "kernel": {"name": f"k{salt}", "version": "1.0.0"},
        "obligations": [],
        "checks": [
            {
                "id": "integrity.manifest",
                "status": "passed",
                "detail": "test",
                "tool": "",
                "version": "",
            }
        ],
    }


def seal_fake(log: Log, sk: nacl.signing.SigningKey, root: Path, salt: str) -> int:
    d = write_bundle(root, f"b{salt}", salt)
    return log.seal(Bundle.from_dir(d), fake_fields(salt), sk).index


def stored_entry(home: Path, idx: int) -> bytes:
    """The bytes of entry ``idx`` as the ledger at ``home`` stores them (read past the store)."""
    import sqlite3

    conn = sqlite3.connect(home / "ledger.db")
    data = conn.execute("SELECT data FROM entries WHERE idx=?", (idx,)).fetchone()[0]
    conn.close()
    return bytes(data)


def fake_home(tmp: Path, n: int) -> Path:
    """``tmp/home``: a ledger of a node key's registration (index 0) and ``n`` ``seal_fake``
    bundle entries after it, closed."""
    h = tmp / "home"
    log = new_ledger(h)
    sk = add_node(log)
    for i in range(n):
        seal_fake(log, sk, tmp / "b", str(i))
    log.close()
    return h


def revoked_ledger(home: Path, bundles_root: Path, reason: str) -> Path:
    """A ledger at ``home`` whose entry 0 registers a node, 1 and 2 are its bundles, 3 revokes
    it (for tests of what a revocation must change)."""
    log = new_ledger(home)
    sk = add_node(log)
    for i in range(2):
        seal_fake(log, sk, bundles_root, str(i))
    log.revoke(log.store.key_rows()[0].key_id, reason)
    log.close()
    return home


def run_cli(
    *args: str, home: Path | None = None, input: bytes | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if home is not None:
        env["LEDGER_HOME"] = str(home)
    env.pop("LEDGER_DEBUG", None)
    env.pop("COLUMNS", None)  # output width as on a pipe; tests of a width set it themselves
    return subprocess.run(
        [sys.executable, "-m", "ledger_cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cli_json(*args: str, home: Path | None = None, ok: tuple[int, ...] = (0,)) -> Any:
    res = run_cli(*args, "--json", home=home)
    assert res.returncode in ok, (res.returncode, res.stderr)
    return json.loads(res.stdout)


def assert_one_error_line(res: subprocess.CompletedProcess[str], code: int) -> str:
    """Bad input: the documented exit code, one line on stderr, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert lines[0].startswith("ledger: error: ")
    return lines[0]


def one_line(res: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The exit ``code``, one line on stderr holding each of ``words``, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def audit_problems(home: Path) -> list[str]:
    """``ledger audit --json`` of a ledger that must fail it: the problems' messages."""
    out = cli_json("audit", home=home, ok=(1,))
    assert out["ok"] is False
    return [p["message"] for p in out["problems"]]


def check_table(rep: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A ``verify --json`` report's checks: id to (status, detail)."""
    return {c["id"]: (c["status"], c["detail"]) for c in rep["checks"]}
