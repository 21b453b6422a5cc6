"""bfloat16 (``bf16``) values for contracts (issue 32; contracts/README.md "DTYPE"): numpy has no
bf16 type, so a bf16 buffer is stored as ``uint16`` bit patterns (what the kernel sees) and
converted here, at the edges: inputs drawn as real values are rounded to bf16, outputs are
decoded to float32 (exact: bf16 is float32's upper half) before they are compared.

* ``decode(bits)``: bf16 bit patterns to float32, exactly.
* ``encode(x)``: float values (any float dtype) to the nearest bf16, ties to even, overflow to
  infinity, NaN to the quiet NaN of its sign, as ``__float2bfloat16_rn`` does. float64 is first
  rounded to float32 *to odd* (toward zero, the last bit set when inexact), which makes the
  second rounding correct: no double-rounding error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STORAGE = np.uint16
TINY = float(np.finfo(np.float32).tiny)  # the smallest normal bf16 is float32's


def decode(bits: Any) -> np.ndarray[Any, Any]:
    """float32 values of bf16 bit patterns."""
    b = np.ascontiguousarray(np.asarray(bits, dtype=STORAGE)).astype(np.uint32) << np.uint32(16)
    out: np.ndarray[Any, Any] = b.view(np.float32)
    return out


def _to_f32_odd(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """float64 to float32 rounded to odd (finite results stay finite below float32's range)."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        r64 = r.astype(np.float64)
    u = r.view(np.uint32).copy()
    fin = np.isfinite(x)
    away = fin & (np.abs(r64) > np.abs(x))  # rounded away from zero (or to inf): step back
    u[away] -= np.uint32(1)
    inexact = fin & (u.view(np.float32).astype(np.float64) != x)
    u[inexact] |= np.uint32(1)
    return u.view(np.float32)


def encode(x: Any) -> np.ndarray[Any, Any]:
    """The nearest bf16 (ties to even) of each value, as uint16 bit patterns."""
    a = np.asarray(x)
    f = _to_f32_odd(a.astype(np.float64)) if a.dtype != np.float32 else a
    u = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    nan = np.isnan(f)
    sign = (u >> np.uint64(16)) & np.uint64(0x8000)
    out = np.where(nan, sign | np.uint64(0x7FC0), rounded).astype(STORAGE)
    return out

