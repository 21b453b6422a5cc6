"""Happens-before between blocks through fences and global atomics (SPEC 8 ``falsify.*``,
issue 4 "Global races"; docs/ptx-interpreter.md "Hand-off between blocks").

The global race detector (``memory.GlobalSpace.track_race``) orders the accesses of one block by
its barriers. This module orders accesses of different blocks by the release/acquire pattern of
the PTX memory model ("fence; atomic" on one side, the atomic that reads its value on the
other), the way the CUDA sample threadFenceReduction hands its partial sums to the last block.
Clocks are kept per block, not per thread:

1. Fence. When threads of block A run a gpu- or sys-scope fence (``membar.gl``, ``membar.sys``,
   ``fence.sc|acq_rel.gpu|sys``; an ``atom``/``red`` with ``.release`` or ``.acq_rel``
   semantics fences first), ``F[A] += 1``. Every global access recorded for race tracking keeps
   ``F`` of its block at the access (its stamp): "made before A's k-th fence" is "stamp < k".
   An atomic access is stamped ``F - 1``: the atomic itself is published by its own event.
2. Event. A global ``atom`` / ``red`` of gpu or sys scope (any operation) by block A on address
   X is one event ``(A, X, F[A])``, appended to the launch's log in the order the atomics were
   applied (per address in thread order, or the second schedule's order).
3. Order. A chain leads from an event to the later events of its block, and from an event to
   the later *acquiring* events on its address (``atom``: it reads the value; ``red`` only
   releases). Block C's clock holds, per block B, the largest ``F`` of an event of B from
   which a chain reaches one of C's events (-1 for none). An earlier access of block B with stamp
   f is ordered before C's current access when ``clock(C)[B] > f``.

The clock is computed on demand (one backward sweep over the log, vectorised per event batch)
and cached until C's next event; only blocks that have events and meet a cross-block conflict
ever get one. Nothing is allocated before the first fence of a launch: until then every ``F``
is 0, so no event publishes anything and none is logged. Past ``MAX_EVENTS`` logged atomic
operations the log stops growing: later atomics order nothing (more races, never fewer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from verify.ptxsim.values import Idx

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine
    from verify.ptxsim.program import Fn

MAX_EVENTS = 1 << 21  # atomic operations logged per launch (about 60 MB of log at most)
CACHE_ENTRIES = 1 << 22  # clock entries (int32, 16 MB) cached before the cache is reset
FIXPOINT_ROUNDS = 8  # within one atomic instruction, a block's events at several addresses


@dataclass
class _Batch:
    """The events of one atomic instruction, sorted by address in the order applied."""

    blocks: np.ndarray  # int64 block per event
    locs: np.ndarray  # int64 dense address id per event
    stamps: np.ndarray  # int32 F of the block at the event
    ends: np.ndarray  # int64 index one past the last event on the same address
    acquire: bool  # atom (reads the value) or red (release only)


def scope_counts(parts: list[str]) -> bool:
    """A fence (or a release atomic) that orders accesses for other blocks: gpu or sys scope.
    ``membar.cta`` / ``fence.*.cta`` / ``.cluster`` order only within the block (cluster: this
    interpreter launches no clusters, and a cluster-scope fence does not reach other blocks)."""
    if parts[0] == "membar":
        return len(parts) > 1 and parts[1] in ("gl", "sys")
    if parts[0] == "fence":
        return any(p in ("gpu", "sys") for p in parts[1:])
    return not any(p in ("cta", "cluster") for p in parts[1:])  # atom/red: .gpu by default


def fence(m: Machine, idx: Idx) -> None:
    """Threads ``idx`` ran a gpu- or sys-scope fence: their blocks' fence counters advance.
    The first one of a launch creates the launch's hand-off state (``m.g.hb``)."""
    if not m.tracking:
        return
    hb = m.g.hb
    if hb is None:
        hb = m.g.hb = HandOff(m.nblk)
    hb.fence(m.block_of if idx is None else m.block_of[idx])


def fence_op(parts: list[str]) -> Fn:
    """The compiled ``membar`` / ``fence``: memory stays sequentially consistent, so a fence
    changes no value; one of gpu or sys scope advances its blocks' fence counters."""
    if scope_counts(parts):
        return fence

    def noop(m: Machine, idx: Idx) -> None:
        return None
    return noop


class HandOff:
    """Fence counters, the event log and the cached clocks of one launch."""

    def __init__(self, nblk: int) -> None:
        self.nblk = nblk
        self.fences = np.zeros(nblk, np.int32)
        self.batches: list[_Batch] = []
        self.n_events = 0
        self.last = np.full(nblk, -1, np.int64)  # the last batch holding an event of the block
        self.keys = np.zeros(0, np.uint64)  # addresses seen, sorted, and their dense ids
        self.key_ids = np.zeros(0, np.int64)
        self.cache: dict[int, tuple[int, np.ndarray]] = {}  # block -> (batches seen, clock)
        self.none: np.ndarray | None = None  # the clock of a block with no event

    def fence(self, blocks: np.ndarray) -> None:
        """The blocks of the fencing threads, in thread order (so sorted): each fences once."""
        first = np.ones(blocks.size, bool)
        first[1:] = blocks[1:] != blocks[:-1]
        self.fences[blocks[first]] += 1

    def atomic(self, blocks: np.ndarray, addr: np.ndarray, acquire: bool) -> None:
        """One atomic instruction's operations on global memory: ``blocks`` and ``addr`` in the
        order they were applied (grouped by address)."""
        n = int(addr.size)
        if n == 0 or self.n_events + n > MAX_EVENTS:
            return
        self.n_events += n
        u, inv = np.unique(addr, return_inverse=True)
        pos = np.searchsorted(self.keys, u)
        known = pos < self.keys.size
        known[known] = self.keys[pos[known]] == u[known]
        if not known.all():
            new = u[~known]
            keys = np.concatenate([self.keys, new])
            ids = np.concatenate([self.key_ids, np.arange(self.key_ids.size,
                                                          self.key_ids.size + new.size)])
            order = np.argsort(keys, kind="stable")
            self.keys, self.key_ids = keys[order], ids[order]
        locs = self.key_ids[np.searchsorted(self.keys, u)][inv.reshape(-1)]
        start = np.ones(n, bool)
        start[1:] = addr[1:] != addr[:-1]
        heads = np.flatnonzero(start)
        ends = np.r_[heads[1:], n][np.cumsum(start) - 1]
        self.batches.append(_Batch(blocks.astype(np.int64), locs, self.fences[blocks].copy(),
                                   ends, acquire))
        self.last[blocks] = len(self.batches) - 1

    def clock(self, tb: int) -> np.ndarray:
        """Per block B: the largest fence count B had at an event that reaches block ``tb``'s
        events (-1: none). Accesses of B stamped below it are ordered before ``tb`` now."""
        last = int(self.last[tb])
        if last < 0:  # no event: nothing acquired (one shared read-only row)
            if self.none is None:
                self.none = np.full(self.nblk, -1, np.int32)
                self.none.flags.writeable = False
            return self.none
        hit = self.cache.get(tb)
        if hit is not None and hit[0] > last:
            return hit[1]
        clk = np.full(self.nblk, -1, np.int32)
        self._sweep(tb, last, clk)
        if (len(self.cache) + 1) * self.nblk > CACHE_ENTRIES:
            self.cache.clear()
        self.cache[tb] = (len(self.batches), clk)
        return clk

    def _sweep(self, tb: int, last: int, clk: np.ndarray) -> None:
        """Backward over the log from ``tb``'s last event: an event reaches ``tb`` when a later
        event of its block does, or a later acquiring event on its address does."""
        rb = np.zeros(self.nblk, bool)  # block: a later event of it reaches tb
        rb[tb] = True
        rl = np.zeros(self.key_ids.size, bool)  # address: a later acquiring event on it does
        for k in range(last, -1, -1):
            bt = self.batches[k]
            via_loc = rl[bt.locs]
            reach = via_loc
            for _ in range(FIXPOINT_ROUNDS):
                rbb = rb[bt.blocks]
                reach = rbb | via_loc
                if bt.acquire:  # an acquiring event that reaches makes earlier ones on X reach
                    c = np.zeros(bt.blocks.size + 1, np.int64)
                    c[:-1] = np.cumsum(rbb[::-1])[::-1]
                    idx = np.arange(bt.blocks.size)
                    reach |= (c[idx + 1] - c[bt.ends]) > 0
                newb = bt.blocks[reach]
                if rb[newb].all():
                    break
                rb[newb] = True  # per-block clocks: the block's other events reach too
            if reach.any():
                np.maximum.at(clk, bt.blocks[reach], bt.stamps[reach])
                if bt.acquire:
                    rl[bt.locs[reach]] = True

    def ordered(self, ob: np.ndarray, stamp: np.ndarray, tb: np.ndarray) -> np.ndarray:
        """Per pair: the access of block ``ob`` with fence stamp ``stamp`` is ordered before the
        current access of block ``tb`` (a different block)."""
        if (tb == tb[0]).all():  # the usual case: one block's thread(s)
            return np.asarray(self.clock(int(tb[0]))[ob] > stamp)
        res = np.zeros(ob.shape, bool)
        for b in np.unique(tb[self.last[tb] >= 0]):  # a block with no event acquired nothing
            sel = np.flatnonzero(tb == b)
            res[sel] = self.clock(int(b))[ob[sel]] > stamp[sel]
        return res
