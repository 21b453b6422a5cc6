"""Warp-level instructions: shfl.sync, vote.sync, bar.warp.sync, ldmatrix, mma.sync
(SPEC 8, issue 4 "Semantics to support").

A warp's participating lanes are the threads of the running group in that warp. ``shfl.sync``
follows the PTX pseudo-code (``c`` packs the clamp value and segment mask); reading a lane that
has exited gives that lane's last register value (undefined on hardware); a lane named in
``membermask`` that has not exited but is not converged here is refused (``UnsupportedPtx``).
``ldmatrix`` and ``mma.sync`` are ``.aligned``: they need whole warps. Fragment layouts follow
the PTX ISA "Matrix Fragments for mma.m16n8k8 / m16n8k16" (groupID = laneid >> 2,
threadID_in_group = laneid % 4). ``mma`` multiplies f16 inputs exactly, sums the products and the
f32 accumulator in float64 and rounds once to float32 (the hardware's internal order and
precision are unspecified; contracts allow a tolerance).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.access import access
from verify.ptxsim.errors import NotConverged
from verify.ptxsim.ops_bf16 import bf16_to_f64
from verify.ptxsim.parser import PredDst, Reg
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, Idx, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine


def _active(m: Machine, tids: np.ndarray) -> np.ndarray:
    act = np.zeros(m.T, bool)
    act[tids] = True
    return act


def _check_members(m: Machine, tids: np.ndarray, mask: Any, act: np.ndarray, what: str) -> None:
    """Refuse a lane named in ``mask`` that neither runs this instruction nor has exited. One
    32-bit word per warp says which lanes are there (running or exited); a thread's mask minus
    its warp's word must be empty. The lowest such lane, then the first thread naming it, is
    reported."""
    maskv = np.broadcast_to(np.asarray(mask).astype(np.uint32), tids.shape)
    there = np.packbits((act | m.exited).reshape(-1, 32), axis=1, bitorder="little")
    bad = maskv & ~there.view("<u4").reshape(-1)[tids >> 5]
    if bad.any():
        union = int(np.bitwise_or.reduce(bad))
        lane = (union & -union).bit_length() - 1
        i = int(np.flatnonzero((bad >> np.uint32(lane)) & np.uint32(1))[0])
        raise NotConverged(
            f"{what} at PTX line {m.line}: lane {lane} of the warp of thread "
            f"{m.tname(int(tids[i]))} is in membermask but never arrives here "
            f"(lane {int(tids[i]) & 31} does); the interpreter does not model that")


def shfl(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if "sync" not in parts or parts[-1] != "b32":
        raise unsupported(ins)
    mode = parts[2]
    if mode not in ("up", "down", "bfly", "idx"):
        raise unsupported(ins)
    ops = ins.operands
    dst = ops[0]
    pset = None
    if isinstance(dst, PredDst):
        pset = ctx.set(dst.pred, ".pred")
        dst = dst.reg
    d = ctx.set(dst, ".b32")
    src_reg = ops[1]
    if not isinstance(src_reg, Reg):
        raise unsupported(ins, "shfl of an immediate")
    a = ctx.get(src_reg, ".b32")
    ctx.reads.remove(src_reg.name)  # read in the source lanes: checked below, per source lane
    b, c, mk = ctx.get(ops[2], ".u32"), ctx.get(ops[3], ".u32"), ctx.get(ops[4], ".u32")
    src_name = src_reg.name

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        act = _active(m, tids)
        maskv = mk(m, idx)
        _check_members(m, tids, maskv, act, "shfl.sync")
        lane = (tids & 31).astype(np.int64)
        bv = np.asarray(b(m, idx)).astype(np.int64) & 31
        cv = np.asarray(c(m, idx)).astype(np.int64)
        cval, segmask = cv & 31, (cv >> 8) & 31
        max_lane = (lane & segmask) | (cval & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:
            j = min_lane | (bv & ~segmask)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = tids - lane + j
        inmask = ((np.broadcast_to(np.asarray(maskv).astype(np.int64), tids.shape) >> j) & 1) \
            .astype(bool)
        good = act[src] & inmask
        if not good.all():
            i = int(np.flatnonzero(~good)[0])
            s_t = int(src[i])
            why = ("has exited" if m.exited[s_t] else "is not executing this shfl" if
                   not act[s_t] else "is outside the membermask "
                   f"{int(np.broadcast_to(np.asarray(maskv), tids.shape)[i]):#010x}")
            m.report("shuffle_undefined_lane",
                     f"shfl.sync.{mode} at PTX line {m.line}: thread {{T{int(tids[i])}}} reads "
                     f"register {src_name} of lane {int(j[i])} of its warp, which {why}; the "
                     "value it gets is undefined", int(tids[i]), None)
        if m.tracking and src_name not in m.full:
            dv = m.defined(src_name)[src] | ~good  # an invalid source lane is reported above
            if not dv.all():
                i = int(np.flatnonzero(~dv)[0])
                m.report("undefined_register",
                         f"register {src_name} of lane {int(j[i])} read through shfl.sync by "
                         f"thread {{T{int(tids[i])}}} at PTX line {m.line} holds no value on "
                         "that lane: no instruction on its path wrote it before",
                         int(tids[i]), None, key=("undef", m.line, src_name))
        d(m, idx, np.asarray(a(m, None))[src])
        if pset is not None:
            pset(m, idx, np.broadcast_to(ok, tids.shape))
    return fn


def vote(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if "sync" not in parts:
        raise unsupported(ins)
    mode = parts[2]
    ops = ins.operands
    a = ctx.get(ops[1], ".pred")
    mk = ctx.get(ops[2], ".u32")
    if mode == "ballot":
        d = ctx.set(ops[0], ".b32")
    elif mode in ("all", "any", "uni"):
        d = ctx.set(ops[0], ".pred")
    else:
        raise unsupported(ins)

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        act = _active(m, tids)
        mask = mk(m, idx)
        _check_members(m, tids, mask, act, "vote.sync")
        lane = (tids & 31).astype(np.uint32)
        inmask = ((np.broadcast_to(np.asarray(mask).astype(np.uint32), tids.shape) >> lane)
                  & np.uint32(1)).astype(bool)
        p = np.broadcast_to(np.asarray(a(m, idx)), tids.shape) & inmask
        uw, inv = _mask_groups(tids, mask)
        if mode == "ballot":
            weights = p.astype(np.float64) * (2.0 ** lane.astype(np.float64))
            bal = np.bincount(inv, weights=weights, minlength=uw.size).astype(np.uint64)
            d(m, idx, bal[inv].astype(np.uint32))
            return
        n_in = np.bincount(inv, weights=inmask.astype(np.float64), minlength=uw.size)
        n_true = np.bincount(inv, weights=p.astype(np.float64), minlength=uw.size)
        if mode == "all":
            r = n_true == n_in
        elif mode == "any":
            r = n_true > 0
        else:
            r = (n_true == 0) | (n_true == n_in)
        d(m, idx, r[inv])
    return fn


def warp_sync(ctx: Ctx) -> Fn:
    mk = ctx.get(ctx.ins.operands[0], ".u32")

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        _check_members(m, tids, mk(m, idx), _active(m, tids), "bar.warp.sync")
        if m.shared is not None:
            m.shared.epochs = True
            m.shared.warp_epoch[np.unique(tids >> 5)] += 1
    return fn


def _whole_warps(m: Machine, tids: np.ndarray, what: str) -> np.ndarray:
    if tids.size % 32 or not (tids.reshape(-1, 32) == (tids.reshape(-1, 32)[:, :1]
                                                      + np.arange(32))).all() or (
            tids.reshape(-1, 32)[:, 0] % 32).any():
        raise NotConverged(f"{what} at PTX line {m.line} executed by a partial warp "
                           "(.aligned needs all 32 lanes)")
    return tids.reshape(-1, 32)


def ldmatrix(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if "m8n8" not in parts or "b16" not in parts:
        raise unsupported(ins)
    num = 4 if "x4" in parts else 2 if "x2" in parts else 1
    trans = "trans" in parts
    space = "shared" if any(p.startswith("shared") for p in parts) else "generic"
    dsts = ctx.vec_items(ins.operands[0])
    if len(dsts) != num:
        raise unsupported(ins, "register count")
    setters = [ctx.set(r, ".b32") for r in dsts]
    _, addr = ctx.address(ins.operands[1])
    lane = np.arange(32)
    g, t4 = lane // 4, lane % 4

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        tw = _whole_warps(m, tids, "ldmatrix")
        a = np.broadcast_to(np.asarray(addr(m, idx), np.uint64), tids.shape).reshape(-1, 32)
        rows_t = tw[:, : 8 * num].ravel()
        rows_a = a[:, : 8 * num].ravel()
        lo = access(m, space, rows_a, 8, rows_t, 16)
        hi = access(m, space, rows_a + np.uint64(8), 8, rows_t, 8)
        assert lo is not None and hi is not None
        el = np.stack([lo, hi], axis=1).view(np.uint16).reshape(tw.shape[0], num, 8, 8)
        for i, s in enumerate(setters):
            mat = el[:, i]
            if trans:
                e0, e1 = mat[:, 2 * t4, g], mat[:, 2 * t4 + 1, g]
            else:
                e0, e1 = mat[:, g, 2 * t4], mat[:, g, 2 * t4 + 1]
            s(m, idx, (e0.astype(np.uint32) | (e1.astype(np.uint32) << np.uint32(16))).ravel())
    return fn


def mma(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    shape = next((p for p in parts if p.startswith("m16n8k")), None)
    if (shape not in ("m16n8k8", "m16n8k16") or "row" not in parts or "col" not in parts
            or parts[-4:] not in (["f32", "f16", "f16", "f32"], ["f32", "bf16", "bf16", "f32"])):
        raise unsupported(ins)
    bf16 = parts[-3] == "bf16"  # same fragment layouts as f16 (PTX ISA, mma.m16n8k8/k16)
    k = 8 if shape == "m16n8k8" else 16
    ops = ins.operands
    dd, aa, bb, cc = (ctx.vec_items(o) for o in ops)
    if len(dd) != 4 or len(cc) != 4 or len(aa) != k // 4 or len(bb) != k // 8:
        raise unsupported(ins, "fragment register count")
    if any(not isinstance(x, Reg) for x in (*aa, *bb)):
        raise unsupported(ins, "immediate fragment")
    dset = [ctx.set(r, ".f32") for r in dd]
    aget = [ctx.get(r, ".b32") for r in aa]
    bget = [ctx.get(r, ".b32") for r in bb]
    cget = [ctx.get(r, ".f32") for r in cc]
    lane = np.arange(32)
    g, t4 = lane // 4, lane % 4
    # element e of register r of lane l sits at (row, col) of the fragment
    a_pos = []
    for r in range(k // 4):
        for e in range(2):
            i = 2 * r + e
            row = g + (8 if (i // 2) % 2 else 0)
            col = t4 * 2 + (i & 1) + (8 if i >= 4 else 0)
            a_pos.append((r, e, row, col))
    b_pos = []
    for r in range(k // 8):
        for e in range(2):
            i = 2 * r + e
            b_pos.append((r, e, t4 * 2 + (i & 1) + (8 if i >= 2 else 0), g))
    c_pos = [(i, g + (8 if i >= 2 else 0), t4 * 2 + (i & 1)) for i in range(4)]

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        nw = _whole_warps(m, tids, "mma.sync").shape[0]
        A = np.zeros((nw, 16, k), np.float64)
        B = np.zeros((nw, k, 8), np.float64)
        C = np.zeros((nw, 16, 8), np.float64)
        regs_a = [np.broadcast_to(np.asarray(x(m, idx)), tids.shape).reshape(nw, 32) for x in aget]
        regs_b = [np.broadcast_to(np.asarray(x(m, idx)), tids.shape).reshape(nw, 32) for x in bget]
        for r, e, row, col in a_pos:
            h = ((regs_a[r] >> np.uint32(16 * e)) & np.uint32(0xFFFF)).astype(np.uint16)
            A[:, row, col] = bf16_to_f64(h) if bf16 else h.view(np.float16)
        for r, e, row, col in b_pos:
            h = ((regs_b[r] >> np.uint32(16 * e)) & np.uint32(0xFFFF)).astype(np.uint16)
            B[:, row, col] = bf16_to_f64(h) if bf16 else h.view(np.float16)
        for i, row, col in c_pos:
            C[:, row, col] = np.broadcast_to(np.asarray(cget[i](m, idx)), tids.shape).reshape(
                nw, 32)
        D = (np.matmul(A, B) + C).astype(np.float32)
        for i, row, col in c_pos:
            dset[i](m, idx, D[:, row, col].reshape(-1))
    return fn


def _mask_groups(tids: np.ndarray, mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """The lanes that take part in one warp collective together: same warp and same
    ``membermask`` (``np.unique`` keys and each thread's group). A warp split into tiles
    (``cg::tiled_partition<16>``: lanes 0-15 pass 0x0000ffff, lanes 16-31 0xffff0000) runs one
    ``vote``/``redux`` per tile; grouping by warp alone would mix the tiles' values."""
    maskv = np.broadcast_to(np.asarray(mask).astype(np.int64) & 0xFFFFFFFF, tids.shape)
    key = ((tids.astype(np.int64) >> 5) << 32) | maskv
    return np.unique(key, return_inverse=True)


def _per_warp(tids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(tids >> 5, return_inverse=True)


def activemask(ctx: Ctx) -> Fn:
    d = ctx.set(ctx.ins.operands[0], ".b32")

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        uw, inv = _per_warp(tids)
        weights = 2.0 ** (tids & 31).astype(np.float64)
        mask = np.bincount(inv, weights=weights, minlength=uw.size).astype(np.uint64)
        d(m, idx, mask[inv].astype(np.uint32))
    return fn


def redux(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if "sync" not in parts or len(parts) < 4:
        raise unsupported(ins)
    op, t = parts[2], "." + parts[-1]
    ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}.get(op)
    if ufunc is None or t not in (".u32", ".s32", ".b32"):
        raise unsupported(ins)
    ops = ins.operands
    d = ctx.set(ops[0], t)
    a, mk = ctx.get(ops[1], t), ctx.get(ops[2], ".u32")

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        maskv = mk(m, idx)
        _check_members(m, tids, maskv, _active(m, tids), "redux.sync")
        v = np.broadcast_to(np.asarray(a(m, idx)), tids.shape)
        wide = v.astype(np.int64) if t == ".s32" else v.astype(np.uint64)
        _, inv = _mask_groups(tids, maskv)
        order = np.argsort(inv, kind="stable")
        g = inv[order]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        red = ufunc.reduceat(wide[order], starts)
        d(m, idx, red[inv].astype(DTYPE[t]))
    return fn
