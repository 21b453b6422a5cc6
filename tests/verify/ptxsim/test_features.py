"""PTX features added in issue 10, on real nvcc output (tests/fixtures/ptxsim/features.cu):
exact fma.rn.f64, f64 conversions, bf16 arithmetic and conversions, mma.sync m16n8k16 with f16
and bf16 inputs, __constant__ and module-scope __device__ variables, non-inlined calls; what is
still not modelled keeps failing closed."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from verify.ptxsim import Buffer, Module, Scalar, UnsupportedPtx, launch, load_module
from verify.ptxsim.ops_bf16 import fma64, round_bf16

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim"


@pytest.fixture(scope="module")
def feat() -> Module:
    return load_module((FIX / "features.ptx").read_bytes())


def exact_fma(a: float, b: float, c: float) -> float:
    v = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(v)  # correctly rounded
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def test_fma64_is_correctly_rounded() -> None:
    rng = np.random.default_rng(11)
    n = 3000
    a = rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)
    b = rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)
    for c in (rng.standard_normal(n), -(a * b), -(a * b) * (1 + 2.0 ** -50)):
        got = fma64(a, b, c)
        want = np.array([exact_fma(x, y, z) for x, y, z in zip(a, b, c, strict=True)])
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    x = 1 + 2.0 ** -30  # x*x - 1 needs the low product bits that a*b+c in float64 loses
    assert fma64(x, x, -1.0) == exact_fma(x, x, -1.0) != x * x - 1.0
    big = np.array([1e308, 1e-310, 5e-324, 3.0])
    got = fma64(big, big[::-1], np.array([1e-300, -1.0, 0.0, -1e308]))
    want = [exact_fma(1e308, 3.0, 1e-300), exact_fma(1e-310, 5e-324, -1.0),
            exact_fma(5e-324, 1e-310, 0.0), exact_fma(3.0, 1e308, -1e308)]
    assert list(got) == want


def test_f64_kernels(feat: Module) -> None:
    rng = np.random.default_rng(3)
    n = 700
    x, y, out = rng.random(n), rng.standard_normal(n), np.zeros(n)
    r = launch(feat, "daxpy_fma", (3, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "in", "y"), Buffer(out, "out", "out"),
                Scalar(1.5, ".f64"), Scalar(n, ".s32")])
    assert r.findings == ()
    want = np.array([exact_fma(1.5, a, b) for a, b in zip(x, y, strict=True)]) / np.where(
        x < 0.5, 3.0, np.sqrt(x + 1.0))
    assert np.array_equal(out, want)
    xf = rng.standard_normal(n).astype(np.float32)
    d, k, back = np.zeros(n), np.zeros(n, np.int32), np.zeros(n, np.float32)
    r = launch(feat, "f64_convert", (3, 1, 1), (256, 1, 1),
               [Buffer(xf, "in", "x"), Buffer(d, "out", "d"), Buffer(k, "out", "k"),
                Buffer(back, "out", "back"), Scalar(n, ".s32")])
    assert r.findings == ()
    v = xf.astype(np.float64) * 1.000000001
    assert np.array_equal(d, v) and np.array_equal(k, np.rint(v * 7.0).astype(np.int32))
    assert np.array_equal(back, (v - 0.25).astype(np.float32))


def bf16_of(x: np.ndarray) -> np.ndarray:
    """Reference float32 -> bf16 round to nearest even on the bits (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(
        np.uint16)


def widen(h: np.ndarray) -> np.ndarray:
    return (h.astype(np.uint32) << np.uint32(16)).view(np.float32)


def test_bf16_rounding_matches_the_bit_recipe() -> None:
    rng = np.random.default_rng(5)
    f = (rng.standard_normal(50000) * 2.0 ** rng.integers(-140, 120, 50000)).astype(np.float32)
    f = f[np.isfinite(f)]
    assert np.array_equal(round_bf16(f.astype(np.float64)), bf16_of(f))
    assert round_bf16(np.array([np.nan]))[0] == 0x7FFF
    assert round_bf16(np.array([3.4e38]))[0] == 0x7F80  # past the largest bf16: infinity


def test_bf16_kernel(feat: Module) -> None:
    rng = np.random.default_rng(6)
    n = 500
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    h, out = np.zeros(n, np.uint16), np.zeros(n, np.float32)
    r = launch(feat, "bf16_ops", (2, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "in", "y"), Buffer(h, "out", "h"),
                Buffer(out, "out", "out"), Scalar(n, ".s32")])
    assert r.findings == ()
    a, b = widen(bf16_of(x)).astype(np.float64), widen(bf16_of(y)).astype(np.float64)
    # these sums and products are exact in float32 for inputs this close in magnitude
    s = bf16_of((a + b).astype(np.float32))
    p = bf16_of((a * b).astype(np.float32))
    exact = np.array([float(Fraction(u) * Fraction(v) + Fraction(float(w)))
                      for u, v, w in zip(a, b, widen(s), strict=True)])
    f = round_bf16(exact)
    assert np.array_equal(h, s)
    assert np.array_equal(out, widen(p) + widen(f))


def frag_layout() -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int, int]]]:
    """(lane, register, half, row, col) of the m16n8k16 A and B fragments, from the PTX ISA."""
    a, b = [], []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(8):
            row, col = g + 8 * ((i // 2) & 1), 2 * t + (i & 1) + 8 * (i // 4)
            a.append((lane * 4 + i // 2, i & 1, row, col))
        for i in range(4):
            b.append((lane * 2 + i // 2, i & 1, 2 * t + (i & 1) + 8 * (i // 2), g))
    return a, b


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_mma_m16n8k16(feat: Module, kind: str) -> None:
    rng = np.random.default_rng(7)
    A = rng.integers(-8, 8, (16, 16)).astype(np.float32) / 4
    B = rng.integers(-8, 8, (16, 8)).astype(np.float32) / 4
    enc = (lambda v: np.float16(v).view(np.uint16)) if kind == "f16" else (
        lambda v: bf16_of(np.array([v]))[0])
    ah, bh = np.zeros((128, 2), np.uint16), np.zeros((64, 2), np.uint16)
    la, lb = frag_layout()
    for reg, half, row, col in la:
        ah[reg, half] = enc(A[row, col])
    for reg, half, row, col in lb:
        bh[reg, half] = enc(B[row, col])
    d = np.zeros(128, np.float32)
    r = launch(feat, f"mma_k16_{kind}", (1, 1, 1), (32, 1, 1),
               [Buffer(ah.reshape(-1).view(np.uint32).copy(), "in", "a"),
                Buffer(bh.reshape(-1).view(np.uint32).copy(), "in", "b"), Buffer(d, "out", "d")])
    assert r.findings == ()
    D = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(4):
            assert d[lane * 4 + i] == D[g + 8 * (i // 2), 2 * t + (i & 1)]


def test_constant_and_module_variables(feat: Module) -> None:
    x = np.linspace(-2, 2, 300).astype(np.float32)
    y = np.zeros(300, np.float32)
    r = launch(feat, "poly_const", (2, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(300, ".s32")])
    assert r.findings == ()
    c = np.float32([0.5, -1.0, 2.0, 0.25])
    want = ((c[3] * x + c[2]) * x + c[1]) * x + c[0] + np.float32(0)  # shift_by: zero-initialised
    assert np.allclose(y, want, rtol=1e-6, atol=1e-6)
    out = np.zeros(256, np.float32)
    r = launch(feat, "via_global_var", (1, 1, 1), (256, 1, 1),
               [Buffer(x[:256].copy(), "in", "x"), Buffer(out, "out", "y"), Scalar(256, ".s32")])
    assert r.findings == ()
    assert np.array_equal(out, np.roll(x[:256] * 2, -1) + 7)  # launches_seen starts at 7
    # two blocks share the module variable 'scratch': a race across blocks
    r = launch(feat, "via_global_var", (2, 1, 1), (256, 1, 1),
               [Buffer(x[:256].copy(), "in", "x"), Buffer(np.zeros(256, np.float32), "out", "y"),
                Scalar(256, ".s32")])
    assert "global_race" in [f.kind for f in r.findings]
    assert "buffer 'scratch'" in next(f.message for f in r.findings if f.kind == "global_race")


def test_non_inlined_calls(feat: Module) -> None:
    x = np.linspace(-3, 3, 301).astype(np.float32)
    y = np.full(602, np.nan, np.float32)
    r = launch(feat, "calls", (2, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(301, ".s32")])
    assert r.findings == ()
    assert np.array_equal(y[0::2], np.clip(x, -1, 1))
    assert np.array_equal(y[1::2], np.clip(-x, 0, 0.5))


RECURSIVE = """.version 8.0
.target sm_86
.address_size 64
.func (.param .b32 func_retval0) f(.param .b32 f_param_0)
{
    .reg .b32 %r<3>;
    ld.param.u32 %r1, [f_param_0];
    { .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r2, [retval0+0];
    }
    st.param.b32 [func_retval0+0], %r2;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, 1;
    { .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r2, [retval0+0];
    }
    ret;
}
"""


def _chain(depth: int) -> str:
    """PTX whose entry calls f0, which calls f1, ... f{depth-1}: no recursion, only depth."""
    head = RECURSIVE[:RECURSIVE.index(".func")]
    call = ("    {{ .param .b32 param0;\n    st.param.b32 [param0+0], %r1;\n"
            "    .param .b32 retval0;\n    call.uni (retval0), {0}, (param0);\n"
            "    ld.param.b32 %r2, [retval0+0];\n    }}\n")
    funcs = []
    for i in reversed(range(depth)):
        body = call.format(f"f{i + 1}") if i + 1 < depth else "    add.u32 %r2, %r1, 1;\n"
        funcs.append(f".func (.param .b32 func_retval0) f{i}(.param .b32 f{i}_param_0)\n{{\n"
                     f"    .reg .b32 %r<3>;\n    ld.param.u32 %r1, [f{i}_param_0];\n{body}"
                     "    st.param.b32 [func_retval0+0], %r2;\n    ret;\n}\n")
    entry = (".visible .entry k(.param .u64 out)\n{\n    .reg .b32 %r<3>;\n"
             "    mov.u32 %r1, 1;\n" + call.format("f0") + "    ret;\n}\n")
    return head + "".join(funcs) + entry


def test_a_call_chain_past_the_inliner_depth_says_so_not_recursion() -> None:
    launch(load_module(_chain(8)), "k", (1, 1, 1), (32, 1, 1),
           [Buffer(np.zeros(1, np.uint32), "out", "out")])
    with pytest.raises(UnsupportedPtx, match="nested more than 16 calls deep") as e:
        launch(load_module(_chain(40)), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(np.zeros(1, np.uint32), "out", "out")])
    assert "recursive" not in str(e.value)


def test_what_is_not_modelled_fails_closed() -> None:
    with pytest.raises(UnsupportedPtx, match="recursive call to f"):
        launch(load_module(RECURSIVE), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(np.zeros(1, np.uint32), "out", "out")])
    ind = RECURSIVE.replace("call.uni (retval0), f, (param0);\n    ld.param.b32 %r2, [retval0+0];"
                            "\n    }\n    ret;\n}\n",
                            "call.uni (retval0), %rd1, (param0), proto;\n    }\n    ret;\n}\n")
    with pytest.raises(UnsupportedPtx):
        launch(load_module(ind), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(np.zeros(1, np.uint32), "out", "out")])
    clock = (RECURSIVE[:RECURSIVE.index(".func")] + ".visible .entry k(.param .u64 out)\n{\n"
             "    .reg .b32 %r<3>;\n    mov.u32 %r1, %smid;\n    ret;\n}\n")
    with pytest.raises(UnsupportedPtx, match="smid"):
        launch(load_module(clock), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(np.zeros(1, np.uint32), "out", "out")])
    tex = clock.replace("mov.u32 %r1, %smid;",
                        "tex.1d.v4.f32.s32 {%r1, %r1, %r1, %r1}, [t, {%r1}];")
    with pytest.raises(UnsupportedPtx, match="tex"):
        launch(load_module(tex), "k", (1, 1, 1), (32, 1, 1),
               [Buffer(np.zeros(1, np.uint32), "out", "out")])
