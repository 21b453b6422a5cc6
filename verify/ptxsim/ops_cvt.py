"""``cvt``: conversions between all integer and float types (SPEC 8, issue 4).

Float to narrower float rounds once: ``.rn`` is numpy's conversion (round to nearest even, with
subnormals and overflow to infinity, exactly as ``cvt.rn.f16.f32``); ``.rz/.rm/.rp`` start from
that result and step one ulp back when it lies on the wrong side of the exact value. Float to
integer needs ``.rni/.rzi/.rmi/.rpi``, saturates to the destination range and maps NaN to 0.
Integer to float rounds per ``.rn/.rz/.rm/.rp`` (directed modes for sources up to 32 bits).
Integer to integer truncates or extends, or clamps with ``.sat``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.ops_float import flush
from verify.ptxsim.parser import type_size
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, Idx, is_float, is_signed, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

FLOAT_MODES = ("rn", "rz", "rm", "rp")
INT_MODES = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def directed(x: Any, dt: Any, mode: str) -> Any:
    """x (a wider float or exact float64) rounded to float dtype ``dt`` in ``mode``."""
    x = np.asarray(x)
    r = x.astype(dt)
    if mode == "rn":
        return r
    back = r.astype(np.float64)
    xv = x.astype(np.float64)
    if mode == "rz":
        step = np.abs(back) > np.abs(xv)
        toward = np.zeros_like(r)
    elif mode == "rm":
        step = back > xv
        toward = np.full_like(r, -np.inf)
    else:
        step = back < xv
        toward = np.full_like(r, np.inf)
    return np.where(step & ~np.isnan(xv), np.nextafter(r, toward), r).astype(dt)


def _int_range(t: str) -> tuple[int, int]:
    bits = 8 * type_size(t)
    if is_signed(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def float_to_int(x: Any, t: str, mode: str) -> Any:
    y = INT_MODES[mode](np.asarray(x).astype(np.float64))
    lo, hi = _int_range(t)
    dt = DTYPE[t]
    nan = np.isnan(y)
    y0 = np.where(nan, 0.0, y)
    inner = np.clip(y0, float(lo), float(hi))
    big = y0 >= float(hi)
    small = y0 <= float(lo)
    out = np.where(big, 0, np.where(small, 0, inner)).astype(np.float64)
    res = out.astype(np.int64) if is_signed(t) or type_size(t) < 8 else out.astype(np.uint64)
    res = np.where(big, np.array(hi).astype(res.dtype), res)
    res = np.where(small, np.array(lo).astype(res.dtype), res)
    return res.astype(dt)


def cvt(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    types = ["." + p for p in parts[1:] if "." + p in DTYPE]
    mods = [p for p in parts[1:] if "." + p not in DTYPE]
    if len(types) != 2:
        raise unsupported(ins)
    dt, st = types
    ftz = "ftz" in mods
    sat = "sat" in mods
    fmode = next((p for p in mods if p in FLOAT_MODES), None)
    imode = next((p for p in mods if p in INT_MODES), None)
    unknown = [p for p in mods if p not in FLOAT_MODES and p not in INT_MODES
               and p not in ("ftz", "sat")]
    if not unknown and (dt in (".bf16", ".bf16x2") or st == ".bf16"):
        return _cvt_bf16(ctx, dt, st, fmode, mods)
    if unknown or dt in (".bf16", ".bf16x2", ".b8", ".b16", ".b32", ".b64") or st in (
            ".bf16", ".bf16x2", ".f16x2"):
        raise unsupported(ins)
    ops = ins.operands
    if dt == ".f16x2":
        if st != ".f32" or len(ops) != 3:
            raise unsupported(ins)
        d = ctx.set(ops[0], ".b32")
        a, b = ctx.get(ops[1], ".f32"), ctx.get(ops[2], ".f32")
        mode = fmode or "rn"

        def pack(m: Machine, idx: Idx) -> None:
            hi = np.asarray(directed(a(m, idx), np.float16, mode)).view(np.uint16)
            lo = np.asarray(directed(b(m, idx), np.float16, mode)).view(np.uint16)
            d(m, idx, (hi.astype(np.uint32) << np.uint32(16)) | lo.astype(np.uint32))
        return pack
    d = ctx.set(ops[0], dt)
    a = ctx.get(ops[1], st)
    ddt = DTYPE[dt]

    def pre(x: Any) -> Any:
        return flush(x) if ftz and st == ".f32" else x

    def post(r: Any) -> Any:
        if ftz and dt == ".f32":
            r = flush(r)
        if sat and is_float(dt):
            r = np.where(np.isnan(r), ddt(0), np.clip(r, 0, 1)).astype(ddt)
        return r

    if is_float(dt) and is_float(st):
        if imode is not None:  # round to an integral value in the same format
            if dt != st:
                raise unsupported(ins)
            rf = INT_MODES[imode]

            def fint(m: Machine, idx: Idx) -> None:
                d(m, idx, post(np.asarray(rf(pre(a(m, idx)))).astype(ddt)))
            return fint
        narrowing = type_size(dt) < type_size(st)
        if narrowing and fmode is None:
            raise unsupported(ins, "narrowing float conversion needs a rounding mode")
        mode = fmode or "rn"

        def ff(m: Machine, idx: Idx) -> None:
            d(m, idx, post(directed(pre(a(m, idx)), ddt, mode)))
        return ff
    if is_float(st):  # float -> int
        if imode is None:
            raise unsupported(ins, "float to integer conversion needs .rni/.rzi/.rmi/.rpi")
        im = imode

        def fi(m: Machine, idx: Idx) -> None:
            d(m, idx, float_to_int(pre(a(m, idx)), dt, im))
        return fi
    if is_float(dt):  # int -> float
        mode = fmode or "rn"
        if fmode is None:
            raise unsupported(ins, "integer to float conversion needs a rounding mode")
        if mode != "rn" and type_size(st) > 4:
            raise unsupported(ins, "directed rounding from 64-bit integers")

        def iff(m: Machine, idx: Idx) -> None:
            x = np.asarray(a(m, idx))
            if mode == "rn":
                r = x.astype(ddt)
            else:
                r = directed(x.astype(np.float64), ddt, mode)
            d(m, idx, post(r))
        return iff
    lo, hi = _int_range(dt)

    def ii(m: Machine, idx: Idx) -> None:
        x = np.asarray(a(m, idx))
        if sat:
            wide = x.astype(np.int64) if x.dtype != np.uint64 else x
            if x.dtype == np.uint64:
                r = np.minimum(x, np.uint64(hi)) if hi >= 0 else x
                d(m, idx, r.astype(ddt))
                return
            d(m, idx, np.clip(wide, lo, min(hi, 2**63 - 1)).astype(ddt))
            return
        d(m, idx, x.astype(ddt))
    return ii


def _cvt_bf16(ctx: Ctx, dt: str, st: str, fmode: str | None, mods: list[str]) -> Fn:
    """cvt.{rn,rz,rm,rp}.bf16.f32/.f64 (``__float2bfloat16_rz`` ...), cvt.rn.bf16x2.f32 (pack:
    first source in the high half) and cvt.f32/.f64.bf16 (exact widening)."""
    from verify.ptxsim.ops_bf16 import bf16_to_f64, round_bf16

    ins = ctx.ins
    ops = ins.operands
    if any(p not in ("rn", "rz", "rm", "rp") for p in mods):
        raise unsupported(ins)
    if dt == ".bf16x2":
        if st != ".f32" or fmode != "rn" or len(ops) != 3:
            raise unsupported(ins)
        d = ctx.set(ops[0], ".b32")
        a, b = ctx.get(ops[1], ".f32"), ctx.get(ops[2], ".f32")

        def pack(m: Machine, idx: Idx) -> None:
            hi = round_bf16(np.asarray(a(m, idx), np.float64)).astype(np.uint32)
            lo = round_bf16(np.asarray(b(m, idx), np.float64)).astype(np.uint32)
            d(m, idx, (hi << np.uint32(16)) | lo)
        return pack
    if dt == ".bf16" and st in (".f32", ".f64"):
        if fmode not in ("rn", "rz", "rm", "rp"):
            raise unsupported(ins, "bf16 conversion needs a rounding mode")
        d = ctx.set(ops[0], ".b16")
        a = ctx.get(ops[1], st)
        mode = fmode

        def narrow(m: Machine, idx: Idx) -> None:
            d(m, idx, round_bf16(np.asarray(a(m, idx), np.float64), mode=mode))
        return narrow
    if st == ".bf16" and dt in (".f32", ".f64") and fmode is None:
        d = ctx.set(ops[0], dt)
        a = ctx.get(ops[1], ".b16")
        ddt = DTYPE[dt]

        def widen(m: Machine, idx: Idx) -> None:
            d(m, idx, bf16_to_f64(a(m, idx)).astype(ddt))
        return widen
    raise unsupported(ins)
