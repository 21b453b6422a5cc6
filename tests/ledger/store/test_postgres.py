"""The ledger on PostgreSQL (issue 13): ``ledger init --db postgresql://...``, the same commands
and audit, append-only enforced by the database, several processes (as if on several hosts)
sealing into one database, a writer killed mid-batch, and ``ledger db copy`` from SQLite.

One real PostgreSQL server (Debian's binaries, started by ``tests.helpers.postgres.pg_server`` as
an unprivileged user on a free loopback port) serves the whole module; each test gets a fresh
database owned by an ordinary role. Without the server these tests are skipped with the reason.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ledger.audit import audit
from ledger.core.bundle import Bundle
from ledger.core.entries import decode_entry
from ledger.core.errors import CannotCheck, LedgerStateError
from ledger.http.server import make_app
from ledger.keys import load_node_secret
from ledger.log import Log
from ledger.store import postgres as pgstore
from ledger.store.common import APPEND_ONLY_TABLES as SQLITE_TABLES
from ledger.store.postgres import APPEND_ONLY_TABLES, PgStore
from tests.helpers.ledgers import (
    REPO,
    add_node,
    assert_one_error_line,
    fake_fields,
    new_ledger,
    run_cli,
    write_bundle,
)
from tests.helpers.postgres import PgServer, pg_server
from tests.helpers.server import BackgroundServer

__all__ = ["pg_server"]  # the session fixture, used by name below


def _seal(log: Log, sk: object, root: Path, n: int, prefix: str) -> list[int]:
    out = []
    for i in range(n):
        b = Bundle.from_dir(write_bundle(root, f"{prefix}{i}", f"{prefix}{i}"))
        out.append(log.seal(b, fake_fields(f"{prefix}{i}"), sk).index)  # type: ignore[arg-type]
    return out


def _db_name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _host_copy(home: Path, dest: Path) -> Path:
    """Another host's LEDGER_HOME: the same log key, verifier key, node key and database URL."""
    shutil.copytree(home, dest, symlinks=True)
    return dest


def test_init_and_every_command_unchanged(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.new_database()
    home = tmp_path / "home"
    r = run_cli("init", "--origin", "pg.example/log", "--db", url, "--json", home=home)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["origin"] == "pg.example/log"
    assert not (home / "ledger.db").exists() and APPEND_ONLY_TABLES == SQLITE_TABLES
    assert (home / "db.url").read_text().strip() == url
    assert (home / "db.url").stat().st_mode & 0o777 == 0o600
    log = Log.open(home)
    assert isinstance(log.store, PgStore)
    sk = add_node(log)
    _seal(log, sk, tmp_path / "b", 5, "a")
    size, root = log.store.size(), log.store.root()
    # the server's blob batches: many files by digest in one query, their lengths in another
    digests = [bytes(r[0]) for r in log.store.conn.execute("SELECT digest FROM blobs")]
    got = log.store.blobs_anywhere([*digests, bytes(32)])
    assert set(got) == set(digests) and all(log.store.blob(d) == v for d, v in got.items())
    assert log.store.blob_lengths(digests) == {d: len(v) for d, v in got.items()}
    log.close()
    r = run_cli("audit", "--json", home=home)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["ok"] is True and got["size"] == size == 6
    r = run_cli("checkpoint", home=home)
    assert r.returncode == 0 and f"\n{size}\n" in r.stdout
    r = run_cli("log", "--json", home=home)
    assert r.returncode == 0 and len(json.loads(r.stdout)["entries"]) == size
    r = run_cli("proof", "inclusion", "3", "--json", home=home)
    assert r.returncode == 0 and json.loads(r.stdout)["tree_size"] == size
    # a second init on the same home, or of another home on the same database, is refused
    r = run_cli("init", "--origin", "o.example/x", "--db", url, home=home)
    assert r.returncode == 2 and "holds a ledger already" in r.stderr
    r = run_cli("init", "--origin", "o.example/x", "--db", url, home=tmp_path / "other")
    assert "holds a ledger already" in assert_one_error_line(r, 2)
    assert not (tmp_path / "other" / "log.key").exists()
    log = Log.open(home)
    assert (log.store.size(), log.store.root()) == (size, root)
    log.close()


def test_sealing_workers_on_postgresql(pg_server: PgServer, tmp_path: Path) -> None:
    """A batch made by the sealing workers stores its full chunks' subtrees a level at a time
    (``Writer._put_hash_runs``), as rows on PostgreSQL: exactly the rows that appending its
    leaves one by one makes, and an audit that passes."""
    from ledger import sealers
    from ledger.core import merkle
    batch = [
        (Bundle.from_files({"contract.yaml": f"w{i}".encode(), "k.ptx": b"p", "p.lean": b"l",
                            "s.fut": b"f"}),
         fake_fields(f"w{i}"))
        for i in range(2 * sealers.CHUNK + 5)
    ]
    log = Log.init(tmp_path / "pg", "pg.example/log", pg_server.new_database())
    sk = add_node(log)
    log.seal_many(batch[:3], sk, workers=0)  # the chunks then start mid-tree
    log.seal_many(batch[3:], sk, workers=2)
    conn = log.store.conn
    leaves = [bytes(r[0]) for r in conn.execute("SELECT leaf_hash FROM entries ORDER BY idx")]
    tree = merkle.Frontier()
    want = sorted(row for leaf in leaves for row in tree.append(leaf))
    got = [(lv, n, bytes(h)) for lv, n, h in conn.execute(
        "SELECT level, n, hash FROM hashes ORDER BY level, n").fetchall()]
    assert len(leaves) == log.store.size() == len(batch) + 1 and got == want  # + the key entry
    assert audit(log.store, log.verifier).ok
    log.close()


def test_chunked_audit_in_workers_on_postgresql(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit's worker processes each open the database from LEDGER_HOME's URL: chunks of two
    entries give the same counts and root as the one-process audit."""
    from ledger import audit as audit_mod

    home = tmp_path / "home"
    log = Log.init(home, "pg.example/log", pg_server.new_database())
    sk = add_node(log)
    _seal(log, sk, tmp_path / "b", 5, "a")
    alone = audit(log.store, log.verifier)
    monkeypatch.setattr(audit_mod, "CHUNK_LEVEL", 1)
    monkeypatch.setattr(audit_mod, "PARALLEL_MIN_ENTRIES", 0)
    workers = audit(log.store, log.verifier)
    assert alone.ok and workers.ok, (alone.problems, workers.problems)
    assert workers.size == alone.size == 6 and workers.root == alone.root == log.store.root()
    assert (workers.hashes, workers.signatures, workers.checkpoints, workers.blobs) == (
        alone.hashes, alone.signatures, alone.checkpoints, alone.blobs)
    log.close()


def test_a_ledger_from_before_parts_is_migrated_on_postgresql(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL ledger written with schema 1 (files keyed by digest alone) is refused by
    every command but `ledger db migrate` (issue 33 item 4), which applies migrations 2 and 3:
    its files are kept in part -1, the audit passes, its entries' files are found for verify,
    and new seals keep theirs in their own part."""
    from ledger.store import writer as store_mod

    home = tmp_path / "home"
    monkeypatch.setattr(pgstore, "MIGRATIONS", pgstore.MIGRATIONS[:1])
    monkeypatch.setattr(pgstore, "LATEST", 1)
    old_flush = store_mod.Writer.flush

    def flush_v1(self: store_mod.Writer) -> None:  # what a writer of schema 1 inserted
        if self._blob_rows:
            self.conn.executemany("INSERT OR IGNORE INTO blobs VALUES(?, ?)",
                                  [(d, data) for _, d, data in self._blob_rows])
            self._blob_rows.clear()
        old_flush(self)

    monkeypatch.setattr(store_mod.Writer, "flush", flush_v1)
    log = Log.init(home, "pg.example/log", pg_server.new_database())
    sk = add_node(log)
    _seal(log, sk, tmp_path / "b", 3, "a")
    log.close()
    monkeypatch.undo()
    for read_only in (True, False):
        with pytest.raises(LedgerStateError, match="ledger db migrate"):
            Log.open(home, read_only=read_only)
    out = run_cli("db", "migrate", home=home)
    assert out.returncode == 0 and "from version 1 to 3" in out.stdout, out.stderr
    log = Log.open(home)
    versions = [r[0] for r in log.store.conn.execute("SELECT version FROM migrations ORDER BY 1")]
    assert versions == [1, 2, 3]
    parts = {int(r[0]) for r in log.store.conn.execute("SELECT DISTINCT part FROM blobs")}
    assert parts == {-1}
    res = audit(log.store, log.verifier)
    assert res.ok, res.problems
    _seal(log, sk, tmp_path / "b", 2, "b")
    parts = {int(r[0]) for r in log.store.conn.execute("SELECT DISTINCT part FROM blobs")}
    assert parts == {-1, 0}
    res = audit(log.store, log.verifier)
    assert res.ok, res.problems
    log.close()
    out = run_cli("verify", "2", "--json", home=home)
    checks = {c["id"]: c["status"] for c in json.loads(out.stdout)["checks"]}
    assert checks["integrity.manifest"] == "passed", out.stderr


def test_bad_and_unreachable_database(pg_server: PgServer, tmp_path: Path) -> None:
    r = run_cli("init", "--origin", "o.example/x", "--db", "mysql://u@h/db", home=tmp_path / "a")
    assert "bad database URL" in assert_one_error_line(r, 2)
    assert not (tmp_path / "a").exists()
    dead = f"postgresql://ledger@127.0.0.1:{pg_server.port}/no_such_db"
    r = run_cli("init", "--origin", "o.example/x", "--db", dead, home=tmp_path / "b")
    assert "cannot reach the ledger database" in assert_one_error_line(r, 3)
    assert not (tmp_path / "b" / "log.key").exists()


def test_append_only_enforced_by_the_database(pg_server: PgServer, tmp_path: Path) -> None:
    import psycopg

    url = pg_server.new_database()
    home = tmp_path / "home"
    log = Log.init(home, "pg.example/log", url)
    sk = add_node(log)
    _seal(log, sk, tmp_path / "b", 3, "a")
    log.close()
    db = _db_name(url)
    # the application role (the tables' owner) lost UPDATE, DELETE and TRUNCATE
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in ("UPDATE entries SET type='x' WHERE idx=1", "DELETE FROM hashes",
                    "TRUNCATE checkpoints", "DELETE FROM head"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)  # type: ignore[arg-type]
    # a superuser bypasses privileges, not the triggers
    for sql in ("UPDATE entries SET type='x' WHERE idx=1", "DELETE FROM blobs",
                "TRUNCATE keys", "UPDATE head SET size=size-1", "UPDATE checkpoints SET size=0"):
        with pytest.raises(psycopg.errors.RaiseException, match=r"append-only|only grows"):
            pg_server.admin_execute(sql, db)
    assert audit_ok(home)
    # a superuser who disables a trigger and edits history is caught by `ledger audit`
    pg_server.admin_execute(
        "ALTER TABLE entries DISABLE TRIGGER entries_no_update; "
        "UPDATE entries SET data = overlay(data placing 'X' from 20 for 1) WHERE idx=2", db
    )
    r = run_cli("audit", home=home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "entry 2" in r.stdout + r.stderr
    assert "entries_no_update has been dropped" in r.stdout + r.stderr
    pg_server.admin_execute(
        "ALTER TABLE head DISABLE TRIGGER head_grows; UPDATE head SET size = size - 1", db
    )
    r = run_cli("audit", home=home)
    assert r.returncode == 1
    assert "head_grows has been dropped" in r.stderr
    assert "the tree head says 3 entries, the audited log has 4" in r.stderr


def audit_ok(home: Path) -> bool:
    log = Log.open(home)
    try:
        res = audit(log.store, log.verifier)
        assert isinstance(log.store, PgStore)
        return res.ok and log.store.head_size() == res.size == log.store.size()
    finally:
        log.close()


def _worker(home: Path, prefix: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.seal_worker", str(home), prefix, str(count)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.campaign  # a crash loop: scripts/campaigns.sh
def test_two_hosts_seal_into_one_database_and_a_killed_writer_loses_nothing(
    pg_server: PgServer, tmp_path: Path
) -> None:
    url = pg_server.new_database()
    a = tmp_path / "host-a"
    log = Log.init(a, "pg.example/log", url)
    add_node(log)
    log.close()
    b = _host_copy(a, tmp_path / "host-b")
    # two processes with their own LEDGER_HOME (their own write.lock: only the database orders them)
    procs = [_worker(a, "a", 25), _worker(b, "b", 25)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.count("done ") == 25
    log = Log.open(b)
    idx = [r[0] for r in log.store.conn.execute("SELECT idx FROM entries ORDER BY idx")]
    assert idx == list(range(51))
    # host b serves what host a seals: its cached view follows the database's head
    with BackgroundServer(make_app(b)) as srv:
        assert httpx.get(srv.url + "/checkpoint").text.split("\n")[1] == "51"
        other = Log.open(a)
        _seal(other, load_node_secret(other.keydir, "node")[0], tmp_path / "s", 1, "s")
        other.close()
        got = httpx.get(srv.url + "/checkpoint").text
        assert got.split("\n")[1] == "52"
        assert got.encode() == log.store.checkpoint()
        assert httpx.get(srv.url + "/tile/0/000.p/52").content == b"".join(
            log.store.stored_hash(0, i) for i in range(52)
        )
    log.close()
    assert audit_ok(a)
    # kill -9 of a sealing process mid-run, 3 times: every seal it reported is there, once
    reported: list[list[str]] = []
    for r in range(3):
        proc = _worker(b if r % 2 else a, f"k{r}", 100_000)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        for _ in range(5 + 3 * r):  # some committed, then the kill lands while it writes
            line = proc.stdout.readline()
            assert line.startswith("done "), line
            reported.append(line.split())
        time.sleep(0.05 * r)
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        reported += [ln.split() for ln in out.splitlines() if ln.startswith("done ")]
        log = Log.open(a)
        by_index = {}
        for i, _lh, data in log.store.rows():
            e = decode_entry(data)
            if e.bundle_digest is not None:
                by_index[i] = e.bundle_digest
        log.close()
        assert all(by_index.get(int(idx)) == digest for _, idx, digest in reported)
        assert len(set(by_index.values())) == len(by_index)  # none twice
        assert audit_ok(a)


def test_two_sequencers_without_the_lock_cannot_fork(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even a sequencer that skipped the advisory lock cannot fork the log: the head's
    conditional update (and the entries' key) refuse its transaction, and nothing of it stays."""
    url = pg_server.new_database()
    a = tmp_path / "a"
    log = Log.init(a, "pg.example/log", url)
    sk = add_node(log)
    log.close()
    b = _host_copy(a, tmp_path / "b")
    rogue, honest = Log.open(a), Log.open(b)
    bundle = Bundle.from_dir(write_bundle(tmp_path / "x", "r", "rogue"))
    with pytest.raises((CannotCheck, LedgerStateError)), rogue.store.writer() as w:
        start = w.size
        # the honest sequencer takes another advisory lock: nothing orders the two any more
        monkeypatch.setattr(pgstore, "LOCK_KEY", pgstore.LOCK_KEY + 1)
        _seal(honest, sk, tmp_path / "h", 1, "h")  # commits entry `start` meanwhile
        w.append_bundle(honest.store.entry(start), bundle.digest)  # the rogue's own entry `start`
    honest.close()
    rogue.close()
    assert audit_ok(a)


def test_db_copy_moves_a_sqlite_ledger_and_proves_the_roots(
    pg_server: PgServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    log = new_ledger(home)
    sk = add_node(log)
    _seal(log, sk, tmp_path / "b", 4, "s")
    log.revoke(log.store.key_rows()[0].key_id, "rotated")
    size, root, note = log.store.size(), log.store.root(), log.store.checkpoint()
    log.close()
    url = pg_server.new_database()
    r = run_cli("db", "copy", "--to", url, "--json", home=home)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["equal"] is True and got["size"] == size
    assert got["sqlite_root"] == got["postgresql_root"] == base64.b64encode(root).decode()
    assert not (home / "ledger.db").exists() and (home / "ledger.db.moved-to-postgresql").exists()
    log = Log.open(home)
    assert isinstance(log.store, PgStore)
    assert (log.store.size(), log.store.root(), log.store.checkpoint()) == (size, root, note)
    sk2 = add_node(log, "second")
    _seal(log, sk2, tmp_path / "c", 2, "p")
    log.close()
    assert audit_ok(home)
    # once moved, copying again is refused; so is copying into a database holding a ledger
    r = run_cli("db", "copy", "--to", url, home=home)
    assert r.returncode == 2 and "on PostgreSQL already" in r.stderr
    other = tmp_path / "other"
    new_ledger(other).close()
    r = run_cli("db", "copy", "--to", url, home=other)
    assert r.returncode == 2 and "holds a ledger already" in r.stderr
    assert (other / "ledger.db").exists() and not (other / "db.url").exists()
    # the human output prints both roots
    url2 = pg_server.new_database()
    r = run_cli("db", "copy", "--to", url2, home=other)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    sq = [ln.split() for ln in lines if ln.startswith("  sqlite ")]
    pg = [ln.split() for ln in lines if ln.startswith("  postgresql ")]
    assert sq and pg and len(sq[0][1]) == 44 and sq[0][1] == pg[0][1]
    assert all(len(ln) <= 80 for ln in lines if ln.startswith("  "))


def test_shared_sealing_through_two_servers_on_one_database(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """Two `serve --accept-submissions` processes (their own LEDGER_HOME each, as on two hosts)
    integrate submissions into the one database; indices stay contiguous, every receipt's entry
    is where it says, the audit passes."""
    from concurrent.futures import ThreadPoolExecutor

    from ledger.submit import submit_bundle

    url = pg_server.new_database()
    a = tmp_path / "a"
    log = Log.init(a, "pg.example/log", url)
    sk = add_node(log)
    verifier = log.verifier
    log.close()
    b = _host_copy(a, tmp_path / "b")
    with (
        BackgroundServer(make_app(a, accept_submissions=True)) as sa,
        BackgroundServer(make_app(b, accept_submissions=True)) as sb,
    ):

        def one(i: int) -> int:
            files = {"contract.yaml": b"c", f"k{i}.ptx": f"// {i}\n".encode(),
                     "proof.lean": b"l", "spec.fut": b"f"}
            srv = sa if i % 2 else sb
            return submit_bundle(
                srv.url, Bundle.from_files(files), fake_fields(str(i)), sk, verifier
            ).index

        with ThreadPoolExecutor(4) as pool:
            got = sorted(pool.map(one, range(8)))
    assert got == list(range(1, 9))
    assert audit_ok(a)


@pytest.mark.campaign  # a crash loop: scripts/campaigns.sh
def test_sequencer_killed_mid_batch_loses_nothing_acknowledged(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """`serve --accept-submissions` on PostgreSQL (its own LEDGER_HOME, as on another host than
    the one checking) killed -9 with submissions in flight, then restarted: every acknowledged
    submission is in the database at its index, none twice, indices contiguous, the audit
    passes (the SQLite campaign of tests/ledger/test_submit_batch.py, same code)."""
    from tests.ledger.test_submit_batch import ServeProcess, free_port, kill_mid_batch

    url = pg_server.new_database()
    a = tmp_path / "a"
    log = Log.init(a, "pg.example/log", url)
    keys = [add_node(log, "n1"), add_node(log, "n2")]
    sp = ServeProcess(_host_copy(a, tmp_path / "b"), free_port())
    try:
        kill_mid_batch(log, sp, keys)
    finally:
        sp.stop()
        log.close()
    assert audit_ok(a)
