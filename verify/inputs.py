"""Input values of a falsification launch (issue 32; contracts/README.md "Input domains",
docs/falsification.md "Values the verifier chooses").

Each in/inout pointer draws from its own domain (``Param.domain``) or, without one, from the
test's ``inputs: {low, high}``:

- a range ``low .. high`` with a ``uniform`` or ``normal`` distribution;
- an index array (``index_of: V``): integers in ``[0, V)``, ``sorted`` (non-decreasing),
  ``unique`` or a ``permutation`` of ``0 .. V-1``;
- CSR offsets (``offsets_of: array, total: T``): non-decreasing, first 0, last ``T``;
- preconditions ``A[i] OP expr`` narrow ``A``'s range before the draw; ``A[i] OP B[i]`` are
  repaired by redrawing the violating elements of both (at most ``PRECONDITION_ROUNDS`` rounds
  over at most ``MAX_PRECONDITION_ELEMENTS`` elements); every precondition is checked after the
  draw.

Beside the random draws the verifier lays out the values itself (``PATTERNS``): all-negative and
all-positive rows, ties, one extreme per row, zeros with negative zero, the range's bounds,
subnormals, and NaN / Inf when the test's ``specials`` say the claim covers them. A row is the
last dimension of the pointer's shape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ledger.core.errors import BadInput, ContractError
from verify.compare import cast_to, np_dtype, values_of
from verify.expr import eval_expr, parse_expr
from verify.model import FLOAT_DTYPES, Constant, FalsificationTest, InputDomain, Param

# The verifier's own layouts of the input values, run in every test besides the random draws.
PATTERNS = ("repeated", "negative", "positive", "extreme", "zeros", "bounds", "subnormal")
PATTERN_TEXT = {
    "repeated": "one repeated value per input",
    "negative": "all-negative rows",
    "positive": "all-positive rows",
    "extreme": "one extreme per row",
    "zeros": "zeros and negative zeros",
    "bounds": "the range's bounds only",
    "subnormal": "subnormal values",
    "nan": "a NaN in every row",
    "inf": "+Inf and -Inf in every row",
    "null": "nullable pointers null",
}
PRECONDITION_ROUNDS = 64
MAX_PRECONDITION_ELEMENTS = 1 << 24
_PRECONDITION = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)\[i\]\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$", re.S)
_ELEMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\[i\]$")
_CMP = {
    "<=": np.less_equal, "<": np.less, ">=": np.greater_equal, ">": np.greater,
    "==": np.equal, "!=": np.not_equal,
}


# --- preconditions -------------------------------------------------------------------------


def parse_precondition(text: str) -> tuple[str, str, str, bool]:
    """``"targets[i] < V"`` -> (array, op, right side, right side is ``B[i]``); else
    ``ContractError``. The right side is a size expression or another array's ``B[i]``."""
    m = _PRECONDITION.match(text)
    if m is None or len(text) > 256:
        raise ContractError(f"precondition {text[:80]!r}: expected 'A[i] OP expr' or "
                            "'A[i] OP B[i]' with OP one of <= < >= > == !=")
    array, op, rhs = m.group(1), m.group(2), m.group(3)
    el = _ELEMENT.match(rhs)
    if el is not None:
        return array, op, el.group(1), True
    parse_expr(rhs)
    return array, op, rhs, False


def _narrow(lo: float, hi: float, op: str, bound: int, integer: bool) -> tuple[float, float]:
    step = 1 if integer else 0
    if op in ("<", "<="):
        top: float = bound - step if op == "<" else bound
        if op == "<" and not integer:
            top = float(np.nextafter(float(bound), -math.inf))
        hi = min(hi, top)
    elif op in (">", ">="):
        bot: float = bound + step if op == ">" else bound
        if op == ">" and not integer:
            bot = float(np.nextafter(float(bound), math.inf))
        lo = max(lo, bot)
    elif op == "==":
        lo = hi = float(bound)
    return lo, hi


def input_range(p: Param, test: FalsificationTest, sizes: Mapping[str, int],
                preconditions: Sequence[str] = ()) -> tuple[float, float]:
    """The range ``p``'s values are drawn from: its own, else the test's; narrowed by every
    precondition ``p[i] OP expr``. ``BadInput`` when nothing is left."""
    d = p.domain
    lo, hi = (d.low, d.high) if d is not None and d.low is not None else (None, None)
    low = test.input_low if lo is None else lo
    high = test.input_high if hi is None else hi
    integer = p.dtype not in FLOAT_DTYPES
    for text in preconditions:
        array, op, rhs, elementwise = parse_precondition(text)
        if array != p.name or elementwise:
            continue
        low, high = _narrow(low, high, op, eval_expr(rhs, sizes), integer)
    if low > high or (integer and math.floor(high) < math.ceil(low)):
        raise BadInput(f"param {p.name}: no value meets its range and preconditions "
                       f"({low} .. {high})")
    return low, high


def check_preconditions(preconditions: Sequence[str], values: Mapping[str, np.ndarray[Any, Any]],
                        dtypes: Mapping[str, str], sizes: Mapping[str, int],
                        rng: np.random.Generator,
                        redraw: Mapping[str, tuple[float, float]]) -> None:
    """Repair ``A[i] OP B[i]`` by redrawing both where it fails, then check every precondition
    over the drawn values (in place); ``BadInput`` naming the first one that does not hold."""
    for text in preconditions:
        array, op, rhs, elementwise = parse_precondition(text)
        if array not in values:
            continue  # a null pointer, or an output
        a = values[array]
        if a.size > MAX_PRECONDITION_ELEMENTS:
            raise BadInput(f"precondition {text!r}: {a.size} elements is over the "
                           f"{MAX_PRECONDITION_ELEMENTS} the verifier checks")
        dt = dtypes[array]
        for _ in range(PRECONDITION_ROUNDS if elementwise else 1):
            bad = ~_holds(a, dt, op, rhs, elementwise, values, dtypes, sizes, text)
            if not bad.any():
                break
            for side in (array, rhs) if elementwise else ():  # both sides, where drawn
                if side in redraw:
                    lo, hi = redraw[side]
                    flat = values[side].reshape(-1)
                    flat[bad.reshape(-1)] = random_values(rng, dtypes[side], int(bad.sum()), lo,
                                                          hi)
        else:
            bad = ~_holds(a, dt, op, rhs, elementwise, values, dtypes, sizes, text)
        if bad.any():
            at = int(np.flatnonzero(bad.reshape(-1))[0])
            raise BadInput(f"precondition {text!r} does not hold at i = {at} after "
                           f"{PRECONDITION_ROUNDS} redraws: the inputs cannot meet it")


def _holds(a: np.ndarray[Any, Any], dt: str, op: str, rhs: str, elementwise: bool,
           values: Mapping[str, np.ndarray[Any, Any]], dtypes: Mapping[str, str],
           sizes: Mapping[str, int], text: str) -> np.ndarray[Any, Any]:
    left = values_of(dt, a).astype(np.float64).reshape(-1)
    if not elementwise:
        return np.asarray(_CMP[op](left, float(eval_expr(rhs, sizes))))
    if rhs not in values:
        raise BadInput(f"precondition {text!r}: {rhs!r} is not an input pointer")
    right = values_of(dtypes[rhs], values[rhs]).astype(np.float64).reshape(-1)
    if right.size != left.size:
        raise BadInput(f"precondition {text!r}: {rhs} has {right.size} elements, "
                       f"{a.size} in the left side")
    return np.asarray(_CMP[op](left, right))


# --- random draws ----------------------------------------------------------------------------


def random_values(
    rng: np.random.Generator, dtype: str, count: int, low: float, high: float,
    distribution: str = "uniform",
) -> np.ndarray[Any, Any]:
    """``count`` values in [low, high], cast to ``dtype`` (integers: inclusive range; bf16: real
    values rounded to the nearest bf16, as bit patterns, never arbitrary bits). ``normal``:
    centred on the range's middle with a sixth of its width as deviation, clipped to it."""
    if dtype == "bf16":
        return cast_to("bf16", random_values(rng, "f64", count, low, high, distribution))
    dt = np_dtype(dtype)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        lo = max(math.ceil(low), int(info.min))
        hi = min(math.floor(high), int(info.max))
        if hi < lo:
            hi = lo
        if distribution == "normal":
            mid, sd = (lo + hi) / 2, max((hi - lo) / 6, 0.5)
            return np.clip(np.rint(rng.normal(mid, sd, count)), lo, hi).astype(dt)
        return rng.integers(lo, hi, size=count, endpoint=True).astype(dt)
    with np.errstate(over="ignore"):  # a range beyond f16's gives infinities, as the cast says
        if distribution == "normal" and math.isfinite(high - low):
            mid, sd = low / 2 + high / 2, (high - low) / 6
            return np.clip(rng.normal(mid, sd, count), low, high).astype(dt)
        if math.isfinite(high - low):
            return rng.uniform(low, high, size=count).astype(dt)
        # a range wider than the largest double (-1e308 .. 1e308): numpy's uniform refuses it;
        # the same draws (``uniform`` is ``low + (high - low) * random()``) without the overflow
        u = rng.random(count)
        return (low * (1.0 - u) + high * u).astype(dt)


def index_values(rng: np.random.Generator, dtype: str, count: int, d: InputDomain,
                 sizes: Mapping[str, int], name: str) -> np.ndarray[Any, Any]:
    """An index array: ``count`` integers in [0, V), sorted / unique / a permutation."""
    v = eval_expr(d.index_of, sizes)
    if v < 1 and count:
        raise BadInput(f"param {name}: index_of {d.index_of} = {v} leaves no index")
    if d.permutation and count != v:
        raise BadInput(f"param {name}: a permutation of {v} indices needs {v} elements, "
                       f"not {count}")
    if (d.unique or d.permutation) and count > v:
        raise BadInput(f"param {name}: {count} unique indices from {v} values cannot be drawn")
    if d.permutation:
        vals = rng.permutation(v)
    elif d.unique:
        vals = rng.choice(v, size=count, replace=False) if count else np.zeros(0, np.int64)
    else:
        vals = rng.integers(0, max(v, 1), size=count)
    if d.sorted:
        vals = np.sort(vals)
    return _fit(vals, dtype, name)


def offsets_values(rng: np.random.Generator, dtype: str, count: int, d: InputDomain,
                   sizes: Mapping[str, int], name: str) -> np.ndarray[Any, Any]:
    """CSR offsets: ``count`` non-decreasing integers, first 0, last ``total`` (empty rows and
    one crowded row included)."""
    total = eval_expr(d.total, sizes)
    if total < 0:
        raise BadInput(f"param {name}: total {d.total} = {total} is negative")
    if count == 0:
        return np.zeros(0, np_dtype(dtype))
    if count == 1:
        if total:
            raise BadInput(f"param {name}: one offset cannot go from 0 to {total}")
        return _fit(np.zeros(1, np.int64), dtype, name)
    inner = np.sort(rng.integers(0, total, size=count - 2, endpoint=True))
    return _fit(np.concatenate([[0], inner, [total]]), dtype, name)


def _fit(vals: np.ndarray[Any, Any], dtype: str, name: str) -> np.ndarray[Any, Any]:
    dt = np_dtype(dtype)
    if vals.size and int(vals.max()) > int(np.iinfo(dt).max):
        raise BadInput(f"param {name}: index {int(vals.max())} does not fit {dtype}")
    return vals.astype(dt)


def structured(p: Param) -> bool:
    """Whether ``p``'s values are structural (indices, offsets): kept by every pattern."""
    return p.domain is not None and bool(p.domain.index_of or p.domain.offsets_of)


def draw_pointer(p: Param, count: int, sizes: Mapping[str, int], rng: np.random.Generator,
                 lo_hi: tuple[float, float]) -> np.ndarray[Any, Any]:
    """The random draw of one in/inout pointer inside its domain."""
    d = p.domain
    if d is not None and d.index_of:
        return index_values(rng, p.dtype, count, d, sizes, p.name)
    if d is not None and d.offsets_of:
        return offsets_values(rng, p.dtype, count, d, sizes, p.name)
    dist = d.distribution if d is not None else "uniform"
    return random_values(rng, p.dtype, count, lo_hi[0], lo_hi[1], dist)


# --- the verifier's own values ---------------------------------------------------------------


def edge_values(dtype: str, low: float, high: float) -> np.ndarray[Any, Any]:
    """The edges of the input range [low, high] in ``dtype``: ``high``, 0 (and -0.0 for floats)
    when the range holds it, ``low``; finite values only, each once, in that order.

    A uniform draw never gives ``high`` (numpy's interval is half-open) and almost never exactly
    0 or ``low``, yet the contract claims the whole closed range: a float histogram whose top
    value falls into bin ``nbins``, a ``x / |x|`` that is NaN at 0, or an integer ``abs`` of the
    minimum passes every random draw and fails there."""
    if dtype == "bf16":
        vals16 = edge_values("f32", low, high)
        bits = cast_to("bf16", vals16)
        fin = np.isfinite(values_of("bf16", bits))
        return np.array(list(dict.fromkeys(bits[fin].tolist())), dtype=np.uint16)
    dt = np_dtype(dtype)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        lo = max(math.ceil(low), int(info.min))
        hi = max(min(math.floor(high), int(info.max)), lo)
        ints = [hi, *([0] if lo < 0 < hi else []), lo]
        return np.array(list(dict.fromkeys(ints)), dtype=dt)
    zeros = [0.0, -0.0] if low <= 0.0 <= high else []
    with np.errstate(over="ignore"):
        vals = np.array([high, *zeros, low], dtype=np.float64).astype(dt)
    keep: list[int] = []
    for i, v in enumerate(vals):  # dedupe on the bits (+0 and -0 are different inputs)
        if np.isfinite(v) and all(vals[j].tobytes() != v.tobytes() for j in keep):
            keep.append(i)
    return vals[keep]


def plant_edges(data: np.ndarray[Any, Any], dtype: str, low: float, high: float) -> None:
    """Overwrite a few elements of ``data``, spread from its first to its last, with
    ``edge_values`` (the first ones when ``data`` has fewer elements than there are edges)."""
    vals = edge_values(dtype, low, high)
    k = min(vals.size, data.size)
    if k == 0:
        return
    pos = np.unique(np.linspace(0, data.size - 1, k).round().astype(np.int64))
    data[pos] = vals[: pos.size]


def apply_pattern(data: np.ndarray[Any, Any], pattern: str, low: float, high: float,
                  dtype: str = "", row: int = 0, rng: np.random.Generator | None = None) -> None:
    """Lay out a random draw of ``dtype`` as ``pattern`` says, in place, inside [low, high];
    ``row`` is the row length (the shape's last extent; 0: the whole buffer is one row). A
    pattern the range cannot hold (all-negative rows in 0 .. 1, subnormals of an integer type)
    leaves the draw as it is.

    ``repeated`` fills it with its first value (a float cut to 3 significant bits towards zero,
    when that stays in [low, high]): uniform random inputs are (almost) never equal, yet the
    contract claims every input of the range: a histogram whose packed per-block counters
    overflow when a whole block hits one bin, an argmax that breaks ties the wrong way, a ``<``
    where ``<=`` is meant pass every random draw and fail here. The short float keeps sums of up
    to 2^20 copies exact, so the pattern tests equality, not a rounding claim."""
    if pattern not in PATTERN_TEXT or pattern == "null":
        raise ValueError(f"unknown input pattern {pattern!r}")
    if data.size == 0:
        return
    if pattern == "repeated":
        _repeated(data, low, high)
        return
    dtype = dtype or _dtype_name(data)
    rng = rng if rng is not None else np.random.default_rng(0)
    flat = data.reshape(-1)
    row = row if 0 < row <= flat.size else flat.size
    vals = _pattern_values(pattern, dtype, flat.size, row, low, high, rng)
    if vals is not None:
        flat[...] = cast_to(dtype, vals) if dtype == "bf16" else vals.astype(flat.dtype)


def _dtype_name(data: np.ndarray[Any, Any]) -> str:
    names = {"float16": "f16", "float32": "f32", "float64": "f64", "int32": "s32",
             "uint32": "u32", "int64": "s64", "uint64": "u64", "uint8": "u8", "int8": "s8",
             "uint16": "bf16"}
    return names[data.dtype.name]


def _repeated(data: np.ndarray[Any, Any], low: float, high: float) -> None:
    v = data.reshape(-1)[0]
    if np.issubdtype(data.dtype, np.floating) and np.isfinite(v):
        m, e = np.frexp(np.float64(v))
        short = np.ldexp(np.trunc(m * 8) / 8, e)
        if low <= short <= high:
            v = data.dtype.type(short)
    data[...] = v


def _pattern_values(pattern: str, dtype: str, n: int, row: int, low: float, high: float,
                    rng: np.random.Generator) -> np.ndarray[Any, Any] | None:
    """The float64 values of ``pattern`` (None: the range cannot hold it)."""
    is_float = dtype in FLOAT_DTYPES
    draw = "f64" if is_float else dtype
    if not is_float:
        info = np.iinfo(np_dtype(dtype))
        low, high = max(math.ceil(low), int(info.min)), min(math.floor(high), int(info.max))
    if pattern in ("negative", "positive"):
        if pattern == "negative":
            lo, hi = low, min(high, 0.0 if is_float else -1.0)
        else:
            lo, hi = max(low, 0.0 if is_float else 1.0), high
        if lo > hi or (is_float and lo == hi == 0.0):
            return None
        v = random_values(rng, draw, n, lo, hi).astype(np.float64)
        v[v == 0.0] = lo if pattern == "negative" else hi  # strictly of one sign
        return v
    starts = np.arange(0, n, row)
    shift = int(rng.integers(0, row))  # another column in each buffer of the launch
    pos = starts + (np.arange(starts.size) * 7 + shift) % np.minimum(row, n - starts)
    alternate = np.arange(starts.size) % 2 == 0
    if pattern == "extreme":
        v = random_values(rng, draw, n, low, high).astype(np.float64)
        v[pos] = np.where(alternate, high, low)
        return v
    if pattern == "zeros":
        if not low <= 0.0 <= high:
            return None
        v = np.zeros(n)
        if is_float:
            v[1::2] = -0.0
        return v
    if pattern == "bounds":
        return np.where(rng.random(n) < 0.5, low, high)
    if pattern == "subnormal":
        return _subnormals(dtype, n, low, high, rng)
    if pattern in ("nan", "inf") and is_float:
        v = random_values(rng, "f64", n, low, high)
        v[pos] = np.nan if pattern == "nan" else np.where(alternate, math.inf, -math.inf)
        return v
    return None


_SUBNORMAL_MIN = {"f16": 2.0**-24, "bf16": 2.0**-133, "f32": 2.0**-149, "f64": 2.0**-1074}
_NORMAL_MIN = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126, "f64": 2.0**-1022}


def _subnormals(dtype: str, n: int, low: float, high: float,
                rng: np.random.Generator) -> np.ndarray[Any, Any] | None:
    if dtype not in _SUBNORMAL_MIN or not low <= 0.0 <= high:
        return None
    steps = int(_NORMAL_MIN[dtype] / _SUBNORMAL_MIN[dtype])
    k = rng.integers(1, min(steps, 1 << 30), size=n).astype(np.float64)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if low == 0.0:
        sign[:] = 1.0
    if high == 0.0:
        sign[:] = -1.0
    v = sign * k * _SUBNORMAL_MIN[dtype]
    return v


def patterns_for(test: FalsificationTest, nullable: bool) -> tuple[str, ...]:
    """Every pattern a test runs: ``PATTERNS``, its ``specials``, and ``null`` when a pointer is
    nullable."""
    return PATTERNS + tuple(test.specials) + (("null",) if nullable else ())


# --- __constant__ --------------------------------------------------------------------------


def constant_bytes(constants: Sequence[Constant], rng: np.random.Generator) -> dict[str, bytes]:
    """The contents of each ``kernel.constants`` entry, as the bytes of its dtype."""
    out: dict[str, bytes] = {}
    for c in constants:
        vals = np.array(c.values, dtype=np.float64) if c.values else random_values(
            rng, "f64" if c.dtype in FLOAT_DTYPES else c.dtype, c.count, c.low, c.high)
        out[c.name] = np.ascontiguousarray(cast_to(c.dtype, vals)).tobytes()
    return out


# --- comparison of NaN -----------------------------------------------------------------------


def nan_rule(got: np.ndarray[Any, Any], want: Any, dtype: str, rule: str) -> np.ndarray[Any, Any]:
    """The kernel's output as the test's ``nan`` rule compares it: ``equal`` (NaN matches only
    NaN, both ways: ``compare_output`` as it is); ``any``: where the reference is NaN, any value
    of the kernel is accepted (the reference's NaN is copied into a copy of the output)."""
    if rule != "any" or dtype not in FLOAT_DTYPES:
        return got
    w = np.asarray(want, dtype=np.float64).reshape(-1)
    if w.size != got.size:
        return got
    at = np.isnan(w)
    if not at.any():
        return got
    out = got.copy()
    out[at] = cast_to(dtype, np.full(int(at.sum()), np.nan)).astype(out.dtype)
    return out
