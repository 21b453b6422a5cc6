"""Memory instructions: ld, ldu, st (scalar and .v2/.v4), cvta, atom, red, cp.async
(SPEC 8, issue 4 "Semantics to support").

Atomics run in thread order: threads of one instruction that hit the same address are applied one
after another (a legal serialisation), others in parallel. Two atomics never race; a global
atomic of gpu or sys scope is an event of the hand-off between blocks (handoff.py), logged
before it is applied.
cp.async reads its source when issued (zero-filling past ``src-size``) and writes shared memory
only when ``cp.async.wait_group`` / ``wait_all`` completes its group; that write is tracked as a
write by the issuing thread at the cp.async line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim import handoff
from verify.ptxsim.access import access
from verify.ptxsim.memory import LOCAL_GENERIC, SHARED_GENERIC, UINT, CpAsync
from verify.ptxsim.ops_alu import ptype
from verify.ptxsim.parser import Imm, type_size
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, UBITS, Idx, convert_bits, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

SPACES = ("global", "shared", "local", "param", "const")


def _space(ctx: Ctx, parts: list[str], sym_space: str | None) -> str:
    sp = next((p for p in parts if p in SPACES or p.startswith("shared::")), None)
    if sp is not None and sp.startswith("shared::"):
        if sp != "shared::cta":
            raise unsupported(ctx.ins, "distributed shared memory")
        sp = "shared"
    if sp == "const":  # module .const variables live at fixed global addresses (read-only)
        if sym_space not in (None, "global"):
            raise unsupported(ctx.ins, "constant space")
        return "global"
    if sp == "param" and sym_space == "local":  # a call-site .param variable (inline.py)
        return "local"
    if sp is None:
        if sym_space in ("shared", "local"):
            raise unsupported(ctx.ins, "generic access through a variable name")
        return "generic"
    return sp


MEM_QUALIFIERS = {"nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile", "relaxed",
                  "acquire", "release", "weak", "cta", "gpu", "sys", "v2", "v4", "shared::cta",
                  *SPACES}


def _check_qualifiers(ctx: Ctx, parts: list[str]) -> None:
    for p in parts[1:]:
        if p in MEM_QUALIFIERS or "." + p in DTYPE or p.startswith(("L1::", "L2::")):
            continue
        raise unsupported(ctx.ins, "qualifier ." + p)


def _vec(parts: list[str]) -> int:
    return 4 if "v4" in parts else 2 if "v2" in parts else 8 if "v8" in parts else 1


def ld(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    t = ptype(parts)
    if not t:
        raise unsupported(ins)
    _check_qualifiers(ctx, parts)
    sym_space, addr = ctx.address(ins.operands[1])
    space = _space(ctx, parts, sym_space)
    n = _vec(parts)
    w = type_size(t)
    dsts = ctx.vec_items(ins.operands[0])
    if len(dsts) != n:
        raise unsupported(ins, "vector size")
    setters = [ctx.set(r, t) for r in dsts]
    dt = DTYPE[t]
    if space == "param":
        if sym_space != "param":
            raise unsupported(ins, "ld.param through a register address")

        def ldp(m: Machine, idx: Idx) -> None:
            base = int(addr(m, idx))
            for i, s in enumerate(setters):
                raw = m.params[base + i * w: base + (i + 1) * w]
                s(m, idx, np.frombuffer(raw, UINT[w])[0].view(dt) if t != ".pred" else
                  np.frombuffer(raw, np.uint8)[0] != 0)
        return ldp

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        a = addr(m, idx)
        for i, s in enumerate(setters):
            ai = a + np.uint64(i * w) if i else a
            bits = access(m, space, ai, w, tids, w * n if i == 0 else w)
            assert bits is not None
            s(m, idx, bits.view(dt) if t != ".pred" else bits != 0)
    return fn


def st(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    t = ptype(parts)
    if not t:
        raise unsupported(ins)
    _check_qualifiers(ctx, parts)
    sym_space, addr = ctx.address(ins.operands[0])
    space = _space(ctx, parts, sym_space)
    if space == "param":
        raise unsupported(ins, "st.param")
    n = _vec(parts)
    w = type_size(t)
    srcs = ctx.vec_items(ins.operands[1])
    if len(srcs) != n:
        raise unsupported(ins, "vector size")
    getters = [ctx.get(r, t) for r in srcs]
    ut = UBITS[w]

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        a = addr(m, idx)
        for i, g in enumerate(getters):
            bits = convert_bits(g(m, idx), t, ut)
            access(m, space, a + np.uint64(i * w) if i else a, w, tids, w * n if i == 0 else w,
                   store=bits)
    return fn


def cvta(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    t = ptype(parts)
    to = "to" in parts
    sp = next((p for p in parts if p in ("global", "shared", "local", "param", "const")), None)
    if sp is None or sp == "param" or t not in (".u64", ".u32"):
        raise unsupported(ins)
    base = {"global": 0, "const": 0, "shared": SHARED_GENERIC, "local": LOCAL_GENERIC}[sp]
    d = ctx.set(ins.operands[0], t)
    a = ctx.get(ins.operands[1], t)
    off = DTYPE[t](base & (2 ** (8 * type_size(t)) - 1))

    def fn(m: Machine, idx: Idx) -> None:
        v = a(m, idx)
        d(m, idx, v - off if to else v + off)
    return fn


def _atomic_op(op: str, t: str) -> Any:
    if op == "add":
        if t == ".f32":
            return lambda o, v, c: (o.view(np.float32) + v.view(np.float32)).view(np.uint32)
        if t == ".f64":
            return lambda o, v, c: (o.view(np.float64) + v.view(np.float64)).view(np.uint64)
        return lambda o, v, c: o + v
    dt = DTYPE[t]
    table = {
        "min": lambda o, v, c: np.minimum(o.view(dt), v.view(dt)).view(o.dtype),
        "max": lambda o, v, c: np.maximum(o.view(dt), v.view(dt)).view(o.dtype),
        "and": lambda o, v, c: o & v, "or": lambda o, v, c: o | v, "xor": lambda o, v, c: o ^ v,
        "exch": lambda o, v, c: v, "cas": lambda o, v, c: np.where(o == v, c, o),
        "inc": lambda o, v, c: np.where(o >= v, 0, o + 1).astype(o.dtype),
        "dec": lambda o, v, c: np.where((o == 0) | (o > v), v, o - 1).astype(o.dtype),
    }
    return table.get(op)


def _group(m: Machine, space: str, a: np.ndarray, tids: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:
    """Thread order sorted by memory location: (address, owner) where the owner is the block
    for shared memory and the thread for local memory."""
    if space == "shared":
        owner = m.block_of[tids]
    elif space == "local":
        owner = tids
    elif space == "global":
        owner = np.full(tids.shape, -1, np.int64)
    else:
        sh = (a >= np.uint64(SHARED_GENERIC)) & (a < np.uint64(SHARED_GENERIC + (1 << 32)))
        lo = (a >= np.uint64(LOCAL_GENERIC)) & (a < np.uint64(LOCAL_GENERIC + (1 << 32)))
        owner = np.where(sh, m.block_of[tids], np.where(lo, tids, -1))
    order = np.lexsort((tids if m.prio is None else m.prio[tids], a, owner))
    return order, a[order], owner[order]


def atom(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    red = parts[0] == "red"
    t = ptype(parts)
    op = next((p for p in parts[1:] if p in ("add", "min", "max", "and", "or", "xor", "exch",
                                               "cas", "inc", "dec")), None)
    if op is None or not t or t in (".f16", ".f16x2", ".bf16", ".bf16x2") or "v2" in parts \
            or "v4" in parts or (t == ".f32" and op not in ("add", "exch")):
        raise unsupported(ins)
    ops = ins.operands
    aop = ops[0] if red else ops[1]
    sym_space, addr = ctx.address(aop)
    space = _space(ctx, parts, sym_space)
    w = type_size(t)
    ut = UINT[w]
    f = _atomic_op(op, t)
    if f is None:
        raise unsupported(ins)
    d = None if red else ctx.set(ops[0], t)
    vget = ctx.get(ops[1] if red else ops[2], t)
    cget = ctx.get(ops[3], t) if op == "cas" else None
    hands_off = handoff.scope_counts(parts)  # gpu/sys scope: an event between blocks
    releases = hands_off and ("release" in parts or "acq_rel" in parts)
    # an exchange's new value does not depend on the old one: reading an output element nothing
    # wrote yet is no finding there (every other operation combines the old value)
    uses_old = op != "exch"

    def fn(m: Machine, idx: Idx) -> None:
        if releases:  # .release / .acq_rel: the atomic fences first
            handoff.fence(m, idx)
        tids = m.all_idx(idx)
        a = np.broadcast_to(np.asarray(addr(m, idx), np.uint64), tids.shape)
        v = np.broadcast_to(convert_bits(vget(m, idx), t, ut), tids.shape)
        c = None if cget is None else np.broadcast_to(convert_bits(cget(m, idx), t, ut),
                                                      tids.shape)
        old = np.zeros(tids.shape, ut)
        order, sa, sg = _group(m, space, a, tids)
        if m.g.hb is not None and hands_off:
            glob = sg < 0  # global locations (generic ones too), in the order applied
            m.g.hb.atomic(m.block_of[tids[order[glob]]], sa[glob], acquire=not red)
        start = np.ones(sa.shape, bool)
        start[1:] = (sa[1:] != sa[:-1]) | (sg[1:] != sg[:-1])
        gidx = np.cumsum(start) - 1
        first = np.flatnonzero(start)
        rank = np.arange(sa.size) - first[gidx]
        if op == "add" and t not in (".f32", ".f64") and rank.size and rank.max() > 0:
            # integer add: one load, exclusive prefix sums per address, one store
            sel = order[rank == 0]
            base = access(m, space, a[sel], w, tids[sel], w, track=False, atomic=True,
                          reads=uses_old)
            assert base is not None
            vs = v[order].astype(np.uint64)
            incl = np.cumsum(vs)
            excl = incl - vs
            excl = excl - excl[first][gidx]
            old[order] = (base[gidx].astype(np.uint64) + excl).astype(ut)
            last = np.r_[first[1:] - 1, sa.size - 1]
            final = (base.astype(np.uint64) + (incl[last] - incl[first] + vs[first])).astype(ut)
            # every participant stores its location's final value: the race tracking sees each
            # thread's atomic access (a plain access by another thread races with any of them)
            access(m, space, sa, w, tids[order], w, store=final[gidx], atomic=True)
        else:
            for r in range(int(rank.max()) + 1 if rank.size else 0):
                sel = order[rank == r]
                cur = access(m, space, a[sel], w, tids[sel], w, track=False, atomic=True,
                             reads=uses_old)
                assert cur is not None
                old[sel] = cur
                new = f(cur, v[sel], None if c is None else c[sel])
                access(m, space, a[sel], w, tids[sel], w, store=np.asarray(new).astype(ut),
                       atomic=True)
        if d is not None:
            d(m, idx, old.view(DTYPE[t]))
    return fn


def cp_async(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ["cp", *ins.parts[2:]]  # cp.async.X... -> cp.X...
    if parts[1] == "commit_group":
        def commit(m: Machine, idx: Idx) -> None:
            m.cp_committed[m.all_idx(idx)] += 1
        return commit
    if parts[1] in ("wait_group", "wait_all"):
        if parts[1] == "wait_all":
            n = 0
        else:
            op = ins.operands[0]
            if not isinstance(op, Imm):
                raise unsupported(ins)
            n = int(op.text)
        wall = parts[1] == "wait_all"

        def wait(m: Machine, idx: Idx) -> None:
            tids = m.all_idx(idx)
            if wall:
                m.cp_committed[tids] += 1
            complete(m, tids, n)
        return wait
    if parts[1] not in ("ca", "cg") or "shared" not in parts[2] or "global" not in parts:
        raise unsupported(ins)
    ops = ins.operands
    _, dst = ctx.address(ops[0])
    _, src = ctx.address(ops[1])
    size_op = ops[2]
    if not isinstance(size_op, Imm) or int(size_op.text) not in (4, 8, 16):
        raise unsupported(ins, "cp-size")
    size = int(size_op.text)
    srcsize = ctx.get(ops[3], ".u32") if len(ops) > 3 else None

    def issue(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        d = np.broadcast_to(np.asarray(dst(m, idx), np.uint64), tids.shape)
        s = np.broadcast_to(np.asarray(src(m, idx), np.uint64), tids.shape)
        ss = np.full(tids.shape, size) if srcsize is None else np.broadcast_to(
            np.minimum(np.asarray(srcsize(m, idx)).astype(np.int64), size), tids.shape)
        data = np.zeros((tids.size, size), np.uint8)
        for k in range(size):
            need = ss > k
            if need.any():
                b = access(m, "global", s[need] + np.uint64(k), 1, tids[need], 1 if k else size)
                assert b is not None
                data[need, k] = b
        ok = (d % np.uint64(size) == 0)
        inb = d + np.uint64(size) <= np.uint64(m.shared_size)
        if not (ok & inb).all():
            i = int(np.flatnonzero(~(ok & inb))[0])
            kind = "misaligned" if not ok[i] else "out_of_bounds"
            m.report(kind, f"cp.async of {size} bytes to shared address {int(d[i]):#x} by thread "
                     f"{{T{int(tids[i])}}} at PTX line {m.line} ("
                     f"{'not aligned' if not ok[i] else 'past the block shared memory'})",
                     int(tids[i]), int(d[i]))
        good = ok & inb
        assert m.shared is not None
        flat = m.block_of[tids[good]] * m.shared.stride + d[good].astype(np.int64)
        m.shared.issue_copy(flat, size, tids[good], m.line, m.report)
        if m.prio is not None:  # second schedule: the copy lands at once (the earliest moment)
            m.shared.data[flat[:, None] + np.arange(size)[None, :]] = data[good]
        m.cp_pending.append(CpAsync(flat, data[good], tids[good],
                                    m.cp_committed[tids[good]].copy(), m.line,
                                    s[good]))
    return issue


def complete(m: Machine, tids: np.ndarray, n: int) -> None:
    """Finish the cp.async groups of ``tids`` older than their newest ``n`` committed groups."""
    if not m.cp_pending:
        return
    waiting = np.zeros(m.T, bool)
    waiting[tids] = True
    keep = []
    line = m.line
    for rec in m.cp_pending:
        done = waiting[rec.threads] & (rec.group < m.cp_committed[rec.threads] - n)
        if done.any():
            sh = m.shared
            assert sh is not None
            w = rec.data.shape[1]
            m.line = rec.line
            sh.land_copy(rec.dst[done], w, rec.threads[done], rec.line, m.report)
            m.line = line
            sh.data[rec.dst[done][:, None] + np.arange(w)[None, :]] = rec.data[done]
        if not done.all():
            keep.append(type(rec)(rec.dst[~done], rec.data[~done], rec.threads[~done],
                                  rec.group[~done], rec.line,
                                  rec.src[~done]))
    m.cp_pending = keep
