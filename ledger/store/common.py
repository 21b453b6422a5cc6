"""What every ledger store shares, whatever its engine (SPEC 4): file names, the parts, the
tables that hold history, and the rules both drivers apply the same way.

* **Names.** ``LEDGER_HOME/ledger.db`` (SQLite), ``LEDGER_HOME/db.url`` (the trusted file naming
  a PostgreSQL database instead), ``LEDGER_HOME/write.lock`` (SQLite writers' queue).
* **Parts.** The log is cut into parts of 2**16 consecutive entries (``PART_BITS``): the indexes
  by leaf hash and by bundle digest are keyed by (part, hash), and a bundle's files are kept in
  the part of its entry, so an append writes to the newest part of each B-tree only (issue 12;
  docs/design.md, "Store"). Part -1 (``LEGACY_PART``) holds the files stored before parts existed
  (migration 2).
* **Lost-row refusal.** Before a write transaction commits, the ``entries`` table must hold
  exactly the rows it wrote (``refuse_lost_rows``): a trigger or rule that makes an insert vanish
  must not turn into an acknowledged seal.
* **Schema bookkeeping.** Migrations are numbered; the ``migrations`` table records those applied.
  ``schema_state`` judges what it records against what the schema shows (``SchemaState``): whole,
  older than the code (``ledger db migrate`` brings it up), or altered (tampering). Only ``init``
  and ``ledger db migrate`` ever migrate; every other command opens the store as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.core.errors import LedgerStateError, TamperDetected
from ledger.core.note import Checkpoint, note_text, parse_checkpoint

DB_NAME = "ledger.db"
LOCK_NAME = "write.lock"
URL_NAME = "db.url"  # in LEDGER_HOME: the PostgreSQL database holding this ledger
PART_BITS = 16  # entries idx >> PART_BITS form one part (the module docstring, "Parts")
LEGACY_PART = -1  # the blobs stored before parts existed (migration 2)
APPEND_ONLY_TABLES = ("entries", "hashes", "blobs", "checkpoints", "keys", "revocations")
# The schema's bookkeeping (migration 3): the migrations applied may never be updated or deleted;
# the meta rows below may be inserted once and never changed (the rest of ``meta`` is the
# mirror's and witnesses' working state, rewritten as they go).
BOOKKEEPING_TABLE = "migrations"
FIXED_META = ("origin", "vkey")
MIRROR_URL_META = "mirror.url"  # set by ``ledger mirror`` (``ledger.mirror.URL_META``)
MIGRATE_FIX = "run `ledger db migrate` (after a backup) to bring it up to date"


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


def checkpoint_of(note: bytes) -> Checkpoint:
    return parse_checkpoint(note_text(note))


class Cursor(Protocol):
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """What a store asks of its connection: ``sqlite3.Connection``, or
    ``ledger.store.postgres.PgConn`` (SQLite's ``?`` placeholders and ``INSERT OR ...`` spelled
    for PostgreSQL)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...
    @property
    def in_transaction(self) -> bool: ...
    def close(self) -> None: ...


def refuse_lost_rows(conn: Conn, start: int, size: int, whose: str, changer: str) -> None:
    """Inside a write transaction, before it commits: TamperDetected where the ``entries`` table
    does not hold exactly the rows ``start .. size - 1`` it wrote (``changer``, "a trigger" or "a
    rule or trigger", made them vanish or move), so that such a write is refused, never
    acknowledged. One range count on the primary key. ``whose``: "the ledger's" (a file) or
    "the database's" (a server)."""
    count, top = conn.execute(
        "SELECT count(*), coalesce(max(idx) + 1, 0) FROM entries WHERE idx>=?", (start,)
    ).fetchone()
    if (int(count), int(top)) != (size - start, size):
        raise TamperDetected(
            f"the entries written ({start}..{size - 1}) are not in {whose} entries table "
            f"as written: {changer} on it changes the ledger's writes; nothing was written "
            "(run `ledger audit`)"
        )


@dataclass(frozen=True)
class SchemaState:
    """What a ledger's schema bookkeeping says: the versions its ``migrations`` table records,
    the newest version whose objects the schema shows (``shown``), and how many the code has."""

    recorded: frozenset[int]
    shown: int
    latest: int

    @property
    def whole(self) -> bool:
        return self.recorded == frozenset(range(1, self.latest + 1))

    @property
    def version(self) -> int:
        return max(self.recorded, default=0)

    def problem(self) -> str | None:
        """Why the bookkeeping is not that of a ledger of some version (altered rows), or None.
        A ledger records every version from 1 to its own, each once, never past the code's, and
        never fewer than its schema shows."""
        v = self.version
        if self.whole:
            return None
        if not self.recorded:
            return "records no migration at all (its rows were deleted)"
        if self.recorded != frozenset(range(1, v + 1)) or v > self.latest:
            shown = ", ".join(str(x) for x in sorted(self.recorded)[:20])
            return f"records migrations {shown}, not 1 to {min(v, self.latest)} (rows changed)"
        if self.shown > v:
            return (f"records migrations 1 to {v}, but the schema holds migration {self.shown}'s "
                    "objects (rows deleted)")
        return None

    def require(self, where: str) -> None:
        """Raise unless the schema is whole: TamperDetected (exit 1) where the bookkeeping was
        altered, LedgerStateError (exit 2) where it is an older schema, naming the fix."""
        bad = self.problem()
        if bad is not None:
            raise TamperDetected(
                f"{where}: the ledger's schema bookkeeping table {BOOKKEEPING_TABLE} {bad}: the "
                "database was altered (restore it from a backup or a mirror)"
            )
        if not self.whole:
            raise LedgerStateError(
                f"{where}: the ledger's schema is version {self.version}, this ledger program "
                f"needs version {self.latest}: {MIGRATE_FIX}"
            )


def bring_up_to_date(
    state_of: Callable[[], SchemaState], apply: Callable[[], None], where: str
) -> tuple[int, int]:
    """``ledger db migrate`` on either engine: the schema's version before and after ``apply``
    (the driver's migrations) ran, where they were needed. Refused, nothing written, where the
    bookkeeping was altered: migrating on top of deleted rows is what re-ran migration 1."""
    state = state_of()
    if state.problem() is not None:
        state.require(where)
    if not state.whole:
        apply()
    return state.version, state_of().version
