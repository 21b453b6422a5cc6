"""Fourth red-team of kernels users bring (docs/falsification.md, "Fourth round"): bugs that show
only for some input VALUES (integer extremes, -0.0, overflow to infinity, subnormals, the upper
range of an approximate intrinsic, many equal inputs) and only for some LAUNCH SHAPES (a second
row of blocks, a block size that is not a multiple of the warp). Each kernel has a contract
that honestly states the intended function, is built with a real nvcc and checked with the real
CLI (skipped without nvcc); every buggy kernel must fail its ``falsify.*`` check with the
finding or value that names the bug, every correct twin must pass.

Four slipped through before this round's fixes (``EXPECT``'s last field is False for them):
``__fdividef`` returns 0 for a divisor above 2^126 on a device while the interpreter divided
exactly (``fdividef``: ``div.approx.f32`` is now modelled as ``a * (1 / b)`` with the
reciprocal flushed); and three kernels wrong only when many inputs are EQUAL, which uniform
random inputs never give: a histogram with 8-bit packed bins that overflow when a whole block
hits one bin (``hist_packed8``), an argmax that breaks ties towards the last index
(``argmax_ties``), and an is-sorted check with a strict ``<`` (``sorted_strict``). The
verifier now runs one chosen size again with every input buffer holding one repeated value
(``verify.falsify.apply_pattern``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import byo
from verify.tools import find_tool

needs_nvcc = pytest.mark.skipif(
    find_tool("nvcc", cuda=True) is None, reason="no nvcc: ledger new cannot build the PTX"
)


_fut, _run = byo.fut_identity, byo.run_case
_p, _s, _launch = byo.ptr, byo.scalar, byo.launch


INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def _map1(src: str, ins: list[str], out_dtype: str, in_dtype: str, test: dict[str, Any],
          ref: str) -> dict[str, Any]:
    """An elementwise kernel over n elements, 128-thread blocks."""
    return {
        "src": src,
        "kernel": {
            "params": [*(_p(a, in_dtype, "in", ["n"]) for a in ins),
                       _p("y", out_dtype, "out", ["n"]), _s("n")],
            "launch": _launch(["ceil_div(n, 128)", 1, 1], [128, 1, 1]),
            "size_domain": {"n": {"min": 1, "max": 4096}},
        },
        "test": test,
        "ref": ref,
    }


# ---------------------------------------------------------------- integer extremes

# 1. A saturating |x| (INT_MIN gives INT_MAX) written as abs(x): abs(INT_MIN) is INT_MIN.
SAT_ABS = r"""
__global__ void sat_abs(const int* __restrict__ x, int* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = abs(x[i]);
#else
        y[i] = x[i] == (-2147483647 - 1) ? 2147483647 : abs(x[i]);
#endif
    }
}
"""
CASE_SAT_ABS = _map1(
    SAT_ABS, ["x"], "s32", "s32",
    {"sizes": [{"n": 1000}], "inputs": {"low": INT_MIN, "high": INT_MAX}, "tolerance": {"abs": 0}},
    "def FN(inputs, sizes):\n    return {'y': np.minimum(np.abs(inputs['x'].astype(np.int64)), "
    "2147483647)}\n",
)

# 2. The midpoint floor((a + b) / 2) as (a + b) >> 1: right (the shift floors) unless a + b
#    overflows int32.
MIDPOINT = r"""
__global__ void midpoint(const int* __restrict__ a, const int* __restrict__ b,
                         int* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = (a[i] + b[i]) >> 1;
#else
        y[i] = (a[i] >> 1) + (b[i] >> 1) + (a[i] & b[i] & 1);
#endif
    }
}
"""
CASE_MIDPOINT = _map1(
    MIDPOINT, ["a", "b"], "s32", "s32",
    {"sizes": [{"n": 1000}], "inputs": {"low": 0, "high": INT_MAX}, "tolerance": {"abs": 0}},
    "def FN(inputs, sizes):\n    return {'y': (inputs['a'].astype(np.int64) + inputs['b']) // 2}\n",
)

# 3. Floor division by 8 written as x / 8 (C truncates toward zero): wrong only for negative x
#    that are not multiples of 8.
FLOORDIV = r"""
__global__ void floor8(const int* __restrict__ x, int* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = x[i] / 8;
#else
        y[i] = x[i] >> 3;
#endif
    }
}
"""
CASE_FLOORDIV = _map1(
    FLOORDIV, ["x"], "s32", "s32",
    {"sizes": [{"n": 1000}], "inputs": {"low": -1000, "high": 1000}, "tolerance": {"abs": 0}},
    "def FN(inputs, sizes):\n    return {'y': inputs['x'].astype(np.int64) // 8}\n",
)

# ---------------------------------------------------------------- float special values

# 4. The sign of x with signed zeros (copysign(1, x)) written as x < 0 ? -1 : 1: wrong only at
#    -0.0, which the range [-1, 1] holds.
SIGN0 = r"""
__global__ void sign1(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = x[i] < 0.0f ? -1.0f : 1.0f;
#else
        y[i] = copysignf(1.0f, x[i]);
#endif
    }
}
"""
CASE_SIGN0 = _map1(
    SIGN0, ["x"], "f32", "f32",
    {"sizes": [{"n": 1000}], "tolerance": {"ulp": 0}},
    "def FN(inputs, sizes):\n    return {'y': np.copysign(1.0, inputs['x'].astype(np.float64))}\n",
)

# 5. hypot as sqrtf(a*a + b*b): the squares overflow to infinity for |a| above 1.8e19, which the
#    claimed range reaches.
HYPOT = r"""
__global__ void hyp(const float* __restrict__ a, const float* __restrict__ b,
                    float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = sqrtf(a[i] * a[i] + b[i] * b[i]);
#else
        y[i] = hypotf(a[i], b[i]);
#endif
    }
}
"""
CASE_HYPOT = _map1(
    HYPOT, ["a", "b"], "f32", "f32",
    {"sizes": [{"n": 500}], "inputs": {"low": -1.0e30, "high": 1.0e30},
     "tolerance": {"rel": 1.0e-6}},
    "def FN(inputs, sizes):\n    return {'y': np.hypot(inputs['a'].astype(np.float64), "
    "inputs['b'].astype(np.float64))}\n",
)

# 6. __fdividef: "for 2^126 < |y| < 2^128, __fdividef(x, y) delivers a result of zero" (CUDA C
#    Programming Guide); the claimed range of divisors reaches 3e38.
FDIV = r"""
__global__ void ratio(const float* __restrict__ a, const float* __restrict__ b,
                      float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = __fdividef(a[i], b[i]);
#else
        y[i] = a[i] / b[i];
#endif
    }
}
"""
CASE_FDIV = _map1(
    FDIV, ["a", "b"], "f32", "f32",
    {"sizes": [{"n": 500}], "inputs": {"low": 1.0e37, "high": 3.0e38},
     "tolerance": {"rel": 1.0e-6}},
    "def FN(inputs, sizes):\n    return {'y': inputs['a'].astype(np.float64) / "
    "inputs['b'].astype(np.float64)}\n",
)

# 7. floor(log2(x)) for positive x read from the float's exponent bits: right for every normal
#    float, -127 for every subnormal one, which the claimed range [1e-40, 1e-37] mostly holds.
ILOGB = r"""
__global__ void ilog2f(const float* __restrict__ x, int* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = ((__float_as_int(x[i]) >> 23) & 255) - 127;
#else
        y[i] = ilogbf(x[i]);
#endif
    }
}
"""
CASE_ILOGB = _map1(
    ILOGB, ["x"], "s32", "f32",
    {"sizes": [{"n": 500}], "inputs": {"low": 1.0e-40, "high": 1.0e-37},
     "tolerance": {"abs": 0}},
    "def FN(inputs, sizes):\n    return {'y': np.frexp(inputs['x'].astype(np.float64))[1] - 1}\n",
)

# 8. __expf: exp2 of x * log2(e) rounded to float first, an error of about |x| * 6e-8 relative,
#    beyond the claimed rel 1e-6 for |x| above about 17.
EXPF = r"""
__global__ void exps(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
#ifdef BUG
        y[i] = __expf(x[i]);
#else
        y[i] = expf(x[i]);
#endif
    }
}
"""
CASE_EXPF = _map1(
    EXPF, ["x"], "f32", "f32",
    {"sizes": [{"n": 500}], "inputs": {"low": -80.0, "high": 80.0},
     "tolerance": {"rel": 1.0e-6}},
    "def FN(inputs, sizes):\n    return {'y': np.exp(inputs['x'].astype(np.float64))}\n",
)

# ---------------------------------------------------------------- many equal inputs

# 9. A histogram of 16 bins whose per-block counts are packed four to a word, 8 bits each: a
#    bin that 256 inputs of one block hit wraps to 0 and carries into the next bin. Random
#    inputs spread over the bins never come near; many equal inputs (one hot bin) do.
HIST8 = r"""
__global__ void hist16p(const int* __restrict__ x, int* hist, int n) {
#ifdef BUG
    __shared__ unsigned int h[4];
    if (threadIdx.x < 4) h[threadIdx.x] = 0;
#else
    __shared__ unsigned int h[8];
    if (threadIdx.x < 8) h[threadIdx.x] = 0;
#endif
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int b = x[i] & 15;
#ifdef BUG
        atomicAdd(&h[b >> 2], 1u << (8 * (b & 3)));
#else
        atomicAdd(&h[b >> 1], 1u << (16 * (b & 1)));
#endif
    }
    __syncthreads();
    if (threadIdx.x < 16) {
#ifdef BUG
        int c = (h[threadIdx.x >> 2] >> (8 * (threadIdx.x & 3))) & 255;
#else
        int c = (h[threadIdx.x >> 1] >> (16 * (threadIdx.x & 1))) & 65535;
#endif
        atomicAdd(&hist[threadIdx.x], c);
    }
}
"""
CASE_HIST8 = {
    "src": HIST8,
    "kernel": {
        "params": [_p("x", "s32", "in", ["n"]), _p("hist", "s32", "inout", [16]), _s("n")],
        "launch": _launch(["ceil_div(n, 256)", 1, 1], [256, 1, 1]),
        "size_domain": {"n": {"min": 1, "max": 4096}},
    },
    "test": {"sizes": [{"n": 1000}], "inputs": {"low": 0, "high": 1000},
             "tolerance": {"abs": 0}},
    "ref": """def FN(inputs, sizes):
    b = inputs['x'].astype(np.int64) & 15
    return {'hist': inputs['hist'].astype(np.int64) + np.bincount(b, minlength=16)}
""",
}

# 10. The index of the first maximum (np.argmax) by one block, whose tree step breaks ties
#     towards the larger index: random floats never tie at the maximum.
ARGMAX = r"""
__global__ void argmax1(const float* __restrict__ x, int* out, int n) {
    __shared__ float sv[256];
    __shared__ int si[256];
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += 256) {
        float v = x[i];
        if (v > bv) { bv = v; bi = i; }
    }
    sv[threadIdx.x] = bv;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            float v = sv[threadIdx.x + k];
            int j = si[threadIdx.x + k];
#ifdef BUG
            if (v > sv[threadIdx.x] || (v == sv[threadIdx.x] && j > si[threadIdx.x])) {
#else
            if (v > sv[threadIdx.x] || (v == sv[threadIdx.x] && j < si[threadIdx.x])) {
#endif
                sv[threadIdx.x] = v;
                si[threadIdx.x] = j;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = si[0];
}
"""
CASE_ARGMAX = {
    "src": ARGMAX,
    "kernel": {
        "params": [_p("x", "f32", "in", ["n"]), _p("out", "s32", "out", [1]), _s("n")],
        "launch": _launch([1, 1, 1], [256, 1, 1]),
        "size_domain": {"n": {"min": 1, "max": 4096}},
    },
    "test": {"sizes": [{"n": 1000}], "tolerance": {"abs": 0}},
    "ref": "def FN(inputs, sizes):\n    return {'out': np.array([int(np.argmax(inputs['x']))], "
           "np.int64)}\n",
}

# 11. "Is x non-decreasing?" with a strict < between neighbours: the same answer as <= unless two
#     neighbours are equal, and random floats are never equal.
SORTED = r"""
__global__ void sorted1(const float* __restrict__ x, int* flag, int n) {
    __shared__ int all;
    if (threadIdx.x == 0) all = 1;
    __syncthreads();
    int ok = 1;
    for (int i = threadIdx.x; i + 1 < n; i += blockDim.x) {
#ifdef BUG
        ok &= x[i] < x[i + 1];
#else
        ok &= x[i] <= x[i + 1];
#endif
    }
    atomicAnd(&all, ok);
    __syncthreads();
    if (threadIdx.x == 0) flag[0] = all;
}
"""
CASE_SORTED = {
    "src": SORTED,
    "kernel": {
        "params": [_p("x", "f32", "in", ["n"]), _p("flag", "s32", "out", [1]), _s("n")],
        "launch": _launch([1, 1, 1], [128, 1, 1]),
        "size_domain": {"n": {"min": 1, "max": 4096}},
    },
    "test": {"sizes": [{"n": 1000}], "tolerance": {"abs": 0}},
    "ref": "def FN(inputs, sizes):\n    x = inputs['x']\n"
           "    return {'flag': np.array([int(bool(np.all(x[:-1] <= x[1:])))], np.int64)}\n",
}

# ---------------------------------------------------------------- launch shapes

# 12. A 2-D map over 32 x 8 blocks whose row index uses blockDim.x for blockDim.y: right while
#     the grid has one row of blocks (rows <= 8).
ROWS2D = r"""
__global__ void scale2d(const float* __restrict__ a, float* __restrict__ b, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef BUG
    int r = blockIdx.y * blockDim.x + threadIdx.y;
#else
    int r = blockIdx.y * blockDim.y + threadIdx.y;
#endif
    if (r < rows && c < cols) b[r * cols + c] = 3.0f * a[r * cols + c];
}
"""
CASE_ROWS2D = {
    "src": ROWS2D,
    "kernel": {
        "params": [_p("a", "f32", "in", ["rows", "cols"]), _p("b", "f32", "out", ["rows", "cols"]),
                   _s("rows"), _s("cols")],
        "launch": _launch(["ceil_div(cols, 32)", "ceil_div(rows, 8)", 1], [32, 8, 1]),
        "size_domain": {"rows": {"min": 1, "max": 256}, "cols": {"min": 1, "max": 256}},
    },
    "test": {"sizes": [{"rows": 8, "cols": 64}], "tolerance": {"ulp": 0}},
    "ref": "def FN(inputs, sizes):\n    return {'b': 3.0 * inputs['a'].astype(np.float64)}\n",
}

# 13. Block sums by warp shuffles with the full mask, while the contract lets the block size `bs`
#     be any value in [1, 256]: the last warp of a block of, say, 100 threads is partial.
WARP_BS = r"""
__global__ void bsum_w(const float* __restrict__ x, float* __restrict__ y, int n, int bs) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef BUG
    __shared__ float w[32];
    float v = i < n ? x[i] : 0.0f;
    for (int k = 16; k > 0; k >>= 1) v += __shfl_down_sync(0xffffffffu, v, k);
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int j = 0; j < (blockDim.x + 31) / 32; ++j) t += w[j];
        y[blockIdx.x] = t;
    }
#else
    __shared__ float s[256];
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int j = 0; j < blockDim.x; ++j) t += s[j];
        y[blockIdx.x] = t;
    }
#endif
}
"""
CASE_WARP_BS = {
    "src": WARP_BS,
    "kernel": {
        "params": [_p("x", "f32", "in", ["n"]), _p("y", "f32", "out", ["ceil_div(n, bs)"]),
                   _s("n"), _s("bs")],
        "launch": _launch(["ceil_div(n, bs)", 1, 1], ["bs", 1, 1]),
        "size_domain": {"n": {"min": 1, "max": 2048}, "bs": {"min": 1, "max": 256}},
    },
    "test": {"sizes": [{"n": 1024, "bs": 128}], "tolerance": {"abs": 1e-4, "rel": 1e-5}},
    "ref": """def FN(inputs, sizes):
    x, bs = inputs['x'].astype(np.float64), int(sizes['bs'])
    return {'y': np.array([x[b * bs:(b + 1) * bs].sum() for b in range(-(-x.size // bs))])}
""",
}

CASES = {
    "sat_abs": CASE_SAT_ABS,
    "midpoint": CASE_MIDPOINT,
    "floordiv": CASE_FLOORDIV,
    "sign0": CASE_SIGN0,
    "hypot": CASE_HYPOT,
    "fdividef": CASE_FDIV,
    "ilogb_subnormal": CASE_ILOGB,
    "expf_fast": CASE_EXPF,
    "hist_packed8": CASE_HIST8,
    "argmax_ties": CASE_ARGMAX,
    "sorted_strict": CASE_SORTED,
    "rows2d": CASE_ROWS2D,
    "warp_bs": CASE_WARP_BS,
}

# What each buggy case fails with: (finding kind or value phrase, a phrase of the detail,
# whether it was caught before the fourth round's fixes).
EXPECT: dict[str, tuple[str, str, bool]] = {
    "sat_abs": ("outside abs 0", "got np.int32(-2147483648), want np.int64(2147483647)", True),
    "midpoint": ("outside abs 0", "elements of y outside abs 0", True),
    "floordiv": ("outside abs 0", "got np.int32(-6), want np.int64(-7)", True),
    "sign0": ("outside 0 ulp", "got np.float32(1.0), want np.float64(-1.0)", True),
    "hypot": ("outside rel 1e-06", "got np.float32(inf)", True),
    "fdividef": ("outside rel 1e-06", "got np.float32(0.0)", False),
    "ilogb_subnormal": ("outside abs 0", "got np.int32(-127)", True),
    "expf_fast": ("outside rel 1e-06", "elements of y outside rel 1e-06", True),
    "hist_packed8": ("outside abs 0", "(chosen: n max; one repeated value per input)", False),
    "argmax_ties": ("outside abs 0", "; one repeated value per input); seed 1: out[0]", False),
    "sorted_strict": ("outside abs 0", "; one repeated value per input); seed 1: flag[0]", False),
    "rows2d": ("unwritten [coverage/PO1]", "rows=9,cols=1 (chosen: rows tile+1 (8))", True),
    "warp_bs": ("shuffle_undefined_lane [initialised/PO6]", "which has exited", True),
}


# ---------------------------------------------------------------- every case, real nvcc + CLI


@needs_nvcc
@pytest.mark.parametrize("name", sorted(CASES))
def test_bug_is_caught(tmp_path: Path, name: str) -> None:
    byo.assert_caught(tmp_path, name, CASES[name], *EXPECT[name][:2])


@needs_nvcc
@pytest.mark.parametrize("name", sorted(CASES))
def test_correct_twin_passes(tmp_path: Path, name: str) -> None:
    """No false positive: the kernel without its bug passes every size and input layout the
    verifier chose."""
    detail = byo.assert_twin_passes(tmp_path, name, CASES[name])
    assert "again with one repeated value per input;" in detail


# An is-sorted check through __syncthreads_and (bar.red.and.pred), which the interpreter does not
# model: skipped with the instruction named, never passed (docs/falsification.md, open).
SORTED_BAR_RED = r"""
__global__ void sorted1(const float* __restrict__ x, int* flag, int n) {
    int ok = 1;
    for (int i = threadIdx.x; i + 1 < n; i += blockDim.x) ok &= x[i] < x[i + 1];
    ok = __syncthreads_and(ok);
    if (threadIdx.x == 0) flag[0] = ok;
}
"""


@needs_nvcc
def test_block_vote_barrier_is_reported_not_passed(tmp_path: Path) -> None:
    f = _run(tmp_path, "sorted_bar_red", {**CASE_SORTED, "src": SORTED_BAR_RED}, bug=False)
    assert f["status"] == "skipped", f["detail"]
    assert "unsupported PTX instruction 'bar.red.and.pred'" in f["detail"]


# ---------------------------------------------------------------- the fixes, without nvcc


def test_value_patterns() -> None:
    """``repeated`` fills a buffer with one value of its draw (a float cut to 3 significant bits
    when that stays in the range); the plan runs the costliest affordable chosen size with it."""
    import numpy as np

    from verify import falsify

    x = np.array([0.7, -1.0, 2.0, 0.5], np.float32)
    falsify.apply_pattern(x, "repeated", -1.0, 1.0)
    assert x.tolist() == [0.625] * 4
    y = np.array([0.301, 0.2], np.float32)  # 0.25 is below the range: the value itself
    falsify.apply_pattern(y, "repeated", 0.3, 0.35)
    assert y.tolist() == [np.float32(0.301)] * 2
    z = np.array([-7, 3], np.int32)
    falsify.apply_pattern(z, "repeated", -10, 10)
    assert z.tolist() == [-7, -7]
    with pytest.raises(ValueError, match="unknown input pattern"):
        falsify.apply_pattern(x, "sorted", -1.0, 1.0)

    from verify.contract import load_contract

    root = Path(__file__).resolve().parents[2]
    c = load_contract((root / "bundles" / "vector_add" / "contract.yaml").read_bytes())
    assert c.kernel is not None
    plan, phrase = falsify.plan_bindings(c.kernel, c.falsification[0], 5, falsify.CPU_COST_CAP)
    (pat,) = [b for b in plan if b.pattern]
    assert pat.pattern == "repeated" and pat.chosen.endswith("; one repeated value per input")
    assert pat.sizes in [b.sizes for b in plan if b.chosen and not b.pattern]
    assert "again with one repeated value per input" in phrase


@pytest.mark.parametrize(("b", "want"), [
    (2.0, 0.5), (-4.0, -0.25), (2.0 ** 126, 2.0 ** -126), (2.0 ** 127, 0.0), (-3.0e38, -0.0),
    (float("inf"), 0.0),
])
def test_div_approx_flushes_the_reciprocal_above_2_126(b: float, want: float) -> None:
    """``div.approx.f32`` (``__fdividef``) is ``a * (1 / b)``: zero for 2^126 < |b|, as on a
    device; ``div.full`` and ``div.rn`` still divide exactly."""
    import numpy as np

    from verify.ptxsim import ops_float

    got = np.float32(ops_float._div_approx(np.float32(1.0), np.float32(b)))
    assert got == np.float32(want) and np.signbit(got) == np.signbit(np.float32(want))
    assert np.isnan(ops_float._div_approx(np.float32("inf"), np.float32(2.0 ** 127)))
