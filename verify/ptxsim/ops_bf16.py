"""bf16 and exact f64 fused multiply-add (issue 10, "Unsupported instructions").

bf16 values live in 16-bit registers as raw bits (two per ``.b32`` for ``.bf16x2``); a bf16 is the
high half of a float32, so widening is exact. Every bf16 operation is computed exactly in float64
(products of two 8-bit significands are exact; sums use TwoSum, so the pair s + e is the exact
value) and rounded once to bf16 with round-to-nearest-even, ties decided by the exact value.

``fma.rn.f64`` is exact: Dekker's product (Veltkamp split) gives a*b = ph + pl exactly, TwoSum
gives c + ph = th + tl exactly, tl + pl is rounded to odd, and the final sum rounded to nearest
is the correctly rounded a*b+c (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
proved algorithms using rounding to odd", IEEE TC 2008). Elements outside the range where those
steps are exact (huge or tiny magnitudes) are computed with ``fractions.Fraction``; non-finite
inputs follow IEEE (numpy's a*b+c gives the same NaN / infinity).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

BF16_MAX = float(np.array(0x7F7F0000, np.uint32).view(np.float32))


def two_sum(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def bf16_to_f64(bits: Any) -> np.ndarray:
    u = np.asarray(bits).astype(np.uint32) << np.uint32(16)
    return u.view(np.float32).astype(np.float64)


def round_bf16(s: Any, e: Any = 0.0, mode: str = "rn") -> np.ndarray:
    """bf16 bits (uint16) of the exact value s + e (float64 pair, |e| below half an ulp of s),
    rounded to nearest even (``rn``), toward zero (``rz``), down (``rm``) or up (``rp``; the
    directed modes with e = 0). A directed mode overflows to the largest finite value where it
    rounds toward zero, else to the infinity."""
    s = np.asarray(s, np.float64)
    e = np.broadcast_to(np.asarray(e, np.float64), s.shape)
    fin = np.isfinite(s) & (s != 0)
    _, ex = np.frexp(np.where(fin, s, 1.0))
    q = np.maximum(ex - 8, -133)  # the bf16 quantum at |s| (subnormals: 2^-133)
    k = np.ldexp(np.where(fin, s, 0.0), -q)  # exact: a power-of-two scaling
    fl = np.floor(k)
    if mode == "rn":
        frac = k - fl
        r = np.rint(k)  # half to even
        tie = frac == 0.5
        r = np.where(tie & (e > 0), fl + 1, np.where(tie & (e < 0), fl, r))
    else:
        r = {"rz": np.trunc, "rm": np.floor, "rp": np.ceil}[mode](k)
    v = np.ldexp(r, q)
    big = np.abs(v) > BF16_MAX
    to_inf = np.full(s.shape, mode == "rn") | ((mode == "rm") & (s < 0)) | (
        (mode == "rp") & (s > 0))
    v = np.where(big, np.copysign(np.where(to_inf, np.inf, BF16_MAX), s), v)
    v = np.where(fin, v, s)  # zeros, infinities and NaN pass through
    bits = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(s), np.uint16(0x7FFF), bits).astype(np.uint16)


_SPLIT = 134217729.0  # 2^27 + 1


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = _SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def _round_odd(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    s, err = two_sum(x, y)
    odd = (s.view(np.uint64) & np.uint64(1)).astype(bool)
    step = (err != 0) & ~odd
    return np.where(step, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _fma_exact(a: float, b: float, c: float) -> float:
    v = Fraction(a) * Fraction(b) + Fraction(c)
    if v == 0:
        return float(np.float64(a) * np.float64(b) + np.float64(c))  # IEEE signed zero
    try:
        return float(v)  # int / int division in CPython is correctly rounded
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def fma64(a: Any, b: Any, c: Any) -> np.ndarray:
    """Correctly rounded float64 a*b+c, vectorised."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(all="ignore"):
        ph = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        pl = ((ah * bh - ph) + ah * bl + al * bh) + al * bl
        th, tl = two_sum(c, ph)
        z = th + _round_odd(tl, pl)
        fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
        mag = np.abs(ph)
        safe = fin & np.isfinite(z) & ((mag == 0) | ((mag > 2.0 ** -900) & (mag < 2.0 ** 900))) \
            & (np.abs(a) < 2.0 ** 900) & (np.abs(b) < 2.0 ** 900) & (np.abs(c) < 2.0 ** 1000) \
            & (z != 0) & ((np.abs(c) > 2.0 ** -900) | (c == 0))
        out = np.where(fin, z, a * b + c)
    slow = np.flatnonzero((fin & ~safe).ravel())
    if slow.size:
        flat = out.reshape(-1).copy()
        af, bf, cf = a.reshape(-1), b.reshape(-1), c.reshape(-1)
        for i in slow[:100_000]:
            flat[i] = _fma_exact(float(af[i]), float(bf[i]), float(cf[i]))
        out = flat.reshape(out.shape)
    return np.asarray(out, np.float64)
