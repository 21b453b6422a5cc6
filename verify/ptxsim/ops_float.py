"""Floating-point instructions (SPEC 8, issue 4 "Semantics to support").

add sub mul fma mad div rcp sqrt rsqrt ex2 lg2 sin cos tanh min max abs neg on .f32/.f64, and
add/sub/mul/fma/min/max/neg/abs on .f16 and .f16x2.

Exactness: .f32 add/sub/mul/div/sqrt/rcp with ``.rn`` are numpy's IEEE float32 operations,
correctly rounded. ``fma.rn.f32`` is exact: the product is exact in float64, the sum is computed
with TwoSum, and a float64 result lying exactly half-way between two float32 values is nudged
toward the true sum before the single rounding to float32. The approximate instructions
(``.approx``, ``.full``, ex2/lg2/sin/cos/tanh/rsqrt) are modelled by the correctly rounded float32
value of the exact function (computed in float64); the hardware differs by a few ulp, which the
contract tolerances cover. ``.ftz`` flushes subnormal inputs and results to signed zero; ``.sat``
clamps to [0, 1] with NaN to 0. ``.rz/.rm/.rp`` on f32 add/sub/mul/fma are exact too (TwoSum
pair, then one directed rounding); other directed-rounding forms (div, sqrt, rcp, f64) are refused.
f16 arithmetic is done in float64 (exact for add/sub/mul) and rounded once to float16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.ops_alu import ptype
from verify.ptxsim.ops_bf16 import bf16_to_f64, fma64, round_bf16, two_sum
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, Idx, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

F32_TINY = np.float32(np.finfo(np.float32).tiny)


def flush(x: Any) -> Any:
    x = np.asarray(x)
    return np.where(np.abs(x) < F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def _two_sum(p: Any, c: Any) -> tuple[Any, Any]:
    """s + e == p + c exactly (float64 TwoSum)."""
    s = p + c
    bb = s - p
    return s, (p - (s - bb)) + (c - bb)


def round32(s: Any, e: Any, mode: str = "rn") -> Any:
    """The float32 rounding, in ``mode``, of the exact value s + e (float64 pair, |e| tiny)."""
    s, e = np.asarray(s, np.float64), np.asarray(e, np.float64)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    fin = np.isfinite(s)
    if mode == "rn":
        # a float64 s exactly half-way between two float32 values: the true value s + e decides
        up = np.where(s > r64, np.float32(np.inf), np.float32(-np.inf))
        other = np.nextafter(r, up).astype(np.float64)
        tie = (s == (r64 + other) * 0.5) & (e != 0) & fin & (s != r64)
        if np.any(tie):
            s = np.where(tie, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
            r = s.astype(np.float32)
        return r
    d = r64 - s  # exact: r64 and s are within one float32 ulp
    above = fin & ((d > e) | (np.isinf(r) & (r > 0)))  # r > s + e
    below = fin & ((d < e) | (np.isinf(r) & (r < 0)))  # r < s + e
    toward: Any
    if mode == "rm":
        step, toward = above, np.float32(-np.inf)
    elif mode == "rp":
        step, toward = below, np.float32(np.inf)
    else:  # rz
        step = np.where(s > 0, above, below)
        toward = np.float32(0)
    return np.where(step, np.nextafter(r, toward), r).astype(np.float32)


def fma32(a: Any, b: Any, c: Any, mode: str = "rn") -> Any:
    """Correctly rounded float32 a*b+c."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)  # exact
    s, e = _two_sum(p, np.asarray(c, np.float64))
    return round32(s, e, mode)


def _directed(op: str, mode: str) -> Callable[..., Any]:
    """add/sub/mul/fma .rz/.rm/.rp on float32, exact."""
    if op == "add":
        return lambda a, b: round32(*_two_sum(np.asarray(a, np.float64),
                                              np.asarray(b, np.float64)), mode)
    if op == "sub":
        return lambda a, b: round32(*_two_sum(np.asarray(a, np.float64),
                                              -np.asarray(b, np.float64)), mode)
    if op == "mul":
        return lambda a, b: round32(np.asarray(a, np.float64) * np.asarray(b, np.float64),
                                    np.float64(0), mode)
    return lambda a, b, c: fma32(a, b, c, mode)


def _rn_only(ctx: Ctx) -> None:
    for p in ctx.ins.parts:
        if p in ("rz", "rm", "rp"):
            raise unsupported(ctx.ins, "rounding mode ." + p)


def _wrap(parts: list[str], t: str, f: Callable[..., Any]) -> Callable[..., Any]:
    ftz = "ftz" in parts and t == ".f32"
    sat = "sat" in parts
    out = np.float32 if t == ".f32" else np.float64

    def g(*xs: Any) -> Any:
        if ftz:
            xs = tuple(flush(x) for x in xs)
        r = np.asarray(f(*xs)).astype(out)
        if ftz:
            r = flush(r)
        if sat:
            r = np.where(np.isnan(r), out(0), np.clip(r, 0, 1)).astype(out)
        return r
    return g


def _approx(f: Callable[[Any], Any], t: str) -> Callable[[Any], Any]:
    out = np.float32 if t == ".f32" else np.float64
    return lambda x: np.asarray(f(np.asarray(x, np.float64))).astype(out)


def _div_approx(a: Any, b: Any) -> Any:
    """``div.approx.f32``: "computed as d = a * (1/b)"; for |b| in [2^126, 2^128] it "returns
    zero" (PTX ISA; CUDA's ``__fdividef``: "for 2^126 < |y| < 2^128, __fdividef(x,y) delivers a
    result of zero"), as the reciprocal is below the smallest normal float and flushed. Else the
    correctly rounded quotient (the instruction's 2 ulp error is not modelled)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = a64 / b64
        flushed = a64 * np.copysign(0.0, b64)  # NaN for an infinite or NaN a
    return np.where(np.abs(b64) > 2.0 ** 126, flushed, q).astype(np.float32)


def _h(f: Callable[..., Any]) -> Callable[..., Any]:
    """A float16 operation computed in float64 and rounded once."""
    return lambda *xs: np.asarray(f(*(np.asarray(x).astype(np.float64) for x in xs))).astype(
        np.float16)


def _h2(f: Callable[..., Any]) -> Callable[..., Any]:
    """The same operation on both halves of .f16x2 values (uint32 bits)."""
    hf = _h(f)

    def g(*xs: Any) -> Any:
        lo = [(np.asarray(x).astype(np.uint32) & np.uint32(0xFFFF)).astype(np.uint16).view(
            np.float16) for x in xs]
        hi = [(np.asarray(x).astype(np.uint32) >> np.uint32(16)).astype(np.uint16).view(
            np.float16) for x in xs]
        rl = np.asarray(hf(*lo)).view(np.uint16).astype(np.uint32)
        rh = np.asarray(hf(*hi)).view(np.uint16).astype(np.uint32)
        return rl | (rh << np.uint32(16))
    return g


def _bf_add(a: Any, b: Any) -> Any:
    return round_bf16(*two_sum(a, b))


def _bf_fma(a: Any, b: Any, c: Any) -> Any:
    return round_bf16(*two_sum(np.asarray(a) * np.asarray(b), c))  # the product is exact


def fmax_signed_zero(a: Any, b: Any) -> Any:
    """PTX ``max``: the larger, a NaN input ignored, and +0.0 greater than -0.0 (PTX ISA:
    "if values of both inputs are 0.0, then +0.0 > -0.0"). numpy's ``fmax`` returns its first
    argument for equal values, so ``fmax(-0.0, +0.0)`` gave -0.0 and the two lanes of a butterfly
    reduction disagreed on the sign of a zero maximum."""
    r = np.fmax(a, b)
    both_zero = (np.asarray(a) == 0) & (np.asarray(b) == 0)
    if not np.any(both_zero):
        return r
    pos = np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0).astype(np.asarray(r).dtype)
    out = np.where(both_zero, pos, r)
    return out if np.ndim(out) else out[()]  # a scalar stays a numpy scalar


def fmin_signed_zero(a: Any, b: Any) -> Any:
    """PTX ``min``: the smaller, a NaN input ignored, and -0.0 smaller than +0.0."""
    r = np.fmin(a, b)
    both_zero = (np.asarray(a) == 0) & (np.asarray(b) == 0)
    if not np.any(both_zero):
        return r
    neg = np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0).astype(np.asarray(r).dtype)
    out = np.where(both_zero, neg, r)
    return out if np.ndim(out) else out[()]  # a scalar stays a numpy scalar


_BF16: dict[str, Callable[..., Any]] = {
    "add": _bf_add, "sub": lambda a, b: _bf_add(a, -np.asarray(b)),
    "mul": lambda a, b: round_bf16(np.asarray(a) * np.asarray(b)), "fma": _bf_fma,
    "min": lambda a, b: round_bf16(fmin_signed_zero(a, b)),
    "max": lambda a, b: round_bf16(fmax_signed_zero(a, b)),
    "neg": lambda a: round_bf16(np.negative(a)), "abs": lambda a: round_bf16(np.abs(a)),
}


def _bf(f: Callable[..., Any]) -> Callable[..., Any]:
    """A bf16 operation on uint16 bits: exact in float64, rounded once."""
    return lambda *xs: f(*(bf16_to_f64(x) for x in xs))


def _bf2(f: Callable[..., Any]) -> Callable[..., Any]:
    """The same operation on both halves of .bf16x2 values (uint32 bits)."""
    def g(*xs: Any) -> Any:
        u = [np.asarray(x).astype(np.uint32) for x in xs]
        lo = np.asarray(f(*(bf16_to_f64(x & np.uint32(0xFFFF)) for x in u))).astype(np.uint32)
        hi = np.asarray(f(*(bf16_to_f64(x >> np.uint32(16)) for x in u))).astype(np.uint32)
        return lo | (hi << np.uint32(16))
    return g


FLOAT_MODS = {"rn", "rz", "rm", "rp", "ftz", "sat", "approx", "full"}


def float_op(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    op, t = parts[0], ptype(parts)
    extra = [p for p in parts[1:] if "." + p not in DTYPE and p not in FLOAT_MODS]
    if extra:  # e.g. max.NaN, min.xorsign.abs, fma.relu: not modelled
        raise unsupported(ins, "modifier ." + extra[0])
    ops = ins.operands
    n_in = len(ops) - 1
    f: Callable[..., Any]
    if t in (".bf16", ".bf16x2"):
        if "ftz" in parts or "sat" in parts:
            raise unsupported(ins, "bf16 .ftz/.sat")
        _rn_only(ctx)
        fb = _BF16.get(op)
        if fb is None:
            raise unsupported(ins)
        f = _bf(fb) if t == ".bf16" else _bf2(fb)
    elif t in (".f16", ".f16x2"):
        if "ftz" in parts or "sat" in parts:
            raise unsupported(ins, "f16 .ftz/.sat")
        _rn_only(ctx)
        base: dict[str, Callable[..., Any]] = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply,
            "fma": lambda a, b, c: a * b + c, "min": fmin_signed_zero, "max": fmax_signed_zero,
            "neg": np.negative, "abs": np.abs,
        }
        if op not in base:
            raise unsupported(ins)
        f = _h(base[op]) if t == ".f16" else _h2(base[op])
    elif t in (".f32", ".f64"):
        f = _f32_64(ctx, op, t, parts)
    else:
        raise unsupported(ins)
    d = ctx.set(ops[0], t)
    getters = [ctx.get(o, t) for o in ops[1:]]
    if n_in == 1:
        g0 = getters[0]

        def f1(m: Machine, idx: Idx) -> None:
            d(m, idx, f(g0(m, idx)))
        return f1
    if n_in == 2:
        g0, g1 = getters

        def f2(m: Machine, idx: Idx) -> None:
            d(m, idx, f(g0(m, idx), g1(m, idx)))
        return f2
    if n_in == 3:
        g0, g1, g2 = getters

        def f3(m: Machine, idx: Idx) -> None:
            d(m, idx, f(g0(m, idx), g1(m, idx), g2(m, idx)))
        return f3
    raise unsupported(ins)


def _f32_64(ctx: Ctx, op: str, t: str, parts: list[str]) -> Callable[..., Any]:
    ins = ctx.ins
    approx = "approx" in parts or "full" in parts
    mode = next((p for p in parts if p in ("rz", "rm", "rp")), None)
    if mode is not None and t == ".f32" and op in ("add", "sub", "mul", "fma", "mad"):
        return _wrap(parts, t, _directed(op, mode))
    if op in ("add", "sub", "mul", "div", "sqrt", "rcp", "fma", "mad"):
        _rn_only(ctx)
    f: Callable[..., Any]
    if op == "add":
        f = np.add
    elif op == "sub":
        f = np.subtract
    elif op == "mul":
        f = np.multiply
    elif op in ("fma", "mad"):
        if t == ".f64":
            if op == "mad" and "rn" not in parts:
                raise unsupported(ins, "mad.f64 without .rn")
            f = fma64
        else:
            f = fma32
    elif op == "div":
        if approx and t == ".f32":
            if "approx" in parts:  # a * (1 / b): the reciprocal of |b| > 2^126 flushes to 0
                return _wrap(parts, t, _div_approx)
            return _wrap(parts, t, lambda a, b: (np.asarray(a, np.float64) /
                                                  np.asarray(b, np.float64)).astype(np.float32))
        f = np.divide
    elif op == "rcp":
        one = np.float32(1) if t == ".f32" else np.float64(1)
        if approx:
            f = _approx(lambda x: 1.0 / x, t)
        else:
            f = lambda x: one / x  # noqa: E731
    elif op == "sqrt":
        f = np.sqrt if not approx else _approx(np.sqrt, t)
    elif op == "rsqrt":
        f = _approx(lambda x: 1.0 / np.sqrt(x), t)
    elif op == "ex2":
        f = _approx(np.exp2, t)
    elif op == "lg2":
        f = _approx(np.log2, t)
    elif op == "sin":
        f = _approx(np.sin, t)
    elif op == "cos":
        f = _approx(np.cos, t)
    elif op == "tanh":
        f = _approx(np.tanh, t)
    elif op == "min":
        f = fmin_signed_zero
    elif op == "max":
        f = fmax_signed_zero
    elif op == "abs":
        f = np.abs
    elif op == "neg":
        f = np.negative
    else:
        raise unsupported(ins)
    return _wrap(parts, t, f)


def testp(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    t = ptype(parts)
    if t not in (".f32", ".f64") or len(parts) != 3:
        raise unsupported(ins)
    tiny = np.finfo(np.float32 if t == ".f32" else np.float64).tiny
    tests: dict[str, Callable[[Any], Any]] = {
        "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
        "notanumber": np.isnan, "normal": lambda x: np.isfinite(x) & (np.abs(x) >= tiny),
        "subnormal": lambda x: (np.abs(x) < tiny) & (x != 0),
    }
    f = tests.get(parts[1])
    if f is None:
        raise unsupported(ins)
    d = ctx.set(ins.operands[0], ".pred")
    a = ctx.get(ins.operands[1], t)

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, np.asarray(f(a(m, idx))))
    return fn


def copysign(ctx: Ctx) -> Fn:
    ins = ctx.ins
    t = ptype(ins.parts)
    if t not in (".f32", ".f64"):
        raise unsupported(ins)
    ops = ins.operands
    d = ctx.set(ops[0], t)
    a, b = ctx.get(ops[1], t), ctx.get(ops[2], t)

    def fn(m: Machine, idx: Idx) -> None:  # PTX: d = |b| with the sign of a
        d(m, idx, np.copysign(b(m, idx), a(m, idx)))
    return fn
