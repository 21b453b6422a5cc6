"""Moving a SQLite ledger to PostgreSQL (``ledger db copy --to postgresql://...``, issue 13).

``copy_home`` copies every row of the ledger in LEDGER_HOME into an empty PostgreSQL database in
one PostgreSQL transaction, while it holds the SQLite ledger's write lock and a write transaction
(no append can slip in between the copy and the switch). It then recomputes the tree root from
the entry bytes on each side (no stored hash trusted), compares the two roots with each other, with
both stores' stored trees and with the newest checkpoint, and only then makes LEDGER_HOME name the
database (``db.url``). The SQLite file stays beside it, renamed ``ledger.db.moved-to-postgresql``,
so no process can go on appending to the old copy by mistake.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ledger.core import merkle
from ledger.core.encoding import hex_encode
from ledger.core.errors import LedgerStateError, TamperDetected
from ledger.store.base import Store
from ledger.store.common import DB_NAME, URL_NAME, checkpoint_of
from ledger.store.pgdriver import import_psycopg
from ledger.store.postgres import (
    PgConn,
    PgStore,
    check_url,
    connect,
    create_tables,
    db_error,
    rollback_quietly,
    write_url,
)
from ledger.store.sqlite import SqliteStore

COPY_TABLES = (
    ("meta", "key, value"),
    ("entries", "idx, leaf_hash, data, type, bundle_digest"),
    ("hashes", "level, n, hash"),
    ("blobs", "part, digest, data"),
    ("checkpoints", "id, size, note"),
    ("keys", "key_id, name, public_key, registered_idx"),
    ("revocations", "key_id, revoked_idx, reason"),
)
MOVED_SUFFIX = ".moved-to-postgresql"


@dataclass(frozen=True)
class Copied:
    size: int
    sqlite_root: bytes
    pg_root: bytes
    rows: dict[str, int]
    kept: Path


def root_of_entries(store: Store) -> tuple[int, bytes]:
    """The tree size and root recomputed from the stored entry bytes alone (no stored hash)."""
    frontier = merkle.Frontier.from_store(0, store.stored_hash)
    size = 0
    for idx, data in store.scan("SELECT idx, data FROM entries ORDER BY idx"):
        if int(idx) != size:
            raise TamperDetected(f"entry {size} is missing (next stored is {idx})")
        frontier.append(merkle.leaf_hash(bytes(data)))
        size += 1
    return size, frontier.root()


def copy_home(home: Path, url: str) -> Copied:
    check_url(url)
    if os.path.lexists(home / URL_NAME):
        raise LedgerStateError(f"{home}: this ledger is on PostgreSQL already ({URL_NAME})")
    src = SqliteStore.open(home)
    try:
        with src._write_lock():
            src.conn.execute("BEGIN IMMEDIATE")
            try:
                dst = connect(url)
                try:
                    rows = _copy_rows(src, dst, url)
                    size, sqlite_root, pg_root = _compare(src, PgStore(dst, home))
                finally:
                    dst.close()
            finally:
                src.conn.execute("ROLLBACK")
            src.close()  # SQLite folds its WAL back into the file before the rename
            write_url(home / URL_NAME, url)
            for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm"):
                if os.path.lexists(home / name):
                    base, _, tail = name.partition("-")
                    moved = base + MOVED_SUFFIX + (f"-{tail}" if tail else "")
                    os.rename(home / name, home / moved)
            from ledger.core.fsutil import fsync_dir

            fsync_dir(home)
    finally:
        src.close()
    return Copied(size, sqlite_root, pg_root, rows, home / (DB_NAME + MOVED_SUFFIX))


def _copy_rows(src: Store, dst: PgConn, url: str) -> dict[str, int]:
    psycopg = import_psycopg()

    counts: dict[str, int] = {}
    create_tables(dst, url)  # its transaction stays open for the rows
    try:
        cur = dst.raw.cursor()
        for table, cols in COPY_TABLES:
            n = 0
            try:
                with cur.copy(f"COPY {table}({cols}) FROM STDIN") as cp:
                    for row in src.scan(f"SELECT {cols} FROM {table}"):
                        cp.write_row(row)
                        n += 1
            except psycopg.Error as e:
                raise db_error(e, url) from e
            counts[table] = n
        dst.execute("UPDATE head SET size=? WHERE size=0", (src.size(),))
        dst.execute(
            "SELECT setval(pg_get_serial_sequence('checkpoints', 'id'), "
            "coalesce(max(id), 0) + 1, false) FROM checkpoints"
        )
        dst.execute("COMMIT")
    except BaseException:
        rollback_quietly(dst)
        raise
    return counts


def _compare(src: Store, dst: Store) -> tuple[int, bytes, bytes]:
    size_a, root_a = root_of_entries(src)
    size_b, root_b = root_of_entries(dst)
    if (size_a, root_a) != (size_b, root_b) or dst.root(size_b) != root_b:
        raise TamperDetected(
            f"the copy differs: SQLite {size_a} entries, root {hex_encode(root_a)}; PostgreSQL "
            f"{size_b} entries, root {hex_encode(root_b)}; nothing was switched (the PostgreSQL "
            "database keeps the copy: drop its tables before trying again)"
        )
    if src.root(size_a) != root_a:
        raise TamperDetected(
            "the SQLite ledger's stored tree does not match its entries (run `ledger audit`); "
            "nothing was switched"
        )
    note = src.checkpoint()
    newest = checkpoint_of(note)
    if newest.size == size_a and newest.root != root_a:
        raise TamperDetected("the newest checkpoint does not sign the entries' root")
    if dst.checkpoint() != note:
        raise TamperDetected("the copied newest checkpoint differs from the SQLite ledger's")
    return size_a, root_a, root_b
