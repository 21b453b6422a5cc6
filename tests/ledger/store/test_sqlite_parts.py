"""Parts of the store (ledger/store/sqlite.py, "Parts"): the hash indexes keyed by (part, hash),
every
entry's files kept in its own part, the migration of a ledger written before parts existed.

Most tests shrink a part to 8 entries (``PART_BITS`` = 3) so that a few dozen entries cross
several part boundaries; one checks that with the real constant every lookup uses the indexes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.audit import audit
from ledger.core.bundle import Bundle, blake3_digest
from ledger.core.encoding import hex_encode
from ledger.core.errors import LedgerStateError
from ledger.http.server import make_app
from ledger.log import Log
from ledger.mirror import Mirror, Remote
from ledger.store import common, open_store
from ledger.store import sqlite as store_mod
from ledger.store.common import LEGACY_PART, part_of
from ledger.store.sqlite import MIGRATIONS
from tests.helpers.ledgers import add_node, fake_fields, new_ledger, run_cli
from tests.helpers.server import BackgroundServer

SHARED = {"k.ptx": b"p", "p.lean": b"l", "s.fut": b"f"}  # files every bundle here shares


def _items(salt: str, n: int) -> list[tuple[Bundle, dict[str, object]]]:
    return [
        (Bundle.from_files({"contract.yaml": f"{salt}{i}".encode(), **SHARED}), fake_fields(str(i)))
        for i in range(n)
    ]


@pytest.fixture()
def small_parts(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(common, "PART_BITS", 3)
    yield 8


def _blob_parts(home: Path, digest: bytes) -> list[int]:
    conn = sqlite3.connect(home / "ledger.db")
    try:
        return [int(r[0]) for r in conn.execute(
            "SELECT part FROM blobs WHERE digest=? ORDER BY part", (digest,))]
    finally:
        conn.close()


def test_files_are_kept_in_the_part_of_their_entry(small_parts: int, tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    sealed = log.seal_many(_items("a", 13), sk) + log.seal_many(_items("b", 12), sk)
    size = log.store.size()
    assert size == 26 and part_of(size - 1) == 3
    shared = blake3_digest(SHARED["k.ptx"])
    # a file every bundle names: once in each part holding a bundle entry (entry 0 is the key)
    assert _blob_parts(log.home, shared) == [0, 1, 2, 3]
    common = [blake3_digest(v) for v in SHARED.values()]
    for s in sealed:
        assert log.store.has_blobs(common, index=s.index) == set(common)
    # lookups by hash and prefix reach every part
    for s in sealed:
        lh = hex_encode(s.leaf_hash)
        assert log.store.resolve(lh) == s.index
        assert log.store.resolve(lh[:12]) == s.index
        assert log.store.has_leaf(s.leaf_hash)
    digest = Bundle.from_files({"contract.yaml": b"b11", **SHARED}).digest
    assert log.store.indices_for_digest(digest) == [sealed[13 + 11].index]
    assert log.store.blob(shared) == b"p"
    assert log.store.blob(shared, index=20) == b"p"
    # many at once, from whichever part holds each (the server's blob batches)
    late = blake3_digest(b"b11")  # a file only the bundle of entry 25, in part 3, names
    assert log.store.blobs_anywhere([late, shared, late, bytes(32)]) == {late: b"b11", shared: b"p"}
    assert log.store.blob_lengths([shared, late, bytes(32)]) == {shared: 1, late: 3}
    assert sorted(d for d, _ in log.store.blobs()) == sorted(
        {f.digest for b, _ in _items("a", 13) + _items("b", 12) for f in b.files})
    res = audit(log.store, log.verifier)
    assert res.ok, res.problems
    log.close()


def test_a_file_missing_from_its_part_is_found_though_another_part_has_it(
    small_parts: int, tmp_path: Path
) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    log.seal_many(_items("a", 20), sk)
    shared = blake3_digest(SHARED["k.ptx"])
    conn = sqlite3.connect(log.home / "ledger.db")
    conn.execute("DROP TRIGGER blobs_no_delete")
    conn.execute("DELETE FROM blobs WHERE part=1 AND digest=?", (shared,))
    conn.commit()
    conn.close()
    res = audit(log.store, log.verifier)
    missing = [i for i, m in res.problems if f"bundle file {hex_encode(shared)} is missing" in m]
    assert missing == list(range(8, 16))  # the entries of part 1, and only they
    log.close()


def test_a_mirror_keeps_every_part_whole(small_parts: int, tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "origin")
    sk = add_node(log)
    for salt in "abc":
        log.seal_many(_items(salt, 9), sk)
    vkey = str(log.store.meta("vkey"))
    with BackgroundServer(make_app(log.home)) as srv:
        import httpx

        remote = Remote(srv.url, httpx.Client(timeout=30))
        try:
            Mirror(tmp_path / "m", remote, vkey).sync()
        finally:
            remote.close()
    shared = blake3_digest(SHARED["k.ptx"])
    assert _blob_parts(tmp_path / "m", shared) == _blob_parts(log.home, shared) == [0, 1, 2, 3]
    m = open_store(tmp_path / "m")
    try:
        from ledger.core.note import parse_vkey

        res = audit(m, parse_vkey(vkey))
        assert res.ok, res.problems
    finally:
        m.close()
    log.close()


def test_lookups_use_the_part_indexes() -> None:
    """With the real part size, the queries spell the indexes' own expressions, so SQLite
    searches them instead of scanning the table."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    store_mod.migrate(conn)
    parts = common.parts_sql(300_000)
    bits = common.PART_BITS
    for sql, index in [
        (f"SELECT idx FROM entries WHERE idx >> {bits} IN ({parts}) AND leaf_hash=?",
         "entries_leaf_part"),
        (f"SELECT idx FROM entries WHERE idx >> {bits} IN ({parts}) AND bundle_digest=? "
         "ORDER BY idx", "entries_digest_part"),
        (f"SELECT idx FROM entries WHERE idx >> {bits} IN ({parts}) AND leaf_hash BETWEEN ? "
         "AND ?", "entries_leaf_part"),
        (f"SELECT data FROM blobs WHERE part IN ({parts}) AND digest=? LIMIT 1", "PRIMARY KEY"),
        ("SELECT digest FROM blobs WHERE part IN (3,-1) AND digest IN (?,?)", "PRIMARY KEY"),
    ]:
        plan = " ".join(str(r[3]) for r in conn.execute(
            "EXPLAIN QUERY PLAN " + sql, (b"x",) * sql.count("?")))
        assert "SEARCH" in plan and index in plan, (sql, plan)


def _as_version_1(src: Path, dst: Path) -> None:
    """The ledger at ``src`` as a ledger written before parts existed (schema migration 1 only,
    every file once by digest), at ``dst``."""
    dst.mkdir(mode=0o700)
    for name in ("log.key", "log.vkey"):
        (dst / name).write_bytes((src / name).read_bytes())
    (dst / "log.key").chmod(0o600)
    old = sqlite3.connect(dst / "ledger.db")
    old.execute("CREATE TABLE migrations(version INTEGER PRIMARY KEY, "
                "applied TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) STRICT")
    for stmt in store_mod._split_sql(MIGRATIONS[0]):
        old.execute(stmt)
    old.execute("INSERT INTO migrations(version) VALUES(1)")
    old.execute(f"ATTACH DATABASE '{src / 'ledger.db'}' AS new")
    for table in ("meta", "entries", "hashes", "checkpoints", "keys", "revocations"):
        old.execute(f"INSERT INTO main.{table} SELECT * FROM new.{table}")
    old.execute("INSERT INTO main.blobs SELECT digest, min(data) FROM new.blobs GROUP BY digest")
    old.commit()
    old.execute("DETACH DATABASE new")
    old.close()


def test_a_ledger_from_before_parts_is_migrated(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "new")
    sk = add_node(log)
    log.seal_many(_items("a", 30), sk)
    log.close()
    _as_version_1(tmp_path / "new", tmp_path / "old")
    shared = blake3_digest(SHARED["k.ptx"])
    # opening never migrates: reads and writes alike name `ledger db migrate` (issue 33 item 4)
    for read_only in (True, False):
        with pytest.raises(LedgerStateError, match="ledger db migrate"):
            Log.open(tmp_path / "old", read_only=read_only)
    out = run_cli("audit", home=tmp_path / "old")
    assert out.returncode == 2 and "ledger db migrate" in out.stderr, out.stderr
    out = run_cli("db", "migrate", "--json", home=tmp_path / "old")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"home": str(tmp_path / "old"), "from": 1, "to": 3,
                                      "migrated": True}
    migrated = Log.open(tmp_path / "old")
    versions = [r[0] for r in migrated.store.conn.execute("SELECT version FROM migrations")]
    assert versions == [1, 2, 3]
    assert _blob_parts(tmp_path / "old", shared) == [LEGACY_PART]
    res = audit(migrated.store, migrated.verifier)
    assert res.ok, res.problems
    # appends after the migration keep their files in their part; old entries still verify
    migrated.seal_many(_items("b", 3), sk)
    assert _blob_parts(tmp_path / "old", shared) == [LEGACY_PART, 0]
    res = audit(migrated.store, migrated.verifier)
    assert res.ok, res.problems
    migrated.close()
    # the files of an entry sealed before the migration are found for `ledger verify`
    out = run_cli("verify", "5", "--json", home=tmp_path / "old")
    checks = {c["id"]: c["status"] for c in json.loads(out.stdout)["checks"]}
    assert checks["integrity.manifest"] == "passed", out.stderr
