"""Campaign: read commands never write (issue 33 item 4), on SQLite and PostgreSQL.

The attack: a superuser (or anyone who can write the SQLite file) deletes or changes the rows of
the schema's bookkeeping table ``migrations``. The read commands used to migrate again on open
("relation meta already exists", exit 3: damage reported as "could not check", and a write
attempted by a read). Now every read command opens the database read-only and judges the
bookkeeping: exit 1 naming ``migrations``, and nothing written: the SQLite file's hash
unchanged, no PostgreSQL transaction id assigned (the next one, ``pg_snapshot_xmax`` of a
snapshot taken from another session, the same before and after). A schema that is merely older
than the code is reported (exit 2, naming ``ledger db migrate``), never migrated by a read; the
bookkeeping is protected by triggers like the history, and audit reports those triggers dropped.
"""

from __future__ import annotations

import hashlib
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ledger.core.errors import CannotCheck, LedgerStateError
from ledger.http.server import make_app
from ledger.log import Log
from tests.helpers.ledgers import add_node, cli_json, new_ledger, one_line, run_cli, seal_fake
from tests.helpers.postgres import PgServer, pg_server
from tests.helpers.server import BackgroundServer

__all__ = ["pg_server"]  # the session fixture, used by name below


def _free_port() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


# the read commands; ``serve`` last (it refuses a ledger it cannot read before it listens)
READS: tuple[tuple[str, ...], ...] = (
    ("audit",), ("log",), ("show", "1"), ("verify", "1"), ("checkpoint",),
    ("proof", "inclusion", "1"), ("serve", "--port", _free_port()),
)
# a fake bundle's kernel fails verify's own checks (exit 1): what counts here is what it wrote
_READ_OK = {"verify": (0, 1), **{args[0]: (0,) for args in READS if args[0] != "verify"}}
BOOKKEEPING_TRIGGERS = ("migrations_no_update", "migrations_no_delete", "meta_fixed_no_update",
                        "meta_fixed_no_delete", "meta_fixed_no_replace")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    c = tmp_path / "cache"
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(c))
    return c


def _ledger(home: Path, tmp: Path, db: str | None = None) -> None:
    log = Log.init(home, "test.example/log", db) if db else new_ledger(home)
    sk = add_node(log)
    for i in range(3):
        seal_fake(log, sk, tmp / "b", str(i))
    log.close()


# -- SQLite ----------------------------------------------------------------------------------


def _file_hash(home: Path) -> str:
    return hashlib.sha256((home / "ledger.db").read_bytes()).hexdigest()


def _sqlite(home: Path, *sql: str) -> None:
    """Run ``sql`` on the file past the ledger (as anyone who can write it), then fold the WAL
    into the file so that the hash taken next is the file's settled state."""
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)
    try:
        for s in sql:
            conn.execute(s)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _unguard(home: Path) -> None:
    """Drop the bookkeeping's triggers (the base schema had none) so its rows can be changed."""
    _sqlite(home, *(f"DROP TRIGGER IF EXISTS {t}" for t in BOOKKEEPING_TRIGGERS))


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM migrations", "records no migration at all"),
        ("UPDATE migrations SET version = 7 WHERE version = 2", "not 1 to"),
        ("DELETE FROM migrations WHERE version >= 2", "schema holds migration"),
    ],
)
def test_sqlite_reads_of_altered_bookkeeping_fail_and_write_nothing(
    tmp_path: Path, sql: str, words: str
) -> None:
    home = tmp_path / "home"
    _ledger(home, tmp_path)
    _unguard(home)
    _sqlite(home, sql)
    (home / "write.lock").unlink()  # the seals' queue; a read never takes it
    before = _file_hash(home)
    for args in READS:
        one_line(run_cli(*args, home=home, timeout=120), 1, "migrations", words)
        assert _file_hash(home) == before, args
    assert not (home / "write.lock").exists()  # nobody queued to write either


def test_sqlite_reads_never_write_an_intact_ledger(tmp_path: Path) -> None:
    """Every read command (and a server answering requests) leaves the file's bytes as they
    were; the store they open refuses a write itself."""
    home = tmp_path / "home"
    _ledger(home, tmp_path)
    _sqlite(home)
    before = _file_hash(home)
    for args in READS[:-1]:
        res = run_cli(*args, home=home)
        assert res.returncode in _READ_OK[args[0]], (args, res.stderr)
    with BackgroundServer(make_app(home)) as srv:
        for path in ("/checkpoint", "/tile/0/000.p/4", "/"):
            httpx.get(srv.url + path, timeout=30)
    assert _file_hash(home) == before
    from ledger.store import open_store  # here: the module stays importable on older code

    store = open_store(home, read_only=True)
    try:
        assert store.read_only and store.size() == 4
        with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only"):
            store.conn.execute("INSERT INTO meta VALUES('x', 'y')")
        with pytest.raises(LedgerStateError, match="read-only"), store.writer():
            pass
    finally:
        store.close()
    assert _file_hash(home) == before


def _as_schema_2(home: Path) -> None:
    """The ledger at ``home`` as the previous program left it: migration 3 never applied."""
    _unguard(home)
    _sqlite(home, "DELETE FROM migrations WHERE version = 3")


def test_sqlite_older_schema_is_reported_and_only_db_migrate_migrates(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _ledger(home, tmp_path)
    _as_schema_2(home)
    before = _file_hash(home)
    for args in READS:
        one_line(run_cli(*args, home=home, timeout=120), 2, "version 2", "ledger db migrate")
    for args in (("keys", "list"), ("vkey",)):
        one_line(run_cli(*args, home=home), 2, "ledger db migrate")
    with pytest.raises(LedgerStateError, match="ledger db migrate"):
        Log.open(home)  # a writer does not migrate either
    assert _file_hash(home) == before
    got = cli_json("db", "migrate", "--json", home=home)
    assert (got["from"], got["to"], got["migrated"]) == (2, 3, True)
    assert cli_json("db", "migrate", "--json", home=home)["migrated"] is False
    assert cli_json("audit", home=home)["ok"] is True


def test_db_migrate_refuses_altered_bookkeeping(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _ledger(home, tmp_path)
    _unguard(home)
    _sqlite(home, "DELETE FROM migrations")
    before = _file_hash(home)
    one_line(run_cli("db", "migrate", home=home), 1, "migrations", "altered")
    assert _file_hash(home) == before


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM migrations",
        "UPDATE migrations SET applied = 'then'",
        "UPDATE meta SET value = 'other.example/log' WHERE key = 'origin'",
        "DELETE FROM meta WHERE key = 'vkey'",
        "INSERT OR REPLACE INTO meta VALUES('vkey', 'other')",
    ],
)
def test_sqlite_bookkeeping_refuses_changes(tmp_path: Path, sql: str) -> None:
    home = tmp_path / "home"
    _ledger(home, tmp_path)
    with pytest.raises(sqlite3.IntegrityError, match=r"append-only|fixed"):
        _sqlite(home, sql)
    assert cli_json("audit", home=home)["ok"] is True


def test_sqlite_audit_reports_a_dropped_bookkeeping_trigger(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _ledger(home, tmp_path)
    _sqlite(home, "DROP TRIGGER migrations_no_delete")
    before = _file_hash(home)
    res = run_cli("audit", home=home)
    assert res.returncode == 1 and "migrations_no_delete has been dropped" in res.stderr, res
    assert _file_hash(home) == before


# -- PostgreSQL ------------------------------------------------------------------------------


class PgLedger:
    def __init__(self, server: PgServer, tmp: Path) -> None:
        self.server = server
        self.url = server.new_database()
        self.db = self.url.rsplit("/", 1)[1]
        self.home = tmp / "home"
        _ledger(self.home, tmp, self.url)

    def admin(self, sql: str, *, bypass: bool = False) -> list[Any]:
        with psycopg.connect(self.server.url(self.db, "admin"), autocommit=True) as conn:
            if bypass:  # the triggers stay in place and none fires
                conn.execute("SET session_replication_role = replica")
            cur = conn.execute(sql)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def next_xid(self) -> int:
        """The next transaction id the server will assign, read from another session without
        taking one (a snapshot's xmax)."""
        return int(self.admin("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")[0][0])

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """No autovacuum meanwhile (an autoanalyze, of the catalogs too, takes an xid): off for
        the test server, and none of its workers still running, then back on."""
        self.admin("ALTER SYSTEM SET autovacuum = off")
        self.admin("SELECT pg_reload_conf()")
        try:
            while self.admin("SELECT count(*) FROM pg_stat_activity "
                             "WHERE backend_type = 'autovacuum worker'")[0][0]:
                time.sleep(0.1)
            yield
        finally:
            self.admin("ALTER SYSTEM RESET autovacuum")
            self.admin("SELECT pg_reload_conf()")


@pytest.fixture()
def pgl(pg_server: PgServer, tmp_path: Path) -> PgLedger:
    return PgLedger(pg_server, tmp_path)


def _no_xid(pgl: PgLedger, run: Callable[[], None]) -> None:
    with pgl.quiet():
        before = pgl.next_xid()
        run()
        assert pgl.next_xid() == before, "a read assigned a transaction id: it wrote"


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM migrations", "records no migration at all"),
        ("UPDATE migrations SET version = 7 WHERE version = 2", "not 1 to"),
    ],
)
def test_pg_reads_of_altered_bookkeeping_fail_and_assign_no_xid(
    pgl: PgLedger, sql: str, words: str
) -> None:
    """The reported attack: a superuser deletes the rows of ``migrations``; audit used to
    migrate again and end exit 3 "relation meta already exists"."""
    pgl.admin(sql, bypass=True)

    def reads() -> None:
        for args in READS:
            one_line(run_cli(*args, home=pgl.home, timeout=120), 1, "migrations", words)

    _no_xid(pgl, reads)


def test_pg_reads_assign_no_xid_and_the_session_is_read_only(pgl: PgLedger) -> None:
    def reads() -> None:
        for args in READS[:-1]:
            res = run_cli(*args, home=pgl.home)
            assert res.returncode in _READ_OK[args[0]], (args, res.stderr)

    _no_xid(pgl, reads)
    from ledger.store import open_store  # here: the module stays importable on older code

    store = open_store(pgl.home, read_only=True)
    try:
        with pytest.raises(CannotCheck, match="read-only transaction"):
            store.conn.execute("INSERT INTO meta VALUES('x', 'y')")
        with pytest.raises(LedgerStateError, match="read-only"), store.writer():
            pass
    finally:
        store.close()


def test_pg_bookkeeping_refuses_changes_and_audit_reports_its_triggers(pgl: PgLedger) -> None:
    for sql in ("DELETE FROM migrations", "UPDATE migrations SET version = 9",
                "TRUNCATE migrations", "UPDATE meta SET value = 'x' WHERE key = 'origin'",
                "DELETE FROM meta WHERE key = 'vkey'"):
        with pytest.raises(psycopg.Error, match=r"append-only|fixed"):
            pgl.admin(sql)  # a superuser without the bypass: the triggers refuse
    with psycopg.connect(pgl.url, autocommit=True) as conn:  # the ledger's own role
        with pytest.raises(psycopg.Error, match=r"permission denied|append-only"):
            conn.execute("DELETE FROM migrations")
    assert cli_json("audit", home=pgl.home)["ok"] is True
    pgl.admin("ALTER TABLE migrations DISABLE TRIGGER migrations_no_delete")
    res = run_cli("audit", home=pgl.home)
    assert res.returncode == 1 and "migrations_no_delete has been dropped" in res.stderr, res


def test_pg_older_schema_is_reported_not_migrated(pgl: PgLedger) -> None:
    """Migration 3 undone (as the previous program left the database): reads exit 2 naming
    `ledger db migrate` and take no transaction id; `ledger db migrate` applies it."""
    for trigger in ("migrations_no_update", "migrations_no_delete", "migrations_no_truncate"):
        pgl.admin(f"DROP TRIGGER {trigger} ON migrations")
    for trigger in ("meta_fixed_no_update", "meta_fixed_no_delete", "meta_no_truncate"):
        pgl.admin(f"DROP TRIGGER {trigger} ON meta")
    pgl.admin("DROP FUNCTION ledger_meta_fixed()")
    pgl.admin("DELETE FROM migrations WHERE version = 3")

    def reads() -> None:
        for args in READS:
            one_line(run_cli(*args, home=pgl.home, timeout=120), 2, "ledger db migrate")

    _no_xid(pgl, reads)
    got = cli_json("db", "migrate", "--json", home=pgl.home)
    assert (got["from"], got["to"]) == (2, 3)
    assert cli_json("audit", home=pgl.home)["ok"] is True
