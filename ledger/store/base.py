"""The ledger store's interface (SPEC 4) and what both engines' drivers share.

``Store`` is the narrow set of operations the log, audit, server and mirror use: read entries,
stored hashes, proofs, checkpoints, files and the key index; append in one write transaction
(``writer``, a ``ledger.store.writer.Writer``); report what ``ledger audit`` checks of the
database itself (``audit_problems``). Its shape follows Go's ``sumdb`` ``ServerOps`` and
Tessera's one driver per ``storage/<engine>/``: one driver per engine, none a branch of another:

* ``ledger.store.sqlite.SqliteStore``: one SQLite file, ``LEDGER_HOME/ledger.db``;
* ``ledger.store.postgres.PgStore``: a PostgreSQL database named by ``LEDGER_HOME/db.url``.

``BaseStore`` holds the reads, which both engines answer with the same SQL (the PostgreSQL
connection translates SQLite's spelling, ``ledger.store.postgres.PgConn``); each driver adds how
it opens (read-only or read-write), writes, streams and audits. ``ledger.store.open_store``
chooses the driver from the ledger's trusted configuration, never from anything a request
carries.

Tables: ``entries(idx, leaf_hash, data, type, bundle_digest)``, the exact entry bytes of each
leaf; ``hashes(level, n, hash)``, every complete-subtree hash (``ledger.core.merkle``
addressing), so roots and proofs cost O(log n) point reads; ``blobs(part, digest, data)``, bundle
files by BLAKE3 in the part of their entry (``ledger.store.common``, "Parts");
``checkpoints(id, size, note)``, every checkpoint the log issued (or a mirror verified);
``keys`` / ``revocations``, an index of the key entries that ``audit`` rebuilds and compares;
``meta``, the origin and verifier key (fixed) and working state; ``migrations``, the schema's
bookkeeping (``ledger.store.common.SchemaState``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core import merkle
from ledger.core.encoding import hex_decode, hex_encode
from ledger.core.errors import BadInput, LedgerStateError, TamperDetected, UnknownHash
from ledger.core.hashlevels import HashLevels, combine, inclusion_paths
from ledger.store import common
from ledger.store.common import (
    LEGACY_PART,
    MIRROR_URL_META,
    Conn,
    checkpoint_of,
    part_of,
    parts_sql,
)
from ledger.store.writer import Writer

if TYPE_CHECKING:
    from ledger.core.entries import NodeKey

PRELOAD_AFTER_PROOFS = 64  # a Store that has answered this many proofs keeps the tree's
# stored hashes in memory from then on (ledger.core.hashlevels: the levels that fit in 64 MB),
# reading
FILL_ROWS = 1 << 14  # at most this many of them per proof (0.02-0.1 s) until it holds them all


class Store(Protocol):
    """A ledger database, as the log, audit, server and mirror use it. Readers see committed
    state; writers use ``writer()``. A store opened read-only refuses every write."""

    home: Path
    origin: str
    read_only: bool

    @property
    def conn(self) -> Conn: ...  # audit's own queries (all reads)
    def close(self) -> None: ...
    def wait_checkpoint(self) -> None: ...
    # meta
    def meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    # entries and the tree
    def size(self) -> int: ...
    def entry(self, index: int) -> bytes: ...
    def leaf_hash(self, index: int) -> bytes: ...
    def entries(self, start: int, end: int) -> Iterator[bytes]: ...
    def rows(self, start: int = 0) -> Iterator[tuple[int, bytes, bytes]]: ...
    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]: ...
    def stored_hash(self, level: int, n: int) -> bytes: ...
    def version(self) -> tuple[int, int]: ...
    def root(self, size: int | None = None) -> bytes: ...
    def inclusion_proof(self, index: int, size: int) -> list[bytes]: ...
    def consistency_proof(self, old: int, new: int) -> list[bytes]: ...
    def resolve(self, text: str) -> int: ...
    def has_leaf(self, leaf_hash: bytes) -> bool: ...
    def indices_for_digest(self, digest: bytes) -> list[int]: ...
    # checkpoints
    def checkpoint(self) -> bytes: ...
    def checkpoints(self) -> Iterator[tuple[int, bytes]]: ...
    def put_checkpoint(self, note: bytes, size: int | None = None) -> None: ...
    # files
    def blob(self, digest: bytes, index: int | None = None) -> bytes | None: ...
    def blobs(self) -> Iterator[tuple[bytes, bytes]]: ...
    def blob_lengths(self, digests: Sequence[bytes]) -> dict[bytes, int]: ...
    def blobs_anywhere(self, digests: Sequence[bytes]) -> dict[bytes, bytes]: ...
    def has_blobs(self, digests: Sequence[bytes], index: int) -> set[bytes]: ...
    def blobs_in(self, part: int, digests: Sequence[bytes] | None) -> set[bytes]: ...
    def count_blobs_in(self, part: int, digests: Sequence[bytes]) -> int: ...
    # key index
    def key_rows(self) -> list[NodeKey]: ...
    def key_row(self, key_id: bytes) -> NodeKey | None: ...
    def revoked(self, size: int) -> list[tuple[bytes, int]]: ...
    # writing and auditing
    def writer(self, *, checkpoint_later: bool = False) -> AbstractContextManager[Writer]: ...
    def audit_problems(self, size: int) -> list[str]: ...


class BaseStore(ABC):
    """The reads of a ledger database, the same SQL on both engines; the drivers add opening,
    writing, streaming and the database's own audit."""

    def __init__(self, conn: Conn, home: Path, *, read_only: bool = False) -> None:
        self._conn = conn
        self.home = home
        self.read_only = read_only
        self._levels: HashLevels | None = None  # stored hashes in memory, for proofs
        self._proofs = 0
        origin = self.meta("origin")
        if origin is None:
            if conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is not None:
                raise TamperDetected(  # init records the origin before the first checkpoint
                    f"{home}: the ledger database holds checkpoints but no origin: its meta "
                    "table was altered"
                )
            raise LedgerStateError(f"{home}: ledger database has no origin (not initialised)")
        self.origin = origin

    @property
    def conn(self) -> Conn:
        return self._conn

    # -- what each engine does its own way -----------------------------------------------------

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def scan(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Any]:
        """The rows of a query that may return the whole log, streamed (other queries may run on
        this connection meanwhile)."""

    @abstractmethod
    def version(self) -> tuple[int, int]:
        """A value that changes whenever committed state may have. A server caches what it
        derives from the latest checkpoint on it (``ledger.http.state``)."""

    @abstractmethod
    def writer(self, *, checkpoint_later: bool = False) -> AbstractContextManager[Writer]:
        """One write transaction; rolls back on error."""

    @abstractmethod
    def put_hash_runs(self, runs: Sequence[tuple[int, int, bytes]]) -> None:
        """Insert runs of consecutive hashes of one level, ``(level, first n, joined)``."""

    @abstractmethod
    def audit_problems(self, size: int) -> list[str]:
        """What ``ledger audit`` finds wrong with the database itself (its append-only triggers,
        its schema bookkeeping) for a log of ``size`` entries."""

    def wait_checkpoint(self) -> None:
        """Wait for work a commit left to a thread (SQLite's WAL checkpoint); nothing here."""
        return None

    # -- meta ----------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.writer():
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (key, value))

    def put_checkpoint(self, note: bytes, size: int | None = None) -> None:
        if size is None:
            size = checkpoint_of(note).size
        with self.writer() as w:
            w.put_checkpoint(note, size)

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
            f"SELECT 1 FROM entries WHERE idx >> {common.PART_BITS} IN ({self._parts()}) "
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
                f"SELECT idx FROM entries WHERE idx >> {common.PART_BITS} IN ({self._parts()}) "
                "AND bundle_digest=? ORDER BY idx",
                (digest,),
            )
        ]

    def resolve(self, text: str) -> int:
        """Index of the entry a user names: a decimal index, or a bundle digest or leaf hash in
        full or as a unique prefix of at least 8 hex digits (SPEC 7)."""
        t = text.strip().lower()
        size = self.size()
        if t.isascii() and t.isdigit() and len(t) < 8:  # "²".isdigit(), int("²") raises
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
        parts = f"idx >> {common.PART_BITS} IN ({parts_sql(size)})"
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

    def key_row(self, key_id: bytes) -> NodeKey | None:
        for row in self.key_rows():
            if row.key_id == key_id:
                return row
        return None

    def revoked(self, size: int) -> list[tuple[bytes, int]]:
        """(key id, revocation index) of each key revoked by an entry before ``size``, from the
        key index (what a checkpoint's revoked-key line commits to: ``ledger.core.revoked``)."""
        rows = self.conn.execute(
            "SELECT key_id, revoked_idx FROM revocations WHERE revoked_idx < ?", (size,)
        ).fetchall()
        return sorted((bytes(k), int(i)) for k, i in rows)

    # -- writing -------------------------------------------------------------------------------
