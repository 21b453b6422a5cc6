"""One write transaction of a ledger store (SPEC 4), the same on every engine.

A ``Writer`` keeps the tree's right edge in memory (``ledger.core.merkle.Frontier``), batches the
rows of entries, subtree hashes and files, and inserts them with a few ``executemany`` calls per
thousand entries (``flush``, before any other write of its transaction and before COMMIT). The
store that opened the transaction (``ledger.store.sqlite``, ``ledger.store.postgres``) begins and
commits it; the one step spelt differently per engine, inserting whole runs of one level's
hashes, is the store's ``put_hash_runs``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from ledger.core import merkle
from ledger.core.encoding import hex_decode
from ledger.store.common import Conn, part_of, part_start

if TYPE_CHECKING:
    from ledger.core.bundle import BundleFile

FLUSH_ROWS = 1024  # entries a Writer batches before inserting them
BLOBS_REMEMBERED = 1 << 16  # blob digests a Writer remembers as put in its transaction


class WriterHost(Protocol):
    """What a ``Writer`` needs of the store whose transaction it writes in."""

    @property
    def conn(self) -> Conn: ...
    def size(self) -> int: ...
    def stored_hash(self, level: int, n: int) -> bytes: ...
    def put_hash_runs(self, runs: Sequence[tuple[int, int, bytes]]) -> None: ...


class Writer:
    """Operations inside one write transaction; the tree's right edge is kept in memory."""

    def __init__(
        self, store: WriterHost, size: int | None = None, stored: merkle.GetStored | None = None
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
        where ``executemany`` took ~1.3 (docs/benchmarks.md). PostgreSQL gets the rows. The
        insert itself is the engine's (``WriterHost.put_hash_runs``)."""
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
        self.store.put_hash_runs(
            [(level, first, b"".join(parts)) for level, first, parts in whole]
        )

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

