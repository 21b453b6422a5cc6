"""Tamper tests (issue 2): with the append-only triggers dropped, change one stored entry, blob,
interior hash, checkpoint or key row in the SQLite file; ``ledger audit`` exits 1 naming the
first bad index, and ``ledger verify`` of an affected entry exits 1 with the specific check."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.core.bundle import blake3_digest
from ledger.log import Log
from tests.helpers.ledgers import add_node, cli_json, fake_home, new_ledger, run_cli, stored_entry

N = 6  # bundle entries after the registration at index 0


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return fake_home(tmp_path, N)


def _tamper(home: Path, *sql: tuple[str, tuple[object, ...]]) -> None:
    conn = sqlite3.connect(home / "ledger.db")
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
    for n in names:
        conn.execute(f"DROP TRIGGER {n}")
    for stmt, args in sql:
        cur = conn.execute(stmt, args)
        assert cur.rowcount == 1, stmt
    conn.commit()
    conn.close()


_entry = stored_entry


def _audit_fails_at(home: Path, index: int | None) -> dict[str, object]:
    out = cli_json("audit", home=home, ok=(1,))
    assert out["ok"] is False
    assert out["first_bad_index"] == index, out["problems"]
    res = run_cli("audit", home=home)
    assert res.returncode == 1
    assert "audit failed" in res.stderr
    return out


def test_clean_ledger_audits(home: Path) -> None:
    out = cli_json("audit", home=home)
    assert out["ok"] is True and out["size"] == N + 1
    assert out["checked"]["signatures"] == N + 1


def _verify_check(home: Path, idx: int) -> dict[str, str]:
    rep = cli_json("verify", str(idx), home=home, ok=(1,))
    assert rep["verdict"] == "failed"
    return {c["id"]: c["status"] for c in rep["checks"]}


def test_changed_entry_bytes(home: Path) -> None:
    data = _entry(home, 3).replace(b'"time":"', b'"time":"1', 1)
    data = data.replace(b'"time":"1', b'"time":"', 1).replace(b"k2", b"k9")  # same length
    _tamper(home, ("UPDATE entries SET data=? WHERE idx=3", (data,)))
    out = _audit_fails_at(home, 3)
    assert any("hash to the stored leaf" in p["message"] for p in out["problems"])
    assert _verify_check(home, 3)["integrity.inclusion"] == "failed"


def test_changed_entry_and_leaf_hash(home: Path) -> None:
    """An attacker who rewrites the entry and its leaf hash column still breaks the tree and
    the node signature."""
    from ledger.core.merkle import leaf_hash

    data = _entry(home, 4).replace(b"k3", b"k7")
    _tamper(home, ("UPDATE entries SET data=?, leaf_hash=? WHERE idx=4", (data, leaf_hash(data))))
    out = _audit_fails_at(home, 4)
    assert any("signature" in p["message"] for p in out["problems"])
    checks = _verify_check(home, 4)
    assert checks["integrity.inclusion"] == "failed"
    assert checks["integrity.signature"] == "failed"


def test_changed_blob(home: Path) -> None:
    digest = blake3_digest(b"// ptx 2\n")  # k.ptx of the bundle sealed at index 3
    _tamper(home, ("UPDATE blobs SET data=? WHERE digest=?", (b"// ptx 2 evil\n", digest)))
    out = cli_json("audit", home=home, ok=(1,))
    assert any("does not hash to its address" in p["message"] for p in out["problems"])
    assert _verify_check(home, 3)["integrity.manifest"] == "failed"


def test_changed_interior_hash(home: Path) -> None:
    _tamper(home, ("UPDATE hashes SET hash=? WHERE level=1 AND n=1", (b"\x11" * 32,)))
    out = _audit_fails_at(home, 2)
    assert any("stored hash (1, 1)" in p["message"] for p in out["problems"])
    # entry 1's proof uses the bad hash (1, 1) as a sibling: it no longer reaches the signed root
    assert _verify_check(home, 1)["integrity.inclusion"] == "failed"


def test_changed_checkpoint(home: Path) -> None:
    conn = sqlite3.connect(home / "ledger.db")
    cid, note = conn.execute("SELECT id, note FROM checkpoints ORDER BY id DESC").fetchone()
    conn.close()
    bad = bytes(note).replace(b"\n7\n", b"\n8\n", 1)
    _tamper(home, ("UPDATE checkpoints SET note=? WHERE id=?", (bad, cid)))
    out = cli_json("audit", home=home, ok=(1,))
    assert out["first_bad_index"] == N
    assert _verify_check(home, 2)["integrity.checkpoint"] == "failed"


def test_changed_key_row(home: Path) -> None:
    _tamper(home, ("UPDATE keys SET name='mallory'", ()))
    out = _audit_fails_at(home, 0)
    assert any("key index row" in p["message"] for p in out["problems"])
    assert any(
        "append-only trigger entries_no_update has been dropped" in p["message"]
        for p in out["problems"]
    )


def test_deleted_last_entry(home: Path) -> None:
    _tamper(home, ("DELETE FROM entries WHERE idx=?", (N,)))
    out = cli_json("audit", home=home, ok=(1,))
    assert out["ok"] is False


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:-1] + bytes([b[-1] ^ 1]),
        lambda b: b.replace(b'"prev_size":2', b'"prev_size":3'),
    ],
)
def test_any_entry_mutation_is_caught(home: Path, mutate: Callable[[bytes], bytes]) -> None:
    data = _entry(home, 2)
    bad = mutate(data)
    assert bad != data
    _tamper(home, ("UPDATE entries SET data=? WHERE idx=2", (bad,)))
    _audit_fails_at(home, 2)


def test_audit_passes_after_normal_use(home: Path) -> None:
    log = Log.open(home)
    log.revoke(log.store.key_rows()[0].key_id, "rotated")
    log.close()
    assert cli_json("audit", home=home)["ok"] is True


def test_large_audit_checks_signatures_in_a_worker(tmp_path: Path) -> None:
    """Past PARALLEL_MIN_ENTRIES the audit checks the log in chunks in worker processes; a forged
    signature (with the leaf hash column re-hashed to match) is still found at its index, and a
    wrong stored hash in another chunk at its place."""
    from ledger import audit as audit_mod
    from ledger.core.bundle import Bundle
    from ledger.core.encoding import b64_encode
    from ledger.core.merkle import leaf_hash
    from tests.helpers.ledgers import fake_fields

    home = tmp_path / "big"
    log = new_ledger(home)
    sk = add_node(log)
    n = audit_mod.PARALLEL_MIN_ENTRIES + 100
    items = [
        (
            Bundle.from_files(
                {"contract.yaml": b"c%d" % i, "k.ptx": b"p", "p.lean": b"l", "s.fut": b"f"}
            ),
            fake_fields(str(i)),
        )
        for i in range(n)
    ]
    log.seal_many(items, sk)
    log.close()
    victim = 5000
    data = _entry(home, victim)
    sig = data.split(b'"signature":"')[1].split(b'"')[0]
    forged = data.replace(sig, b64_encode(b"\x01" * 64).encode())
    # and in the second chunk (another worker), a stored hash of the tree that no entry explains
    second = (1 << audit_mod.CHUNK_LEVEL) + 50
    _tamper(
        home,
        ("UPDATE entries SET data=?, leaf_hash=? WHERE idx=?", (forged, leaf_hash(forged), victim)),
        ("UPDATE hashes SET hash=? WHERE level=1 AND n=?", (b"\x02" * 32, second // 2)),
    )
    log = Log.open(home)
    res = audit_mod.audit(log.store, log.verifier)
    assert res.first_bad_index == victim
    assert (victim, f"entry {victim}: entry signature does not verify") in res.problems
    first = second // 2 * 2
    assert (first, f"stored hash (1, {second // 2}) over entries {first}..{first + 1} is wrong") \
        in res.problems
    assert res.entries == res.size == n + 1 and res.signatures == n  # all but the forged one


TAMPERS: dict[str, Callable[[Path], tuple[tuple[str, tuple[object, ...]], ...]]] = {
    "none": lambda h: (),
    "entry bytes": lambda h: (
        ("UPDATE entries SET data=? WHERE idx=3", (_entry(h, 3).replace(b"k2", b"k9"),)),
    ),
    "interior hash": lambda h: (("UPDATE hashes SET hash=? WHERE level=1 AND n=2", (b"\1" * 32,)),),
    "missing entry": lambda h: (("DELETE FROM entries WHERE idx=4", ()),),
    "type column": lambda h: (("UPDATE entries SET type='bundle' WHERE idx=0", ()),),
    "chain link": lambda h: (
        ("UPDATE entries SET data=? WHERE idx=2",
         (_entry(h, 2).replace(b'"prev_size":2', b'"prev_size":1'),)),
    ),
    "checkpoint": lambda h: (
        ("DELETE FROM checkpoints WHERE id=(SELECT max(id) FROM checkpoints)", ()),
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_chunked_audit_in_workers_finds_what_one_process_finds(
    home: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunked audit run by worker processes (chunks of 2 entries, each starting from the
    stored edge of the tree before it) fails where the one-chunk audit fails, at the same first
    index (what it says after that may differ: a later chunk is judged against the stored tree,
    and where that is not the recomputed one it says so). On an untouched log both report
    exactly the same counts and root."""
    from ledger import audit as audit_mod

    sql = TAMPERS[case](home)
    if sql:
        _tamper(home, *sql)
    log = Log.open(home)
    alone = audit_mod.audit(log.store, log.verifier)
    monkeypatch.setattr(audit_mod, "CHUNK_LEVEL", 1)
    monkeypatch.setattr(audit_mod, "PARALLEL_MIN_ENTRIES", 0)
    seen: list[int] = []
    workers = audit_mod.audit(log.store, log.verifier, progress=seen.append)
    log.close()
    assert (alone.ok, workers.ok) == (case == "none", case == "none")
    assert workers.first_bad_index == alone.first_bad_index
    assert alone.ok or alone.sorted_problems()[0] in workers.problems
    assert (workers.size, workers.entries, workers.root, workers.signatures, workers.blobs) == (
        alone.size, alone.entries, alone.root, alone.signatures, alone.blobs)
    if case == "none":
        assert (workers.hashes, workers.checkpoints) == (alone.hashes, alone.checkpoints)
        assert seen == [2, 4, 6, N + 1]
    if case == "interior hash":  # entries 6.. were judged against the wrong stored hash (1, 2)
        assert any("the stored tree before it is not the recomputed one" in m
                   for _, m in workers.problems)
