"""Red-team of the stored log (issue: tamper evidence of the SQLite file and of receipts): an
attacker who can write ``ledger.db`` (its WAL, its meta table, its pages) or a receipt file. Each
test alters a real ledger with ``sqlite3`` (triggers dropped, and re-created where that hides the
change), runs the real CLI and requires exit 1 with one clear line or a failed integrity check:
never exit 0, 2 or 3, never a traceback. What stays undetectable is in docs/threat-model.md
("Write access to the ledger directory")."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledger.core.canonical import canonical_json
from ledger.core.errors import TamperDetected
from ledger.keys import load_node_secret
from ledger.log import Log
from ledger.store.sqlite import expected_triggers
from tests.helpers.ledgers import (
    add_node,
    audit_problems,
    check_table,
    cli_json,
    fake_home,
    one_line,
    run_cli,
    seal_fake,
    stored_entry,
)

N = 3  # bundle entries after the registration at index 0


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return fake_home(tmp_path, N)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkpoint memory of this test's own (the CLI subprocesses inherit it)."""
    c = tmp_path / "cache"
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(c))
    return c


def _alter(home: Path, *sql: tuple[str, tuple[object, ...]], retrigger: bool = False) -> None:
    """Run ``sql`` with the append-only triggers dropped; ``retrigger``: put them back after, as
    an attacker who wants ``audit`` not to see the drop would."""
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    for stmt, args in sql:
        conn.execute(stmt, args)
    if retrigger:  # every trigger the schema makes (the history's and the bookkeeping's)
        for _table, text in expected_triggers().values():
            conn.execute(text)
    conn.close()


_entry = stored_entry





def test_a_stored_entry_that_no_longer_decodes_is_tampering_not_bad_input(home: Path) -> None:
    """``show``, ``log`` and ``verify`` read stored bytes the log wrote valid: bytes that no
    longer decode were altered (exit 1), where they used to be reported as bad input (exit 2)."""
    _alter(home, ("UPDATE entries SET data=? WHERE idx=2", (b"\xff\x00not json",)))
    for args in (("show", "2"), ("log",)):
        one_line(run_cli(*args, home=home), 1, "entry 2 as stored is not a valid entry",
                  "ledger audit")
    status, detail = check_table(cli_json("verify", "2", home=home, ok=(1,)))["integrity.manifest"]
    assert status == "failed" and "entry 2 is malformed" in detail
    assert any("entry 2" in p for p in audit_problems(home))


def test_a_stored_manifest_that_no_longer_parses_fails_integrity_manifest(home: Path) -> None:
    obj = json.loads(_entry(home, 1))
    obj["manifest"] = "not a manifest"
    _alter(home, ("UPDATE entries SET data=? WHERE idx=1", (canonical_json(obj),)))
    rep = cli_json("verify", "1", home=home, ok=(1,))
    checks = check_table(rep)
    assert checks["integrity.manifest"][0] == "failed"
    assert "recorded manifest is invalid" in checks["integrity.manifest"][1]
    assert checks["integrity.signature"][0] == "failed"


def test_a_file_missing_from_the_store_is_named(home: Path) -> None:
    _alter(home, ("UPDATE blobs SET part=9 WHERE data=?", (b"// ptx 1\n",)))
    status, detail = check_table(cli_json("verify", "2", home=home, ok=(1,)))["integrity.manifest"]
    assert status == "failed" and detail == "k.ptx: listed in the manifest but missing"
    assert any("bundle file" in p and "is missing" in p for p in audit_problems(home))


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM meta WHERE key='vkey'", ("records no verifier key", "log.vkey")),
        ("UPDATE meta SET value='garbage' WHERE key='vkey'", ("no valid verifier key",)),
        ("DELETE FROM meta WHERE key='origin'", ("holds checkpoints but no origin",)),
    ],
)
def test_an_altered_meta_table_is_tampering(home: Path, sql: str, words: tuple[str, ...]) -> None:
    _alter(home, (sql, ()))
    for args in (("audit",), ("log",), ("show", "1"), ("verify", "1")):
        one_line(run_cli(*args, home=home), 1, *words)


def test_deleted_checkpoints_are_caught(home: Path) -> None:
    """Every write ends with a checkpoint of the whole log: a log whose newest checkpoint rows
    were deleted (triggers put back) fails the audit, and with none left verify says why."""
    _alter(home, ("DELETE FROM checkpoints WHERE size=?", (N + 1,)), retrigger=True)
    assert any(f"no checkpoint covers the log's {N + 1} entries (newest: size {N})" in p
               for p in audit_problems(home))
    _alter(home, ("DELETE FROM checkpoints", ()), retrigger=True)
    one_line(run_cli("verify", "1", home=home), 1, "no checkpoint", "ledger audit")
    assert any("(newest: none)" in p for p in audit_problems(home))


def test_a_row_below_index_0_is_outside_the_log(home: Path) -> None:
    """A forged entry hidden at index -1 (its digest column a digest of the attacker's) is no
    entry of the log: the audit names it, and no lookup reaches it."""
    forged = _entry(home, 1).replace(b'"k0"', b'"kX"')
    _alter(home, ("INSERT INTO entries VALUES(-1, ?, ?, 'bundle', ?)",
                  (b"\x01" * 32, forged, b"\xee" * 32)), retrigger=True)
    assert "1 entry rows have a negative index: rows outside the log" in audit_problems(home)
    one_line(run_cli("show", "ee" * 32, home=home), 2, "no bundle digest or leaf hash")
    rep = cli_json("verify", "1", home=home, ok=(0, 1))
    assert check_table(rep)["integrity.signer"][0] == "passed"  # the replay ignores the row


def test_truncation_is_caught_by_the_checkpoint_memory_of_an_earlier_audit(
    home: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last entry deleted with its hashes and checkpoint, triggers put back: the file alone
    is a consistent shorter log (another machine's audit passes), but an audit on a machine
    that audited the longer log fails and keeps both signed checkpoints."""
    assert cli_json("audit", home=home)["ok"] is True
    _alter(home, ("DELETE FROM entries WHERE idx=?", (N,)),
           ("DELETE FROM hashes WHERE NOT (level=0 AND n<?) AND NOT (level=1 AND n<?)",
            (N, N // 2)),
           ("DELETE FROM checkpoints WHERE size=?", (N + 1,)), retrigger=True)
    problems = audit_problems(home)
    assert any(f"older than the size {N + 1}" in p and "lost entries" in p for p in problems)
    assert len(list((cache / "evidence").glob("*-presented.checkpoint"))) == 1
    res = run_cli("audit", home=home)
    assert res.returncode == 1 and "lost entries" in res.stderr
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(tmp_path / "other-machine"))
    out = cli_json("audit", home=home)
    assert out["ok"] is True and out["size"] == N  # by design: docs/threat-model.md


def test_a_damaged_wal_frame_is_a_rollback_the_memory_catches(
    home: Path, cache: Path, tmp_path: Path
) -> None:
    """SQLite ignores WAL frames from the first one whose checksum fails: flipping a byte of the
    last frame silently drops the last commit. The checkpoint memory catches it as a rollback."""
    hold = sqlite3.connect(home / "ledger.db")  # keeps the WAL from being folded in and removed
    hold.execute("SELECT count(*) FROM entries").fetchone()
    log = Log.open(home)
    seal_fake(log, add_node(log, "second"), tmp_path / "b", "late")  # two commits into the WAL
    log.close()
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    assert cli_json("audit", home=home)["size"] == N + 3  # remembered here
    hold.close()
    wal = copy / "ledger.db-wal"
    data = bytearray(wal.read_bytes())
    data[-100] ^= 0xFF
    wal.write_bytes(bytes(data))
    problems = audit_problems(copy)
    assert any(f"older than the size {N + 3}" in p for p in problems), problems


def test_a_damaged_database_page_is_tampering(home: Path) -> None:
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    db = home / "ledger.db"
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    data[3 * page] ^= 0xFF  # the type byte of a b-tree page
    db.write_bytes(bytes(data))
    for args in (("audit",), ("log",), ("verify", "1")):
        one_line(run_cli(*args, home=home), 1, "damaged")
    db.write_bytes(bytes(data[: len(data) // 2]))
    one_line(run_cli("show", "1", home=home), 1, "damaged")


@pytest.fixture()
def receipt(home: Path, tmp_path: Path) -> Path:
    bundle = tmp_path / "b" / "b1"
    cli_json("receipt", "write", "2", "--out", str(bundle), home=home)
    return bundle / "ledger-receipt.json"


def _offline(home: Path, receipt: Path, tmp_path: Path) -> dict[str, tuple[str, str]]:
    vkey = (home / "log.vkey").read_text().strip()
    res = run_cli("verify", "2", "--receipt", str(receipt), "--vkey", vkey, "--json",
                  home=tmp_path / "no-ledger")
    assert res.returncode in (0, 1), res.stderr
    return check_table(json.loads(res.stdout))


@pytest.mark.parametrize(
    ("field", "edit", "words"),
    [
        ("tlog_proof", lambda t: t.replace("index 2", "index 7"), "tlog_proof does not repeat"),
        ("tlog_proof", lambda t: "garbage", "tlog_proof does not repeat"),
        ("origin", lambda t: "evil.example/log", "names origin 'evil.example/log'"),
    ],
)
def test_a_receipt_must_agree_with_itself(
    home: Path, receipt: Path, tmp_path: Path, field: str, edit: Any, words: str
) -> None:
    """The receipt's members are what ``verify`` checks; its ``tlog_proof`` text (what other C2SP
    clients read) and its ``origin`` must say the same, else ``integrity.inclusion`` fails."""
    assert _offline(home, receipt, tmp_path)["integrity.inclusion"][0] == "passed"
    obj = json.loads(receipt.read_text())
    obj[field] = edit(obj[field])
    receipt.write_text(json.dumps(obj))
    status, detail = _offline(home, receipt, tmp_path)["integrity.inclusion"]
    assert status == "failed" and words in detail, detail


def test_a_receipt_away_from_its_bundle_says_to_give_the_bundle(
    home: Path, receipt: Path, tmp_path: Path
) -> None:
    """Without ``--bundle`` the receipt's directory is taken as the bundle: a receipt copied
    elsewhere gets that directory's structural error and the way out, in one line (exit 2)."""
    away = tmp_path / "downloads"
    away.mkdir()
    for i in range(70):  # more files than a bundle may hold
        (away / f"f{i}.txt").write_text("x")
    moved = away / "ledger-receipt.json"
    moved.write_bytes(receipt.read_bytes())
    vkey = (home / "log.vkey").read_text().strip()
    res = run_cli("verify", "2", "--receipt", str(moved), "--vkey", vkey,
                  home=tmp_path / "no-ledger")
    one_line(res, 2, "more than 64 files", "--bundle DIR")


def test_a_trigger_re_created_without_its_refusal_is_reported(home: Path) -> None:
    """Same name, a body that refuses nothing: the names alone looked whole."""
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute("CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries BEGIN SELECT 1; END")
    conn.close()
    problems = audit_problems(home)
    assert "append-only trigger entries_no_update has been altered: it may no longer refuse " \
        "changes" in problems
    assert not any("has been dropped" in p for p in problems)


def test_a_trigger_that_swallows_inserts_makes_a_seal_refused_not_acknowledged(
    home: Path, tmp_path: Path
) -> None:
    """``RAISE(IGNORE)`` before each insert: the seal used to return an index and sign a
    checkpoint over an entry that was never stored."""
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    conn.execute("CREATE TRIGGER swallow BEFORE INSERT ON entries BEGIN SELECT RAISE(IGNORE); END")
    conn.close()
    log = Log.open(home)
    sk = load_node_secret(log.keydir, "node")[0]
    with pytest.raises(TamperDetected, match="not in the ledger's entries table as written"):
        seal_fake(log, sk, tmp_path / "late", "late")
    log.close()
    conn = sqlite3.connect(home / "ledger.db")
    assert conn.execute("SELECT count(*) FROM entries").fetchone() == (N + 1,)
    assert conn.execute("SELECT max(size) FROM checkpoints").fetchone() == (N + 1,)
    conn.close()
    assert "trigger swallow on table entries is not the ledger's: it can change or drop the " \
        "ledger's writes" in audit_problems(home)
