"""Issue 9 items 3, 4, 5, 6, 24: the bundle reader race, verify ignoring what it was given,
verify trusting the mutable index tables, offline receipts and revocations."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledger.core.bundle import read_dir
from ledger.core.errors import BundleError
from ledger.log import Log
from ledger_cli import wiring
from tests.helpers.ledgers import (
    add_node,
    assert_one_error_line,
    cli_json,
    new_ledger,
    revoked_ledger,
    run_cli,
    seal_fake,
    write_bundle,
)


def _drop_triggers_and(home: Path, *sql: tuple[str, tuple[object, ...]]) -> None:
    conn = sqlite3.connect(home / "ledger.db")
    for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {n}")
    for stmt, args in sql:
        conn.execute(stmt, args)
    conn.commit()
    conn.close()


def _checks(rep: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["id"]: c for c in rep["checks"]}


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """0 registers a node, 1 and 2 are its bundles, 3 revokes it."""
    return revoked_ledger(tmp_path / "home", tmp_path / "b", "key stolen")


# -- item 3: the bundle reader race ----------------------------------------------------------------


def test_subdirectory_swapped_for_a_symlink_mid_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "x.lean").write_bytes(b"PRIVATE+KEY+.....\n")  # same size as the real file
    d = write_bundle(tmp_path, "bundle", "s", extra={"inner/x.lean": b"-- lean file 1234\n"})
    real_open = os.open
    swapped: list[bool] = []

    def racing_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        if not swapped and os.fsdecode(path).split("/")[-2:][0] == "inner":
            swapped.append(True)  # the attacker wins the race right before this open
            os.rename(d / "inner", tmp_path / "old-inner")
            os.symlink(secret, d / "inner")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", racing_open)
    try:
        files = read_dir(d)
    except BundleError as e:
        assert "changed while reading" in str(e)
    else:
        assert b"PRIVATE" not in files.get("inner/x.lean", b""), "read through the swapped link"
    assert swapped


def test_file_growing_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = write_bundle(tmp_path, "bundle", "g")
    real_open = os.open

    def growing_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if os.fsdecode(path).endswith("k.ptx"):
            with open(d / "k.ptx", "ab") as fh:
                fh.write(b"// appended while read\n")
        return fd

    monkeypatch.setattr(os, "open", growing_open)
    with pytest.raises(BundleError, match="changed while reading"):
        read_dir(d)


# -- item 4: verify looks at what it was given -----------------------------------------------------


def test_verify_key_entry_with_bundle_is_bad_input(home: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "junk").write_bytes(b"\x00" * 10)
    line = assert_one_error_line(run_cli("verify", "0", "--bundle", str(garbage), home=home), 2)
    assert "not a bundle" in line


def test_verify_key_entry_receipt_in_a_bundle_dir_is_bad_input(home: Path, tmp_path: Path) -> None:
    log = Log.open(home)
    rec = wiring.make_receipt(log, 0)
    log.close()
    d = write_bundle(tmp_path, "tampered", "t")
    (d / "ledger-receipt.json").write_bytes(rec.to_bytes())
    vkey = (home / "log.vkey").read_text().strip()
    leaf = rec.item.entry
    from ledger.core.merkle import leaf_hash

    res = run_cli(
        "verify",
        leaf_hash(leaf).hex(),
        "--receipt",
        str(d / "ledger-receipt.json"),
        "--vkey",
        vkey,
        home=home,
    )
    assert "not a bundle" in assert_one_error_line(res, 2)


# -- items 5 and 6: indexes are hints, re-checked --------------------------------------------------


def test_deleted_revocation_row_does_not_unrevoke(home: Path) -> None:
    _drop_triggers_and(home, ("DELETE FROM revocations", ()))
    signer = _checks(cli_json("verify", "1", home=home, ok=(1,)))["integrity.signer"]
    assert signer["status"] == "failed" and "revoked at entry 3" in signer["detail"]


def test_deleted_revocation_entry_is_caught(home: Path) -> None:
    """Deleting the revocation entry itself (and its index row) leaves a hole the replay of the
    signed tree sees."""
    _drop_triggers_and(
        home, ("DELETE FROM revocations", ()), ("DELETE FROM entries WHERE idx=3", ())
    )
    # the checkpoint of size 4 still stands; entry 3 is gone
    signer = _checks(cli_json("verify", "1", home=home, ok=(1,)))["integrity.signer"]
    assert signer["status"] == "failed"


def test_redirected_digest_column_is_caught(home: Path) -> None:
    conn = sqlite3.connect(home / "ledger.db")
    d1, d2 = (
        bytes(r[0])
        for r in conn.execute("SELECT bundle_digest FROM entries WHERE idx IN (1, 2) ORDER BY idx")
    )
    conn.close()
    _drop_triggers_and(
        home,
        ("UPDATE entries SET bundle_digest=NULL WHERE idx=1", ()),
        ("UPDATE entries SET bundle_digest=? WHERE idx=2", (d1,)),
    )
    line = assert_one_error_line(run_cli("verify", d1.hex(), home=home), 1)
    assert "index" in line
    assert d2 != d1


# -- item 24: offline receipts and revocations inside their own tree -----------------------------


def test_receipt_carries_a_revocation_inside_its_checkpoint(home: Path, tmp_path: Path) -> None:
    log = Log.open(home)
    rec = wiring.make_receipt(log, 1)
    files = wiring.files_from_store(log, rec.item.entry)
    log.close()
    assert rec.revocation is not None and rec.revocation.index == 3
    d = tmp_path / "restored"
    d.mkdir()
    for rel, data in (files or {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    (d / "ledger-receipt.json").write_bytes(rec.to_bytes())
    vkey = (home / "log.vkey").read_text().strip()
    rep = cli_json(
        "verify", "1", "--receipt", str(d / "ledger-receipt.json"), "--vkey", vkey, ok=(1,)
    )
    signer = _checks(rep)["integrity.signer"]
    assert signer["status"] == "failed" and "revoked at entry 3" in signer["detail"]


def test_offline_detail_does_not_claim_only_later_revocations_are_unseen(
    tmp_path: Path,
) -> None:
    from ledger.core.note import (
        Checkpoint,
        format_checkpoint,
        note_text,
        parse_checkpoint,
        parse_vkey,
        sign_note,
    )
    from verify.integrity import Evidence, check_evidence

    h = tmp_path / "home"
    log = new_ledger(h)
    sk = add_node(log)
    seal_fake(log, sk, tmp_path / "b", "x")
    rec = wiring.make_receipt(log, 1)
    files = wiring.files_from_store(log, rec.item.entry)
    vk = parse_vkey((h / "log.vkey").read_text().strip())
    # an older receipt: its checkpoint commits to no revoked-key list (issue 33)
    cp = parse_checkpoint(note_text(rec.checkpoint))
    assert log.signer is not None
    old = sign_note(format_checkpoint(Checkpoint(cp.origin, cp.size, cp.root)), [log.signer])
    log.close()
    checks, _ = check_evidence(Evidence(rec.item, old, rec.signer, None, False), vk, files)
    signer = {c.id: c for c in checks}["integrity.signer"]
    assert signer.status == "skipped" and "not proven" in signer.detail
    assert "in its own tree" in signer.detail
