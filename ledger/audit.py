"""``ledger audit`` (SPEC 4, 7): recompute every hash, the tree, every chain link and signature.

It streams the log once, in index order, never holding it in memory:

1. each entry's leaf hash is recomputed and compared with the stored one; the entry must be
   canonical JSON of a known shape, name this log's origin, and carry a chain link that holds
   (``ledger.entries.chain_problem``): a v1 entry ``prev_size`` = its index and ``prev_root`` = the
   root of the tree before it (recomputed here, not read); a v2 entry a ``prev_size`` of at most
   its index and the log's root at that size (a prefix; recent roots are the recomputed ones,
   older ones come from the ``hashes`` table, which step 3 compares with the recomputed tree in
   full, so a wrong stored hash is reported there);
2. every signature is checked and the node-key rules replayed (``ledger.entries.Registry``);
   for a large log the Ed25519 checks run in batches in a worker process, at most
   ``MAX_BATCHES_IN_FLIGHT`` batches ahead, so they overlap the Python work of this loop;
3. every complete-subtree hash the append creates is recomputed and compared with ``hashes``, and
   that table holds exactly the rows a tree of this size needs;
4. every stored checkpoint verifies under the log key and its root equals the recomputed root at
   its size (a second cursor walks the checkpoints in size order beside the entries);
5. every blob hashes to its BLAKE3 address, and every file a bundle manifest names is present
   (only the digests are read from the manifest: judging its paths is ``integrity.manifest``'s
   job, and the node that signed it answered for it);
6. the ``keys`` / ``revocations`` index equals the registry the log's history defines;
7. the append-only triggers are all still in place (read through ``sqlite_utils``' schema view).

It works with the database's append-only triggers dropped: it trusts nothing stored but the log's
verifier key recorded at init (or the one a mirror pinned).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from ledger import merkle
from ledger.bundle import blake3_digest, manifest_digests
from ledger.encoding import hex_decode, hex_encode
from ledger.entries import ChainCheck, SignatureJob, verify_jobs
from ledger.errors import LedgerError
from ledger.note import NoteVerifier, open_note, parse_checkpoint
from ledger.store import Store

MAX_PROBLEMS = 100
SIGNATURE_BATCH = 512  # signatures checked per job in the signature process
SIGNATURE_WORKERS = 4  # at most this many signature processes, one per core
MAX_BATCHES_IN_FLIGHT = 8  # back-pressure: memory stays bounded however long the log
PARALLEL_MIN_ENTRIES = 8192  # audits this large check signatures in a worker process
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
    from ledger.entries import Registry

    res = AuditResult()
    registry = Registry(vkey.public, store.origin)
    frontier = merkle.Frontier.from_store(0, store.stored_hash)
    cps = _checkpoints_by_size(store)
    next_cp = next(cps, None)
    conn = store.conn
    blobs_seen: dict[bytes, None] = {}  # a bounded cache of blob digests known to be stored
    broken_links = 0  # after one bad entry every later link breaks too: report the first
    chain = ChainCheck(lambda size: store.root(size))

    def check_cps_at(size: int) -> None:
        nonlocal next_cp
        while next_cp is not None and next_cp[0] <= size:
            cp_size, note = next_cp
            if cp_size == size:
                _check_checkpoint(res, vkey, store.origin, note, size, frontier.root())
            else:
                res.add(None, f"checkpoint of size {cp_size} does not match the log's growth")
            res.checkpoints += 1
            next_cp = next(cps, None)

    check_cps_at(0)
    _check_checkpoint_order(store, res)
    _check_recorded_vkey(store, vkey, res)
    pool = _signature_pool(store.size())
    pending: list[SignatureJob] = []
    running: deque[Future[list[int]]] = deque()

    def collect(limit: int) -> None:
        while len(running) > limit:
            for bad in running.popleft().result():
                res.add(bad, f"entry {bad}: entry signature does not verify")

    def submit(jobs: list[SignatureJob]) -> None:
        if pool is None:
            for bad in verify_jobs(jobs):
                res.add(bad, f"entry {bad}: entry signature does not verify")
        else:
            running.append(pool.submit(verify_jobs, jobs))
            collect(MAX_BATCHES_IN_FLIGHT)

    hash_batch: list[tuple[int, int, bytes]] = []  # recomputed subtree hashes to compare
    blob_batch: list[tuple[int, bytes]] = []  # (entry, file digest) to look up

    def check_batches() -> None:
        """Compare a batch of recomputed subtree hashes with ``hashes`` (one range SELECT per
        level) and look up a batch of blob digests (one SELECT per 500): bounded memory, a few
        queries per thousand entries instead of point queries per hash and per file."""
        by_level: dict[int, list[tuple[int, bytes]]] = {}
        for level, n, h in hash_batch:
            by_level.setdefault(level, []).append((n, h))
        for level, items in sorted(by_level.items()):
            stored = {
                int(n): bytes(h)
                for n, h in conn.execute(
                    "SELECT n, hash FROM hashes WHERE level=? AND n>=? AND n<=?",
                    (level, items[0][0], items[-1][0]),
                )
            }
            for n, h in items:
                res.hashes += 1
                if stored.get(n) != h:
                    first, last = n << level, ((n + 1) << level) - 1
                    # a bad entry inside the range was reported already; this is its consequence
                    if not any(i is not None and first <= i <= last for i, _ in res.problems):
                        res.add(
                            first,
                            f"stored hash ({level}, {n}) over entries {first}..{last} is wrong",
                        )
        hash_batch.clear()
        if blob_batch:
            present = store.has_blobs(list(dict.fromkeys(fd for _, fd in blob_batch)))
            for i, fd in blob_batch:
                if fd in present:
                    if len(blobs_seen) >= BLOB_CACHE:
                        blobs_seen.clear()
                    blobs_seen[fd] = None
                else:
                    res.add(i, f"entry {i}: bundle file {hex_encode(fd)} is missing")
            blob_batch.clear()

    for idx, lh, data, etype, digest in store.scan(
        "SELECT idx, leaf_hash, data, type, bundle_digest FROM entries ORDER BY idx"
    ):
        data = bytes(data)
        if idx != res.entries:
            res.add(res.entries, f"entry index {res.entries} is missing (next stored is {idx})")
            break
        stored_lh, lh = lh, merkle.leaf_hash(data)
        if lh != bytes(stored_lh):
            res.add(idx, f"entry {idx}: bytes do not hash to the stored leaf hash")
        try:
            obj = registry.apply(idx, data, pending)
            res.signatures += 1
            if len(pending) >= SIGNATURE_BATCH:
                submit(pending)
                pending = []
            link = chain.check(obj, idx, frontier)
            if link is not None:
                broken_links += 1
                if broken_links == 1:
                    res.add(idx, f"entry {idx}: chain link (prev_size/prev_root) does not match: "
                                 f"{link}")
            if obj.type != etype:
                res.add(idx, f"entry {idx}: stored type column does not match the entry")
            if obj.bundle_digest is not None and obj.manifest is not None:
                d = hex_decode(obj.bundle_digest)
                if digest is None or bytes(digest) != d:
                    res.add(idx, f"entry {idx}: stored bundle digest column does not match")
                manifest = obj.manifest.encode("utf-8")
                if blake3_digest(manifest) != d:
                    res.add(idx, f"entry {idx}: manifest does not hash to its bundle digest")
                for fd in manifest_digests(manifest):
                    if fd not in blobs_seen:
                        blob_batch.append((idx, fd))
        except LedgerError as e:
            res.add(idx, f"entry {idx}: {e}")
        hash_batch.extend(frontier.append(lh))
        res.entries += 1
        if len(hash_batch) >= CHECK_BATCH:
            check_batches()
        check_cps_at(res.entries)
        if progress is not None and res.entries % 1024 == 0:
            progress(res.entries)
    check_batches()
    submit(pending)
    collect(0)
    if broken_links > 1:
        res.add(
            None,
            f"{broken_links - 1} later chain links do not match either (entries "
            "chained to a tree that an earlier change altered)",
        )
    if pool is not None:
        pool.shutdown()
    res.size = res.entries
    res.root = frontier.root()
    if next_cp is not None:
        res.add(None, f"checkpoint of size {next_cp[0]} is beyond the log ({res.size} entries)")
    rows = conn.execute("SELECT count(*) FROM hashes").fetchone()[0]
    if rows != expected_hash_rows(res.size):
        res.add(
            None,
            f"hashes table holds {rows} rows, a tree of {res.size} needs "
            f"{expected_hash_rows(res.size)}",
        )
    _check_blobs(store, res)
    _check_key_index(store, registry, res)
    _check_triggers(store, res)
    return res


def _check_recorded_vkey(store: Store, vkey: NoteVerifier, res: AuditResult) -> None:
    """The ``meta`` table is editable: the key it records must be the trusted one."""
    from ledger.note import parse_vkey

    text = store.meta("vkey")
    try:
        recorded = parse_vkey(text or "")
    except LedgerError:
        res.add(None, "the database records no valid verifier key")
        return
    if (recorded.name, recorded.public) != (vkey.name, vkey.public):
        res.add(
            None,
            f"the database records verifier key {recorded.name}+{hex_encode(recorded.key_id)}, "
            f"not the trusted {vkey.name}+{hex_encode(vkey.key_id)}",
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
    from ledger.store import APPEND_ONLY_TABLES

    have = store.trigger_names()
    for table in APPEND_ONLY_TABLES:
        for kind in ("no_update", "no_delete"):
            if f"{table}_{kind}" not in have:
                res.add(None, f"append-only trigger {table}_{kind} has been dropped")
    if store.backend is not None:  # PostgreSQL: its own triggers and the tree head (pgstore)
        for message in store.backend.audit_problems(res.size):
            res.add(None, message)


def _signature_pool(size: int) -> ProcessPoolExecutor | None:
    """A worker process for the Ed25519 checks of a large audit (PyNaCl holds the GIL, so a
    thread would not overlap); small audits check inline and start nothing."""
    if size < PARALLEL_MIN_ENTRIES or (os.cpu_count() or 1) < 2:
        return None
    workers = min(SIGNATURE_WORKERS, os.cpu_count() or 1)
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def _checkpoints_by_size(store: Store) -> Iterator[tuple[int, bytes]]:
    for size, note in store.scan("SELECT size, note FROM checkpoints ORDER BY size, id"):
        yield int(size), bytes(note)


def _check_checkpoint(
    res: AuditResult, vkey: NoteVerifier, origin: str, note: bytes, size: int, root: bytes
) -> None:
    try:
        cp = parse_checkpoint(open_note(note, [vkey]).text)
    except LedgerError as e:
        res.add(max(size - 1, 0) if size else None, f"checkpoint of size {size}: {e}")
        return
    if cp.origin != origin or cp.size != size or cp.root != root:
        res.add(max(size - 1, 0), f"checkpoint of size {size} does not match the recomputed root")


def _check_blobs(store: Store, res: AuditResult) -> None:
    for digest, data in store.blobs():
        res.blobs += 1
        if blake3_digest(data) != digest:
            res.add(None, f"blob {hex_encode(digest)} does not hash to its address")


def _check_key_index(store: Store, registry: object, res: AuditResult) -> None:
    from ledger.entries import Registry

    assert isinstance(registry, Registry)
    want = dict(registry.keys)
    have = {k.key_id: k for k in store.key_rows()}
    for kid in sorted(set(want) | set(have)):
        if want.get(kid) != have.get(kid):
            where = want.get(kid) or have.get(kid)
            idx = where.registered_at if where else None
            res.add(idx,
                    f"key index row for {hex_encode(kid)} does not match the log's key entries")
