"""Integer, logic, comparison and move instructions (SPEC 8, issue 4 "Semantics to support").

add sub mul(.lo/.hi/.wide) mad(.lo/.hi/.wide) div rem min max abs neg and or xor not cnot shl shr
setp set selp mov popc clz brev bfe bfi prmt lop3. Integer arithmetic wraps in the numpy dtype of
the instruction type; shifts clamp the shift amount as PTX does; ``div``/``rem`` truncate toward
zero. Float forms of add/sub/mul/mad/min/max/abs/neg are in ``ops_float``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.parser import Imm, PredDst, Reg, Sym, Vec, type_size
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, SBITS, UBITS, Idx, is_float, is_signed, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

TYPES = set(DTYPE)


def ptype(parts: list[str]) -> str:
    for p in reversed(parts):
        if "." + p in TYPES:
            return "." + p
    return ""


def _wide(t: str) -> str:
    return {".s16": ".s32", ".u16": ".u32", ".s32": ".s64", ".u32": ".u64"}[t]


def _mulhi(a: Any, b: Any, t: str) -> Any:
    size = type_size(t)
    if size < 8:
        wt = SBITS[size * 2] if is_signed(t) else UBITS[size * 2]
        return ((np.asarray(a).astype(wt) * np.asarray(b).astype(wt)) >> (8 * size)).astype(
            DTYPE[t])
    # 64-bit high half via 32-bit limbs, unsigned, then signed correction
    ua = np.asarray(a).view(np.uint64) if np.asarray(a).ndim else np.uint64(np.asarray(a).view(
        np.uint64))
    ub = np.asarray(b).view(np.uint64) if np.asarray(b).ndim else np.uint64(np.asarray(b).view(
        np.uint64))
    m32 = np.uint64(0xFFFFFFFF)
    a0, a1 = ua & m32, ua >> np.uint64(32)
    b0, b1 = ub & m32, ub >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    if is_signed(t):
        hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) - np.where(
            np.asarray(b) < 0, ua, np.uint64(0))
    return np.asarray(hi).astype(np.uint64).view(np.int64) if is_signed(t) else hi


def _div(a: Any, b: Any, t: str) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    bz = np.where(b == 0, 1, b).astype(a.dtype)
    if not is_signed(t):
        return np.where(b == 0, np.array(-1).astype(a.dtype), a // bz)
    q = np.abs(a.astype(np.int64) if a.dtype.itemsize < 8 else a) // np.abs(bz)
    q = np.where((a < 0) != (bz < 0), -q, q)
    return np.where(b == 0, -1, q).astype(a.dtype)


def _rem(a: Any, b: Any, t: str) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    q = _div(a, b, t)
    return np.where(b == 0, a, a - q * b).astype(a.dtype)


def _shift(op: str, t: str) -> Callable[[Any, Any], Any]:
    bits = 8 * type_size(t)

    def f(a: Any, b: Any) -> Any:
        a = np.asarray(a)
        sh = np.minimum(np.asarray(b).astype(np.uint32), bits)
        big = sh >= bits
        s = np.where(big, 0, sh).astype(a.dtype)
        if op == "shl":
            r = a << s
            return np.where(big, np.zeros((), a.dtype), r)
        r = a >> s
        if is_signed(t):
            return np.where(big, np.where(a < 0, -1, 0).astype(a.dtype), r)
        return np.where(big, np.zeros((), a.dtype), r)
    return f


def _bin(ctx: Ctx, t_in: str, t_out: str, f: Callable[[Any, Any], Any]) -> Fn:
    ops = ctx.ins.operands
    d = ctx.set(ops[0], t_out)
    a, b = ctx.get(ops[1], t_in), ctx.get(ops[2], t_in)

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, f(a(m, idx), b(m, idx)))
    return fn


def _un(ctx: Ctx, t_in: str, t_out: str, f: Callable[[Any], Any]) -> Fn:
    ops = ctx.ins.operands
    d = ctx.set(ops[0], t_out)
    a = ctx.get(ops[1], t_in)

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, f(a(m, idx)))
    return fn


def _divide(ctx: Ctx, op: str, t: str) -> Fn:
    """Integer ``div`` / ``rem``. The PTX ISA says division by zero "yields an unspecified,
    machine-specific value", so a lane that divides by zero is a ``division_by_zero`` finding
    (the run goes on with the value this interpreter gives: -1 for ``div``, the dividend for
    ``rem``), not a result a reference could agree with by chance."""
    ops = ctx.ins.operands
    d = ctx.set(ops[0], t)
    a, b = ctx.get(ops[1], t), ctx.get(ops[2], t)
    f = _div if op == "div" else _rem

    def fn(m: Machine, idx: Idx) -> None:
        x, y = a(m, idx), b(m, idx)
        zero = np.asarray(y) == 0
        if zero.any():
            tids = m.all_idx(idx)
            lanes = np.flatnonzero(np.broadcast_to(zero, tids.shape))
            th = int(tids[lanes[0]])
            m.report("division_by_zero",
                     f"{op}{t} by zero in thread {{T{th}}} (and {lanes.size - 1} other thread(s) "
                     f"here) at PTX line {m.line}: the PTX ISA leaves the result unspecified",
                     th, None)
        d(m, idx, f(x, y, t))
    return fn


INT_MODS = {"lo", "hi", "wide", "sat"}


def int_arith(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    op, t = parts[0], ptype(parts)
    extra = [p for p in parts[1:] if "." + p not in TYPES and p not in INT_MODS]
    if extra:
        raise unsupported(ins, "modifier ." + extra[0])
    if not t or is_float(t) or (t == ".pred" and op not in ("and", "or", "xor", "not")):
        raise unsupported(ins)
    if t in (".f16x2", ".bf16", ".bf16x2"):
        raise unsupported(ins)
    if "sat" in parts and op in ("add", "sub"):
        if t != ".s32":
            raise unsupported(ins)

        def sat(x: Any) -> Any:
            return np.clip(x, -(2**31), 2**31 - 1)
        if op == "add":
            return _bin(ctx, t, t, lambda a, b: sat(np.asarray(a, np.int64) + b))
        return _bin(ctx, t, t, lambda a, b: sat(np.asarray(a, np.int64) - b))
    if op == "add":
        return _bin(ctx, t, t, lambda a, b: a + b)
    if op == "sub":
        return _bin(ctx, t, t, lambda a, b: a - b)
    if op in ("mul", "mul24"):
        if op == "mul24":
            raise unsupported(ins)
        if "wide" in parts:
            wt = _wide(t)
            return _bin(ctx, t, wt, lambda a, b: np.asarray(a).astype(DTYPE[wt]) * b)
        if "hi" in parts:
            return _bin(ctx, t, t, lambda a, b: _mulhi(a, b, t))
        return _bin(ctx, t, t, lambda a, b: a * b)
    if op == "mad":
        ops = ins.operands
        wide = "wide" in parts
        t_out = _wide(t) if wide else t
        d = ctx.set(ops[0], t_out)
        a, b, c = ctx.get(ops[1], t), ctx.get(ops[2], t), ctx.get(ops[3], t_out)
        hi = "hi" in parts

        def fn(m: Machine, idx: Idx) -> None:
            x, y = a(m, idx), b(m, idx)
            if wide:
                p = np.asarray(x).astype(DTYPE[t_out]) * y
            elif hi:
                p = _mulhi(x, y, t)
            else:
                p = x * y
            d(m, idx, p + c(m, idx))
        return fn
    if op in ("div", "rem"):
        return _divide(ctx, op, t)
    if op == "min":
        return _bin(ctx, t, t, np.minimum)
    if op == "max":
        return _bin(ctx, t, t, np.maximum)
    if op == "abs":
        return _un(ctx, t, t, np.abs)
    if op == "neg":
        return _un(ctx, t, t, np.negative)
    if op == "and":
        return _bin(ctx, t, t, np.bitwise_and)
    if op == "or":
        return _bin(ctx, t, t, np.bitwise_or)
    if op == "xor":
        return _bin(ctx, t, t, np.bitwise_xor)
    if op == "not":
        return _un(ctx, t, t, np.invert if t != ".pred" else np.logical_not)
    if op == "cnot":
        return _un(ctx, t, t, lambda a: (np.asarray(a) == 0).astype(DTYPE[t]))
    if op in ("shl", "shr"):
        ops = ins.operands
        d = ctx.set(ops[0], t)
        a, b = ctx.get(ops[1], t), ctx.get(ops[2], ".u32")
        f = _shift(op, t)
        bits = 8 * type_size(t)
        if isinstance(ops[2], Imm):
            k = int(b(None, None))  # type: ignore[arg-type]
            if k < bits:
                kk = DTYPE[t](k)
                g: Callable[[Any], Any] = (lambda x: x << kk) if op == "shl" else (
                    lambda x: x >> kk)

                def fk(m: Machine, idx: Idx) -> None:
                    d(m, idx, g(a(m, idx)))
                return fk

        def fs(m: Machine, idx: Idx) -> None:
            d(m, idx, f(a(m, idx), b(m, idx)))
        return fs
    raise unsupported(ins)


def _cmp(cmp: str, t: str) -> Callable[[Any, Any], Any]:
    fl = is_float(t)
    base = cmp[:-1] if fl and cmp.endswith("u") and cmp not in ("equ",) and len(cmp) == 3 \
        else cmp
    if cmp == "equ":
        base = "eq"
    unordered = fl and cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu")
    table: dict[str, Callable[[Any, Any], Any]] = {
        "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
        "hi": np.greater, "hs": np.greater_equal,
    }
    if cmp == "num":
        return lambda a, b: ~(np.isnan(a) | np.isnan(b))
    if cmp == "nan":
        return lambda a, b: np.isnan(a) | np.isnan(b)
    if base not in table:
        raise KeyError(cmp)
    f = table[base]
    if not fl:
        return f
    if unordered:
        return lambda a, b: f(a, b) | np.isnan(a) | np.isnan(b)
    if base == "ne":
        return lambda a, b: f(a, b) & ~np.isnan(a) & ~np.isnan(b)
    return f


def _ftz(t: str, parts: list[str]) -> Callable[[Any], Any]:
    if "ftz" not in parts or t != ".f32":
        return lambda x: x
    tiny = np.float32(np.finfo(np.float32).tiny)
    return lambda x: np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x)


def setp(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if len(parts) < 3:
        raise unsupported(ins)
    cmp, t = parts[1], ptype(parts)
    try:
        f = _cmp(cmp, t)
    except KeyError as e:
        raise unsupported(ins) from e
    ftz = _ftz(t, parts)
    bop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    ops = ins.operands
    dst = ops[0]
    p_set = ctx.set(dst.reg if isinstance(dst, PredDst) else dst, ".pred")
    q_set = ctx.set(dst.pred, ".pred") if isinstance(dst, PredDst) else None
    a, b = ctx.get(ops[1], t), ctx.get(ops[2], t)
    c = ctx.get(ops[3], ".pred") if bop else None
    combine = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}

    def fn(m: Machine, idx: Idx) -> None:
        r = np.asarray(f(ftz(a(m, idx)), ftz(b(m, idx))))
        nr = ~r
        if c is not None and bop is not None:
            cv = c(m, idx)
            r, nr = combine[bop](r, cv), combine[bop](nr, cv)
        p_set(m, idx, r)
        if q_set is not None:
            q_set(m, idx, nr)
    return fn


def set_(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    cmp = parts[1]
    types = [("." + p) for p in parts[2:] if "." + p in TYPES]
    if len(types) != 2 or any(p in ("and", "or", "xor") for p in parts):
        raise unsupported(ins)
    dt, st = types
    f = _cmp(cmp, st)
    one = DTYPE[dt](1.0) if is_float(dt) else np.array(-1).astype(DTYPE[dt])[()]
    zero = DTYPE[dt](0)
    return _bin(ctx, st, dt, lambda a, b: np.where(f(a, b), one, zero))


def selp(ctx: Ctx) -> Fn:
    ins = ctx.ins
    t = ptype(ins.parts)
    ops = ins.operands
    d = ctx.set(ops[0], t)
    a, b, c = ctx.get(ops[1], t), ctx.get(ops[2], t), ctx.get(ops[3], ".pred")

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, np.where(c(m, idx), a(m, idx), b(m, idx)))
    return fn


def mov(ctx: Ctx) -> Fn:
    ins = ctx.ins
    t = ptype(ins.parts)
    ops = ins.operands
    dst, src = ops[0], ops[1]
    if isinstance(dst, Vec) or isinstance(src, Vec):
        return _pack(ctx, t, dst, src)
    if t == ".pred" or not isinstance(src, Sym | Imm):
        d = ctx.set(dst, t, copy=True)
    else:
        d = ctx.set(dst, t)
    a = ctx.get(src, t)

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, a(m, idx))
    return fn


def _pack(ctx: Ctx, t: str, dst: Any, src: Any) -> Fn:
    size = type_size(t)
    if isinstance(dst, Vec):  # unpack
        n = len(dst.items)
        part = size // n
        pt = {1: ".b8", 2: ".b16", 4: ".b32"}[part]
        setters = [ctx.set(r, pt) if isinstance(r, Reg) else None for r in dst.items]
        a = ctx.get(src, ".b" + str(8 * size))

        def un(m: Machine, idx: Idx) -> None:
            v = np.asarray(a(m, idx))
            for i, s in enumerate(setters):
                if s is not None:
                    s(m, idx, (v >> DTYPE[t](8 * part * i)).astype(UBITS[part]))
        return un
    n = len(src.items)
    part = size // n
    pt = {1: ".b8", 2: ".b16", 4: ".b32"}[part]
    getters = [ctx.get(r, pt) for r in src.items]
    d = ctx.set(dst, ".b" + str(8 * size))
    ut = UBITS[size]

    def pk(m: Machine, idx: Idx) -> None:
        acc: Any = ut(0)
        for i, g in enumerate(getters):
            acc = acc | (np.asarray(g(m, idx)).astype(ut) << ut(8 * part * i))
        d(m, idx, acc)
    return pk


def bits_ops(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    op, t = parts[0], ptype(parts)
    size = type_size(t) if t else 4
    nb = 8 * size
    ut = UBITS[size]
    if op == "popc":
        return _un(ctx, t, ".u32", lambda a: np.bitwise_count(np.asarray(a)).astype(np.uint32))
    if op == "clz":
        def clz(a: Any) -> Any:
            x = np.asarray(a).astype(np.uint64)
            n = np.zeros(x.shape, np.uint32)
            for s in (32, 16, 8, 4, 2, 1):
                if s >= nb:
                    continue
                top = x >> np.uint64(nb - s) == 0
                n = n + np.where(top, s, 0).astype(np.uint32)
                x = np.where(top, x << np.uint64(s), x) & np.uint64((1 << nb) - 1)
            return n + np.where(x == 0, 1, 0).astype(np.uint32)
        return _un(ctx, t, ".u32", clz)
    if op == "brev":
        def brev(a: Any) -> Any:
            x = np.asarray(a).astype(ut)
            y = np.zeros(x.shape, ut)
            for i in range(nb):
                y = y | (((x >> ut(i)) & ut(1)) << ut(nb - 1 - i))
            return y
        return _un(ctx, t, t, brev)
    ops = ins.operands
    if op == "bfe":
        d = ctx.set(ops[0], t)
        a, b, c = ctx.get(ops[1], t), ctx.get(ops[2], ".u32"), ctx.get(ops[3], ".u32")

        def bfe(m: Machine, idx: Idx) -> None:
            x = np.asarray(a(m, idx)).view(ut) if np.asarray(a(m, idx)).ndim else \
                np.asarray(a(m, idx)).astype(ut)
            pos = np.minimum(np.asarray(b(m, idx)) & 0xFF, nb).astype(np.uint64)
            ln = np.minimum(np.asarray(c(m, idx)) & 0xFF, nb).astype(np.uint64)
            xs = x.astype(np.uint64) >> np.minimum(pos, nb - 1)
            xs = np.where(pos >= nb, 0, xs).astype(np.uint64)
            mask = np.where(ln >= 64, np.uint64(2**64 - 1),
                            (np.uint64(1) << np.minimum(ln, 63)) - np.uint64(1))
            r = xs & mask
            if is_signed(t):
                sbit_pos = np.minimum(pos + ln - 1, nb - 1)
                sign = np.where(ln == 0, 0, (x.astype(np.uint64) >> sbit_pos) & 1)
                r = np.where((sign == 1) & (ln < nb), r | ~mask, r)
            d(m, idx, r.astype(ut).view(DTYPE[t]))
        return bfe
    if op == "bfi":
        d = ctx.set(ops[0], t)
        f, b = ctx.get(ops[1], t), ctx.get(ops[2], t)
        c, e = ctx.get(ops[3], ".u32"), ctx.get(ops[4], ".u32")

        def bfi(m: Machine, idx: Idx) -> None:
            pos = np.minimum(np.asarray(c(m, idx)) & 0xFF, nb).astype(np.uint64)
            ln = np.minimum(np.asarray(e(m, idx)) & 0xFF, nb).astype(np.uint64)
            mask = np.where(ln >= 64, np.uint64(2**64 - 1),
                            (np.uint64(1) << np.minimum(ln, 63)) - np.uint64(1))
            mask = np.where(pos >= nb, 0, mask << np.minimum(pos, 63)).astype(np.uint64)
            fv = np.asarray(f(m, idx)).astype(np.uint64) << np.minimum(pos, 63)
            r = (np.asarray(b(m, idx)).astype(np.uint64) & ~mask) | (fv & mask)
            d(m, idx, r.astype(ut))
        return bfi
    if op == "prmt":
        if len(parts) > 2:
            raise unsupported(ins, "prmt mode")
        d = ctx.set(ops[0], ".b32")
        a, b, c = ctx.get(ops[1], ".b32"), ctx.get(ops[2], ".b32"), ctx.get(ops[3], ".b32")

        def prmt(m: Machine, idx: Idx) -> None:
            x = (np.asarray(b(m, idx)).astype(np.uint64) << np.uint64(32)) | np.asarray(
                a(m, idx)).astype(np.uint64)
            s = np.asarray(c(m, idx)).astype(np.uint64)
            r: Any = np.uint64(0)
            for i in range(4):
                sel = (s >> np.uint64(4 * i)) & np.uint64(0xF)
                byte = (x >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
                sgn = (byte >> np.uint64(7)) & np.uint64(1)
                byte = np.where((sel & np.uint64(8)) != 0, sgn * np.uint64(0xFF), byte)
                r = r | (byte << np.uint64(8 * i))
            d(m, idx, np.asarray(r).astype(np.uint32))
        return prmt
    if op == "lop3":
        d = ctx.set(ops[0], ".b32")
        a, b, c = ctx.get(ops[1], ".b32"), ctx.get(ops[2], ".b32"), ctx.get(ops[3], ".b32")
        lut = int(ctx.get(ops[4], ".u32")(None, None))  # type: ignore[arg-type]

        def lop3(m: Machine, idx: Idx) -> None:
            x, y, z = np.asarray(a(m, idx)), np.asarray(b(m, idx)), np.asarray(c(m, idx))
            r: Any = np.uint32(0)
            for i in range(8):
                if lut >> i & 1:
                    tx = x if i & 4 else ~x
                    ty = y if i & 2 else ~y
                    tz = z if i & 1 else ~z
                    r = r | (tx & ty & tz)
            d(m, idx, np.asarray(r).astype(np.uint32))
        return lop3
    raise unsupported(ins)
