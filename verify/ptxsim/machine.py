"""The SIMT machine of one launch: threads, registers, scheduling, barriers, findings
(SPEC 8 ``falsify.*``, issue 4 "Execution model").

Scheduling: every thread of the grid has a PC; threads at the same PC form a group and run one
instruction together as one numpy vector (all blocks of the grid in lock-step). The group with
the lowest PC runs next ("min-PC" reconvergence): after a divergent branch the side with the
lower PC runs first and the other waits, and the two sides merge again at the first PC both
reach, which for the structured code nvcc emits is the immediate post-dominator of the branch.
Loops work the same way: threads that leave a loop wait at its exit (a higher PC) until the
others leave too. A warp's active mask at an instruction is the set of its threads in the group.

Barriers: a group reaching ``bar.sync`` waits. When no group can run, each block whose non-exited
threads all wait at the same barrier is released and its shared-memory race interval cleared.
If a barrier cannot release (some non-exited threads of the block wait elsewhere or can never
come), that is ``partial_barrier``; the block is then released anyway so the run never deadlocks.
A barrier reached by part of a warp while other non-exited lanes are elsewhere is
``divergent_barrier``. Blocks are independent between barriers, so running them in lock-step is
one legal schedule; races are judged per barrier interval, not by this schedule's order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, Protocol

import numpy as np

from verify.ptxsim.errors import Finding, NotConverged, UnsupportedPtx
from verify.ptxsim.memory import CpAsync, GlobalSpace, SharedSpace

# The machine sits below the modules that compile for it (values, program, handoff, ops_*): they
# name ``Machine`` in their closures' types, and it reads their compiled program only through
# the two protocols below, so no import runs upward (issue 30: no cycle, TYPE_CHECKING included).

Idx = np.ndarray | None  # the threads a group runs (sorted), or None for every thread


class Kind(IntEnum):
    """What the machine does with an instruction: run its closure (``NORMAL``), or handle it
    itself (a branch, an exit, a block barrier)."""

    NORMAL = 0
    BRANCH = 1
    EXIT = 2
    BARRIER = 3


# the one instruction-kind enum, bound to module names the run loop reads
NORMAL, BRANCH, EXIT, BARRIER = Kind.NORMAL, Kind.BRANCH, Kind.EXIT, Kind.BARRIER


class InstrView(Protocol):
    """What the machine reads of a compiled instruction (``verify.ptxsim.program.CInstr``)."""

    @property
    def line(self) -> int: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def fn(self) -> Callable[[Machine, Idx], None]: ...
    @property
    def guard(self) -> Callable[[Machine, Idx], Any] | None: ...
    @property
    def target(self) -> int: ...
    @property
    def bar_count(self) -> int | None: ...
    @property
    def reads(self) -> tuple[str, ...]: ...
    @property
    def writes(self) -> tuple[str, ...]: ...
    @property
    def guard_reg(self) -> str | None: ...


class ProgramView(Protocol):
    """What the machine reads of a compiled entry (``verify.ptxsim.program.Program``)."""

    @property
    def code(self) -> Sequence[InstrView]: ...
    @property
    def store_types(self) -> dict[str, Any]: ...
    @property
    def static_shared(self) -> int: ...
    @property
    def local_size(self) -> int: ...
    @property
    def shared_granule(self) -> int: ...

    def code_at_line(self, line: int) -> str: ...


def _as_slice(idx: np.ndarray | None) -> Any:
    """Sorted distinct thread indices as a slice when they are one contiguous run."""
    if idx is None or idx.size == 0:
        return idx
    lo, hi = int(idx[0]), int(idx[-1])
    return slice(lo, hi + 1) if hi - lo + 1 == idx.size else idx


# warp-instructions a launch runs on after its first finding (about 3 s of interpretation)
AFTER_FINDING_STEPS = 1_000_000


class StopRun(Exception):
    """Internal: the launch stops (step limit or enough findings)."""


class RegFile(dict[str, np.ndarray]):
    def __init__(self, types: dict[str, Any], n: int) -> None:
        super().__init__()
        self.types = types
        self.n = n

    def __missing__(self, key: str) -> np.ndarray:
        dt = self.types.get(key, np.uint32)
        a = np.zeros(self.n, dt)
        self[key] = a
        return a


class _Specials(dict[str, Any]):
    """Special registers, computed on first use."""

    def __init__(self, m: Machine, local: np.ndarray) -> None:
        super().__init__()
        self.m, self.local = m, local
        u32 = np.uint32
        block, grid = m.block, m.grid
        self.update({
            "%ntid.x": u32(block[0]), "%ntid.y": u32(block[1]), "%ntid.z": u32(block[2]),
            "%nctaid.x": u32(grid[0]), "%nctaid.y": u32(grid[1]), "%nctaid.z": u32(grid[2]),
            "%nwarpid": u32(m.pb // 32), "%warpsize": u32(32),
        })

    def __missing__(self, key: str) -> Any:
        m, local = self.m, self.local
        bx, by, _ = m.block
        gx, gy, _ = m.grid
        blk = m.block_of if m.block_ids is None else m.block_ids[m.block_of]
        f: Callable[[], Any] = {
            "%tid.x": lambda: local % bx, "%tid.y": lambda: (local // bx) % by,
            "%tid.z": lambda: local // (bx * by),
            "%ctaid.x": lambda: blk % gx, "%ctaid.y": lambda: (blk // gx) % gy,
            "%ctaid.z": lambda: blk // (gx * gy),
            "%laneid": lambda: local % 32, "%warpid": lambda: local // 32,
            "%lanemask_eq": lambda: np.left_shift(1, local % 32),
            # lanes below / up to / above / from this one (cub's and cooperative groups' masks)
            "%lanemask_lt": lambda: np.left_shift(1, local % 32) - 1,
            "%lanemask_le": lambda: np.left_shift(2, local % 32) - 1,
            "%lanemask_gt": lambda: 0xFFFFFFFF ^ (np.left_shift(2, local % 32) - 1),
            "%lanemask_ge": lambda: 0xFFFFFFFF ^ (np.left_shift(1, local % 32) - 1),
        }[key]
        v = np.asarray(f()).astype(np.uint32)
        self[key] = v
        return v


class Machine:
    def __init__(self, prog: ProgramView, grid: tuple[int, int, int], block: tuple[int, int, int],
                 gspace: GlobalSpace, params: bytes, dynamic_shared: int, step_limit: int,
                 max_findings: int, tracking: bool = True,
                 schedule_seed: int | None = None, blocks: np.ndarray | None = None) -> None:
        self.prog = prog
        self.tracking = tracking  # definedness and global race tracking (bench: off vs on)
        # launch(out_undefined=True): an out buffer's elements hold no value until written, so
        # reading one first is uninitialised_read (verify.ptxsim.access._unwritten_read)
        self.out_undefined = False
        self.grid, self.block = grid, block
        self.nthreads_block = block[0] * block[1] * block[2]
        self.pb = (self.nthreads_block + 31) // 32 * 32
        # ``blocks``: the linear ids (x fastest) of the grid's blocks this run runs, ascending;
        # the machine's block b is grid block blocks[b] (%ctaid, messages), %nctaid the whole grid
        self.block_ids = blocks
        self.nblk = grid[0] * grid[1] * grid[2] if blocks is None else int(blocks.size)
        self.T = self.nblk * self.pb
        self.W = self.T // 32
        self.g = gspace
        self.params = params
        self.step_limit = step_limit
        self.cut_short = False  # the step limit was lowered after the first finding
        # warp-instructions run on after the first finding; None: on to the step limit
        self.after_finding: int | None = AFTER_FINDING_STEPS
        self.max_findings = max_findings
        self.R = RegFile(prog.store_types, self.T)
        t = np.arange(self.T, dtype=np.int64)
        local = t % self.pb
        self.block_of = t // self.pb
        self.exited = local >= self.nthreads_block
        self.pad = self.exited.copy()  # lanes padding the last warp of a block: never run
        # second schedule (issue 10): a seeded thread priority orders atomics on one location and
        # conflicting stores of one instruction; cp.async copies land as soon as they are issued
        self.prio: np.ndarray | None = None
        if schedule_seed is not None:
            self.prio = np.random.default_rng(schedule_seed).permutation(self.T).astype(np.int64)
        self.bar_epoch = np.zeros(self.nblk, np.int32)  # barriers each block passed
        self.D: dict[str, np.ndarray] = {}  # register -> per-lane "holds a defined value"
        self.full: set[str] = set()  # registers defined in every lane
        self.live_block = np.full(self.nblk, self.nthreads_block, np.int64)
        self.n_live = self.nblk * self.nthreads_block  # threads not exited
        self.live_warp = np.bincount((t >> 5)[~self.exited], minlength=self.W).astype(np.int64)
        self.special = _Specials(self, local)
        self.shared_size = prog.static_shared + dynamic_shared
        self.shared = SharedSpace(self.nblk, self.shared_size, self.W, prog.shared_granule) \
            if self.shared_size else None
        self.local_size = max(prog.local_size, 0)
        self.local = np.zeros(self.T * self.local_size, np.uint8) if self.local_size else None
        # local memory starts poisoned: a byte is defined once a store wrote it
        self.local_ever = np.zeros(self.T * self.local_size, bool) if self.local_size else None
        self.findings: list[Finding] = []
        self.notes: list[str] = []  # what was judged benign, with its evidence (not findings)
        # (kind, PTX line) -> the contract waiver that covers it; the findings it covered
        self.waivers: dict[tuple[str, int], int] = {}
        self.waived: list[tuple[int, str]] = []
        self.keys: set[tuple[object, ...]] = set()
        self.thread_instr = 0
        self.warp_instr = 0
        self.line = 0
        self.cp_pending: list[CpAsync] = []
        self.cp_committed = np.zeros(self.T, np.int32)
        self.groups: dict[int, np.ndarray | None] = {}
        self.waiting: dict[int, np.ndarray] = {}
        self.parked: dict[int, np.ndarray] = {}  # at a .sync warp instruction, lanes missing
        self.forced: set[int] = set()
        self.suspects: dict[int, list[np.ndarray]] = {}  # barrier pc -> lanes that skipped it
        self.stopped = False
        self.sl: Any = None  # idx of the running group, or the same threads as a slice

    # ---- threads and findings -------------------------------------------------------------

    def ids(self, t: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        b, loc = divmod(int(t), self.pb)
        if self.block_ids is not None:
            b = int(self.block_ids[b])
        bx, by, _ = self.block
        gx, gy, _ = self.grid
        return ((b % gx, (b // gx) % gy, b // (gx * gy)),
                (loc % bx, (loc // bx) % by, loc // (bx * by)))

    def tname(self, t: int) -> str:
        b, th = self.ids(t)
        return f"(block {b}, thread {th})"

    def _fmt(self, msg: str) -> str:
        msg = re.sub(r"\{T(-?\d+)\}", lambda m: self.tname(int(m.group(1))), msg)
        stride = self.shared.stride if self.shared else 1

        def sh(m: re.Match[str]) -> str:
            b, off = divmod(int(m.group(1)), stride)
            return f"at shared offset {off} of block {self.ids(b * self.pb)[0]}"
        return re.sub(r"\{S(\d+)\}", sh, msg)

    def report(self, kind: str, message: str, thread: int | None, address: int | None,
               key: object = None) -> None:
        k = (kind, self.line if key is None else key)
        if k in self.keys:
            return
        self.keys.add(k)
        w = self.waivers.get((kind, self.line))
        if w is not None:  # a contract waiver covers it: kept as waived, the run goes on
            self.waived.append((w, f"{kind} at PTX line {self.line}: {self._fmt(message)}"))
            return
        block, th = self.ids(thread) if thread is not None else (None, None)
        line = self.line or None
        text = f"{kind}: {self._fmt(message)}"
        self.findings.append(Finding(kind, text, line, block, th, address))
        if len(self.findings) >= self.max_findings:
            self.stopped = True
            raise StopRun
        if len(self.findings) == 1 and kind != "step_limit" and self.after_finding is not None:
            # the launch has failed: it runs on only to show findings of other kinds nearby, not
            # to the step limit (a loop that faults on every trip, such as i <= n - 1 at n = 0)
            self.step_limit = min(self.step_limit, self.warp_instr + self.after_finding)
            self.cut_short = True

    def note(self, message: str) -> None:
        """Record something judged benign (``benign_store``), once per PTX line, at most 20."""
        k = ("note", self.line)
        if k in self.keys or len(self.notes) >= 20:
            return
        self.keys.add(k)
        self.notes.append(self._fmt(message))

    # ---- register definedness -------------------------------------------------------------

    def defined(self, name: str) -> np.ndarray:
        d = self.D.get(name)
        if d is None:
            d = self.D[name] = self.pad.copy()
        return d

    def check_defined(self, name: str, idx: np.ndarray | None, sl: Any, what: str) -> None:
        """Report the first lane of ``idx`` that reads register ``name`` holding no value."""
        if name in self.full:
            return
        d = self.defined(name)
        v = d if idx is None else d[sl]
        if v.all():
            if idx is None:
                self.full.add(name)
                del self.D[name]
            return
        i = int(np.flatnonzero(~v)[0])
        t = i if idx is None else int(self.all_idx(idx)[i])
        self.report("undefined_register", f"register {name} read{what} by thread {{T{t}}} at "
                    f"PTX line {self.line} ('{self.prog.code_at_line(self.line)}') holds no value "
                    f"on that thread: no instruction on its path wrote it before", t, None,
                    key=("undef", self.line, name))
        d[t] = True  # one report per register and line

    def mark_defined(self, names: tuple[str, ...], idx: np.ndarray | None, sl: Any) -> None:
        everyone = idx is None or idx.size == self.n_live  # every thread that will run again
        for w in names:
            if w in self.full:
                continue
            if everyone:
                self.full.add(w)
                self.D.pop(w, None)
            else:
                self.defined(w)[sl] = True

    def check_copy_sources(self, addr: np.ndarray, w: int, t: np.ndarray) -> None:
        """A plain global store into bytes a pending cp.async still reads from."""
        for rec in self.cp_pending:
            if rec.src.size == 0:
                continue
            size = rec.data.shape[1]
            order = np.argsort(rec.src, kind="stable")
            starts = rec.src[order]
            k = np.searchsorted(starts, addr + np.uint64(w - 1), side="right") - 1
            kc = np.maximum(k, 0)
            hit = (k >= 0) & (starts[kc] + np.uint64(size) > addr)
            if hit.any():
                i = int(np.flatnonzero(hit)[0])
                who = int(rec.threads[order[kc[i]]])
                self.report("cp_async_in_flight",
                            f"global store of {w} bytes at address {int(addr[i]):#x} "
                            f"({self.g.describe(int(addr[i]))}) by thread {{T{int(t[i])}}} at PTX "
                            f"line {self.line} overwrites the source of the cp.async by thread "
                            f"{{T{who}}} at PTX line {rec.line}, which may still be reading it "
                            "(its cp.async.wait_group has not completed)", int(t[i]),
                            int(addr[i]))
                return

    # ---- groups ---------------------------------------------------------------------------

    def all_idx(self, idx: np.ndarray | None) -> np.ndarray:
        return np.arange(self.T, dtype=np.int64) if idx is None else idx

    def goto(self, pc: int, idx: np.ndarray | None) -> None:
        if idx is not None and idx.size == 0:
            return
        old = self.groups.get(pc, False)
        if old is False:
            self.groups[pc] = idx
            return
        if old is None or idx is None:
            self.groups[pc] = None
            return
        assert isinstance(old, np.ndarray)
        merged = np.sort(np.concatenate([old, idx]), kind="stable")
        self.groups[pc] = None if merged.size == self.T else merged

    def where(self, t: int) -> str:
        for pc, idx in (list(self.groups.items()) + list(self.waiting.items())
                        + list(self.parked.items())):
            if idx is None or (np.searchsorted(idx, t) < idx.size
                               and idx[np.searchsorted(idx, t)] == t):
                return f"PTX line {self.prog.code[pc].line}"
        return "an unknown place"

    def exit_threads(self, idx: np.ndarray | None) -> None:
        a = self.all_idx(idx)
        self.exited[a] = True
        self.n_live -= a.size
        self.live_block -= np.bincount(self.block_of[a], minlength=self.nblk)
        self.live_warp -= np.bincount(a >> 5, minlength=self.W)

    # ---- barriers -------------------------------------------------------------------------

    def arrive(self, pc: int, idx: np.ndarray | None) -> None:
        a = self.all_idx(idx)
        old = self.waiting.get(pc)
        here = a if old is None else np.sort(np.concatenate([old, a]), kind="stable")
        self.waiting[pc] = here
        # lanes of these warps that are neither here, nor exited, nor about to exit (at a
        # ret/exit: an early return) have skipped or not yet reached this barrier: suspects
        cnt = np.bincount(here >> 5, minlength=self.W)
        leaving = [g for p, g in self.groups.items() if self.prog.code[p].kind == EXIT]
        for g in leaving:
            cnt += np.bincount(self.all_idx(g) >> 5, minlength=self.W)
        warps = np.unique(a >> 5)
        short = warps[cnt[warps] < self.live_warp[warps]]
        if short.size:
            lanes = (short[:, None] * 32 + np.arange(32)[None, :]).ravel()
            lanes = lanes[~self.exited[lanes] & ~np.isin(lanes, here)]
            for g in leaving:
                lanes = lanes[~np.isin(lanes, self.all_idx(g))]
            if lanes.size:
                self.suspects.setdefault(pc, []).append(lanes)

    def check_divergence(self) -> None:
        """Nothing can run: a warp with lanes waiting at a barrier and other lanes that did not
        come (waiting at another barrier or a warp instruction, or gone past it and exited) was
        divergent there. Lanes that reached the same barrier at different times are fine, and so
        are lanes that had returned early (exited, or at their ret) when the first lanes came."""
        for pc in sorted(self.waiting):
            a = self.waiting[pc]
            cnt = np.bincount(a >> 5, minlength=self.W)
            bad = np.flatnonzero((cnt > 0) & (cnt != self.live_warp))
            missing = np.zeros(0, np.int64)
            if bad.size:
                w = int(bad[0])
                lanes = np.arange(w * 32, w * 32 + 32)
                missing = lanes[~np.isin(lanes, a) & ~self.exited[lanes]]
            sus = self.suspects.get(pc)
            if not missing.size and sus:
                allsus = np.concatenate(sus)
                missing = allsus[~np.isin(allsus, a)]
                missing = missing[(missing >> 5) == (missing[0] >> 5)] if missing.size else missing
            if not missing.size:
                continue
            other = int(missing[0])
            w = other >> 5
            first = int(a[np.searchsorted(a, w * 32)]) if np.any(a >> 5 == w) else int(a[0])
            where = "exited without reaching it" if self.exited[other] else \
                f"at {self.where(other)}"
            self.line = self.prog.code[pc].line
            self.report("divergent_barrier",
                        f"barrier at PTX line {self.line} reached by {int(cnt[first >> 5])} "
                        f"thread(s) of a warp, e.g. {{T{first}}}, while {missing.size} other "
                        f"thread(s) of the same warp, e.g. {{T{other}}}, had not reached it; "
                        f"that thread is {where} (divergent warp)", first, None)

    def release(self) -> None:
        self.check_divergence()
        released = False
        expect_all = self.live_block
        for pc in sorted(self.waiting):
            a = self.waiting[pc]
            cnt = np.bincount(self.block_of[a], minlength=self.nblk)
            expect = self.prog.code[pc].bar_count
            exp = expect_all if expect is None else expect  # a count is exact, exits or not
            full = (cnt > 0) & (cnt >= exp)
            if full.any():
                sel = full[self.block_of[a]]
                self._release(pc, a[sel], np.flatnonzero(full))
                rest = a[~sel]
                if rest.size:
                    self.waiting[pc] = rest
                else:
                    del self.waiting[pc]
                released = True
        if released:
            return
        notes = []
        for pc in sorted(self.waiting):
            a = self.waiting[pc]
            b = int(self.block_of[a[0]])
            inb = a[self.block_of[a] == b]
            others = np.flatnonzero((self.block_of == b) & ~self.exited)
            others = others[~np.isin(others, inb)]
            other = int(others[0]) if others.size else int(inb[0])
            notes.append((pc, inb, others.size, other, self.where(other)))
        pending = self.waiting
        self.waiting = {}
        for pc, inb, n_other, other, where in notes:
            self.line = self.prog.code[pc].line
            head = (f"barrier at PTX line {self.line}: {inb.size} thread(s) of block "
                    f"{self.ids(int(inb[0]))[0]} wait there (e.g. {{T{int(inb[0])}}})")
            if n_other:
                text = (f"{head} but {n_other} other non-exited thread(s), e.g. {{T{other}}}, "
                        f"wait at {where} instead")
            else:
                text = (f"{head} but it expects {self.prog.code[pc].bar_count} threads and no "
                        f"other thread of the block can come")
            try:
                self.report("partial_barrier", text, int(inb[0]), None, key=("pb", pc))
            finally:
                for p2, a in pending.items():
                    self._release(p2, a, np.unique(self.block_of[a]))
                pending = {}

    def _release(self, pc: int, a: np.ndarray, blocks: np.ndarray) -> None:
        self.suspects.pop(pc, None)
        self.bar_epoch[blocks] += 1
        if self.shared is not None:
            self.shared.reset_interval(blocks)
        self.goto(pc + 1, None if a.size == self.T else a)

    # ---- run ------------------------------------------------------------------------------

    def run(self) -> None:
        code = self.prog.code
        first = np.flatnonzero(~self.exited)
        self.groups = {0: None if first.size == self.T else first}
        try:
            with np.errstate(all="ignore"):
                self._loop(code)
        except StopRun:
            return

    def _loop(self, code: Sequence[InstrView]) -> None:
        groups = self.groups
        while True:
            if not groups:
                if self.waiting:
                    self.release()
                    continue
                if self.parked:  # run them as they are; a lane still missing is refused
                    self.forced = set(self.parked)
                    for p, a in self.parked.items():
                        self.goto(p, None if a.size == self.T else a)
                    self.parked = {}
                    continue
                return
            pc = min(groups)
            idx = groups.pop(pc)
            ci = code[pc]
            self.line = ci.line
            if idx is None:
                n, nw = self.T, self.W
            else:
                n = idx.size
                lo, hi = int(idx[0]), int(idx[-1])
                if hi - lo + 1 == n:  # contiguous threads
                    nw = (hi >> 5) - (lo >> 5) + 1
                else:
                    w = idx >> 5
                    nw = 1 + int(np.count_nonzero(w[1:] != w[:-1]))
            self.thread_instr += n
            self.warp_instr += nw
            if self.warp_instr > self.step_limit:
                self.stopped = True
                if self.cut_short:  # the findings so far are the result; no "never ends" claim
                    raise StopRun
                t0 = 0 if idx is None else int(idx[0])
                self.report("step_limit", f"stopped after {self.step_limit} warp-instructions at "
                            f"PTX line {ci.line} with {n} thread(s) there, e.g. {{T{t0}}} "
                            "(a loop that never ends, or more work than the limit allows)",
                            t0, None)
                raise StopRun
            sub = idx
            rest: np.ndarray | None = None
            self.sl = _as_slice(idx)
            track = self.tracking
            if track and ci.guard_reg is not None:
                self.check_defined(ci.guard_reg, idx, self.sl, " as the guard predicate")
            if ci.guard is not None:
                gv = np.asarray(ci.guard(self, idx))
                if gv.ndim == 0:
                    gv = np.full(n, bool(gv))
                if not gv.all():
                    base = self.all_idx(idx)
                    sub, rest = base[gv], base[~gv]
                    self.sl = _as_slice(sub)
            if ci.kind == NORMAL:
                if sub is None or sub.size:
                    if track:
                        for r in ci.reads:
                            self.check_defined(r, sub, self.sl, "")
                    try:
                        ci.fn(self, sub)
                    except NotConverged as e:
                        if pc in self.forced:
                            raise UnsupportedPtx(str(e)) from e
                        a = self.all_idx(idx)
                        old = self.parked.get(pc)
                        self.parked[pc] = a if old is None else np.sort(
                            np.concatenate([old, a]), kind="stable")
                        continue
                    if track and ci.writes:
                        self.mark_defined(ci.writes, sub, self.sl)
                self.forced.discard(pc)
                self.goto(pc + 1, idx)
            elif ci.kind == BRANCH:
                if rest is not None:
                    self.goto(pc + 1, rest)
                self.goto(ci.target, sub)
            elif ci.kind == EXIT:
                if rest is not None:
                    self.goto(pc + 1, rest)
                if sub is None or sub.size:
                    self.exit_threads(sub)
            else:  # BARRIER
                if rest is not None:
                    self.goto(pc + 1, rest)
                if sub is None or sub.size:
                    self.arrive(pc, sub)
