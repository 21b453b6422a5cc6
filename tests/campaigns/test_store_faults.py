"""Issue 9 items 1, 2, 23, 25: checkpoint rollback, files written through planted symlinks,
half-built ``init``, LEDGER_HOME permissions. Each test failed on the code before the fix."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.log import Log
from tests.helpers.ledgers import (
    REPO,
    add_node,
    assert_one_error_line,
    cli_json,
    new_ledger,
    revoked_ledger,
    run_cli,
)


def _insert_checkpoint_copy(home: Path, size: int) -> None:
    """The attack of item 1: with the append-only triggers intact, INSERT a copy of an older,
    validly signed checkpoint so that it is the newest row."""
    conn = sqlite3.connect(home / "ledger.db")
    (note,) = conn.execute(
        "SELECT note FROM checkpoints WHERE size=? ORDER BY id LIMIT 1", (size,)
    ).fetchone()
    conn.execute("INSERT INTO checkpoints(size, note) VALUES(?, ?)", (size, note))
    conn.commit()
    conn.close()


@pytest.fixture()
def revoked_home(tmp_path: Path) -> Path:
    """Entry 0 registers a node, 1..2 are its bundles, 3 revokes it."""
    return revoked_ledger(tmp_path / "home", tmp_path / "b", "stolen")


def test_rolled_back_checkpoint_is_not_the_latest(revoked_home: Path) -> None:
    _insert_checkpoint_copy(revoked_home, 3)  # the head before the revocation
    res = run_cli("checkpoint", home=revoked_home)
    assert res.returncode == 0
    assert res.stdout.splitlines()[1] == "4"
    rep = cli_json("verify", "1", home=revoked_home, ok=(1,))
    signer = {c["id"]: c for c in rep["checks"]}["integrity.signer"]
    assert signer["status"] == "failed" and "revoked at entry 3" in signer["detail"]


def test_audit_rejects_checkpoint_table_going_backwards(revoked_home: Path) -> None:
    _insert_checkpoint_copy(revoked_home, 2)
    out = cli_json("audit", home=revoked_home, ok=(1,))
    assert any("goes backwards" in p["message"] for p in out["problems"]), out["problems"]


def test_checkpoint_size_column_is_rechecked(revoked_home: Path) -> None:
    """An old note filed under a large size column must not become the head either."""
    conn = sqlite3.connect(revoked_home / "ledger.db")
    (note,) = conn.execute("SELECT note FROM checkpoints WHERE size=2").fetchone()
    conn.execute("INSERT INTO checkpoints(size, note) VALUES(99, ?)", (note,))
    conn.commit()
    conn.close()
    res = run_cli("checkpoint", home=revoked_home)
    assert_one_error_line(res, 1)
    assert cli_json("audit", home=revoked_home, ok=(1,))["ok"] is False


# -- item 2: no write follows a planted symlink ----------------------------------------------------


def _plant(directory: Path, name: str, target: Path) -> Path:
    """Symlinks at the temporary names the old writer used (``.<name>.<pid>.tmp``)."""
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / f".{name}.{os.getpid()}.tmp"
    link.symlink_to(target)
    return link


def test_init_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "attacker-owned"
    victim.write_bytes(b"")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    _plant(home, "log.key", victim)
    Log.init(home, "test.example/sym").close()
    assert victim.read_bytes() == b""


def test_keys_new_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    from ledger.keys import new_node_key

    victim = tmp_path / "attacker-owned"
    victim.write_bytes(b"")
    keydir = tmp_path / "home" / "keys"
    keydir.parent.mkdir(mode=0o700)
    keydir.mkdir(mode=0o700)
    _plant(keydir, "alice.key", victim)
    new_node_key(keydir, "alice")
    assert victim.read_bytes() == b""


def test_receipt_never_written_through_a_planted_symlink(tmp_path: Path) -> None:
    from ledger.core.bundle import Bundle
    from ledger_cli import wiring
    from verify.report import Report, passed

    victim = tmp_path / "attacker-owned"
    victim.write_bytes(b"keep")
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    from tests.helpers.ledgers import write_bundle

    d = write_bundle(tmp_path, "bundle", "r")
    b = Bundle.from_dir(d)
    _plant(d, "ledger-receipt.json", victim)
    rep = Report(b.digest.hex(), (passed("integrity.manifest", "x"),))
    wiring.seal_checked(log, [(d, b, rep)], sk)
    assert victim.read_bytes() == b"keep"
    assert (d / "ledger-receipt.json").is_file()
    log.close()


def test_export_tiles_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    from ledger.export import export_tiles

    victim = tmp_path / "attacker-owned"
    victim.write_bytes(b"keep")
    log = new_ledger(tmp_path / "home")
    add_node(log)
    log.close()
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / f".checkpoint.tmp{os.getpid()}").symlink_to(victim)
    export_tiles(tmp_path / "home", dest)
    assert victim.read_bytes() == b"keep"
    assert (dest / "checkpoint").read_bytes().startswith(b"test.example/log\n")


def test_write_atomic_refuses_a_symlink_at_the_target(tmp_path: Path) -> None:
    from ledger.core.errors import KeyFileError
    from ledger.core.fsutil import write_atomic

    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "k.key").symlink_to(victim)
    with pytest.raises(KeyFileError):
        write_atomic(tmp_path / "k.key", b"secret", 0o600)
    assert victim.read_bytes() == b"keep"


# -- items 2 and 25: LEDGER_HOME and keys/ are private whatever the umask --------------------------


def _run_with_umask(umask: int, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LEDGER_HOME=str(home))
    return subprocess.run(
        [
            sys.executable,
            "-c",
            f"import os, sys; os.umask({umask}); from ledger_cli import main; main(sys.argv[1:])",
            *args,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_home_and_keys_are_0700_whatever_the_umask(tmp_path: Path) -> None:
    home = tmp_path / "a" / "home"
    assert _run_with_umask(0, "init", "--origin", "test.example/um", home=home).returncode == 0
    assert _run_with_umask(0, "keys", "new", "alice", home=home).returncode == 0
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "keys").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "keys" / "alice.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "log.key").stat().st_mode) == 0o600


def test_home_writable_by_others_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json("init", "--origin", "test.example/ww", home=home)
    home.chmod(0o777)
    line = assert_one_error_line(run_cli("log", home=home), 2)
    assert "writable by group or others" in line
    home.chmod(0o700)
    assert cli_json("audit", home=home)["ok"] is True


# -- item 23: init validates first and builds atomically -------------------------------------------


def test_init_with_control_character_leaves_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res = run_cli("init", "--origin", "test.example/a\x01b", home=home)
    assert_one_error_line(res, 2)
    assert not home.exists()
    assert cli_json("init", "--origin", "test.example/ok", home=home)["origin"] == "test.example/ok"


def test_init_into_existing_dir_with_keys(tmp_path: Path) -> None:
    """``keys new`` before ``init``: init moves its files in beside keys/."""
    home = tmp_path / "home"
    cli_json("keys", "new", "alice", home=home)
    cli_json("init", "--origin", "test.example/k", home=home)
    cli_json("keys", "register", "alice", home=home)
    assert cli_json("audit", home=home)["ok"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["home"]  # no temporary directory left
