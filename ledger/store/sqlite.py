"""The ledger's SQLite driver (SPEC 4): one file, ``LEDGER_HOME/ledger.db``.

The tables and reads are ``ledger.store.base``'s; this module opens the file, writes and audits
it. WAL mode with ``synchronous=FULL``; STRICT tables; migrations numbered and recorded in the
same transaction that applies them, run only by ``init`` (``SqliteStore.create``) and ``ledger db
migrate`` (``SqliteStore.migrate_home``). Triggers refuse UPDATE and DELETE on every table that
holds history and on the schema's bookkeeping (migration 3), so the database itself is
append-only; ``ledger audit`` recomputes everything and catches a change even when the triggers
are bypassed.

**Read-only.** ``SqliteStore.open(home, read_only=True)`` (every command that only reads: audit,
verify, show, log, proof, checkpoint, serve) opens the file with ``mode=ro`` and ``PRAGMA
query_only``: SQLite itself refuses any write, the file is never checkpointed into on close, and
a schema older than the code is reported (``ledger db migrate``), never migrated.

Writers take ``BEGIN IMMEDIATE`` (``SqliteStore.writer()``), so several processes may append at
once and the indices stay contiguous: each writer reads the size and the right edge of the tree
inside its own transaction.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ledger.core.errors import CannotCheck, LedgerStateError, TamperDetected
from ledger.core.fsutil import private_dir
from ledger.core.merkle import HASH_SIZE
from ledger.store.base import BaseStore
from ledger.store.common import (
    APPEND_ONLY_TABLES,
    DB_NAME,
    FIXED_META,
    LEGACY_PART,
    LOCK_NAME,
    PART_BITS,
    SchemaState,
    bring_up_to_date,
    refuse_lost_rows,
)
from ledger.store.writer import Writer

if TYPE_CHECKING:
    from ledger.store.walcheckpoint import Checkpointer

BUSY_TIMEOUT_MS = 60_000
WAL_AUTOCHECKPOINT = 1000  # pages: SQLite's default, set again after a checkpoint_later commit
# A checkpoint_later batch that finds the WAL file larger than this waits for the checkpoint thread
# before it begins. SQLite starts the WAL over from its first frame only in a transaction that
# began after a complete checkpoint; batches back to back each begin while the thread still copies
# the one before, so without the wait the file grew by a batch every batch (17 to 92 MB in five
# batches of 10,000, and on for as long as the stream runs). The same number is the connections'
# journal_size_limit: a WAL that did grow is cut back to it by the next commit after a restart.
WAL_LIMIT_BYTES = 64 << 20
# A run of consecutive hashes of one level (``SqliteStore.put_hash_runs``), cut into rows by SQLite:
# ?1 the level, ?2 the first n, ?3 how many, ?4 the hashes joined (32 bytes each: merkle.HASH_SIZE)
HASH_RUN_SQL = (
    "INSERT INTO hashes(level, n, hash) "
    "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3) "
    "SELECT ?1, ?2 + i, substr(?4, 32 * i + 1, 32) FROM k"
)
CACHE_KIB = 32 * 1024  # SQLite page cache per connection
# The page size of a new ledger database (one made before keeps its own; SQLite reads any).
# An entry is ~1 KB: a 16 KiB page holds ~15 of them, where a 4 KiB one held 3, so a 10,000-entry
# batch writes a quarter of the WAL frames (two write calls each) and its checkpoint a quarter of
# the page writes, and an audit's scan reads a quarter of the pages; same-run A/Bs: append +4-7%,
# audit +1-2% (docs/benchmarks.md).
PAGE_SIZE = 16 * 1024

_FIXED = ", ".join(f"'{k}'" for k in FIXED_META)
# migration 3 (``ledger.store.common``, "Schema bookkeeping"): the rows of ``migrations`` never
# change; ``meta``'s origin and verifier key are written once (INSERT OR REPLACE included)
BOOKKEEPING_TRIGGERS = {
    "migrations_no_update": "CREATE TRIGGER migrations_no_update BEFORE UPDATE ON migrations "
    "BEGIN SELECT RAISE(ABORT, 'ledger table migrations is append-only'); END",
    "migrations_no_delete": "CREATE TRIGGER migrations_no_delete BEFORE DELETE ON migrations "
    "BEGIN SELECT RAISE(ABORT, 'ledger table migrations is append-only'); END",
    "meta_fixed_no_update": "CREATE TRIGGER meta_fixed_no_update BEFORE UPDATE ON meta "
    f"WHEN OLD.key IN ({_FIXED}) OR NEW.key IN ({_FIXED}) "
    "BEGIN SELECT RAISE(ABORT, 'ledger meta origin and vkey are fixed'); END",
    "meta_fixed_no_delete": "CREATE TRIGGER meta_fixed_no_delete BEFORE DELETE ON meta "
    f"WHEN OLD.key IN ({_FIXED}) "
    "BEGIN SELECT RAISE(ABORT, 'ledger meta origin and vkey are fixed'); END",
    "meta_fixed_no_replace": "CREATE TRIGGER meta_fixed_no_replace BEFORE INSERT ON meta "
    f"WHEN NEW.key IN ({_FIXED}) AND EXISTS (SELECT 1 FROM meta WHERE key = NEW.key) "
    "BEGIN SELECT RAISE(ABORT, 'ledger meta origin and vkey are fixed'); END",
}

MIGRATIONS: tuple[str, ...] = (
    # 1: the initial schema
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
    CREATE TABLE entries(
        idx INTEGER PRIMARY KEY, leaf_hash BLOB NOT NULL, data BLOB NOT NULL,
        type TEXT NOT NULL, bundle_digest BLOB) STRICT;
    CREATE INDEX entries_leaf ON entries(leaf_hash);
    CREATE INDEX entries_digest ON entries(bundle_digest) WHERE bundle_digest IS NOT NULL;
    CREATE TABLE hashes(level INTEGER NOT NULL, n INTEGER NOT NULL, hash BLOB NOT NULL,
        PRIMARY KEY(level, n)) STRICT, WITHOUT ROWID;
    CREATE TABLE blobs(digest BLOB PRIMARY KEY, data BLOB NOT NULL) STRICT, WITHOUT ROWID;
    CREATE TABLE checkpoints(id INTEGER PRIMARY KEY, size INTEGER NOT NULL, note BLOB NOT NULL)
        STRICT;
    CREATE TABLE keys(key_id BLOB PRIMARY KEY, name TEXT NOT NULL, public_key BLOB NOT NULL,
        registered_idx INTEGER NOT NULL) STRICT, WITHOUT ROWID;
    CREATE TABLE revocations(key_id BLOB PRIMARY KEY, revoked_idx INTEGER NOT NULL,
        reason TEXT NOT NULL) STRICT, WITHOUT ROWID;
    """
    + "".join(
        f"""
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
        BEGIN SELECT RAISE(ABORT, 'ledger table {t} is append-only'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
        BEGIN SELECT RAISE(ABORT, 'ledger table {t} is append-only'); END;
    """
        for t in APPEND_ONLY_TABLES
    ),
    # 2: parts (the module docstring): the hash indexes keyed by (part, hash), the blobs by
    # (part, digest); the files stored before are kept in LEGACY_PART
    f"""
    DROP INDEX entries_leaf;
    DROP INDEX entries_digest;
    CREATE INDEX entries_leaf_part ON entries(idx >> {PART_BITS}, leaf_hash);
    CREATE INDEX entries_digest_part ON entries(idx >> {PART_BITS}, bundle_digest)
        WHERE bundle_digest IS NOT NULL;
    CREATE TABLE blobs_parted(part INTEGER NOT NULL, digest BLOB NOT NULL, data BLOB NOT NULL,
        PRIMARY KEY(part, digest)) STRICT, WITHOUT ROWID;
    INSERT INTO blobs_parted SELECT {LEGACY_PART}, digest, data FROM blobs;
    DROP TRIGGER blobs_no_update;
    DROP TRIGGER blobs_no_delete;
    DROP TABLE blobs;
    ALTER TABLE blobs_parted RENAME TO blobs;
    CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs
        BEGIN SELECT RAISE(ABORT, 'ledger table blobs is append-only'); END;
    CREATE TRIGGER blobs_no_delete BEFORE DELETE ON blobs
        BEGIN SELECT RAISE(ABORT, 'ledger table blobs is append-only'); END;
    """,
    # 3: the schema's bookkeeping protected like the history (issue 33 item 4): the migrations
    # applied are never updated or deleted, the origin and verifier key never changed
    "".join(f"{sql};\n" for sql in BOOKKEEPING_TRIGGERS.values()),
)
LATEST = len(MIGRATIONS)
# objects that only a migration creates: the newest one present shows how far the schema went
# (``SchemaState.shown``), whatever its bookkeeping rows say
MIGRATION_MARKS = {
    2: ("entries_leaf_part", "entries_digest_part"),
    3: tuple(BOOKKEEPING_TRIGGERS),
}


def expected_triggers() -> dict[str, tuple[str, str]]:
    """The triggers the schema creates: name to (table, its text as ``sqlite_master`` keeps it,
    whitespace folded)."""
    out = {
        f"{t}_{kind}": (t, f"CREATE TRIGGER {t}_{kind} BEFORE {event} ON {t} BEGIN SELECT "
                           f"RAISE(ABORT, 'ledger table {t} is append-only'); END")
        for t in APPEND_ONLY_TABLES
        for kind, event in (("no_update", "UPDATE"), ("no_delete", "DELETE"))
    }
    for name, sql in BOOKKEEPING_TRIGGERS.items():
        out[name] = (sql.split(" ON ", 1)[1].split()[0], " ".join(sql.split()))
    return out


SQLITE_CORRUPT = 11  # sqlite3 error codes (``sqlite3.Error.sqlite_errorcode``, primary code)


def damaged(e: sqlite3.Error) -> bool:
    """Whether SQLite found the ledger file's own pages damaged (``SQLITE_CORRUPT``): bytes of a
    ledger database changed outside SQLite, which is tampering (or a failing disk) to report as
    a failed check, not a database that could not be reached."""
    code = getattr(e, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == SQLITE_CORRUPT


def _bind_bytes_directly() -> None:
    """Let ``sqlite3`` bind ``bytes`` parameters without searching for an adapter.

    Python 3.11's ``sqlite3`` binds ``int``, ``float``, ``str`` and ``bytearray`` directly, but
    looks up an adapter for every ``bytes`` value: a failed registry lookup, then a failed
    ``__adapt__`` attribute lookup on a type, which formats and discards an ``AttributeError``
    (~0.15 µs per value; an append binds five to eight per entry). Registering ``bytes`` itself
    as the adapter of ``bytes`` makes that a registry hit whose call returns the same object:
    the same value is bound, as a BLOB. Registered once per process, and only if nobody
    registered an adapter for ``bytes`` before (then theirs stays)."""
    key = (bytes, sqlite3.PrepareProtocol)
    if key not in sqlite3.adapters:
        sqlite3.register_adapter(bytes, bytes)


def _refuse_other_files(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a ledger database (an empty file, another program's SQLite
    database) before anything writes to it: the WAL switch and the migrations would otherwise
    turn it into an empty ledger. ``init`` writes the ``migrations`` and ``meta`` tables first."""
    names = {str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name IN ('migrations', 'meta')"
    )}
    if names != {"migrations", "meta"}:
        conn.close()
        raise LedgerStateError(
            f"{path}: not a ledger database (no ledger schema; "
            "`ledger init --origin ORIGIN` makes one in an empty LEDGER_HOME)"
        )


def _connect(path: Path, *, new: bool = False, read_only: bool = False) -> sqlite3.Connection:
    """A connection to the ledger file ``path``: read-write (``new``: a file ``init`` is making),
    or ``read_only`` (``mode=ro``, ``query_only``: SQLite refuses every write, so a read command
    can never change the file, nor checkpoint the WAL into it when it closes)."""
    _bind_bytes_directly()
    if read_only:
        uri = f"file:{quote(str(path.absolute()))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                               timeout=BUSY_TIMEOUT_MS / 1000)
    else:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not new:
        _refuse_other_files(conn, path)
    if new:  # only before the file's first page is written (the WAL switch writes it)
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    if read_only:
        conn.execute("PRAGMA query_only=ON")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
    # 32 MiB of page cache (SQLite's default is 2 MiB): the leaf-hash index takes inserts at
    # random places, and past ~10^5 entries its pages no longer fit the default, so each append
    # re-read index pages (issue 12: append stays flat from 10^4 to 10^6 entries)
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _open_file(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """``_connect`` to an existing ledger file, its errors as the ledger's: a damaged file is
    tampering (exit 1), anything else a file that cannot be used as a ledger."""
    try:
        return _connect(path, read_only=read_only)
    except sqlite3.DatabaseError as e:
        if damaged(e):
            raise TamperDetected(f"{path}: the ledger database is damaged ({e})") from e
        raise LedgerStateError(f"{path}: not a usable ledger database ({e})") from e


def schema_state(conn: sqlite3.Connection) -> SchemaState:
    """What the file's ``migrations`` table records, against what its schema shows
    (``MIGRATION_MARKS``)."""
    recorded = frozenset(int(r[0]) for r in conn.execute("SELECT version FROM migrations"))
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    shown = max([1] + [v for v, marks in MIGRATION_MARKS.items() if names & set(marks)])
    return SchemaState(recorded, shown, LATEST)


class SqliteStore(BaseStore):
    """A ledger in one SQLite file. Readers see committed state; writers use ``writer()``."""

    def __init__(self, conn: sqlite3.Connection, home: Path, *, read_only: bool = False) -> None:
        super().__init__(conn, home, read_only=read_only)
        self.sqlite = conn
        self._checkpointer: Checkpointer | None = None  # started by the first large commit

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, home: Path, origin: str) -> SqliteStore:
        """A new ledger file in ``home``, every migration applied, the origin recorded."""
        private_dir(home)
        path = home / DB_NAME
        if os.path.lexists(path):
            raise LedgerStateError(f"{home} holds a ledger already")
        conn = _connect(path, new=True)
        migrate(conn)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO meta VALUES('origin', ?)", (origin,))
        conn.execute("COMMIT")
        return cls(conn, home)

    @classmethod
    def open(cls, home: Path, *, read_only: bool = False) -> SqliteStore:
        """The ledger file in ``home`` as it is: refused where its schema is older than the code
        (``ledger db migrate``) or its bookkeeping was altered (tampering)."""
        path = cls._existing(home)
        conn = _open_file(path, read_only=read_only)
        try:
            schema_state(conn).require(str(path))
            return cls(conn, home, read_only=read_only)
        except BaseException:
            conn.close()
            raise

    @classmethod
    def migrate_home(cls, home: Path) -> tuple[int, int]:
        """``ledger db migrate``: apply the migrations the file lacks; (version before, after).
        Refused, nothing written, where the bookkeeping was altered."""
        path = cls._existing(home)
        conn = _open_file(path, read_only=False)
        try:
            return bring_up_to_date(lambda: schema_state(conn), lambda: migrate(conn), str(path))
        finally:
            conn.close()

    @staticmethod
    def _existing(home: Path) -> Path:
        path = home / DB_NAME
        if not path.is_file():
            raise LedgerStateError(
                f"no ledger at {home} (run `ledger init --origin ORIGIN`, or set LEDGER_HOME)"
            )
        return path

    def wait_checkpoint(self) -> None:
        """Wait for the WAL checkpoint a ``checkpoint_later`` commit left to its thread."""
        if self._checkpointer is not None:
            self._checkpointer.wait()

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        self.sqlite.close()

    # -- reading -------------------------------------------------------------------------------

    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]:
        """The rows of a query that may return the whole log: SQLite steps its cursor."""
        return iter(self.sqlite.execute(sql, parameters))

    def version(self) -> tuple[int, int]:
        """A commit by another connection (SQLite's ``data_version``) or by this one
        (``total_changes``)."""
        (dv,) = self.sqlite.execute("PRAGMA data_version").fetchone()
        return int(dv), self.sqlite.total_changes

    def trigger_problems(self) -> list[str]:
        """A SQLite ledger's triggers: one dropped, one whose text is not the schema's
        (re-created with a body that no longer refuses), and any other trigger on the ledger's
        tables (a ``BEFORE INSERT ... RAISE(IGNORE)`` one makes writes vanish)."""
        found = {str(name): (str(table), " ".join(str(sql or "").split()))
                 for name, table, sql in self.sqlite.execute(
                     "SELECT name, tbl_name, sql FROM sqlite_master WHERE type='trigger'")}
        out: list[str] = []
        want = expected_triggers()
        for name, (table, sql) in want.items():
            if name not in found:
                out.append(f"append-only trigger {name} has been dropped")
            elif found[name] != (table, sql):
                out.append(f"append-only trigger {name} has been altered: it may no longer "
                           "refuse changes")
        out += [f"trigger {name} on table {table} is not the ledger's: it can change or drop the "
                "ledger's writes" for name, (table, _) in sorted(found.items())
                if name not in want]
        return out

    def audit_problems(self, size: int) -> list[str]:
        """``ledger audit``'s check of the file itself: the triggers, the schema bookkeeping."""
        bad = schema_state(self.sqlite).problem()
        book = [f"the schema bookkeeping table migrations {bad}"] if bad else []
        return book + self.trigger_problems()

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def writer(self, *, checkpoint_later: bool = False) -> Iterator[Writer]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``); rolls back on error.

        ``checkpoint_later`` (a large batch): the commit is durable as ever, but the copy of the
        WAL back into the database file is left to a thread of this store
        (``ledger.store.walcheckpoint``) instead of being done inside ``COMMIT``, so the caller
        goes on meanwhile. Such a batch that finds the WAL over ``WAL_LIMIT_BYTES`` first waits
        for that thread, so the WAL starts over instead of growing by a batch every batch.

        Writers of all processes first queue on an exclusive ``flock`` of ``write.lock``: the
        kernel wakes the next one the moment the lock is released, where SQLite's own busy
        handler would poll with sleeps of up to 100 ms. The lock is released by the kernel when
        a process dies, so a killed writer never blocks the others."""
        if self.read_only:
            raise LedgerStateError(f"{self.home}: the ledger was opened read-only")
        with self._write_lock():
            if checkpoint_later and self._wal_over_limit():
                self.wait_checkpoint()  # so this transaction starts the WAL over
            self.sqlite.execute("BEGIN IMMEDIATE")
            try:
                w = Writer(self)
                start = w.size
                yield w
                w.flush()
                if w.size != start:
                    refuse_lost_rows(self.sqlite, start, w.size, "the ledger's", "a trigger")
            except BaseException:
                self.sqlite.execute("ROLLBACK")
                raise
            self._commit(checkpoint_later)

    def _commit(self, checkpoint_later: bool) -> None:
        if not checkpoint_later:
            self.sqlite.execute("COMMIT")
            return
        self.sqlite.execute("PRAGMA wal_autocheckpoint=0")
        try:
            self.sqlite.execute("COMMIT")
        finally:
            self.sqlite.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
        if self._checkpointer is None:
            from ledger.store.walcheckpoint import Checkpointer

            self._checkpointer = Checkpointer(self.home / DB_NAME)
        self._checkpointer.request()

    def _wal_over_limit(self) -> bool:
        """Whether the WAL file has grown past ``WAL_LIMIT_BYTES`` (the module's constants)."""
        try:
            return os.stat(self.home / (DB_NAME + "-wal")).st_size > WAL_LIMIT_BYTES
        except OSError:
            return False

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        try:
            fd = os.open(
                self.home / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
        except OSError as e:
            lock = self.home / LOCK_NAME
            raise CannotCheck(f"cannot take the write lock {lock}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def put_hash_runs(self, runs: Sequence[tuple[int, int, bytes]]) -> None:
        """Each run one statement that SQLite cuts into its rows (``HASH_RUN_SQL``)."""
        for level, first, joined in runs:
            self.sqlite.execute(HASH_RUN_SQL, (level, first, len(joined) // HASH_SIZE, joined))


def migrate(conn: sqlite3.Connection) -> None:
    """Apply numbered migrations not yet recorded, each in its own transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations(version INTEGER PRIMARY KEY, "
            "applied TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) STRICT"
        )
        done = {int(r[0]) for r in conn.execute("SELECT version FROM migrations")}
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    for version, sql in enumerate(MIGRATIONS, start=1):
        if version in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            again = conn.execute("SELECT 1 FROM migrations WHERE version=?", (version,)).fetchone()
            if again is None:
                for stmt in _split_sql(sql):
                    conn.execute(stmt)
                conn.execute("INSERT INTO migrations(version) VALUES(?)", (version,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (triggers contain ';' inside BEGIN ... END)."""
    out: list[str] = []
    buf = ""
    for part in script.split(";"):
        buf += part
        if sqlite3.complete_statement(buf + ";"):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
        else:
            buf += ";"
    return out
