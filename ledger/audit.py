"""``ledger audit`` (SPEC 4, 7): recompute every hash, the tree, every chain link and signature.

It streams the log, never holding it in memory. First the key entries (registrations and
revocations, few) are replayed in index order: the log key's signatures, the proofs of
possession, the key rules (``ledger.core.entries.Registry``). Then the log is checked in chunks of
``CHUNK`` entries, by one worker process per core for a large log (each with its own database
connection), by this process for a small one (``audit_chunk``):

1. each entry's leaf hash is recomputed and compared with the stored one; the entry must be
   canonical JSON of a known shape, name this log's origin, and carry a chain link that holds
   (``ledger.core.entries.chain_problem``): a v1 entry ``prev_size`` = its index and ``prev_root``
   = the
   root of the tree before it (recomputed here, not read); a v2 entry a ``prev_size`` of at most
   its index and the log's root at that size (a prefix; recent roots are the recomputed ones,
   older ones come from the ``hashes`` table, which step 3 compares with the recomputed tree in
   full, so a wrong stored hash is reported there);
2. every signature is checked, a bundle's under the node key that the replayed key entries say
   was registered before it and not revoked;
3. every complete-subtree hash the appends create is recomputed and compared with ``hashes``
   (a chunk starts from the stored right edge of the tree before it, whose hashes the chunks
   that created them compare: a wrong one is reported there), and that table holds exactly the
   rows a tree of this size needs;
4. every stored checkpoint verifies under the log key and its root equals the recomputed root at
   its size;
5. every blob hashes to its BLAKE3 address (part by part, beside the chunks), and every file a
   bundle manifest names is present in the entry's part (``ledger.store.common``, "Parts"; or in the
   part of the files stored before parts existed; only the digests are read from the manifest:
   judging its paths is ``integrity.manifest``'s job, and the node that signed it answered for
   it);
6. the ``keys`` / ``revocations`` index equals the registry the log's history defines;
7. the database's own checks (``Store.audit_problems``): the append-only triggers (on the
   history and on the schema's bookkeeping) are all still in place as the schema wrote them, and
   no other trigger is on the ledger's tables; the ``migrations`` table records every migration
   the schema shows, each once (``ledger.store.common.SchemaState``); on PostgreSQL also the
   triggers enabled, their functions as written, no rule on the ledger's tables, and the tree
   head names the audited size (``ledger.store.postgres.PgStore.audit_problems``);
8. no entry row lies outside the log (a negative index), and in a log (not a mirror) the newest
   checkpoint covers every entry;
9. (``check_memory``, run by the ``audit`` command) the ledger's checkpoint against this
   machine's checkpoint memory: a log that lost its last entries, or was rebuilt under the same
   key, since this machine verified a larger or other tree fails (``ledger.trust``).

It works with the database's append-only triggers dropped: it trusts nothing stored but the log's
verifier key recorded at init (or the one a mirror pinned).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from ledger.core import merkle
from ledger.core.bundle import blake3_digest, manifest_digests
from ledger.core.encoding import hex_decode, hex_encode
from ledger.core.entries import (
    ENTRY_V1,
    ENTRY_V2,
    KEY_TYPES,
    NodeKey,
    Registry,
    bundle_view_fn,
    entry_object,
    link_problem,
    signed_part,
    signer_rule,
)
from ledger.core.errors import LedgerError, TamperDetected, VerificationFailed
from ledger.core.gcpause import collector_paused
from ledger.core.native import verify_many
from ledger.core.note import NoteVerifier, open_note, parse_checkpoint
from ledger.store import Store, open_store
from ledger.store.common import LEGACY_PART, MIRROR_URL_META, part_of, part_start

if TYPE_CHECKING:
    from ledger.trust import CheckpointMemory

MAX_PROBLEMS = 100
CHUNK_LEVEL = 13  # a chunk is the 2**CHUNK_LEVEL entries under one stored subtree hash
WORKERS = 4  # at most this many worker processes, one per core
IN_FLIGHT = 2 * WORKERS  # chunks submitted ahead: memory stays bounded however long the log
PARALLEL_MIN_ENTRIES = 8192  # audits this large run in worker processes
BLOB_CACHE = 4096  # blob digests remembered as present (bounded: the log is never in memory)
CHECK_BATCH = 8192  # recomputed subtree hashes compared per batch of range SELECTs


@dataclass
class AuditResult:
    size: int = 0
    root: bytes = merkle.EMPTY_ROOT
    entries: int = 0
    hashes: int = 0
    checkpoints: int = 0
    blobs: int = 0
    signatures: int = 0
    problems: list[tuple[int | None, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad_index(self) -> int | None:
        bad = [i for i, _ in self.problems if i is not None]
        return min(bad) if bad else None

    def sorted_problems(self) -> list[tuple[int | None, str]]:
        """Problems by index; those not tied to one entry last."""
        return sorted(self.problems, key=lambda p: (p[0] is None, p[0] or 0))

    def add(self, index: int | None, message: str) -> None:
        """Record a problem; past ``MAX_PROBLEMS`` keep the ones at the lowest indices (signature
        results arrive from the worker after later entries were already judged)."""
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((index, message))
            return
        if index is None:
            return
        indexed = [(i, k) for k, (i, _) in enumerate(self.problems) if i is not None]
        if not indexed:
            return
        worst_index, worst = max(indexed)
        if index < worst_index:
            self.problems[worst] = (index, message)


def expected_hash_rows(size: int) -> int:
    total, level = 0, 0
    while (size >> level) > 0:
        total += size >> level
        level += 1
    return total


def audit(
    store: Store, vkey: NoteVerifier, progress: Callable[[int], None] | None = None
) -> AuditResult:
    """Audit the whole log (module docstring). A log of ``PARALLEL_MIN_ENTRIES`` or more is
    checked in chunks by one worker process per core (at most ``WORKERS``); a smaller one in this
    process, by the same chunk function."""
    from ledger.core.entries import Registry

    res = AuditResult()
    size = store.size()
    ranges = _blob_ranges(size)
    # the workers start (a spawned interpreter each) and hash the blobs while this process
    # replays the key entries, which scans the whole entries table (~0.3 s at 10^6 entries)
    pool = _pool(size, store.home)
    done: list[ChunkResult] = []
    blob_parts: list[tuple[int, list[tuple[int | None, str]]]] = []
    try:
        blob_jobs = [] if pool is None else [pool.submit(_blob_job, a, b) for a, b in ranges]
        registry = Registry(vkey.public, store.origin)
        key_events = _replay_key_entries(store, registry, res)
        _check_checkpoint_order(store, res)
        _check_recorded_vkey(store, vkey, res)
        ctx = AuditContext(
            store.home, vkey, store.origin, dict(registry.keys), key_events, CHUNK_LEVEL
        )
        chunk = 1 << ctx.chunk_level
        chunks = [(lo, min(size, lo + chunk)) for lo in range(0, size, chunk)]
        if pool is None:
            for lo, hi in chunks:
                done.append(audit_chunk(store, ctx, lo, hi))
                if progress is not None:
                    progress(hi)
            blob_parts = [check_blob_range(store, a, b) for a, b in ranges]
            rows = _hash_rows(store)
        else:
            pending: deque[Future[ChunkResult]] = deque()
            todo = iter(chunks)
            for lo, hi in todo:
                pending.append(pool.submit(_chunk_job, ctx, lo, hi))
                if len(pending) >= IN_FLIGHT:
                    break
            rows = _hash_rows(store)  # while the workers check the first chunks
            while pending:
                got = pending.popleft().result()
                done.append(got)
                if progress is not None:
                    progress(got.end)
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.submit(_chunk_job, ctx, *nxt))
            blob_parts = [j.result() for j in blob_jobs]
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    root = _merge_chunks(done, res, ctx.chunk_level)
    res.size = res.entries
    res.root = root
    _check_outer_checkpoints(store, vkey, res)
    _check_outside_rows(store, res)
    if rows != expected_hash_rows(res.size):
        res.add(
            None,
            f"hashes table holds {rows} rows, a tree of {res.size} needs "
            f"{expected_hash_rows(res.size)}",
        )
    for count, problems in blob_parts:
        res.blobs += count
        for index, message in problems:
            res.add(index, message)
    _check_key_index(store, registry, res)
    _check_triggers(store, res)
    return res


@dataclass(frozen=True)
class AuditContext:
    """What every chunk of one audit is checked against (sent with each chunk job): the trusted
    verifier key, the log's origin, and the node keys as the log's key entries define them (their
    registration and revocation indices), with the indices of those key entries."""

    home: Path
    vkey: NoteVerifier
    origin: str
    keys: dict[bytes, NodeKey]
    key_events: frozenset[int]
    chunk_level: int  # chunks are the 2**chunk_level entries under one subtree hash


@dataclass
class ChunkResult:
    """What the audit of entries ``[start, end)`` found. ``entries`` counts the entries checked
    (fewer than ``end - start`` when one is missing: ``gap``); ``own`` the recomputed roots of the
    complete subtrees inside the chunk after the last of them (one hash, at ``CHUNK_LEVEL``, for
    a full chunk), which the main process folds into the recomputed tree and compares ``edge``
    with; ``first_link`` the first broken chain link, ``links`` their count."""

    start: int
    end: int
    edge: tuple[tuple[int, bytes], ...] = ()  # the stored right edge of the tree before start
    own: tuple[tuple[int, bytes], ...] = ()  # the recomputed subtrees inside the chunk, at its end
    entries: int = 0
    gap: bool = False
    hashes: int = 0
    signatures: int = 0
    checkpoints: int = 0
    links: int = 0
    first_link: tuple[int, str] | None = None
    problems: list[tuple[int | None, str]] = field(default_factory=list)

    def add(self, index: int | None, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((index, message))


def _replay_key_entries(store: Store, registry: Registry, res: AuditResult) -> frozenset[int]:
    """Step 2's key rules: replay the key entries (registrations, revocations: few) in index
    order, checking the log key's signatures and the proofs of possession. The stored ``type``
    column only chooses what is replayed first; every chunk checks each entry's real type
    against it, and an entry that names a key event this replay did not see fails there."""
    seen: list[int] = []
    for idx, data in store.scan(
        "SELECT idx, data FROM entries WHERE type IN ('key-registration', 'key-revocation') "
        "ORDER BY idx"
    ):
        idx = int(idx)
        seen.append(idx)
        try:
            registry.apply(idx, bytes(data))
        except LedgerError as e:
            res.add(idx, f"entry {idx}: {e}")
    return frozenset(seen)


def audit_chunk(store: Store, ctx: AuditContext, start: int, end: int) -> ChunkResult:
    """Steps 1-5 for entries ``[start, end)``: leaf hashes, the canonical entry and its shape,
    signature and signer rules, the chain link, the stored columns, the manifest and the files it
    names, every subtree hash the appends create, every checkpoint of a size in
    ``(start, end]``. The tree before ``start`` is taken from the stored hashes: the chunks that
    created those hashes compare each with its recomputed value, so a wrong one fails the audit
    there, and the hashes built on it here are compared again.

    It goes through the chunk once for what each entry says (``_Pass``: its bytes, rules,
    columns, manifest, signature, and the tree its link names), then recomputes the chunk's
    tree: a full chunk (aligned: ``start`` is a multiple of its width) as one perfect subtree,
    level by level (``merkle.perfect_levels``); the last, partial one leaf by leaf. The named
    roots, the checkpoints and the stored hashes are judged against that tree."""
    r = ChunkResult(start, end)
    try:
        before = merkle.Frontier.from_store(start, store.stored_hash)
    except LedgerError as e:
        r.add(start, f"entry {start}: the tree before it cannot be read: {e}")
        r.gap = True
        return r
    r.edge = before.edge()
    scan = _Pass(store, ctx, r)
    rows = store.scan(
        "SELECT idx, leaf_hash, data, type, bundle_digest FROM entries "
        "WHERE idx>=? AND idx<? ORDER BY idx",
        (start, end),
    )
    while scan.rows(list(itertools.islice(rows, SUB_BATCH))):
        pass
    scan.finish()
    pos = start + len(scan.leaves)
    if pos < end and not r.gap:
        r.add(pos, f"entry index {pos} is missing (the log ends at {pos})")
        r.gap = True
    r.entries = pos - start
    tree = _ChunkTree(store, r.edge, start, scan.leaves, ctx.chunk_level)
    _check_links(r, scan.links, tree, start)
    tree.compare_stored(r)
    cps = _grouped(store.conn.execute(
        "SELECT size, note FROM checkpoints WHERE size>? AND size<=? ORDER BY size, id",
        (start, pos),
    ))
    for size, notes in cps:
        for note in notes:
            _check_checkpoint(r, ctx.vkey, ctx.origin, note, size, tree.root(size))
            r.checkpoints += 1
    r.own = tree.own()
    return r


SUB_BATCH = 1024  # entries whose signatures are verified, and files looked up, at a time
_FOREVER = 1 << 62
_NO_SPAN = (1, 0, b"")  # an unknown signer: no entry in its span


class _Pass:
    """The one pass of ``audit_chunk`` over a chunk's rows: what each entry says, judged on its
    own and against the replayed key entries; signatures and file lookups batched."""

    def __init__(self, store: Store, ctx: AuditContext, r: ChunkResult) -> None:
        self.store = store
        self.ctx = ctx
        self.r = r
        self.keys = {hex_encode(k): v for k, v in ctx.keys.items()}  # by the hex id entries carry
        # per signer, the entries it may sign (signer_rule's span) and its public key
        self.spans = {
            kid: (k.registered_at + 1, _FOREVER if k.revoked_at is None else k.revoked_at,
                  k.public)
            for kid, k in self.keys.items()
        }
        self.view_of = bundle_view_fn()
        self.leaves: list[bytes] = []
        self.links: list[tuple[int, int, int, str]] = []  # (index, v, prev_size, prev_root)
        self.jobs: list[tuple[bytes, bytes, bytes]] = []
        self.job_index: list[int] = []
        self.files: list[tuple[int, bytes]] = []  # (entry, file digest) to look up
        self.present: dict[int, set[bytes]] = {}  # per part: digests found present there

    def rows(self, rows: list[tuple[int, bytes, bytes, str, Any]]) -> bool:
        """Judge the next rows; False when there are none, or at a gap. A bundle entry the
        compiled scanner reads (``bundle_view``) whose origin, type and digest columns hold is
        judged here, inline (the common case: no Python frame per entry, the signer's span
        precomputed); any other takes ``entry`` (``entry_object``'s path), which says what is
        wrong."""
        if not rows:
            return False
        r, leaves, ctx = self.r, self.leaves, self.ctx
        key_events, origin, spans = ctx.key_events, ctx.origin, self.spans
        jobs, job_index, links, files, present = (
            self.jobs, self.job_index, self.links, self.files, self.present)
        view_of, leaf_hash, b3 = self.view_of, merkle.leaf_hash, blake3.blake3
        part = part_of(rows[0][0])  # where the files of the entries are kept
        held, part_end = present.get(part), part_start(part + 1)
        pos = r.start + len(leaves)
        for row in rows:
            idx, stored_lh, data, etype, digest = row
            view = None if idx in key_events else view_of(data)
            if (view is None or view.origin != origin or etype != "bundle"
                    or digest != view.bundle_digest or idx != pos):
                if not self.entry(*row):
                    return False
                pos += 1
                continue
            pos += 1
            lh = leaf_hash(data)
            leaves.append(lh)
            if lh != stored_lh:
                r.add(idx, f"entry {idx}: bytes do not hash to the stored leaf hash")
            _, size, named_root, v, d, manifest, signer, signature, signed, named, _ = view
            first, last, public = spans.get(signer, _NO_SPAN)
            if not first <= idx <= last:  # not registered before it, or revoked before it
                try:
                    signer_rule(self.keys.get(signer), signer, idx)
                except LedgerError as e:
                    r.add(idx, f"entry {idx}: {e}")
                    continue
            jobs.append((public, signed, signature))
            job_index.append(idx)
            links.append((idx, v, size, named_root))
            if b3(manifest).digest() != d:
                r.add(idx, f"entry {idx}: manifest does not hash to its bundle digest")
            if idx >= part_end:  # into the next part (a chunk never is, but for tests)
                part = part_of(idx)
                held, part_end = present.get(part), part_start(part + 1)
            for fd in named:
                if held is None or fd not in held:
                    files.append((idx, fd))
        if len(jobs) >= SUB_BATCH or len(files) >= SUB_BATCH:
            self.finish()
        return True

    def entry(self, idx: int, stored_lh: bytes, data: bytes, etype: str, digest: Any) -> bool:
        """Judge the row of entry ``idx``; False when it is not the next index (a gap)."""
        r = self.r
        pos = r.start + len(self.leaves)
        if idx != pos:
            r.add(pos, f"entry index {pos} is missing (next stored is {idx})")
            r.gap = True
            return False
        data = bytes(data)
        lh = merkle.leaf_hash(data)
        self.leaves.append(lh)
        if lh != bytes(stored_lh):
            r.add(idx, f"entry {idx}: bytes do not hash to the stored leaf hash")
        try:
            self._rules(idx, data, etype, digest)
        except LedgerError as e:
            r.add(idx, f"entry {idx}: {e}")
        if len(self.jobs) >= SUB_BATCH or len(self.files) >= SUB_BATCH:
            self.finish()
        return True

    def _rules(self, idx: int, data: bytes, etype: str, digest: Any) -> None:
        ctx = self.ctx
        if idx in ctx.key_events:  # replayed (and any problem reported) before the chunks
            obj, _ = entry_object(data)
            self.r.signatures += 1
        else:
            obj, signature = entry_object(data)
            if obj["type"] in KEY_TYPES:
                Registry(ctx.vkey.public, ctx.origin).check(idx, data)  # its signature first
                raise VerificationFailed(f"{obj['type']} entry {idx} is not a key event of "
                                         "this log (its stored type column says otherwise)")
            if obj["origin"] != ctx.origin:
                raise VerificationFailed(f"entry {idx} names origin {obj['origin']!r}")
            signer = obj["signer"]
            key = signer_rule(self.keys.get(signer), signer, idx)
            self.jobs.append((key.public, signed_part(data, obj), signature))
            self.job_index.append(idx)
        self.links.append((idx, ENTRY_V2 if "v" in obj else ENTRY_V1, obj["prev_size"],
                           obj["prev_root"]))
        if obj["type"] != etype:
            self.r.add(idx, f"entry {idx}: stored type column does not match the entry")
        named = obj.get("bundle_digest")
        if named is not None:
            manifest = obj["manifest"].encode("utf-8")
            self._bundle(idx, hex_decode(named), digest, manifest, manifest_digests(manifest))

    def _bundle(
        self, idx: int, d: bytes, column: Any, manifest: bytes, files: list[bytes]
    ) -> None:
        """A bundle entry's digest against its stored column and its manifest; the files it
        names to look up."""
        if column is None or bytes(column) != d:
            self.r.add(idx, f"entry {idx}: stored bundle digest column does not match")
        if blake3_digest(manifest) != d:
            self.r.add(idx, f"entry {idx}: manifest does not hash to its bundle digest")
        present = self.present.get(part_of(idx))
        for fd in files:
            if present is None or fd not in present:
                self.files.append((idx, fd))

    def finish(self) -> None:
        """Verify the signatures and look up the files gathered so far."""
        r = self.r
        if self.jobs:
            bad = verify_many(self.jobs)
            for k in bad:
                idx = self.job_index[k]
                r.add(idx, f"entry {idx}: entry signature does not verify")
            r.signatures += len(self.jobs) - len(bad)
            self.jobs, self.job_index = [], []
        if not self.files:
            return
        by_part: dict[int, dict[bytes, None]] = {}  # an entry's files are kept in its part
        for i, fd in self.files:
            by_part.setdefault(part_of(i), {})[fd] = None
        found: set[tuple[int, bytes]] = set()
        for part, fds in by_part.items():
            digests = list(fds)
            if self.store.count_blobs_in(part, digests) == len(digests):
                found.update((part, fd) for fd in digests)  # all there: the common case
                continue
            found.update((part, fd) for fd in self.store.has_blobs(digests, part_start(part)))
        present = self.present
        for i, fd in self.files:
            part = part_of(i)
            if (part, fd) in found:
                held = present.setdefault(part, set())
                if len(held) >= BLOB_CACHE:
                    held.clear()
                held.add(fd)
            else:
                r.add(i, f"entry {i}: bundle file {hex_encode(fd)} is missing")
        self.files = []


class _ChunkTree:
    """The recomputed tree over a chunk's entries on top of the stored tree before it (``edge``):
    all levels of a full aligned chunk at once, a partial one leaf by leaf; roots at any size in
    the chunk, and the stored hashes compared with the recomputed ones."""

    def __init__(
        self, store: Store, edge: tuple[tuple[int, bytes], ...], start: int,
        leaves: list[bytes], chunk_level: int,
    ) -> None:
        self.store = store
        self.edge = edge
        self.start = start
        self.chunk_level = chunk_level
        self.size = start + len(leaves)
        self.full = len(leaves) == 1 << chunk_level and start % len(leaves) == 0
        self.rows: list[tuple[int, int, bytes]] = []
        self.edges: dict[int, tuple[tuple[int, bytes], ...]] = {}  # partial chunk: at each size
        self.levels: list[list[bytes]] = []
        if self.full:
            self.levels = merkle.perfect_levels(leaves)
        else:
            f = merkle.Frontier.from_edge(start, edge)
            for lh in leaves:
                self.edges[f.size] = f.edge()
                self.rows.extend(f.append(lh))
            self.edges[f.size] = f.edge()

    def root(self, size: int) -> bytes:
        """The recomputed root at ``size`` (in ``[start, start + len]``)."""
        if not self.start <= size <= self.size:
            raise ValueError(f"size {size} is outside the chunk {self.start}..{self.size}")
        if not self.full:
            return merkle.edge_root(self.edges[size])
        return merkle.edge_root(merkle.edge_within(self.edge, self.levels, size - self.start))

    def own(self) -> tuple[tuple[int, bytes], ...]:
        """The recomputed subtrees inside the chunk at its end: its root for a full chunk, else
        the edge nodes below the chunk level (the chunk is aligned: they lie inside it)."""
        if self.full:
            return ((self.chunk_level, self.levels[-1][0]),)
        return tuple((level, h) for level, h in self.edges[self.size] if level < self.chunk_level)

    def compare_stored(self, r: ChunkResult) -> None:
        """Compare every subtree hash the chunk's appends create with ``hashes`` (one range
        SELECT per level)."""
        conn = self.store.conn
        made: list[tuple[int, int, bytes]]
        if self.full:
            # the chunk's own levels, each against one range of stored rows as a whole list
            # (the common case; a level that differs goes through the row-by-row check below)
            made = []
            for level, row in enumerate(self.levels):
                first_n = self.start >> level
                stored = [h for (h,) in conn.execute(
                    "SELECT hash FROM hashes WHERE level=? AND n>=? AND n<=? ORDER BY n",
                    (level, first_n, first_n + len(row) - 1),
                )]
                if stored == row:
                    r.hashes += len(row)
                else:  # counted and judged below
                    made.extend((level, first_n + j, h) for j, h in enumerate(row))
            # and the hashes the chunk's root completes above it
            f = merkle.Frontier.from_edge(self.start, self.edge)
            made.extend(row for row in f.append_subtree(self.levels)
                        if row[0] >= len(self.levels))
        else:
            made = self.rows
        by_level: dict[int, list[tuple[int, bytes]]] = {}
        for level, n, h in made:
            by_level.setdefault(level, []).append((n, h))
        for level, items in sorted(by_level.items()):
            first_n, last_n = items[0][0], items[-1][0]
            r.hashes += len(items)
            if last_n - first_n + 1 == len(items):  # consecutive (always, but for a gap)
                stored = [bytes(h) for (h,) in conn.execute(
                    "SELECT hash FROM hashes WHERE level=? AND n>=? AND n<=? ORDER BY n",
                    (level, first_n, last_n),
                )]
                if stored == [h for _, h in items]:
                    continue  # the common case: one comparison of two lists
            by_n = {
                int(n): bytes(h)
                for n, h in conn.execute(
                    "SELECT n, hash FROM hashes WHERE level=? AND n>=? AND n<=?",
                    (level, first_n, last_n),
                )
            }
            for n, h in items:
                if by_n.get(n) != h:
                    first, last = n << level, ((n + 1) << level) - 1
                    # a bad entry inside the range was reported already; this is its consequence
                    if not any(i is not None and first <= i <= last for i, _ in r.problems):
                        r.add(
                            first,
                            f"stored hash ({level}, {n}) over entries {first}..{last} is wrong",
                        )


def _check_links(
    r: ChunkResult, links: list[tuple[int, int, int, str]], tree: _ChunkTree, start: int
) -> None:
    """Each entry's chain link against the recomputed tree (a size inside the chunk) or the
    stored one before it (``store.root``; step 3 compares those hashes where they were made)."""
    roots: dict[int, bytes | None] = {}

    def root_at(size: int) -> bytes | None:
        if size not in roots:
            if size < start:
                roots[size] = tree.store.root(size)
            else:
                roots[size] = tree.root(size) if size <= tree.size else None
        return roots[size]

    held: tuple[int, str] | None = None  # a v2 link found to hold (batch seals name one tree)
    for idx, v, size, named in links:
        if v == ENTRY_V2 and size < idx and (size, named) == held:
            continue  # the same prefix as the entry before: it holds, and size < idx here too
        needed = v == ENTRY_V1 or size == idx
        link = link_problem(v, size, named, idx, root_at(idx) if needed else None, root_at)
        held = (size, named) if link is None and v == ENTRY_V2 else None
        if link is not None:
            r.links += 1
            if r.first_link is None:
                r.first_link = (idx, link)


def _grouped(rows: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, list[bytes]]]:
    return ((k, [bytes(n) for _, n in g])
            for k, g in itertools.groupby(rows, key=lambda row: int(row[0])))


def _merge_chunks(done: list[ChunkResult], res: AuditResult, chunk_level: int) -> bytes:
    """Fold the chunks' results in index order into ``res``; a missing entry ends the log there
    (what follows it is not counted). The recomputed tree is built from the chunks' own subtrees;
    a chunk that started from a stored edge other than the recomputed one is said (its chain-link
    and checkpoint findings were judged against that stored tree). Returns the recomputed root."""
    top = merkle.Frontier()  # the tree over full chunks: each leaf a subtree at chunk_level
    links = 0
    first_link: tuple[int, str] | None = None
    edge: list[tuple[int, bytes]] = []
    for c in done:
        edge = [(level + chunk_level, h) for level, h in top.edge()]
        if tuple(edge) != c.edge and not c.gap:
            res.add(c.start, f"entry {c.start}: the stored tree before it is not the recomputed "
                             "one (a wrong stored hash, reported above); this part's chain links "
                             "and checkpoints were judged against the stored tree")
        res.entries += c.entries
        res.hashes += c.hashes
        res.signatures += c.signatures
        res.checkpoints += c.checkpoints
        for index, message in c.problems:
            res.add(index, message)
        links += c.links
        if first_link is None and c.first_link is not None:
            first_link = c.first_link
        if c.gap or len(c.own) != 1 or c.own[0][0] != chunk_level:
            edge += c.own  # the last (partial) chunk, or one cut short by a missing entry
            break
        top.append(c.own[0][1])
        edge = [(level + chunk_level, h) for level, h in top.edge()]
    if first_link is not None:  # after one bad entry every later link breaks too: say it once
        idx, link = first_link
        res.add(idx, f"entry {idx}: chain link (prev_size/prev_root) does not match: {link}")
    if links > 1:
        res.add(
            None,
            f"{links - 1} later chain links do not match either (entries "
            "chained to a tree that an earlier change altered)",
        )
    return merkle.edge_root(edge)


def _check_outer_checkpoints(store: Store, vkey: NoteVerifier, res: AuditResult) -> None:
    """The checkpoints no chunk checks: of size 0 (the empty tree at init) and beyond the log."""
    beyond: int | None = None
    for size, note in store.scan(
        "SELECT size, note FROM checkpoints WHERE size<=0 OR size>? ORDER BY size, id",
        (res.size,),
    ):
        size = int(size)
        if size == 0:
            _check_checkpoint(res, vkey, store.origin, bytes(note), 0, merkle.EMPTY_ROOT)
            res.checkpoints += 1
        elif size < 0:
            res.add(None, f"checkpoint of size {size} does not match the log's growth")
            res.checkpoints += 1
        elif beyond is None:
            beyond = size
    if beyond is not None:
        res.add(None, f"checkpoint of size {beyond} is beyond the log ({res.size} entries)")


def _check_outside_rows(store: Store, res: AuditResult) -> None:
    """Step 1's rows the index scan never meets: entries below index 0 (a hidden row that a
    lookup by hash could reach), and, in a log (not a mirror, which stores entries before the
    checkpoint that covers them), entries no checkpoint covers: every write ends with a
    checkpoint of the whole log, so a newest checkpoint smaller than the log was deleted."""
    (hidden,) = store.conn.execute("SELECT count(*) FROM entries WHERE idx<0").fetchone()
    if hidden:
        res.add(None, f"{int(hidden)} entry rows have a negative index: rows outside the log")
    if res.size == 0 or store.meta(MIRROR_URL_META) is not None:
        return
    (top,) = store.conn.execute("SELECT max(size) FROM checkpoints").fetchone()
    if top is None or int(top) < res.size:
        newest = "none" if top is None else f"size {int(top)}"
        res.add(
            res.size - 1,
            f"no checkpoint covers the log's {res.size} entries (newest: {newest}): every "
            "write ends with one, so a checkpoint row was deleted",
        )


def check_memory(
    store: Store, vkey: NoteVerifier, res: AuditResult, memory: CheckpointMemory
) -> str | None:
    """After a clean audit of a log (not a mirror), compare its checkpoint with this machine's
    checkpoint memory (``ledger.trust``, the one ``verify`` and ``mirror`` keep) and remember it:
    the file alone cannot show that it lost entries (the last ones deleted with their hashes and
    checkpoints, a WAL whose last frames were damaged) or was rebuilt under the same key, but a
    checkpoint this machine verified before can. Records the problem in ``res`` (exit 1);
    returns the memory's one-line account."""
    from ledger.trust import Equivocation, Unproven, guard, store_prover

    if not res.ok or store.meta(MIRROR_URL_META) is not None:
        return None  # a mirror may lag what this machine verified; its sync checks the memory
    fix = ("the ledger lost entries or was rewritten since this machine verified a larger "
           "tree; restore it from a mirror or a backup that holds that tree")
    try:
        return guard(store.checkpoint(), vkey, (), 0, memory, store_prover(store), fix)
    except (Equivocation, Unproven, TamperDetected) as e:
        res.add(None, str(e))
    return None


def _blob_ranges(size: int) -> list[tuple[int, int | None]]:
    """Ranges of parts that split the blobs table for step 5's hashing: each part of the log
    (``ledger.store.common``, "Parts"), the legacy part with the first, the last open-ended."""
    last = part_of(max(size - 1, 0))
    cuts = [LEGACY_PART, *range(1, last + 1)]
    return [(cuts[i], cuts[i + 1] if i + 1 < len(cuts) else None) for i in range(len(cuts))]


def check_blob_range(
    store: Store, lo: int, hi: int | None
) -> tuple[int, list[tuple[int | None, str]]]:
    """Hash every blob stored in the parts ``[lo, hi)``: (blobs checked, problems)."""
    count, problems = 0, list[tuple[int | None, str]]()
    sql = "SELECT digest, data FROM blobs WHERE part>=?" + ("" if hi is None else " AND part<?")
    hasher = blake3.blake3
    for d, data in store.scan(sql, (lo,) if hi is None else (lo, hi)):
        count += 1
        if hasher(data).digest() != d:
            if len(problems) < MAX_PROBLEMS:
                problems.append((None, f"blob {hex_encode(bytes(d))} does not hash to its address"))
    return count, problems


# -- worker processes ----------------------------------------------------------------------------

_WORKER: Store | None = None


def _init_worker(home: Path) -> None:
    global _WORKER
    _WORKER = open_store(home, read_only=True)


def _chunk_job(ctx: AuditContext, start: int, end: int) -> ChunkResult:
    """One chunk in a worker, with the cyclic collector paused (``ledger.core.gcpause``): a chunk's
    rows, leaves and jobs form no cycles, and the young collections their allocations set off
    were 1.7% of the workers' chunk samples (py-spy, docs/benchmarks.md)."""
    assert _WORKER is not None
    with collector_paused():
        return audit_chunk(_WORKER, ctx, start, end)


def _blob_job(lo: int, hi: int | None) -> tuple[int, list[tuple[int | None, str]]]:
    assert _WORKER is not None
    return check_blob_range(_WORKER, lo, hi)


def _hash_rows(store: Store) -> int:
    return int(store.conn.execute("SELECT count(*) FROM hashes").fetchone()[0])


def _pool(size: int, home: Path) -> ProcessPoolExecutor | None:
    """One worker process per core (at most ``WORKERS``) for a large audit, each with its own
    connection to the ledger at ``home`` (each chunk job brings the ``AuditContext``, made once
    the key entries are replayed); small audits run here and start nothing."""
    cpus = os.cpu_count() or 1
    if size < PARALLEL_MIN_ENTRIES or cpus < 2:
        return None
    return ProcessPoolExecutor(
        max_workers=min(WORKERS, cpus),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(home,),
    )


def _check_recorded_vkey(store: Store, vkey: NoteVerifier, res: AuditResult) -> None:
    """The ``meta`` table is editable: the key it records must be the trusted one."""
    from ledger.core.note import parse_vkey

    text = store.meta("vkey")
    try:
        recorded = parse_vkey(text or "")
    except LedgerError:
        res.add(None, "the database records no valid verifier key")
        return
    if (recorded.name, recorded.public) != (vkey.name, vkey.public):
        res.add(
            None,
            f"the database records verifier key {recorded.label}, not the trusted {vkey.label}",
        )
    if store.origin != vkey.name:
        res.add(None, f"the database's origin {store.origin!r} is not the key's {vkey.name!r}")


def _check_checkpoint_order(store: Store, res: AuditResult) -> None:
    """Checkpoints are issued (or verified, on a mirror) for growing trees: in insertion order the
    sizes never go down. A row inserted later for a smaller tree is a rollback attempt."""
    top = -1
    for row_id, size in store.conn.execute("SELECT id, size FROM checkpoints ORDER BY id"):
        if size < top:
            res.add(
                None,
                f"checkpoint table goes backwards: row {row_id} (size {size}) was added after a "
                f"checkpoint of size {top}",
            )
            return
        top = size


def _check_triggers(store: Store, res: AuditResult) -> None:
    """Step 7: the database's own checks (``Store.audit_problems``, each engine's)."""
    for message in store.audit_problems(res.size):
        res.add(None, message)


def _check_checkpoint(
    res: AuditResult | ChunkResult,
    vkey: NoteVerifier,
    origin: str,
    note: bytes,
    size: int,
    root: bytes,
) -> None:
    try:
        cp = parse_checkpoint(open_note(note, [vkey]).text)
    except LedgerError as e:
        res.add(max(size - 1, 0) if size else None, f"checkpoint of size {size}: {e}")
        return
    if cp.origin != origin or cp.size != size or cp.root != root:
        res.add(max(size - 1, 0), f"checkpoint of size {size} does not match the recomputed root")


def _check_key_index(store: Store, registry: object, res: AuditResult) -> None:
    from ledger.core.entries import Registry

    assert isinstance(registry, Registry)
    want = dict(registry.keys)
    have = {k.key_id: k for k in store.key_rows()}
    for kid in sorted(set(want) | set(have)):
        if want.get(kid) != have.get(kid):
            where = want.get(kid) or have.get(kid)
            idx = where.registered_at if where else None
            res.add(idx,
                    f"key index row for {hex_encode(kid)} does not match the log's key entries")
