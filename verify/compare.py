"""Comparing a kernel's outputs with the trusted reference (SPEC 8 ``falsify.*``).

``compare_output`` judges one output buffer under a contract ``Tolerance``: floats by units in
the last place on the integer encoding (``ulp_distance``), or by absolute / relative error; NaN
matches only an expected NaN. Used by the falsification runner and ``scripts/device_check.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ledger.core.errors import BadInput
from verify import bfloat16
from verify.model import Tolerance

_NP_DTYPES: dict[str, Any] = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "s32": np.int32,
    "u32": np.uint32,
    "s64": np.int64,
    "u64": np.uint64,
    "u8": np.uint8,
    "s8": np.int8,
    "bf16": bfloat16.STORAGE,  # bit patterns: numpy has no bf16 (verify/bfloat16.py)
}
_UINT_OF_SIZE: dict[int, Any] = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def is_float(dtype: str) -> bool:
    """A float element type (bf16 included, whose storage is an unsigned integer)."""
    return dtype == "bf16" or np.issubdtype(np_dtype(dtype), np.floating)


def values_of(dtype: str, data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The numbers a buffer of ``dtype`` holds: bf16 bit patterns decoded to float32, others as
    they are (what the oracles receive)."""
    return bfloat16.decode(data) if dtype == "bf16" else data


def cast_to(dtype: str, values: Any) -> np.ndarray[Any, Any]:
    """``values`` in the storage of ``dtype`` (bf16: rounded to nearest even, as bit patterns)."""
    if dtype == "bf16":
        return bfloat16.encode(np.asarray(values, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(np_dtype(dtype))


def np_dtype(dtype: str) -> np.dtype[Any]:
    try:
        dt: np.dtype[Any] = np.dtype(_NP_DTYPES[dtype])
    except KeyError as e:
        raise BadInput(f"unknown dtype {dtype!r}") from e
    return dt


def ulp_distance(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Units in the last place between two float arrays of one dtype, on the integer encoding.

    Each value maps to (sign, magnitude bits); the distance is |m1 - m2| for equal signs and
    m1 + m2 across zero (so +0 and -0 are 0 apart, and the largest finite is 1 from inf).
    NaNs are not handled here. Exact in uint64, returned as float64.
    """
    size = got.dtype.itemsize
    bits = 8 * size
    ui = _UINT_OF_SIZE[size]
    g = np.ascontiguousarray(got).view(ui).astype(np.uint64)
    w = np.ascontiguousarray(want).view(ui).astype(np.uint64)
    shift, mask = np.uint64(bits - 1), np.uint64((1 << (bits - 1)) - 1)
    gs, ws = g >> shift, w >> shift
    gm, wm = g & mask, w & mask
    same = np.where(gm >= wm, gm - wm, wm - gm)
    out: np.ndarray[Any, Any] = np.where(gs == ws, same, gm + wm).astype(np.float64)
    return out


def _float_errors(
    g: np.ndarray[Any, Any], g64: np.ndarray[Any, Any], w64: np.ndarray[Any, Any], dtype: str,
    diff: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """ulp (on the encoding of ``dtype``, after rounding the reference to it), abs and rel error
    per element; NaN matches only NaN. bf16: ``g`` holds bit patterns, ``g64`` their values."""
    gn, wn = np.isnan(g64), np.isnan(w64)
    equal = (gn & wn) | (g64 == w64)
    diff = np.where(equal, 0.0, np.where(gn | wn, np.inf, diff))
    tiny = bfloat16.TINY if dtype == "bf16" else float(np.finfo(np_dtype(dtype)).tiny)
    rel = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(w64), tiny))
    rel = np.nan_to_num(rel, nan=np.inf)
    w_cast = cast_to(dtype, w64)
    g_enc = g.astype(np_dtype(dtype))
    ulp = ulp_distance(g_enc, w_cast)
    w_nan = np.isnan(values_of(dtype, w_cast))
    ulp = np.where(gn & w_nan, 0.0, np.where(gn | w_nan, np.inf, ulp))
    return ulp, diff, rel


@dataclass(frozen=True)
class Comparison:
    """One output buffer against the reference."""

    name: str
    bad: int  # elements out of tolerance
    first: str  # the first bad element, e.g. "c[17]: got 1.5, want 2.0 (4 ulp)"; "" when none
    max_ulp: float | None  # None for integers
    max_abs: float
    max_rel: float


def compare_output(
    name: str, got: np.ndarray[Any, Any], want: Any, dtype: str, tol: Tolerance,
    only: np.ndarray[Any, Any] | None = None,
) -> Comparison:
    """Compare ``got`` with the reference's ``want`` under ``tol``.

    Floats: an element passes when it is within ``tol.ulp`` ulp (computed on the integer
    encoding after casting ``want`` to the output dtype), or within ``tol.abs``, or within
    ``tol.rel`` of |want| (any bound given suffices); no bound at all means 0 ulp. NaN matches
    only an expected NaN; an infinity only the same infinity. Integers: exact, or within
    ``tol.abs``. Raises ``BadInput`` when the reference's shape does not fit the buffer.
    ``only``: a boolean mask over the elements; the others are not compared (a launch run on a
    sample of its blocks wrote only some elements; indices stay those of the whole buffer).
    """
    dt = np_dtype(dtype)
    g = np.asarray(got).reshape(-1)
    w_any = np.asarray(want).reshape(-1)
    if w_any.size != g.size:
        raise BadInput(
            f"the reference gives {w_any.size} values for {name}, the buffer holds {g.size}"
        )
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        g64 = values_of(dtype, g).astype(np.float64)
        w64 = w_any.astype(np.float64)
        diff = np.abs(g64 - w64)
        if is_float(dtype):
            ulp, diff, rel = _float_errors(g, g64, w64, dtype, diff)
            ok = np.zeros(g.size, dtype=bool)
            if tol.ulp is not None or (tol.abs is None and tol.rel is None):
                ok |= ulp <= (tol.ulp or 0.0)
            if tol.abs is not None:
                ok |= diff <= tol.abs
            if tol.rel is not None:
                ok |= rel <= tol.rel
            max_ulp: float | None = float(ulp.max()) if g.size else 0.0
        else:
            exact = g.astype(dt) == w_any.astype(dt)
            diff = np.where(exact, 0.0, diff)
            rel = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(w64), 1.0))
            ok = exact | (diff <= (tol.abs if tol.abs is not None else -1.0))
            max_ulp = None
        if only is not None:
            keep = np.asarray(only, dtype=bool).reshape(-1)
            ok |= ~keep
            diff = np.where(keep, diff, 0.0)
            rel = np.where(keep, rel, 0.0)
            if max_ulp is not None:
                max_ulp = float(np.where(keep, ulp, 0.0).max()) if g.size else 0.0
    bad_idx = np.flatnonzero(~ok)
    first = ""
    if bad_idx.size:
        i = int(bad_idx[0])
        err = f"{ulp[i]:g} ulp" if max_ulp is not None else f"abs {diff[i]:g}"
        if max_ulp is not None and tol.ulp is None and (tol.abs is not None or tol.rel is not None):
            err = f"abs {diff[i]:.3g}, rel {rel[i]:.3g}"
        shown = g64[i].item() if dtype == "bf16" else g[i]
        first = f"{name}[{i}]: got {shown!r}, want {w_any[i]!r} ({err})"
    return Comparison(
        name,
        int(bad_idx.size),
        first,
        max_ulp,
        float(diff.max()) if g.size else 0.0,
        float(rel.max()) if g.size else 0.0,
    )


def describe_tolerance(tol: Tolerance) -> str:
    parts = []
    if tol.ulp is not None:
        parts.append(f"{tol.ulp:g} ulp")
    if tol.abs is not None:
        parts.append(f"abs {tol.abs:g}")
    if tol.rel is not None:
        parts.append(f"rel {tol.rel:g}")
    return " or ".join(parts) if parts else "0 ulp"
