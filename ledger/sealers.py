"""Bundle entries made in worker processes for ``Log.seal_many`` (issue 12: append at 0.6 of the
signing rate).

An entry costs about half as much Python work (its fields, the shape rules, the encoding) as
libsodium takes to sign it (~10 against ~20 us), and the store's inserts, the one serial part, come
on top (~25 us of the storing process per entry); on one thread a batch reaches about 0.4 of the
signing rate. Threads would not do: the signatures can leave the GIL (``native.sign_many``) but
the encoding and the storing are Python, which one GIL runs one at a time, on one core. So a
large batch is cut into chunks that forked worker processes turn into signed entry bytes
(fields, shape check, encoding, signatures, leaf hashes: ``bundle_entries``, the same function the
one-thread path calls), while the calling process stores the entries of the chunks already
returned, in order.

The node's secret key reaches the workers only by ``fork`` (the workers' start arguments are
not pickled under ``fork``), never through a pipe: a task is the chain link and a chunk's bundle
heads (digest, manifest) with their entry fields, never a bundle's files. The ``Log`` keeps the
workers of its last batch for the next one of the same key (``Sealers.serves``): a fork per batch
cost ~10 ms, and the copy-on-write faults it left the storing process with ~5 µs per entry (its
system time fell from ~10 to ~4 µs per entry, docs/benchmarks.md). A refused entry, a dead worker
or ``Log.close`` stops them. The workers never touch the database and leave with ``os._exit``.
Where ``fork`` is not the platform's way (or there is one CPU, or the batch is small)
``seal_many`` stays on one thread.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from ledger import merkle
from ledger.entries import BatchEncoder, BundleHead, sign_encoded
from ledger.errors import BadInput, CannotCheck

MIN_BATCH = 4096  # below this a batch is sealed on the calling thread (forking costs ~10 ms)
WORKER_NICE = 10  # the workers yield a CPU to the process that stores: the batch's critical path
# (same-run A/B, docs/benchmarks.md)
CHUNK = 256  # entries per task: small enough to fill the pipeline quickly, large enough that a
# task's round trip (its bounds out, 256 entries of ~1 KB back) costs little per entry


def bundle_entries(
    link: Mapping[str, Any],
    heads: Sequence[tuple[BundleHead, Mapping[str, Any]]],
    signer: bytes,
    sk64: bytes,
    now: Callable[[], str],
) -> tuple[list[tuple[bytes, bytes]], str | None]:
    """The signed ``bundle`` entries of ``heads`` (each bundle with its extra fields) linked by
    ``link``: fields, shape rules, canonical encoding (``BatchEncoder``), the Ed25519 signatures
    of the node key ``sk64`` (libsodium's 64-byte form, all in one call), the size limit; each
    with its leaf hash. Returns them and, when the rules refuse one, the one-line reason: the
    entries before it come back, none after (the caller fails the batch there)."""
    encoder = BatchEncoder(link, signer)
    pairs = []
    refused = None
    for head, fields in heads:
        try:
            pairs.append(encoder.encode(now(), head, fields))
        except BadInput as e:
            refused = str(e)
            break
    try:
        entries = sign_encoded(pairs, sk64)
    except BadInput:  # an entry over the size limit: keep the ones before the first
        entries = []
        for pair in pairs:
            try:
                entries.extend(sign_encoded([pair], sk64))
            except BadInput as first:
                refused = str(first)
                break
    return [(d, merkle.leaf_hash(d)) for d in entries], refused


# -- the workers ---------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}  # set in each worker by ``_start`` (inherited by fork, not pickled)


class Head(NamedTuple):
    """What a worker needs of a bundle (a ``BundleHead``): sent in a task, where the bundle's
    files need not go."""

    digest: bytes
    manifest: bytes


def _start(sk64: bytes, signer: bytes, now: Any) -> None:
    _WORKER.update(sk64=sk64, signer=signer, now=now)
    os.nice(WORKER_NICE)
    # a worker makes no reference cycles that matter: without the collector it does not walk
    # the entries it made again and again (6-7% of a worker's samples, docs/benchmarks.md)
    gc.disable()


def _chunk(
    link: dict[str, Any], task: Sequence[tuple[bytes, bytes, Mapping[str, Any]]]
) -> Chunk:
    """``bundle_entries`` of the bundles of ``task``, with the levels of their subtree when
    they fill one (``merkle.perfect_levels``, each level joined: a full chunk, aligned in the
    log). A task names each bundle by its digest and manifest, with its entry fields, in plain
    tuples: they pickle in less than half the time of named ones, and the storing process, the
    batch's critical path, does the pickling. The caller raises a refusal as ``BadInput``
    after storing nothing, so the batch fails where one thread would have."""
    heads = [(Head(digest, manifest), fields) for digest, manifest, fields in task]
    made, refused = bundle_entries(
        link, heads, _WORKER["signer"], _WORKER["sk64"], _WORKER["now"]
    )
    levels = None
    if len(made) == CHUNK and refused is None:
        levels = merkle.joined_levels(merkle.perfect_levels([lh for _, lh in made]))
    return Chunk(made, refused, levels)


class Chunk(NamedTuple):
    """What a worker returns for a chunk of the batch."""

    made: list[tuple[bytes, bytes]]  # each entry with its leaf hash
    refused: str | None  # the reason the rules refused the entry after the last one made
    # the subtree of a full aligned chunk, leaves to root, each level's hashes joined (a string
    # per level pickles and is stored at once: ``Writer.append_bundles``)
    levels: list[bytes] | None


def worker_count(batch: int) -> int:
    """Worker processes for a batch of ``batch`` entries: one per CPU this process may run on,
    none for a small batch, a single CPU, or a platform without ``fork``."""
    if batch < MIN_BATCH:
        return 0
    # the process pool's modules load only for a batch that may use it: ``ledger verify`` and a
    # seal of a few bundles import this module through ``ledger.log`` (start-up, issue 12)
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return cpus if cpus > 1 else 0


class Sealers:
    """Forked workers that turn chunks of a batch (each bundle's head with its entry fields)
    into entries, in order, for one node key; kept by the ``Log`` for the batches that follow
    (forking again for each batch cost ~10 ms, and the copy-on-write faults of the process that
    stores, a few µs per entry: docs/benchmarks.md). Make it before a write transaction, so no
    worker is forked inside one; the key reaches the workers with the fork, a task is a chunk's
    heads and the chain link."""

    def __init__(self, workers: int, sk64: bytes, signer: bytes, now: Any) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._key = (workers, sk64, signer, now)
        self._pool: Any = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_start,
            initargs=(sk64, signer, now),
        )
        # under fork, every worker is started at the first submit: do it now, outside any
        # transaction, and wait for it
        try:
            self._pool.submit(int).result()
        except BaseException:
            self.close()
            raise

    def serves(self, workers: int, sk64: bytes, signer: bytes, now: Any) -> bool:
        """Whether these workers, still running, are the ones a batch of that key needs."""
        return self._pool is not None and self._key == (workers, sk64, signer, now)

    def pids(self) -> list[int]:
        """The workers' process ids (none once stopped)."""
        return [] if self._pool is None else sorted(self._pool._processes)

    def close(self) -> None:
        """Stop the workers (dropping the chunks not yet begun)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def chunks(
        self,
        link: dict[str, Any],
        first: int,
        batch: Sequence[tuple[BundleHead, Mapping[str, Any]]],
    ) -> Iterator[Chunk]:
        """The entries of ``batch`` linked by ``link`` (``origin`` and the chain fields), to be
        appended from index ``first`` on, chunk after chunk in order as the workers finish them
        (cut at multiples of ``CHUNK`` in the log, so a full chunk is a subtree of the tree);
        ``BadInput`` at the first one the rules refuse (after the chunk of the entries before
        it), ``CannotCheck`` when a worker dies (killed, out of memory): the caller's
        transaction then stores nothing. The workers begin at once, before the first chunk is
        asked for; a batch that ends early stops them (``close``)."""
        if self._pool is None:
            raise CannotCheck("the sealing workers were stopped")
        count = len(batch)
        head = -first % CHUNK
        starts = [0, *range(head, count, CHUNK)] if head else list(range(0, count, CHUNK))
        starts = [s for s in starts if s < count]
        ends = [*starts[1:], count]
        # each task is made just before it is submitted, so the first worker starts at once
        # rather than after the whole batch's tasks are built (~10 ms for 10,000 entries)
        futures = [
            self._pool.submit(_chunk, link, [(b.digest, b.manifest, f) for b, f in batch[a:z]])
            for a, z in zip(starts, ends, strict=True)
        ]
        return self._in_order(f.result() for f in futures)

    def _in_order(self, results: Iterator[Chunk]) -> Iterator[Chunk]:
        from concurrent.futures.process import BrokenProcessPool

        done = False
        try:
            for chunk in results:
                yield chunk
                if chunk.refused is not None:
                    raise BadInput(chunk.refused)
            done = True
        except BrokenProcessPool as e:
            raise CannotCheck(f"a sealing worker process died ({e}); nothing was stored") from e
        finally:
            if not done:
                self.close()
