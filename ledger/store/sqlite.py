"""The ledger's SQLite store (SPEC 4): entries, the Merkle tree, blobs, checkpoints, key index.

One database file, ``LEDGER_HOME/ledger.db``, in WAL mode with ``synchronous=FULL``. Tables are
STRICT; migrations are numbered and recorded in the same transaction that applies them. Triggers
refuse UPDATE and DELETE on every table that holds history, so the database itself is append-only;
``ledger audit`` recomputes everything and catches a change even when the triggers are bypassed.

* ``entries(idx, leaf_hash, data, type, bundle_digest)``: the exact entry bytes of each leaf.
* ``hashes(level, n, hash)``: every complete-subtree hash (``ledger.core.merkle`` addressing), so
roots
  and proofs cost O(log n) point reads.
* ``blobs(part, digest, data)``: bundle files, content-addressed by BLAKE3, kept in the part of
  the entry that names them (below).

**Parts.** The log is cut into parts of 2**16 consecutive entries (``PART_BITS``). The indexes
by leaf hash and by bundle digest are keyed by (part, hash), and a bundle's files are stored in
the part of its entry (``INSERT OR IGNORE`` on (part, digest): a file shared by many bundles is
kept once per part, at most once per 65,536 entries). So an append writes only to the newest
part of each of those three B-trees, whose pages stay few and cached, instead of one random page
of each per entry: that is what made the append rate fall by half from 10^4 to 10^6 entries
(issue 12; docs/design.md, "Store"). A lookup by hash probes every part in one statement (17
index probes at 10^6 entries, 154 at 10^7); the files an entry names are found in its own part
(or in part -1, which holds the files stored before parts existed, migration 2).
* ``checkpoints(id, size, note)``: every signed checkpoint the log issued (or a mirror verified).
* ``keys`` / ``revocations``: an index of the key entries, rebuilt and compared by ``audit``.

Writers take ``BEGIN IMMEDIATE`` (``Store.writer()``), so several processes may append at once and
the indices stay contiguous: each writer reads the size and the right edge of the tree inside its
own transaction.

The same ledger may live on a PostgreSQL server instead (``ledger init --db postgresql://...``):
then ``LEDGER_HOME`` holds a small trusted file naming the database (``db.url``), the connection
(``ledger.store.postgres.PgConn``) speaks PostgreSQL's dialect for every query below, and a
``ledger.store.postgres.PgBackend`` does the few steps spelt differently (the write transaction,
streamed
reads, the trigger list). ``Store.open`` chooses by that file, never by anything a request
carries.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ledger.core import merkle
from ledger.core.encoding import hex_decode, hex_encode
from ledger.core.errors import BadInput, CannotCheck, LedgerStateError, TamperDetected, UnknownHash
from ledger.core.hashlevels import HashLevels, combine, inclusion_paths
from ledger.core.note import Checkpoint, note_text, parse_checkpoint

if TYPE_CHECKING:
    from ledger.core.bundle import BundleFile
    from ledger.core.entries import NodeKey
    from ledger.store.postgres import PgBackend
    from ledger.store.walcheckpoint import Checkpointer

DB_NAME = "ledger.db"
LOCK_NAME = "write.lock"
# in LEDGER_HOME: the PostgreSQL database holding this ledger (ledger.store.postgres)
URL_NAME = "db.url"
BUSY_TIMEOUT_MS = 60_000
WAL_AUTOCHECKPOINT = 1000  # pages: SQLite's default, set again after a checkpoint_later commit
# A checkpoint_later batch that finds the WAL file larger than this waits for the checkpoint thread
# before it begins. SQLite starts the WAL over from its first frame only in a transaction that
# began after a complete checkpoint; batches back to back each begin while the thread still copies
# the one before, so without the wait the file grew by a batch every batch (17 to 92 MB in five
# batches of 10,000, and on for as long as the stream runs). The same number is the connections'
# journal_size_limit: a WAL that did grow is cut back to it by the next commit after a restart.
WAL_LIMIT_BYTES = 64 << 20
PRELOAD_AFTER_PROOFS = 64  # a Store that has answered this many proofs keeps the tree's
# stored hashes in memory from then on (ledger.core.hashlevels: the levels that fit in 64 MB),
# reading
FILL_ROWS = 1 << 14  # at most this many of them per proof (0.02-0.1 s) until it holds them all
FLUSH_ROWS = 1024  # entries a Writer batches before inserting them
# A run of consecutive hashes of one level (``Writer._put_hash_runs``), cut into its rows by SQLite:
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
BLOBS_REMEMBERED = 1 << 16  # blob digests a Writer remembers as put in its transaction
PART_BITS = 16  # entries idx >> PART_BITS form one part (the module docstring, "Parts")
LEGACY_PART = -1  # the blobs stored before parts existed (migration 2)
APPEND_ONLY_TABLES = ("entries", "hashes", "blobs", "checkpoints", "keys", "revocations")

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
)


def expected_triggers() -> dict[str, tuple[str, str]]:
    """The append-only triggers the schema creates: name to (table, its text as ``sqlite_master``
    keeps it, whitespace folded)."""
    return {
        f"{t}_{kind}": (t, f"CREATE TRIGGER {t}_{kind} BEFORE {event} ON {t} BEGIN SELECT "
                           f"RAISE(ABORT, 'ledger table {t} is append-only'); END")
        for t in APPEND_ONLY_TABLES
        for kind, event in (("no_update", "UPDATE"), ("no_delete", "DELETE"))
    }


MIRROR_URL_META = "mirror.url"  # set by ``ledger mirror`` (``ledger.mirror.URL_META``)
SQLITE_CORRUPT = 11  # sqlite3 error codes (``sqlite3.Error.sqlite_errorcode``, primary code)


def damaged(e: sqlite3.Error) -> bool:
    """Whether SQLite found the ledger file's own pages damaged (``SQLITE_CORRUPT``): bytes of a
    ledger database changed outside SQLite, which is tampering (or a failing disk) to report as
    a failed check, not a database that could not be reached."""
    code = getattr(e, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == SQLITE_CORRUPT


def part_of(index: int) -> int:
    """The part of entry ``index`` (the module docstring, "Parts")."""
    return index >> PART_BITS


def part_start(part: int) -> int:
    """The index of the first entry of ``part``."""
    return part << PART_BITS


def parts_sql(size: int) -> str:
    """Every part of a log of ``size`` entries, as SQL integer literals for an ``IN`` list, from
    ``LEGACY_PART`` on (only files are kept there; for the entries' indexes it is one probe that
    finds nothing)."""
    return ",".join(str(k) for k in range(LEGACY_PART, part_of(max(size - 1, 0)) + 1))


class Cursor(Protocol):
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """What a Store asks of its connection: ``sqlite3.Connection``, or
    ``ledger.store.postgres.PgConn``
    (SQLite's ``?`` placeholders and ``INSERT OR ...`` spelled for PostgreSQL)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...
    @property
    def in_transaction(self) -> bool: ...
    def close(self) -> None: ...


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


def _connect(path: Path, *, new: bool = False) -> sqlite3.Connection:
    _bind_bytes_directly()
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not new:
        _refuse_other_files(conn, path)
    if new:  # only before the file's first page is written (the WAL switch writes it)
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    # 32 MiB of page cache (SQLite's default is 2 MiB): the leaf-hash index takes inserts at
    # random places, and past ~10^5 entries its pages no longer fit the default, so each append
    # re-read index pages (issue 12: append stays flat from 10^4 to 10^6 entries)
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


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


class Store:
    """A ledger database. Readers see committed state; writers use ``writer()``."""

    def __init__(self, conn: Conn, home: Path, backend: PgBackend | None = None) -> None:
        self.conn = conn
        self.home = home
        self.backend = backend  # None: SQLite
        self._levels: HashLevels | None = None  # stored hashes in memory, for proofs
        self._proofs = 0
        self._checkpointer: Checkpointer | None = None  # started by the first large commit
        origin = self.meta("origin")
        if origin is None:
            if conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is not None:
                raise TamperDetected(  # init records the origin before the first checkpoint
                    f"{home}: the ledger database holds checkpoints but no origin: its meta "
                    "table was altered"
                )
            raise LedgerStateError(f"{home}: ledger database has no origin (not initialised)")
        self.origin = origin

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(cls, home: Path, origin: str, db: str | None = None) -> Store:
        from ledger.core.fsutil import private_dir

        private_dir(home)
        if db is not None:  # a postgresql:// URL
            from ledger.store.postgres import PgBackend

            backend = PgBackend.create(home / URL_NAME, origin, db)
            return cls(backend.conn, home, backend)
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
    def open(cls, home: Path) -> Store:
        path = home / DB_NAME
        if os.path.lexists(home / URL_NAME):
            from ledger.store.postgres import PgBackend

            backend = PgBackend.open(home / URL_NAME)
            return cls(backend.conn, home, backend)
        if not path.is_file():
            raise LedgerStateError(
                f"no ledger at {home} (run `ledger init --origin ORIGIN`, or set LEDGER_HOME)"
            )
        try:
            conn = _connect(path)
            migrate(conn)
        except sqlite3.DatabaseError as e:
            if damaged(e):
                raise TamperDetected(f"{path}: the ledger database is damaged ({e})") from e
            raise LedgerStateError(f"{path}: not a usable ledger database ({e})") from e
        return cls(conn, home)

    def wait_checkpoint(self) -> None:
        """Wait for the WAL checkpoint a ``checkpoint_later`` commit left to its thread."""
        if self._checkpointer is not None:
            self._checkpointer.wait()

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        self.conn.close()

    # -- meta ----------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.writer():
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (key, value))

    # -- reading -------------------------------------------------------------------------------

    def size(self) -> int:
        row = self.conn.execute("SELECT max(idx) FROM entries").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def entry(self, index: int) -> bytes:
        row = self.conn.execute("SELECT data FROM entries WHERE idx=?", (index,)).fetchone()
        if row is None:
            raise UnknownHash(f"no entry {index} (the log has {self.size()} entries)")
        return bytes(row[0])

    def leaf_hash(self, index: int) -> bytes:
        row = self.conn.execute("SELECT leaf_hash FROM entries WHERE idx=?", (index,)).fetchone()
        if row is None:
            raise UnknownHash(f"no entry {index}")
        return bytes(row[0])

    def entries(self, start: int, end: int) -> Iterator[bytes]:
        cur = self.conn.execute(
            "SELECT data FROM entries WHERE idx>=? AND idx<? ORDER BY idx", (start, end)
        )
        for (data,) in cur:
            yield bytes(data)

    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]:
        """The rows of a query that may return the whole log, streamed (other queries may run on
        this connection meanwhile): SQLite steps its cursor; PostgreSQL uses a server cursor."""
        if self.backend is not None:
            return self.backend.scan(sql, parameters)
        return iter(self.conn.execute(sql, parameters))

    def trigger_problems(self) -> list[str]:
        """What ``ledger audit`` reports of a SQLite ledger's append-only triggers: one dropped,
        one whose text is not the schema's (re-created with a body that no longer refuses), and
        any other trigger on the ledger's tables (a ``BEFORE INSERT ... RAISE(IGNORE)`` one makes
        writes vanish). PostgreSQL's own check is ``PgBackend.audit_problems``."""
        found = {str(name): (str(table), " ".join(str(sql or "").split()))
                 for name, table, sql in self.conn.execute(
                     "SELECT name, tbl_name, sql FROM sqlite_master WHERE type='trigger'")}
        out: list[str] = []
        for name, (table, sql) in expected_triggers().items():
            if name not in found:
                out.append(f"append-only trigger {name} has been dropped")
            elif found[name] != (table, sql):
                out.append(f"append-only trigger {name} has been altered: it may no longer "
                           "refuse changes")
        out += [f"trigger {name} on table {table} is not the ledger's: it can change or drop the "
                "ledger's writes" for name, (table, _) in sorted(found.items())
                if name not in expected_triggers()]
        return out

    def rows(self, start: int = 0) -> Iterator[tuple[int, bytes, bytes]]:
        """(index, leaf hash, entry bytes) in index order, streamed."""
        cur = self.scan(
            "SELECT idx, leaf_hash, data FROM entries WHERE idx>=? ORDER BY idx", (start,)
        )
        for idx, lh, data in cur:
            yield int(idx), bytes(lh), bytes(data)

    def stored_hash(self, level: int, n: int) -> bytes:
        row = self.conn.execute(
            "SELECT hash FROM hashes WHERE level=? AND n=?", (level, n)
        ).fetchone()
        if row is None:
            raise TamperDetected(f"stored hash ({level}, {n}) is missing from the database")
        return bytes(row[0])

    def version(self) -> tuple[int, int]:
        """A value that changes whenever committed state may have: a commit by another
        connection (SQLite's ``data_version``) or by this one (``total_changes``). A server
        caches what it derives from the latest checkpoint on it (``ledger.http.state``)."""
        if self.backend is not None:
            return self.backend.version()
        (dv,) = self.conn.execute("PRAGMA data_version").fetchone()
        return int(dv), cast(sqlite3.Connection, self.conn).total_changes

    def root(self, size: int | None = None) -> bytes:
        return merkle.tree_root(self.size() if size is None else size, self.stored_hash)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        levels = self._hash_levels(size)
        if levels is None:
            return self._prefetched(lambda get: merkle.inclusion_proof(index, size, get))
        fast = levels.inclusion_proof(index, size)  # the whole tree in memory (up to ~10^6)
        if fast is not None:
            return fast
        if not 0 <= index < size:
            raise BadInput(f"leaf index {index} is not in a tree of size {size}")
        paths = inclusion_paths(index, size)
        got: dict[tuple[int, int], bytes] = {}
        for path in paths:
            for a in path:
                h = levels.get(*a)
                if h is not None:
                    got[a] = h
        missing = [a for path in paths for a in path if a not in got]
        if missing:  # the levels below ``low``: one batched read
            got.update(self._read_hashes(missing))
        return [combine([got[a] for a in path]) for path in paths]

    def consistency_proof(self, old: int, new: int) -> list[bytes]:
        levels = self._hash_levels(new)
        fast = None if levels is None else levels.consistency_proof(old, new)
        if fast is not None:  # the whole tree in memory (up to ~10^6 entries)
            return fast
        return self._prefetched(lambda get: merkle.consistency_proof(old, new, get), new)

    def _hash_levels(self, size: int) -> HashLevels | None:
        """The stored hashes in memory, for a Store that keeps answering proofs (a server): after
        ``PRELOAD_AFTER_PROOFS`` proofs, filled from the committed rows, ``FILL_ROWS`` per proof
        (then only the new rows whenever a proof is for a larger tree); never inside a
        transaction, whose rows a rollback would take back. Hashes not held yet are read."""
        self._proofs += 1
        if self._proofs < PRELOAD_AFTER_PROOFS or self.conn.in_transaction:
            return None
        levels = self._levels
        if levels is None:
            levels = self._levels = HashLevels()
        if size > levels.size:
            try:
                levels.fill(self.size(), self._read_level, FILL_ROWS)
            except LookupError:  # a row missing or malformed: the reads below report it
                self._levels = None
                self._proofs = -(1 << 62)  # and never again for this Store
                return None
        return levels

    def _read_level(self, level: int, start: int, end: int) -> Iterator[bytes]:
        for (h,) in self.conn.execute(
            "SELECT hash FROM hashes WHERE level=? AND n>=? AND n<? AND length(hash)=32 "
            "ORDER BY n",
            (level, start, end),
        ):
            yield bytes(h)

    def _read_hashes(self, need: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        """The stored hashes at ``need``, in one query per 400; TamperDetected when one is
        missing."""
        got: dict[tuple[int, int], bytes] = {}
        need = list(dict.fromkeys(need))
        for i in range(0, len(need), 400):
            part = need[i : i + 400]
            where = " OR ".join(["(level=? AND n=?)"] * len(part))
            args = [x for pair in part for x in pair]
            for level, n, h in self.conn.execute(
                f"SELECT level, n, hash FROM hashes WHERE {where}", args
            ):
                got[(int(level), int(n))] = bytes(h)
        for key in need:
            if key not in got:
                raise TamperDetected(f"stored hash {key} is missing from the database")
        return got

    def _prefetched(
        self, proof: Callable[[merkle.GetStored], list[bytes]], size: int | None = None
    ) -> list[bytes]:
        """Run ``proof`` twice: first to learn which stored hashes it reads (the addresses depend
        only on the sizes, never on hash values), then on those hashes, from memory
        (``_hash_levels``, given the tree ``size``) or fetched in one query."""
        need: list[tuple[int, int]] = []

        def record(level: int, n: int) -> bytes:
            need.append((level, n))
            return merkle.EMPTY_ROOT

        proof(record)
        levels = self._hash_levels(size) if size is not None else None
        got: dict[tuple[int, int], bytes] = {}
        if levels is not None:
            for key in need:
                h = levels.get(*key)
                if h is not None:
                    got[key] = h
        missing = [key for key in need if key not in got]
        if missing:
            got.update(self._read_hashes(missing))
        return proof(lambda level, n: got[(level, n)])

    def checkpoint(self) -> bytes:
        """The latest checkpoint: the one for the largest tree. Never "the last row inserted": a
        copy of an older, validly signed checkpoint inserted later must not roll the head back
        (issue 9 item 1); ``ledger audit`` rejects such a table."""
        row = self.conn.execute(  # one statement: one snapshot, even while a writer commits
            "SELECT note, (SELECT max(size) FROM checkpoints) FROM checkpoints "
            "ORDER BY size DESC, id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            size = self.size()
            if size and self.meta(MIRROR_URL_META) is None:  # a log ends every write with one
                raise TamperDetected(
                    f"the ledger holds {size} entries but no checkpoint: the checkpoint table "
                    "was altered (run `ledger audit`)"
                )
            raise LedgerStateError("the ledger has no checkpoint yet")
        note, column = bytes(row[0]), int(row[1])
        try:
            real = checkpoint_of(note).size
        except BadInput:
            return note  # malformed: the signature check of whoever reads it says so
        if real < column:
            raise TamperDetected(
                f"the checkpoint table is altered: the row for size {column} holds a checkpoint "
                f"of size {real} (run `ledger audit`)"
            )
        return note

    def checkpoints(self) -> Iterator[tuple[int, bytes]]:
        for size, note in self.conn.execute("SELECT size, note FROM checkpoints ORDER BY id"):
            yield int(size), bytes(note)

    def _parts(self) -> str:
        return parts_sql(self.size())

    def blob(self, digest: bytes, index: int | None = None) -> bytes | None:
        """A stored file by its BLAKE3 digest. With ``index``, an entry that names it: looked up
        in that entry's part first (one probe), as every entry's files are stored there."""
        if index is not None:
            row = self.conn.execute(
                "SELECT data FROM blobs WHERE part IN (?, ?) AND digest=? LIMIT 1",
                (part_of(index), LEGACY_PART, digest),
            ).fetchone()
            if row is not None:
                return bytes(row[0])
        row = self.conn.execute(
            f"SELECT data FROM blobs WHERE part IN ({self._parts()}) AND digest=? LIMIT 1",
            (digest,),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def blob_lengths(self, digests: Sequence[bytes]) -> dict[bytes, int]:
        """The length of each stored file among ``digests``, from whichever part holds it
        (``blob`` for many: the parts are listed once, 500 digests a query, and no file's bytes
        are read)."""
        return {bytes(d): int(n) for d, n in self._anywhere("digest, length(data)", digests)}

    def blobs_anywhere(self, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored files among ``digests``, by digest (``blob`` for many, as
        ``blob_lengths``)."""
        return {bytes(d): bytes(data) for d, data in self._anywhere("digest, data", digests)}

    def _anywhere(self, what: str, digests: Sequence[bytes]) -> Iterator[Any]:
        parts = self._parts()
        wanted = list(dict.fromkeys(digests))
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            yield from self.conn.execute(
                f"SELECT {what} FROM blobs WHERE part IN ({parts}) AND digest IN ({marks})", chunk
            )

    def has_blobs(self, digests: Sequence[bytes], index: int) -> set[bytes]:
        """Which of ``digests`` the store holds where the entry ``index`` finds its files: its
        part, or the part of the files stored before parts existed."""
        held = self.blobs_in(part_of(index), digests)
        rest = [d for d in digests if d not in held]
        if rest and self.blobs_in(LEGACY_PART, None):
            held |= self.blobs_in(LEGACY_PART, rest)
        return held

    def blobs_in(self, part: int, digests: Sequence[bytes] | None) -> set[bytes]:
        """Which of ``digests`` are stored in ``part`` exactly (one probe each); with None, one
        digest stored there if any (whether the part holds files at all)."""
        if digests is None:
            rows = self.conn.execute("SELECT digest FROM blobs WHERE part=? LIMIT 1", (part,))
            return {bytes(r[0]) for r in rows}
        return {bytes(r[0]) for r in self._in_part("digest", part, digests)}

    def count_blobs_in(self, part: int, digests: Sequence[bytes]) -> int:
        """How many of the distinct ``digests`` are stored in ``part``: ``blobs_in`` for a caller
        that only needs to know whether all are (one number back per query)."""
        return sum(int(r[0]) for r in self._in_part("count(*)", part, digests))

    def _in_part(self, what: str, part: int, digests: Sequence[bytes]) -> Iterator[Any]:
        """The rows of ``SELECT what FROM blobs`` for ``digests`` in ``part``, 500 a query."""
        for i in range(0, len(digests), 500):
            chunk = list(digests[i : i + 500])
            marks = ",".join("?" * len(chunk))
            yield from self.conn.execute(
                f"SELECT {what} FROM blobs WHERE part=? AND digest IN ({marks})", [part, *chunk]
            )

    def has_leaf(self, leaf_hash: bytes) -> bool:
        row = self.conn.execute(
            f"SELECT 1 FROM entries WHERE idx >> {PART_BITS} IN ({self._parts()}) "
            "AND leaf_hash=?",
            (leaf_hash,),
        )
        return row.fetchone() is not None

    def blobs(self) -> Iterator[tuple[bytes, bytes]]:
        """Every stored file once (a file kept in several parts is given once), by digest."""
        last = None
        for d, data in self.scan("SELECT digest, data FROM blobs ORDER BY digest"):
            d = bytes(d)
            if d != last:
                yield d, bytes(data)
            last = d

    def indices_for_digest(self, digest: bytes) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT idx FROM entries WHERE idx >> {PART_BITS} IN ({self._parts()}) "
                "AND bundle_digest=? ORDER BY idx",
                (digest,),
            )
        ]

    def resolve(self, text: str) -> int:
        """Index of the entry a user names: a decimal index, or a bundle digest or leaf hash in
        full or as a unique prefix of at least 8 hex digits (SPEC 7)."""
        t = text.strip().lower()
        size = self.size()
        if t.isdigit() and len(t) < 8:
            i = int(t)
            if i >= size:
                raise UnknownHash(f"no entry {i} (the log has {size} entries)")
            return i
        if len(t) < 8 or len(t) > 64 or any(c not in "0123456789abcdef" for c in t):
            raise UnknownHash(
                f"{text!r} is neither an index nor a hex hash prefix of 8 to 64 digits"
            )
        lo = hex_decode((t + "0" * 64)[:64])
        hi = hex_decode((t + "f" * 64)[:64])
        parts = f"idx >> {PART_BITS} IN ({parts_sql(size)})"
        found = {
            int(r[0])
            for r in self.conn.execute(
                f"SELECT idx FROM entries WHERE {parts} AND leaf_hash BETWEEN ? AND ? "
                f"UNION SELECT idx FROM entries WHERE {parts} AND bundle_digest BETWEEN ? AND ? "
                "LIMIT 11",
                (lo, hi, lo, hi),
            )
        }
        found = {i for i in found if 0 <= i}  # a row below 0 is no entry of the log (audit)
        if not found:
            raise UnknownHash(f"no bundle digest or leaf hash starts with {t}")
        for idx in found:
            self._recheck_names(idx, t)
        if len(found) > 1:
            shown = ", ".join(str(i) for i in sorted(found)[:10])
            raise UnknownHash(
                f"{t} is ambiguous: it matches entries {shown}; give more digits or an index"
            )
        return found.pop()

    def _recheck_names(self, idx: int, prefix: str) -> None:
        """The ``leaf_hash`` and ``bundle_digest`` columns are an index, editable by whoever can
        write the file: the entry they lead to must itself carry the name asked for."""
        from ledger.core.entries import decode_entry

        data = self.entry(idx)
        names = [hex_encode(merkle.leaf_hash(data))]
        try:
            names.append(decode_entry(data).bundle_digest or "")
        except BadInput as e:
            if not names[0].startswith(prefix):
                raise TamperDetected(
                    f"entry {idx}, which the database's index gives for {prefix}, is not a valid "
                    f"entry as stored ({e}): the database was altered (run `ledger audit`)"
                ) from e
        if not any(n.startswith(prefix) for n in names if n):
            raise TamperDetected(
                f"the database's index leads {prefix} to entry {idx}, whose leaf hash and bundle "
                "digest do not start with it (run `ledger audit`)"
            )

    def key_rows(self) -> list[NodeKey]:
        """The key index: one ``NodeKey`` per registered node key, in registration order."""
        from ledger.core.entries import NodeKey

        rows = self.conn.execute(
            "SELECT k.key_id, k.name, k.public_key, k.registered_idx, r.revoked_idx, "
            "coalesce(r.reason, '') FROM keys k LEFT JOIN revocations r USING(key_id) "
            "ORDER BY k.registered_idx"
        ).fetchall()
        return [
            NodeKey(bytes(a), str(b), bytes(c), int(d), None if e is None else int(e), str(f))
            for a, b, c, d, e, f in rows
        ]

    def revoked(self, size: int) -> list[tuple[bytes, int]]:
        """(key id, revocation index) of each key revoked by an entry before ``size``, from the
        key index (what a checkpoint's revoked-key line commits to: ``ledger.core.revoked``)."""
        rows = self.conn.execute(
            "SELECT key_id, revoked_idx FROM revocations WHERE revoked_idx < ?", (size,)
        ).fetchall()
        return sorted((bytes(k), int(i)) for k, i in rows)

    def key_row(self, key_id: bytes) -> NodeKey | None:
        for row in self.key_rows():
            if row.key_id == key_id:
                return row
        return None

    # -- writing -------------------------------------------------------------------------------

    @contextmanager
    def writer(self, *, checkpoint_later: bool = False) -> Iterator[Writer]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``); rolls back on error.

        ``checkpoint_later`` (a large batch): the commit is durable as ever, but the copy of the
        WAL back into the database file is left to a thread of this store
        (``ledger.store.walcheckpoint``)
        instead of being done inside ``COMMIT``, so the caller goes on meanwhile. Such a batch
        that finds the WAL over ``WAL_LIMIT_BYTES`` first waits for that thread, so the WAL
        starts over instead of growing by a batch every batch.

        Writers of all processes first queue on an exclusive ``flock`` of ``write.lock``: the
        kernel wakes the next one the moment the lock is released, where SQLite's own busy
        handler would poll with sleeps of up to 100 ms. The lock is released by the kernel when
        a process dies, so a killed writer never blocks the others. On PostgreSQL the backend
        orders writers of every host instead (``PgBackend.writer``)."""
        if self.backend is not None:
            with self.backend.writer(lambda size, stored: Writer(self, size, stored)) as w:
                yield w
            return
        with self._write_lock():
            if checkpoint_later and self._wal_over_limit():
                self.wait_checkpoint()  # so this transaction starts the WAL over
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                w = Writer(self)
                start = w.size
                yield w
                w.flush()
                if w.size != start:
                    self._refuse_lost_rows(start, w.size)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            else:
                if not checkpoint_later:
                    self.conn.execute("COMMIT")
                    return
                self.conn.execute("PRAGMA wal_autocheckpoint=0")
                try:
                    self.conn.execute("COMMIT")
                finally:
                    self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
                if self._checkpointer is None:
                    from ledger.store.walcheckpoint import Checkpointer

                    self._checkpointer = Checkpointer(self.home / DB_NAME)
                self._checkpointer.request()

    def _refuse_lost_rows(self, start: int, size: int) -> None:
        """Before a commit: TamperDetected where the ``entries`` table does not hold exactly the
        rows this transaction wrote (a trigger someone added made them vanish), so that such a
        write is refused, never acknowledged. One range count on the primary key."""
        count, top = self.conn.execute(
            "SELECT count(*), coalesce(max(idx) + 1, 0) FROM entries WHERE idx>=?", (start,)
        ).fetchone()
        if (int(count), int(top)) != (size - start, size):
            raise TamperDetected(
                f"the entries written ({start}..{size - 1}) are not in the ledger's entries table "
                "as written: a trigger on it changes the ledger's writes; nothing was written "
                "(run `ledger audit`)"
            )

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

    def put_checkpoint(self, note: bytes, size: int | None = None) -> None:
        if size is None:
            size = checkpoint_of(note).size
        with self.writer() as w:
            w.put_checkpoint(note, size)


class Writer:
    """Operations inside one write transaction; the tree's right edge is kept in memory."""

    def __init__(
        self, store: Store, size: int | None = None, stored: merkle.GetStored | None = None
    ) -> None:
        self.store = store
        self.conn = store.conn
        self.size = store.size() if size is None else size
        self.frontier = merkle.Frontier.from_store(self.size, stored or store.stored_hash)
        # Batched rows of ``append_bundle`` / ``put_blobs``, inserted by ``flush`` (before any
        # other write of this transaction and before COMMIT), so a batch import costs a few
        # ``executemany`` calls per thousand entries instead of four statements per entry.
        self._entry_rows: list[tuple[int, bytes, bytes, str, bytes | None]] = []
        self._hash_rows: list[tuple[int, int, bytes]] = []
        # whole levels of subtrees (``append_bundles``): (level, first n, the hashes joined)
        self._hash_runs: list[tuple[int, int, bytes]] = []
        self._blob_rows: list[tuple[int, bytes, bytes]] = []
        # the digests put in this transaction into the part files were last put in (at most
        # BLOBS_REMEMBERED; entries are appended part after part, so only the last one matters)
        self._blobs_part: int | None = None
        self._blobs_put: set[bytes] = set()

    def root(self) -> bytes:
        return self.frontier.root()

    def flush(self) -> None:
        if self._blob_rows:
            self.conn.executemany(
                "INSERT OR IGNORE INTO blobs(part, digest, data) VALUES(?, ?, ?)", self._blob_rows
            )
            self._blob_rows.clear()
        if self._entry_rows:
            self.conn.executemany("INSERT INTO entries VALUES(?, ?, ?, ?, ?)", self._entry_rows)
            if self._hash_rows:
                self.conn.executemany("INSERT INTO hashes VALUES(?, ?, ?)", self._hash_rows)
            if self._hash_runs:
                self._put_hash_runs(self._hash_runs)
            self._entry_rows.clear()
            self._hash_rows.clear()
            self._hash_runs.clear()

    def _put_hash_runs(self, runs: Sequence[tuple[int, int, bytes]]) -> None:
        """Insert runs of consecutive hashes of one level each, ``(level, first n, joined)``:
        the runs that continue one another are merged first, and on SQLite each is one
        statement that cuts its string into rows (a recursive count and ``substr``, which
        indexes a BLOB by bytes), so no row is bound from Python: ~0.45 µs per stored hash
        where ``executemany`` took ~1.3 (docs/benchmarks.md). PostgreSQL gets the rows."""
        merged: dict[int, tuple[int, list[bytes]]] = {}
        whole: list[tuple[int, int, list[bytes]]] = []
        for level, first, joined in runs:
            got = merged.get(level)
            if got is not None and got[0] + sum(map(len, got[1])) // merkle.HASH_SIZE == first:
                got[1].append(joined)
                continue
            if got is not None:
                whole.append((level, *got))
            merged[level] = (first, [joined])
        whole.extend((level, first, parts) for level, (first, parts) in merged.items())
        size = merkle.HASH_SIZE
        if self.store.backend is not None:
            self.conn.executemany(
                "INSERT INTO hashes VALUES(?, ?, ?)",
                [
                    (level, first + j, joined[j * size : (j + 1) * size])
                    for level, first, parts in whole
                    for joined in [b"".join(parts)]
                    for j in range(len(joined) // size)
                ],
            )
            return
        for level, first, parts in whole:
            joined = b"".join(parts)
            self.conn.execute(HASH_RUN_SQL, (level, first, len(joined) // size, joined))

    def append_bundle(self, entry: bytes, digest: bytes) -> tuple[int, bytes]:
        """Append a ``bundle`` entry (batched until ``flush``); return its index and leaf hash."""
        idx = self.size
        lh = merkle.leaf_hash(entry)
        self._entry_rows.append((idx, lh, entry, "bundle", digest))
        self._hash_rows.extend(self.frontier.append(lh))
        self.size += 1
        if len(self._entry_rows) >= FLUSH_ROWS:
            self.flush()
        return idx, lh

    def append_bundles(
        self,
        made: Sequence[tuple[bytes, bytes]],
        digests: Sequence[bytes],
        levels: Sequence[bytes] | None = None,
    ) -> None:
        """``append_bundle`` for many entries: ``made`` holds each entry with its leaf hash
        (computed by whoever made it; ``ledger audit`` recomputes every one), ``digests`` their
        bundle digests; ``levels``, when they fill a subtree of the tree here, all its levels,
        each level's hashes joined (``merkle.joined_levels`` of ``perfect_levels`` of the leaf
        hashes, made by a sealing worker or the mirror), which then are stored as they are,
        a level at a time (``_put_hash_runs``)."""
        rows = self._entry_rows
        idx = self.size
        if levels is not None and made and len(made) & (len(made) - 1) == 0 and \
                idx % len(made) == 0 and len(levels) == len(made).bit_length() and \
                levels[0] == b"".join([lh for _, lh in made]):
            self._hash_rows.extend(self.frontier.append_joined(levels))
            self._hash_runs.extend(
                (level, idx >> level, joined) for level, joined in enumerate(levels)
            )
            for (entry, lh), digest in zip(made, digests, strict=True):
                rows.append((idx, lh, entry, "bundle", digest))
                idx += 1
        else:
            hashes = self._hash_rows
            append = self.frontier.append
            for (entry, lh), digest in zip(made, digests, strict=True):
                rows.append((idx, lh, entry, "bundle", digest))
                hashes.extend(append(lh))
                idx += 1
        self.size = idx
        if len(rows) >= FLUSH_ROWS:
            self.flush()

    def put_bundle_files(self, first: int, files: Sequence[Sequence[BundleFile]]) -> None:
        """``put_blobs`` for the bundles of the entries ``first``, ``first + 1``, ...: each
        bundle's files into its entry's part: one ``_put`` per part, not per bundle, and no key
        built per file (bench/bench_append_steps.py, docs/benchmarks.md)."""
        k = 0
        while k < len(files):
            part = part_of(first + k)
            end = min(len(files), part_start(part + 1) - first)
            self._put(part, ((f.digest, f.data) for bundle in files[k:end] for f in bundle))
            k = end
        if len(self._blob_rows) >= FLUSH_ROWS:
            self.flush()

    def append(self, entry: bytes, etype: str | None = None, digest: bytes | None = None) -> int:
        self.flush()
        if etype is None:
            from ledger.core.entries import decode_entry

            obj = decode_entry(entry)
            etype = obj.type
            if obj.bundle_digest is not None:
                digest = hex_decode(obj.bundle_digest)
        idx = self.size
        if etype in ("key-registration", "key-revocation"):
            self._index_key_entry(idx, entry)
        lh = merkle.leaf_hash(entry)
        self.conn.execute(
            "INSERT INTO entries VALUES(?, ?, ?, ?, ?)", (idx, lh, entry, etype, digest)
        )
        self.conn.executemany("INSERT INTO hashes VALUES(?, ?, ?)", self.frontier.append(lh))
        self.size += 1
        return idx

    def _index_key_entry(self, idx: int, entry: bytes) -> None:
        from ledger.core.encoding import b64_decode
        from ledger.core.entries import decode_entry

        obj = decode_entry(entry)
        kid = hex_decode(str(obj.key_id))
        if obj.type == "key-registration":
            pub = b64_decode(str(obj.public_key), 32)
            self.put_key(kid, str(obj.name), pub, idx)
        else:
            self.put_revocation(kid, idx, str(obj.reason))

    def put_blobs(self, blobs: Iterable[tuple[bytes, bytes]], index: int | None = None) -> None:
        """Insert the files of the entry ``index`` (default: the next one appended) into its
        part (batched until ``flush``), skipping those put there in this transaction."""
        self._put(part_of(self.size if index is None else index), blobs)
        if len(self._blob_rows) >= FLUSH_ROWS:
            self.flush()

    def _seen_in(self, part: int) -> set[bytes]:
        if part != self._blobs_part:
            self._blobs_part, self._blobs_put = part, set()
        return self._blobs_put

    def _put(self, part: int, blobs: Iterable[tuple[bytes, bytes]]) -> None:
        seen = self._seen_in(part)
        for digest, data in blobs:
            if digest not in seen:
                if len(seen) >= BLOBS_REMEMBERED:
                    seen.clear()
                seen.add(digest)
                self._blob_rows.append((part, digest, data))

    def put_checkpoint(self, note: bytes, size: int) -> None:
        self.flush()
        self.conn.execute("INSERT INTO checkpoints(size, note) VALUES(?, ?)", (size, note))

    def put_key(self, key_id: bytes, name: str, public: bytes, index: int) -> None:
        self.flush()
        self.conn.execute("INSERT INTO keys VALUES(?, ?, ?, ?)", (key_id, name, public, index))

    def put_revocation(self, key_id: bytes, index: int, reason: str) -> None:
        self.flush()
        self.conn.execute("INSERT INTO revocations VALUES(?, ?, ?)", (key_id, index, reason))


def checkpoint_of(note: bytes) -> Checkpoint:
    return parse_checkpoint(note_text(note))


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
