"""Simulated memory of one launch: global buffers, per-block shared memory, per-thread local memory
(SPEC 8 ``falsify.*``, issue 4 "Execution model").

Global: each ``Buffer`` gets a distinct base address (256-aligned) with a guard gap at least as
large as the buffer after it, so an access outside every buffer is ``out_of_bounds`` with the
nearest buffer named. "out" / "inout" buffers keep the writing thread of every element
(``unwritten`` / ``double_write``).

Shared: one byte array per block. Every byte keeps its last writer and up to two readers (thread,
PTX line, warp-sync epoch) for the current barrier interval, and whether it was ever written:
a write and another thread's access to the same byte in one interval is a ``race`` unless both
threads are in one warp separated by ``bar.warp.sync``; a read of a byte never written is an
``uninitialised_read``. Atomics are not tracked as racing. ``bar.sync`` clears the interval.

Addresses: shared and local variables have addresses in their own windows starting at 0; the
generic address of one is ``SHARED_GENERIC + addr`` / ``LOCAL_GENERIC + addr``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

GLOBAL_BASE = 0x1_0000_0000
SHARED_GENERIC = 0x7E00_0000_0000
LOCAL_GENERIC = 0x7F00_0000_0000
WINDOW = 1 << 32

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

Report = Callable[[str, str, int, int | None], None]  # kind, message, thread, address


class HandOffView(Protocol):
    """The launch's hand-off state between blocks as memory and the ops use it
    (``verify.ptxsim.handoff.HandOff``, which sits above this module)."""

    @property
    def fences(self) -> np.ndarray: ...  # F per block
    @property
    def n_events(self) -> int: ...

    def fence(self, blocks: np.ndarray) -> None: ...
    def atomic(self, blocks: np.ndarray, addr: np.ndarray, acquire: bool) -> None: ...
    def ordered(self, ob: np.ndarray, stamp: np.ndarray, tb: np.ndarray) -> np.ndarray: ...


@dataclass
class CpAsync:
    """One ``cp.async`` copy in flight: it lands in shared memory at its group's wait."""

    dst: np.ndarray  # flat shared byte index of the first byte
    data: np.ndarray  # (n, width) uint8, read at issue time (zero-filled past src-size)
    threads: np.ndarray
    group: np.ndarray
    line: int
    src: np.ndarray  # global address of the first source byte (bytes read: width, src-size)


@dataclass
class GlobalBuffer:
    name: str
    intent: str
    base: int
    size: int
    u8: np.ndarray
    itemsize: int
    writer: np.ndarray | None  # int64 per element, -1 = never written by a plain store
    atomic: np.ndarray | None  # bool per element written by an atomic
    race: RaceCells | None = None  # global race tracking (created on first access)


class RaceCells:
    """Per element of a global buffer, within one launch: the last plain writer and up to two
    readers, each with its PTX line and the barrier epoch of its block at the access
    (ThreadSanitizer-like shadow cells with a bounded history). Arrays are made on first use
    (a buffer only written has no reader cells). Once a block of the launch has fenced, each cell
    also keeps the fence stamp of its access (``handoff``; ``w_f``, ``r1_f``, ``r2_f``, made
    when a nonzero stamp is first stored: a missing array means every stamp is 0)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.w: np.ndarray | None = None  # writer + 1 (0: none), its epoch, its line: (n, 3)
        self.r1: np.ndarray | None = None
        self.r2: np.ndarray | None = None
        self.w_f: np.ndarray | None = None  # fence stamp of the access (handoff), int32 (n,)
        self.r1_f: np.ndarray | None = None
        self.r2_f: np.ndarray | None = None

    def cells(self, which: str) -> np.ndarray:
        c: np.ndarray | None = getattr(self, which)
        if c is None:
            c = np.zeros((self.n, 3), np.int32)  # calloc: pages are touched on first use
            setattr(self, which, c)
        return c

    def stamps(self, which: str, e: np.ndarray) -> np.ndarray:
        """The fence stamps of cells ``e`` of ``which`` (0 where none was kept)."""
        f: np.ndarray | None = getattr(self, which + "_f")
        return np.zeros(e.shape, np.int32) if f is None else f[e]

    def set_stamps(self, which: str, e: np.ndarray, fs: np.ndarray) -> None:
        f: np.ndarray | None = getattr(self, which + "_f")
        if f is None:
            if not fs.any():
                return
            f = np.zeros(self.n, np.int32)
            setattr(self, which + "_f", f)
        f[e] = fs


@dataclass
class _Access:
    """One instruction's accesses of one global buffer, per element (``GlobalSpace.track_race``):
    element indices, threads and their blocks."""

    b: GlobalBuffer
    e: np.ndarray
    tt: np.ndarray
    tb: np.ndarray
    write: bool
    atomic: bool
    line: int
    block_of: np.ndarray


def _record_read(acc: _Access, stamp: np.ndarray, ep: np.ndarray, fs: np.ndarray | None) -> None:
    """Keep the read in the first reader cell when that one is stale (none, this thread, or an
    earlier barrier interval of the same block), else in the second."""
    rc, e, tt, tb = acc.b.race, acc.e, acc.tt, acc.tb
    assert rc is not None
    r1c = rc.cells("r1")
    r1 = r1c[e, 0] - 1
    stale = (r1 < 0) | (r1 == tt) | ((acc.block_of[np.maximum(r1, 0)] == tb) & (r1c[e, 1] != ep))
    if stale.all():
        r1c[e] = stamp
        if fs is not None:
            rc.set_stamps("r1", e, fs)
        return
    k = np.flatnonzero(stale)
    r1c[e[k]] = stamp[k]
    if fs is not None:
        rc.set_stamps("r1", e[k], fs[k])
    k = np.flatnonzero(~stale)
    rc.cells("r2")[e[k]] = stamp[k]
    if fs is not None:
        rc.set_stamps("r2", e[k], fs[k])


class GlobalSpace:
    def __init__(self, buffers: list[tuple[str, str, np.ndarray]],
                 module_vars: list[tuple[str, str, int, bytes]] | None = None) -> None:
        self.bufs: list[GlobalBuffer] = []
        for name, intent, base, init in module_vars or []:  # fixed addresses below the buffers
            u8 = np.frombuffer(init, np.uint8).copy()
            self.bufs.append(GlobalBuffer(name, intent, base, u8.size, u8, 1, None, None))
        nvars = len(self.bufs)
        addr = GLOBAL_BASE
        for name, intent, data in buffers:
            u8 = data.view(np.uint8)
            size = u8.size
            tracked = intent in ("out", "inout")
            n = size // max(data.itemsize, 1)
            self.bufs.append(GlobalBuffer(
                name, intent, addr, size, u8, data.itemsize,
                np.full(n, -1, np.int64) if tracked else None,
                np.zeros(n, bool) if tracked else None))
            gap = max(1 << 16, (size + 255) // 256 * 256)
            addr += (size + 255) // 256 * 256 + gap
        self.args = self.bufs[nvars:]  # the launch's buffer arguments, in order
        self.hb: HandOffView | None = None  # fences and atomic hand-offs (by the first fence)
        self.bases = np.array([b.base for b in self.bufs], np.uint64)
        self.ends = np.array([b.base + b.size for b in self.bufs], np.uint64)

    def describe(self, addr: int) -> str:
        best = ""
        dist = None
        for b in self.bufs:
            if addr < b.base:
                d, txt = b.base - addr, f"{b.base - addr} bytes before buffer '{b.name}'"
            elif addr >= b.base + b.size:
                d = addr - (b.base + b.size)
                txt = (f"byte offset {addr - b.base} of buffer '{b.name}' ({b.size} bytes, "
                       f"{d} bytes past its end)")
            else:
                d, txt = 0, f"byte offset {addr - b.base} of buffer '{b.name}' ({b.size} bytes)"
            if dist is None or d < dist:
                dist, best = d, txt
        return best if dist is not None and dist < (1 << 20) else "no buffer near it"

    def split(self, addr: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Buffer index per address (-1 when the access is not inside one buffer) and offsets."""
        if len(self.bufs) == 0:
            return np.full(addr.shape, -1, np.int64), np.zeros(addr.shape, np.int64)
        lo, hi = int(addr.min()), int(addr.max())
        one = int(np.searchsorted(self.bases, np.uint64(lo), side="right")) - 1
        if one >= 0 and lo >= self.bufs[one].base and hi + width <= int(self.ends[one]):
            return np.full(addr.shape, one, np.int64), (addr - self.bases[one]).astype(np.int64)
        k = np.searchsorted(self.bases, addr, side="right").astype(np.int64) - 1
        kc = np.maximum(k, 0)
        ok = (k >= 0) & (addr + np.uint64(width) <= self.ends[kc]) & (addr >= self.bases[kc])
        off = (addr - self.bases[kc]).astype(np.int64)
        return np.where(ok, k, -1), off

    def track_race(self, b: GlobalBuffer, off: np.ndarray, width: int, t: np.ndarray,
                   write: bool, block_of: np.ndarray, epoch: np.ndarray, line: int,
                   report: Report, atomic: bool = False) -> None:
        """Global race detection: a plain access and another thread's plain write of the same
        element with no barrier between them (same block: the same barrier epoch) or from
        another block of the launch not ordered by a fence-and-atomic hand-off (``self.hb``,
        verify/ptxsim/handoff.py). Reads of buffers the launch may not write (intent "in") are
        not recorded: a write to one is checked against writes only."""
        if not write and b.intent == "in" and b.race is None:
            return
        isz = b.itemsize
        if b.race is None:
            b.race = RaceCells(b.size // max(isz, 1))
        per = max(1, (width + isz - 1) // isz)
        if per == 1:
            e, tt = off // isz, t.astype(np.int32)
        else:
            e = (off[:, None] // isz + np.arange(per)[None, :]).ravel()
            tt = np.repeat(t, per).astype(np.int32)
        acc = _Access(b, e, tt, block_of[tt], write, atomic, line, block_of)
        ep = epoch[acc.tb]
        hb = self.hb
        fs = None if hb is None else hb.fences[acc.tb] - (1 if atomic else 0)  # its stamp
        self._race_check(acc, ep, report)
        stamp = np.empty((e.size, 3), np.int32)
        stamp[:, 0] = tt + 1
        stamp[:, 1] = ep
        stamp[:, 2] = -line if atomic else line
        if write:
            self._record_write(acc, stamp, fs, report)
        else:
            _record_read(acc, stamp, ep, fs)

    def _race_check(self, acc: _Access, ep: np.ndarray, report: Report) -> None:
        """Report the first earlier access of these elements this one races with."""
        b, e, tt, tb, block_of = acc.b, acc.e, acc.tt, acc.tb, acc.block_of
        rc = b.race
        assert rc is not None
        hb = self.hb
        sync = hb is not None and hb.n_events > 0
        # write-write on an out/inout buffer is double_write (note_writes), reported once there
        ww = b.writer is None
        checks = [("w", "written"), ("r1", "read"), ("r2", "read")] if acc.write else [
            ("w", "written")]
        for which, verb in checks:
            cells = getattr(rc, which)
            if cells is None:
                continue
            c = cells[e]
            o = c[:, 0] - 1
            if not (o >= 0).any():
                continue
            ob = block_of[np.maximum(o, 0)]
            hit = (o >= 0) & (o != tt) & ((ob != tb) | (c[:, 1] == ep))
            if which == "w" and acc.write:
                prev_atomic = c[:, 2] < 0
                # atomic vs atomic: never; plain vs plain on out/inout: double_write's
                hit &= ~prev_atomic if acc.atomic else (prev_atomic | ww)
            if sync and hit.any():  # other blocks' accesses a hand-off ordered before this one
                assert hb is not None
                cross = np.flatnonzero(hit & (ob != tb))
                if cross.size:
                    hit[cross] = ~hb.ordered(ob[cross], rc.stamps(which, e[cross]), tb[cross])
            bad = np.flatnonzero(hit)
            if bad.size:
                i = bad[0]
                how = ("in the same barrier interval of their block" if ob[i] == tb[i] else
                       "from another block of the same launch" + (
                           ", not ordered by a fence and an atomic hand-off" if sync else ""))
                verb2 = verb + (" atomically" if c[i, 2] < 0 else "")
                report("global_race", f"element {e[i]} of buffer '{b.name}' "
                       f"{'written' if acc.write else 'read'}"
                       f"{' atomically' if acc.atomic else ''} by thread {{T{tt[i]}}} at PTX line "
                       f"{acc.line} and {verb2} by thread {{T{o[i]}}} at PTX line "
                       f"{abs(int(c[i, 2]))} {how}", int(tt[i]), b.base + int(e[i]) * b.itemsize)
                return

    def _record_write(self, acc: _Access, stamp: np.ndarray, fs: np.ndarray | None,
                      report: Report) -> None:
        b, e, tt = acc.b, acc.e, acc.tt
        rc = b.race
        assert rc is not None
        w = rc.cells("w")
        w[e] = stamp
        if fs is not None:
            rc.set_stamps("w", e, fs)
        if b.writer is None and not acc.atomic:  # two threads of this store hit one element
            back = w[e, 0] - 1
            dup = np.flatnonzero(back != tt)
            if dup.size:
                i = dup[0]
                report("global_race", f"element {e[i]} of buffer '{b.name}' written by "
                       f"threads {{T{tt[i]}}} and {{T{back[i]}}} in one store at PTX line "
                       f"{acc.line}", int(tt[i]), b.base + int(e[i]) * b.itemsize)

    def note_writes(self, b: GlobalBuffer, off: np.ndarray, width: int, threads: np.ndarray,
                    atomic: bool, report: Report, line: int) -> None:
        if b.writer is None or b.atomic is None:
            return
        isz = b.itemsize
        per = max(1, (width + isz - 1) // isz)
        e = (off[:, None] // isz + np.arange(per)[None, :]).ravel()
        t = np.repeat(threads, per)
        if atomic:
            b.atomic[e] = True
            return
        prev = b.writer[e]
        bad = np.flatnonzero((prev >= 0) & (prev != t))
        if bad.size:
            i = bad[0]
            report("double_write", f"element {e[i]} of buffer '{b.name}' written by thread "
                   f"{{T{prev[i]}}} and again by thread {{T{t[i]}}} (PTX line {line})",
                   int(t[i]), b.base + int(e[i]) * isz)
        b.writer[e] = t
        back = b.writer[e]
        dup = np.flatnonzero(back != t)  # another thread of this store wrote the same element
        if dup.size:
            i = dup[0]
            report("double_write", f"element {e[i]} of buffer '{b.name}' written by threads "
                   f"{{T{t[i]}}} and {{T{back[i]}}} in one store (PTX line {line})",
                   int(back[i]), b.base + int(e[i]) * isz)


class SharedSpace:
    """Shared memory of every block, with race and initialisation tracking per byte."""

    def __init__(self, nblocks: int, size: int, nwarps: int, granule: int = 1) -> None:
        self.size = size
        self.stride = max(16, (size + 15) // 16 * 16)
        self.granule = granule  # bytes tracked together: every shared access covers whole ones
        n = nblocks * self.stride // granule
        self.nblocks = nblocks
        self.data = np.zeros(nblocks * self.stride, np.uint8)
        self.lastw = np.full(n, -1, np.int32)
        self.lastw_line = np.zeros(n, np.int32)
        self.lastw_ep = np.zeros(n, np.int32)
        self.lastw_atomic = np.zeros(n, bool)  # the last write was an atomic
        self.ra = np.full(n, -1, np.int32)
        self.ra_line = np.zeros(n, np.int32)
        self.ra_ep = np.zeros(n, np.int32)
        self.rb = np.full(n, -1, np.int32)
        self.rb_line = np.zeros(n, np.int32)
        self.rb_ep = np.zeros(n, np.int32)
        self.ever = np.zeros(n, bool)
        self.inflight = np.full(n, -1, np.int32)  # thread whose cp.async may still land here
        self.inflight_line = np.zeros(n, np.int32)
        self.n_inflight = 0  # granules in flight (0: no check needed)
        self.warp_epoch = np.zeros(nwarps, np.int32)
        self.epochs = False  # set by the first bar.warp.sync

    def reset_interval(self, blocks: np.ndarray) -> None:
        for arr in (self.lastw, self.ra, self.rb):
            arr.reshape(self.nblocks, self.stride // self.granule)[blocks] = -1

    def _conflict(self, other: np.ndarray, ep: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Another thread's access, not ordered with this one by bar.warp.sync."""
        w = np.maximum(other, 0) >> 5
        res: np.ndarray = (other >= 0) & (other != t) & (
            (w != (t >> 5)) | (ep == self.warp_epoch[w]))
        return res

    def granules(self, flat: np.ndarray, width: int, t: np.ndarray) -> tuple[
            np.ndarray, np.ndarray]:
        g, k = self.granule, width // self.granule
        if k == 1:
            return flat // g, t.astype(np.int32)
        return ((flat // g)[:, None] + np.arange(k)[None, :]).ravel(), np.repeat(
            t.astype(np.int32), k)

    def check_inflight(self, b: np.ndarray, tt: np.ndarray, line: int, report: Report,
                       verb: str) -> None:
        """An access to bytes a cp.async may still be writing (issued, its wait_group not yet
        completed on the issuing thread): the copy lands at an undetermined moment."""
        fl = self.inflight[b]
        hit = np.flatnonzero(fl >= 0)
        if hit.size:
            i = hit[0]
            G = self.granule
            who = "the same thread" if fl[i] == tt[i] else f"thread {{T{fl[i]}}}"
            report("cp_async_in_flight",
                   f"shared byte {{S{b[i] * G}}} {verb} by thread {{T{tt[i]}}} at PTX line {line} "
                   f"while the cp.async by {who} at PTX line {self.inflight_line[b[i]]} may still "
                   "be writing it (not ordered after the cp.async.wait_group that covers the copy"
                   + (" and a barrier)" if fl[i] != tt[i] else ")"), int(tt[i]), int(b[i]) * G)

    def check_init(self, flat: np.ndarray, width: int, t: np.ndarray, line: int,
                   report: Report, what: str = "read") -> None:
        """Initialisation (and in-flight copy) check only: atomics read shared memory too."""
        b, tt = self.granules(flat, width, t)
        if self.n_inflight:
            self.check_inflight(b, tt, line, report, f"{what} (atomic)")
        ev = self.ever[b]
        if not ev.all():
            i = int(np.flatnonzero(~ev)[0])
            report("uninitialised_read", f"shared byte {{S{b[i] * self.granule}}} {what} "
                   f"atomically by thread {{T{tt[i]}}} at PTX line {line} was never written in "
                   "this launch", int(tt[i]), int(b[i]) * self.granule)

    def track_read(self, flat: np.ndarray, width: int, t: np.ndarray, line: int,
                   report: Report) -> None:
        b, tt = self.granules(flat, width, t)
        G = self.granule
        if self.n_inflight:
            self.check_inflight(b, tt, line, report, "read")
        lw = self.lastw[b]
        cand = np.flatnonzero((lw >= 0) & (lw != tt))
        if cand.size:
            bad = cand[self._conflict(lw[cand], self.lastw_ep[b[cand]], tt[cand])]
            if bad.size:
                i = bad[0]
                how = " atomically" if self.lastw_atomic[b[i]] else ""
                report("race", f"shared byte {{S{b[i] * G}}} read by thread {{T{tt[i]}}} at PTX "
                       f"line {line} and written{how} by thread {{T{lw[i]}}} at PTX line "
                       f"{self.lastw_line[b[i]]} in the same barrier interval",
                       int(tt[i]), int(b[i]) * G)
        ev = self.ever[b]
        if not ev.all():
            i = int(np.flatnonzero(~ev)[0])
            report("uninitialised_read", f"shared byte {{S{b[i] * G}}} read by thread "
                   f"{{T{tt[i]}}} "
                   f"at PTX line {line} was never written in this launch", int(tt[i]),
                   int(b[i]) * G)
        ra = self.ra[b]
        new = ra < 0
        if new.any():
            e = np.flatnonzero(new)
            self.ra[b[e]] = tt[e]
            self.ra_line[b[e]] = line
            if self.epochs:
                self.ra_ep[b[e]] = self.warp_epoch[tt[e] >> 5]
            ra = self.ra[b]  # read back: of several readers of one byte, one was kept
        other = np.flatnonzero(ra != tt)
        if other.size:
            free = other[self.rb[b[other]] < 0]
            if free.size:
                self.rb[b[free]] = tt[free]
                self.rb_line[b[free]] = line
                if self.epochs:
                    self.rb_ep[b[free]] = self.warp_epoch[tt[free] >> 5]
        if self.epochs:  # a repeated reader: its latest read counts
            ep = self.warp_epoch[tt >> 5]
            same = np.flatnonzero(ra == tt)
            self.ra_ep[b[same]] = ep[same]
            same_b = np.flatnonzero(self.rb[b] == tt)
            self.rb_ep[b[same_b]] = ep[same_b]

    def track_write(self, flat: np.ndarray, width: int, t: np.ndarray, line: int,
                    report: Report, init: bool = True, atomic: bool = False) -> None:
        """A write in the current barrier interval. Two atomics never race with each other; an
        atomic and another thread's plain access of the same bytes do (the plain zeroing of an
        accumulator that atomics update, a plain read of it, without a barrier between)."""
        b, tt = self.granules(flat, width, t)
        G = self.granule
        if self.n_inflight and init:
            self.check_inflight(b, tt, line, report, "written (atomic)" if atomic else "written")
        how = " atomically" if atomic else ""
        for who, wline, wep, verb in ((self.lastw, self.lastw_line, self.lastw_ep, "written"),
                                      (self.ra, self.ra_line, self.ra_ep, "read"),
                                      (self.rb, self.rb_line, self.rb_ep, "read")):
            other = who[b]
            hit = self._conflict(other, wep[b], tt)
            if who is self.lastw:
                prev_atomic = self.lastw_atomic[b]
                if atomic:
                    hit &= ~prev_atomic
                if hit.any():
                    verb = np.where(prev_atomic, "written atomically", "written")[
                        int(np.flatnonzero(hit)[0])]
            bad = np.flatnonzero(hit)
            if bad.size:
                i = bad[0]
                report("race", f"shared byte {{S{b[i] * G}}} written{how} by thread {{T{tt[i]}}} "
                       f"at PTX line {line} and {verb} by thread {{T{other[i]}}} at PTX line "
                       f"{wline[b[i]]} in the same barrier interval", int(tt[i]), int(b[i]) * G)
                break
        if b.size > width // G and not atomic:
            order = np.argsort(b, kind="stable")
            bs, ts = b[order], tt[order]
            dup = np.flatnonzero((bs[1:] == bs[:-1]) & (ts[1:] != ts[:-1]))
            if dup.size:
                i = dup[0]
                report("race", f"shared byte {{S{bs[i] * G}}} written by threads {{T{ts[i]}}} and "
                       f"{{T{ts[i + 1]}}} in one instruction at PTX line {line}",
                       int(ts[i + 1]), int(bs[i]) * G)
        self.lastw[b] = tt
        self.lastw_line[b] = line
        self.lastw_atomic[b] = atomic
        if self.epochs:
            self.lastw_ep[b] = self.warp_epoch[tt >> 5]
        if init:
            self.ever[b] = True

    def issue_copy(self, flat: np.ndarray, width: int, t: np.ndarray, line: int,
                   report: Report) -> None:
        """A cp.async is issued: it may land at once (a write in this barrier interval) or at
        any moment until its wait_group completes (in flight until then)."""
        self.track_write(flat, width, t, line, report, init=False)
        b, tt = self.granules(flat, width, t)
        if self.n_inflight:
            self.check_inflight(b, tt, line, report, "targeted by another cp.async")
        self.inflight[b] = tt
        self.inflight_line[b] = line
        self.n_inflight += b.size

    def land_copy(self, flat: np.ndarray, width: int, t: np.ndarray, line: int,
                  report: Report) -> None:
        """The covering wait_group completed on the issuing thread: the bytes are written."""
        b, _ = self.granules(flat, width, t)
        self.inflight[b] = -1
        self.n_inflight = max(0, self.n_inflight - b.size)
        self.track_write(flat, width, t, line, report)
