"""The SQLite store and the log's write side: contiguous indices, roots and proofs from stored
hashes agree with the reference tree, triggers refuse rewrites, hash resolution (SPEC 4, 7); bytes
bound without sqlite3's adapter search, a user's own adapter kept."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.core import merkle
from ledger.core.entries import decode_entry
from ledger.core.errors import BadInput, LedgerStateError, UnknownHash
from ledger.core.note import note_text, open_note, parse_checkpoint
from ledger.log import Log
from ledger.store import open_store
from ledger.store.sqlite import _bind_bytes_directly
from tests.helpers.ledgers import add_node, new_ledger, seal_fake


@pytest.fixture()
def log(tmp_path: Path) -> Log:
    return new_ledger(tmp_path / "home")


def test_init_writes_empty_signed_checkpoint(log: Log) -> None:
    note = log.store.checkpoint()
    cp = parse_checkpoint(open_note(note, [log.verifier]).text)
    assert (cp.origin, cp.size, cp.root) == ("test.example/log", 0, merkle.EMPTY_ROOT)
    assert (log.home / "log.key").stat().st_mode & 0o777 == 0o600


def test_init_twice_refused(log: Log) -> None:
    with pytest.raises(LedgerStateError):
        Log.init(log.home, "other")


def test_open_missing_ledger(tmp_path: Path) -> None:
    with pytest.raises(LedgerStateError, match="no ledger"):
        open_store(tmp_path / "nothing")


@pytest.mark.parametrize("kind", ["empty", "other program's", "garbage"])
def test_a_file_that_is_not_a_ledger_is_refused_unchanged(tmp_path: Path, kind: str) -> None:
    """Opening must not turn an empty file or another program's database into a ledger (the WAL
    switch and the migrations write): it is refused, byte for byte as it was, no WAL beside it."""
    home = tmp_path / "home"
    home.mkdir()
    db = home / "ledger.db"
    if kind == "empty":
        db.write_bytes(b"")
    elif kind == "garbage":
        db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
    else:
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE notes(x TEXT)")
        conn.execute("INSERT INTO notes VALUES('mine')")
        conn.commit()
        conn.close()
    before = db.read_bytes()
    with pytest.raises(LedgerStateError, match=r"not a (usable )?ledger database"):
        open_store(home)
    assert db.read_bytes() == before
    assert not (home / "ledger.db-wal").exists()


def test_appends_are_chained_and_proofs_verify(log: Log, tmp_path: Path) -> None:
    sk = add_node(log)
    for i in range(13):
        assert seal_fake(log, sk, tmp_path / "b", str(i)) == i + 1
    size = log.store.size()
    assert size == 14
    leaves = [merkle.leaf_hash(e) for e in log.store.entries(0, size)]
    root = merkle.root_from_leaf_hashes(leaves)
    assert log.store.root() == root
    # every entry names the tree it was appended to
    for i, data in enumerate(log.store.entries(0, size)):
        e = decode_entry(data)
        assert e.prev_size == i
        assert e.prev_root == merkle.root_from_leaf_hashes(leaves[:i]).hex()
    for n in (1, 5, 8, 14):
        r = log.store.root(n)
        assert r == merkle.root_from_leaf_hashes(leaves[:n])
        for i in range(n):
            merkle.verify_inclusion(leaves[i], i, n, log.store.inclusion_proof(i, n), r)
        for m in range(n + 1):
            merkle.verify_consistency(m, n, log.store.root(m), r, log.store.consistency_proof(m, n))
    cp = parse_checkpoint(note_text(log.store.checkpoint()))
    assert (cp.size, cp.root) == (14, root)


def test_a_batch_names_the_tree_it_starts_from_and_audits(log: Log, tmp_path: Path) -> None:
    """``seal_many`` links every entry of a batch to the tree before the batch (v2, SPEC 4):
    chain-checked in audit and by a mirror's rule from the edge kept per size, even past the
    window of roots; a batch bigger than the insert batches stays in order."""
    from ledger import audit as audit_mod
    from ledger.core.bundle import Bundle
    from ledger.core.entries import ChainCheck
    from ledger.store.writer import FLUSH_ROWS
    from tests.helpers.ledgers import fake_fields

    sk = add_node(log)
    start = log.store.size()
    n = FLUSH_ROWS * 2 + 3
    files = {"k.ptx": b"p", "p.lean": b"l", "s.fut": b"f"}
    items = [(Bundle.from_files({"contract.yaml": f"{i}".encode(), **files}), fake_fields(str(i)))
             for i in range(n)]
    sealed = log.seal_many(items, sk)
    assert [s.index for s in sealed] == list(range(start, start + n))
    assert [log.store.entry(s.index) for s in sealed] == [s.entry for s in sealed]
    start_root = log.store.root(start).hex()
    for s in sealed:
        e = decode_entry(s.entry)
        assert (e.v, e.prev_size, e.prev_root) == (2, start, start_root)
    assert audit_mod.audit(log.store, log.verifier).ok
    # the same rule with a window smaller than the batch: older roots come from ``older``
    asked: list[int] = []

    def older(size: int) -> bytes | None:
        asked.append(size)
        return log.store.root(size)

    chain = ChainCheck(older, window=8)
    frontier = merkle.Frontier()
    for i, data in enumerate(log.store.entries(0, log.store.size())):
        assert chain.check(decode_entry(data), i, frontier) is None
        frontier.append(merkle.leaf_hash(data))
    assert asked == []  # the batch start's root was computed once, when its first entry came
    # an entry naming a tree that is not a prefix (another root) is refused
    e = decode_entry(sealed[-1].entry)
    assert chain.check(e, frontier.size, frontier) is None  # as if appended again
    frontier.append(merkle.leaf_hash(e.data))
    bad = dataclasses.replace(e, prev_root="00" * 32)
    assert "not a prefix" in (chain.check(bad, frontier.size, frontier) or "")


def test_triggers_refuse_update_and_delete(log: Log, tmp_path: Path) -> None:
    sk = add_node(log)
    seal_fake(log, sk, tmp_path, "x")
    log.revoke(log.store.key_rows()[0].key_id, "retired")
    conn = sqlite3.connect(log.home / "ledger.db")
    for sql in (
        "UPDATE entries SET data = x'00' WHERE idx = 0",
        "DELETE FROM entries WHERE idx = 1",
        "UPDATE hashes SET hash = x'00'",
        "DELETE FROM blobs",
        "DELETE FROM checkpoints",
        "UPDATE keys SET name = 'mallory'",
        "DELETE FROM revocations",
    ):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
    conn.close()


def test_migrations_are_recorded(log: Log) -> None:
    versions = [r[0] for r in log.store.conn.execute("SELECT version FROM migrations")]
    assert versions == [1, 2, 3]
    tables = {r[0] for r in log.store.conn.execute("SELECT name FROM sqlite_master")}
    assert {"entries", "hashes", "blobs", "checkpoints", "keys", "revocations"} <= tables


def test_resolve(log: Log, tmp_path: Path) -> None:
    sk = add_node(log)
    idx = seal_fake(log, sk, tmp_path, "r")
    e = decode_entry(log.store.entry(idx))
    lh = log.store.leaf_hash(idx).hex()
    assert log.store.resolve(str(idx)) == idx
    assert e.bundle_digest is not None
    assert log.store.resolve(e.bundle_digest) == idx
    assert log.store.resolve(e.bundle_digest[:8]) == idx
    assert log.store.resolve(lh[:9].upper()) == idx
    with pytest.raises(UnknownHash, match="no entry"):
        log.store.resolve("99")
    with pytest.raises(UnknownHash, match="8 to 64"):
        log.store.resolve("abc")
    with pytest.raises(UnknownHash, match="starts with"):
        log.store.resolve("0" * 64 if not lh.startswith("0" * 8) else "f" * 64)


def test_ambiguous_digest_names_both_entries(log: Log, tmp_path: Path) -> None:
    """The same bundle vouched for by two nodes: its digest names two entries, so it is
    ambiguous; the leaf hashes still name each one."""
    a = add_node(log, "a")
    b = add_node(log, "b")
    i = seal_fake(log, a, tmp_path / "1", "same")
    j = seal_fake(log, b, tmp_path / "2", "same")
    digest = str(decode_entry(log.store.entry(i)).bundle_digest)
    with pytest.raises(UnknownHash, match=f"ambiguous: it matches entries {i}, {j}"):
        log.store.resolve(digest)
    assert log.store.resolve(log.store.leaf_hash(j).hex()[:12]) == j


def test_register_revoke_and_refuse(log: Log, tmp_path: Path) -> None:
    sk = add_node(log, "n1")
    kid = log.store.key_rows()[0].key_id
    seal_fake(log, sk, tmp_path, "before")
    log.revoke(kid, "compromised")
    size = log.store.size()
    with pytest.raises(BadInput, match="revoked"):
        seal_fake(log, sk, tmp_path, "after")
    assert log.store.size() == size
    with pytest.raises(BadInput, match="revoked already"):
        log.revoke(kid, "again")


def test_same_bundle_same_signer_is_the_same_entry(log: Log, tmp_path: Path) -> None:
    """Issue 33 item 8: sealing is idempotent, a second seal answers with the first entry."""
    sk = add_node(log)
    first = seal_fake(log, sk, tmp_path, "dup")
    size = log.store.size()
    assert seal_fake(log, sk, tmp_path, "dup") == first
    assert log.store.size() == size


def test_batched_seal_and_cached_proofs_match_the_tree(log: Log) -> None:
    """seal_many batches rows and skips repeated blobs; proofs read upper levels from a cache:
    both must give exactly the tree and blobs that one-by-one appends would."""
    from ledger.core.bundle import Bundle
    from tests.helpers.ledgers import fake_fields

    sk = add_node(log)

    def items(salt: str) -> list[tuple[Bundle, dict[str, object]]]:
        files = {"k.ptx": b"shared", "p.lean": b"l", "s.fut": b"f"}
        return [
            (Bundle.from_files({"contract.yaml": f"{salt}{i}".encode(), **files}), fake_fields())
            for i in range(40)
        ]

    for salt in ("a", "b"):
        before = log.store.size()
        log.seal_many(items(salt), sk)
        size = log.store.size()
        leaves = [merkle.leaf_hash(e) for e in log.store.entries(0, size)]
        root = merkle.root_from_leaf_hashes(leaves)
        assert log.store.root() == root
        for i in range(size):  # more than PRELOAD_AFTER_PROOFS: the preload is used too
            merkle.verify_inclusion(leaves[i], i, size, log.store.inclusion_proof(i, size), root)
        merkle.verify_consistency(
            before, size, log.store.root(before), root, log.store.consistency_proof(before, size)
        )
    assert len(list(log.store.blobs())) == 3 + 80


def test_subtrees_stored_a_level_at_a_time_give_every_row(log: Log) -> None:
    """``Writer.append_bundles`` with a subtree's joined levels stores each level with one
    statement (``_put_hash_runs``), merging runs that continue one another and keeping apart
    those that do not (single appends in between): the rows are exactly those of appending
    each leaf alone, and the store's root agrees."""
    def entry(i: int) -> tuple[bytes, bytes]:
        data = f'{{"n":{i}}}'.encode()
        return data, merkle.leaf_hash(data)

    def digest(i: int) -> bytes:
        return merkle.leaf_hash(b"d%d" % i)

    start = log.store.size()  # 0: the batches below are aligned
    pieces = [(4, True), (4, True), (3, False), (1, True), (8, True), (2, False), (2, True)]
    made_all: list[tuple[bytes, bytes]] = []
    with log.store.writer() as w:
        w.append_bundles([], [], [])  # nothing: no subtree to take levels from
        at = start
        for width, whole in pieces:
            made = [entry(at + j) for j in range(width)]
            levels = merkle.joined_levels(merkle.perfect_levels([lh for _, lh in made])) \
                if whole else None
            w.append_bundles(made, [digest(at + j) for j in range(width)], levels)
            made_all.extend(made)
            at += width
        assert w._hash_runs and w._hash_rows  # both kinds wait for the flush
    tree = merkle.Frontier()
    want = sorted(row for _, lh in made_all for row in tree.append(lh))
    got = log.store.conn.execute("SELECT level, n, hash FROM hashes ORDER BY level, n").fetchall()
    assert got == want
    assert log.store.root() == tree.root()


@pytest.fixture()
def no_bytes_adapter() -> Iterator[None]:
    key = (bytes, sqlite3.PrepareProtocol)
    saved = sqlite3.adapters.pop(key, None)
    yield
    sqlite3.adapters.pop(key, None)
    if saved is not None:
        sqlite3.adapters[key] = saved


def test_bytes_bind_as_the_same_blob(no_bytes_adapter: None, tmp_path: Path) -> None:
    _bind_bytes_directly()
    conn = sqlite3.connect(":memory:")
    value = bytes(range(256))
    assert conn.execute("SELECT typeof(?), ?", (value, value)).fetchone() == ("blob", value)
    # a subclass of bytes is not the registered type: it binds as SQLite always bound it
    class Sub(bytes):
        pass

    assert conn.execute("SELECT typeof(?)", (Sub(b"ab"),)).fetchone() == ("blob",)


def test_an_adapter_registered_before_stays(no_bytes_adapter: None, tmp_path: Path) -> None:
    def theirs(b: bytes) -> bytes:
        return b

    sqlite3.register_adapter(bytes, theirs)
    log = new_ledger(tmp_path / "home")
    open_store(log.home).close()
    assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)] is theirs
