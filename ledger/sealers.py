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

The node's secret key reaches the workers only by ``fork`` (``os.fork``: the workers are this
process's copies), never through a pipe: a task is the chain link and a chunk's bundle heads
(digest, manifest) with their entry fields, never a bundle's files. The ``Log`` keeps the
workers of its last batch for the next one of the same key (``Sealers.serves``): a fork per batch
cost ~10 ms, and the copy-on-write faults it left the storing process with ~5 µs per entry (its
system time fell from ~10 to ~4 µs per entry, docs/benchmarks.md). A refused entry, a dead worker
or ``Log.close`` stops them. The workers never touch the database and leave with ``os._exit``.
Where the platform has no ``fork`` (or there is one CPU, or the batch is small) ``seal_many``
stays on one thread.
"""

from __future__ import annotations

import fcntl
import gc
import os
import pickle
import select
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from ledger.core import merkle
from ledger.core.entries import BatchEncoder, BundleHead, sign_encoded
from ledger.core.errors import BadInput, CannotCheck

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
    if batch < MIN_BATCH or not hasattr(os, "fork"):
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
    heads and the chain link.

    Each worker has a pipe of its own each way (``_Worker``), and the storing thread moves the
    bytes itself: chunk ``j`` goes to worker ``j % n`` and its entries come back from there, so
    reading the workers in turn gives the chunks in order. No thread of this process takes part
    (a process pool's result and feeder threads cost 2.4-4.3 µs of CPU per entry, of which
    pickling the tasks, timed alone, is ~0.5: docs/benchmarks.md). While it waits for a chunk
    the thread also writes the tasks still pending, without blocking (``poll``): a worker that
    writes a large chunk back and a task that does not fit in its pipe never wait on each
    other."""

    def __init__(self, workers: int, sk64: bytes, signer: bytes, now: Any) -> None:
        self._key = (workers, sk64, signer, now)
        self._workers: list[_Worker] | None = []
        # a batch whose chunks were not all read (its caller stopped at a refusal or an error,
        # the generator not yet closed) leaves its results in the pipes: not for the next batch
        self._in_flight = False
        try:
            for _ in range(workers):
                self._workers.append(_Worker.fork(sk64, signer, now))
        except OSError as e:  # no process or pipe to be had (EAGAIN, EMFILE)
            self.close()
            raise CannotCheck(f"cannot start the sealing workers: {e.strerror or e}") from e
        except BaseException:
            self.close()
            raise

    def serves(self, workers: int, sk64: bytes, signer: bytes, now: Any) -> bool:
        """Whether these workers, still running and idle, are the ones a batch of that key
        needs."""
        return (self._workers is not None and not self._in_flight
                and self._key == (workers, sk64, signer, now)
                and all(w.alive() for w in self._workers))

    def pids(self) -> list[int]:
        """The workers' process ids (none once stopped)."""
        return [] if self._workers is None else sorted(w.pid for w in self._workers)

    def close(self) -> None:
        """Stop the workers: their pipes are closed, so each leaves at its next read or write
        (a chunk being made is dropped); one that has not left after ``STOP_WAIT`` seconds is
        killed. Every one is reaped."""
        workers, self._workers = self._workers, None
        for w in workers or ():
            w.close_pipes()
        deadline = time.monotonic() + STOP_WAIT
        for w in workers or ():
            w.reap(deadline)

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
        workers = self._workers
        if workers is None or self._in_flight:
            self.close()
            raise CannotCheck("the sealing workers were stopped, or are busy with another batch")
        count = len(batch)
        head = -first % CHUNK
        starts = [0, *range(head, count, CHUNK)] if head else list(range(0, count, CHUNK))
        starts = [s for s in starts if s < count]
        ends = [*starts[1:], count]

        def task(j: int) -> bytes:
            # a task is made just before it is sent, so the first worker starts at once
            rows = [(b.digest, b.manifest, f) for b, f in batch[starts[j] : ends[j]]]
            return pickle.dumps((link, rows), protocol=pickle.HIGHEST_PROTOCOL)

        n = len(workers)
        sent = min(AHEAD * n, len(starts))
        self._in_flight = True
        try:
            for j in range(sent):  # every worker gets its first tasks now
                workers[j % n].send(task(j))
        except OSError as e:
            self.close()
            raise CannotCheck(f"a sealing worker process died ({e}); nothing was stored") from e
        return self._in_order(workers, len(starts), sent, task)

    def _in_order(
        self, workers: list[_Worker], total: int, sent: int, task: Callable[[int], bytes]
    ) -> Iterator[Chunk]:
        done = False
        n = len(workers)
        try:
            for j in range(total):
                chunk = workers[j % n].receive(workers)
                if sent < total:  # that worker has room for one more
                    workers[sent % n].send(task(sent))
                    sent += 1
                yield chunk
                if chunk.refused is not None:
                    raise BadInput(chunk.refused)
            done = True
            self._in_flight = False
        except (OSError, EOFError) as e:
            raise CannotCheck(f"a sealing worker process died ({e}); nothing was stored") from e
        finally:
            if not done:
                self.close()


# this process's ends of the pipes of every worker still running (of every ``Sealers``: each
# ``Log`` has its own), which each new worker closes: a worker that held another's would keep
# that one from seeing its pipes close
_LIVE_FDS: set[int] = set()
AHEAD = 3  # tasks each worker holds at a time: the one it makes and the next two, already sent
# (2 or 4 would do as well: a batch with 3 took 0.96 and 0.99 of the time of one with 2, medians
# of paired batches in two runs, within the spread: bench/bench_append_steps.py)
STOP_WAIT = 2.0  # seconds ``close`` waits for a worker to leave before killing it (one that
# is making a chunk leaves when it writes it; a process forked elsewhere may hold its pipes)
_PIPE_BYTES = 1 << 20  # what each pipe is asked to hold (Linux; elsewhere the default)
_HEADER = 8  # a message is its length (8 bytes, little-endian) and that many bytes of pickle


class _Worker:
    """One sealing worker process and this process's ends of its two pipes: tasks go out on
    ``task_fd`` (non-blocking: what does not fit waits in ``out``), chunks come back on
    ``result_fd``."""

    def __init__(self, pid: int, task_fd: int, result_fd: int) -> None:
        self.pid = pid
        self.task_fd = task_fd
        self.result_fd = result_fd
        self.out: deque[memoryview] = deque()  # task bytes not yet written
        self.reaped = False

    @classmethod
    def fork(cls, sk64: bytes, signer: bytes, now: Any) -> _Worker:
        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        for fd in (task_w, result_w):
            _widen(fd)
        try:
            pid = os.fork()
        except OSError:
            for fd in (task_r, task_w, result_r, result_w):
                os.close(fd)
            raise
        if pid == 0:  # the worker: it keeps only its own ends, so it sees EOF when we go
            code = 0
            try:
                os.close(task_w)
                os.close(result_r)
                for fd in _LIVE_FDS:  # this process's ends of every other worker's pipes
                    os.close(fd)
                _start(sk64, signer, now)
                _serve(task_r, result_w)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(result_w)
        os.set_blocking(task_w, False)
        _LIVE_FDS.update((task_w, result_r))
        return cls(pid, task_w, result_r)

    def send(self, message: bytes) -> None:
        self.out.append(memoryview(len(message).to_bytes(_HEADER, "little")))
        self.out.append(memoryview(message))
        self.flush()

    def flush(self) -> None:
        """Write what the pipe takes now of the pending task bytes."""
        while self.out:
            try:
                wrote = os.write(self.task_fd, self.out[0])
            except BlockingIOError:
                return
            if wrote == len(self.out[0]):
                self.out.popleft()
            else:
                self.out[0] = self.out[0][wrote:]

    def receive(self, workers: Sequence[_Worker]) -> Chunk:
        """The next chunk this worker makes; meanwhile the pending task bytes of ``workers``
        are written as their pipes take them. ``EOFError`` when the worker is gone."""
        size = int.from_bytes(self._read(_HEADER, workers), "little")
        kind, value = pickle.loads(self._read(size, workers))
        if kind != "chunk":
            raise value  # the worker failed (a bug): its exception, raised here
        chunk: Chunk = value
        return chunk

    def _read(self, size: int, workers: Sequence[_Worker]) -> bytearray:
        got = _read_exactly(self.result_fd, size, lambda: self._readable(workers))
        if got is None:
            raise EOFError(f"worker {self.pid} closed its pipe")
        return got

    def _readable(self, workers: Sequence[_Worker]) -> bool:
        """Whether the chunk pipe can be read now: while tasks wait to be written, wait for
        either (``poll``) and write what their pipes take; else, yes (the read waits)."""
        waiting = [w for w in workers if w.out]
        if not waiting:
            return True
        poller = select.poll()
        poller.register(self.result_fd, select.POLLIN)
        for w in waiting:
            poller.register(w.task_fd, select.POLLOUT)
        ready = {fd for fd, _ in poller.poll()}
        for w in waiting:
            if w.task_fd in ready:
                w.flush()
        return self.result_fd in ready

    def alive(self) -> bool:
        """Whether the process is still there (one that left is reaped here)."""
        if not self.reaped:
            try:
                self.reaped = os.waitpid(self.pid, os.WNOHANG)[0] == self.pid
            except ChildProcessError:
                self.reaped = True
        return not self.reaped

    def close_pipes(self) -> None:
        for fd in (self.task_fd, self.result_fd):
            if fd in _LIVE_FDS:
                _LIVE_FDS.discard(fd)
                os.close(fd)

    def reap(self, deadline: float) -> None:
        """Wait for the process to leave (until ``deadline``, then kill it)."""
        while self.alive():
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                deadline = float("inf")
            else:
                time.sleep(0.005)


def _widen(fd: int) -> None:
    """Ask a pipe to hold ``_PIPE_BYTES`` (fewer wake-ups per task and chunk; Linux only)."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        try:
            fcntl.fcntl(fd, set_size, _PIPE_BYTES)
        except OSError:
            pass  # above the system's limit: the default size works, with more wake-ups


def _serve(task_fd: int, result_fd: int) -> None:
    """A worker's loop: read a task, make its chunk, write it back; until the pipe closes."""
    while True:
        header = _read_exactly(task_fd, _HEADER)
        if header is None:
            return  # the storing process closed the pipe (``close``) or is gone
        body = _read_exactly(task_fd, int.from_bytes(header, "little"))
        if body is None:
            return
        link, rows = pickle.loads(body)
        try:
            reply = pickle.dumps(("chunk", _chunk(link, rows)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # a bug: the storing process raises it
            try:
                reply = pickle.dumps(("error", e))
            except Exception:
                reply = pickle.dumps(("error", CannotCheck(f"a sealing worker failed: {e!r}")))
        data = memoryview(len(reply).to_bytes(_HEADER, "little") + reply)
        while data:
            data = data[os.write(result_fd, data):]


def _read_exactly(
    fd: int, size: int, readable: Callable[[], bool] | None = None
) -> bytearray | None:
    """``size`` bytes from ``fd``, or None at its end; ``readable``, when given, runs before
    each read and says whether to read now (False: ask again)."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        if readable is not None and not readable():
            continue
        n = os.readv(fd, [view[got:]])
        if n == 0:
            return None
        got += n
    return buf
