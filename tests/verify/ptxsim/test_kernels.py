"""PTX interpreter on real nvcc output (tests/fixtures/ptxsim): exact results of correct kernels,
and each planted bug caught by the right finding with a precise message (SPEC 8, issue 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verify.ptxsim import Buffer, Module, Scalar, SimResult, launch, load_module

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim"


def mod(name: str) -> Module:
    return load_module((FIX / f"{name}.ptx").read_bytes())


def kinds(r: SimResult) -> list[str]:
    return [f.kind for f in r.findings]


def vadd_args(n: int, c: np.ndarray, rng: np.random.Generator) -> tuple[
        np.ndarray, np.ndarray, list[Buffer | Scalar]]:
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return a, b, [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                  Scalar(n, ".s32")]


def test_vadd_exact() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    c = np.zeros(n, np.float32)
    a, b, args = vadd_args(n, c, rng)
    r = launch(mod("vadd"), "vadd", (4, 1, 1), (256, 1, 1), args)
    assert r.findings == ()
    assert np.array_equal(c, a + b)
    assert r.engine.startswith("ptxsim ")
    # 22 instructions, each run once by each of the 32 warps: the threads past n branch to `ret`
    # and wait there (min-PC) until the others arrive, so the warp reconverges for one `ret`
    assert r.warp_instructions == 32 * 22
    assert r.thread_instructions == 1024 * 11 + 1000 * 11


def test_vadd_off_by_one_bound_reads_and_writes_past_the_end() -> None:
    rng = np.random.default_rng(1)
    n = 1000
    c = np.zeros(n, np.float32)
    _, _, args = vadd_args(n, c, rng)
    r = launch(mod("vadd"), "vadd_obo", (4, 1, 1), (256, 1, 1), args)
    assert set(kinds(r)) == {"out_of_bounds"}
    store = next(f for f in r.findings if "store" in f.message)
    assert store.block == (3, 0, 0) and store.thread == (232, 0, 0)  # global index 1000
    assert "buffer 'c'" in store.message and "0 bytes past its end" in store.message
    assert store.line is not None and f"PTX line {store.line}" in store.message
    text = (FIX / "vadd.ptx").read_text().splitlines()[store.line - 1]
    assert text.strip().startswith("st.global.f32")


def test_vadd_shifted_index_out_of_bounds_and_unwritten() -> None:
    rng = np.random.default_rng(2)
    n = 1000
    c = np.zeros(n, np.float32)
    _, _, args = vadd_args(n, c, rng)
    r = launch(mod("vadd"), "vadd_shift", (4, 1, 1), (256, 1, 1), args)
    assert sorted(kinds(r)) == ["out_of_bounds", "unwritten"]
    unw = next(f for f in r.findings if f.kind == "unwritten")
    assert "1 of 1000 elements of output buffer 'c'" in unw.message
    assert "first: element 0" in unw.message


def test_two_threads_one_element_is_double_write() -> None:
    rng = np.random.default_rng(3)
    n = 256
    c = np.zeros(n, np.float32)
    _, _, args = vadd_args(n, c, rng)
    r = launch(mod("vadd"), "vadd_dup", (1, 1, 1), (256, 1, 1), args)
    assert sorted(kinds(r)) == ["double_write", "unwritten"]
    dw = next(f for f in r.findings if f.kind == "double_write")
    assert "element 0 of buffer 'c'" in dw.message
    assert "thread (0, 0, 0)" in dw.message and "thread (1, 0, 0)" in dw.message


def test_endless_loop_hits_step_limit() -> None:
    flag = np.zeros(2, np.int32)
    r = launch(mod("vadd"), "spin", (1, 1, 1), (64, 1, 1),
               [Buffer(flag, "inout", "flag"), Scalar(3, ".s32")], step_limit=5000)
    assert kinds(r) == ["step_limit"]
    assert "5000 warp-instructions" in r.findings[0].message
    assert r.warp_instructions >= 5000


def test_spin_that_ends_when_flag_is_set() -> None:
    flag = np.array([1, 0], np.int32)
    r = launch(mod("vadd"), "spin", (1, 1, 1), (32, 1, 1),
               [Buffer(flag, "inout", "flag"), Scalar(3, ".s32")])
    # every thread writes flag[1]: a double write into an inout buffer, reported
    assert kinds(r) == ["double_write"]


def test_f16_round_to_nearest_even_matches_numpy() -> None:
    rng = np.random.default_rng(4)
    h = rng.integers(0, 0x7C00, 3000, dtype=np.uint16).view(np.float16)  # finite halves
    h2 = np.nextafter(h, np.float16(np.inf))
    ties = ((h.astype(np.float32) + h2.astype(np.float32)) / 2).astype(np.float32)
    special = np.array([65504, 65519.996, 65520, 1e6, -1e6, 2.9802322e-08, 2.98e-8, 5.9604645e-08,
                        1e-8, 6.1e-5, 6.097555e-05, -0.0, 0.0, np.inf, -np.inf], np.float32)
    x = np.concatenate([ties, -ties, rng.standard_normal(3000).astype(np.float32) * 100,
                        rng.standard_normal(1000).astype(np.float32) * 1e-6, special])
    n = x.size
    y = np.zeros(n, np.float16)
    r = launch(mod("f16cvt"), "to_half", ((n + 255) // 256, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(n, ".s32")])
    assert r.findings == ()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(y.view(np.uint16), want.view(np.uint16))
    back = np.zeros(n, np.float32)
    r = launch(mod("f16cvt"), "from_half", ((n + 255) // 256, 1, 1), (256, 1, 1),
               [Buffer(y, "in", "x"), Buffer(back, "out", "y"), Scalar(n, ".s32")])
    assert r.findings == ()
    assert np.array_equal(back.view(np.uint32), y.astype(np.float32).view(np.uint32))


def test_nan_converts_to_a_half_nan() -> None:
    x = np.array([np.nan, -np.nan], np.float32)
    y = np.zeros(2, np.float16)
    launch(mod("f16cvt"), "to_half", (1, 1, 1), (32, 1, 1),
           [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(2, ".s32")])
    assert np.isnan(y).all()


def test_unknown_entry_and_bad_arguments_are_bad_input() -> None:
    from verify.ptxsim import PtxSyntaxError

    m = mod("vadd")
    with pytest.raises(PtxSyntaxError, match=r"no \.entry named 'nope'"):
        launch(m, "nope", (1, 1, 1), (1, 1, 1), [])
    with pytest.raises(PtxSyntaxError, match="takes 4 parameters"):
        launch(m, "vadd", (1, 1, 1), (1, 1, 1), [])
    with pytest.raises(PtxSyntaxError, match="invalid launch shape"):
        launch(m, "vadd", (1, 1, 1), (1025, 1, 1), [])


def test_oversized_launch_cannot_be_checked() -> None:
    from ledger.core.errors import CannotCheck

    with pytest.raises(CannotCheck, match="more than the PTX interpreter runs"):
        launch(mod("vadd"), "vadd", (1 << 20, 1, 1), (256, 1, 1), [])


MATH = mod("math")


def test_library_math_as_nvcc_emits_it() -> None:
    # expf/logf/tanhf/roundf... compile to ex2.approx, fma.rm, add.rz, cvt.rpi, copysign, ...
    rng = np.random.default_rng(30)
    x = (rng.standard_normal(1000) * 3).astype(np.float32)
    x[:6] = [0.0, -0.0, 2.5, -2.5, 0.49999997, -1.5]
    y = np.zeros(1000, np.float32)
    r = launch(MATH, "mathy", (4, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(1000, ".s32")])
    assert r.findings == ()
    v = x.astype(np.float64)
    ref = (np.exp(v) + np.log(np.abs(v) + 1) + np.sqrt(np.abs(v)) + 1 / np.sqrt(np.abs(v) + 1)
           + np.tanh(v) + np.minimum(v, 0.5) + np.maximum(v, -0.5) + v / 3 + np.rint(v * 10)
           + np.floor(v) + np.ceil(v) + np.trunc(v) + np.sign(v) * np.floor(np.abs(v) + 0.5)
           + np.copysign(2, v) + 1 + np.clip(v, 0, 1) + v / 7)
    assert np.allclose(y, ref, rtol=2e-5, atol=1e-5)


def test_half2_intrinsics() -> None:
    rng = np.random.default_rng(31)
    a = rng.standard_normal(512).astype(np.float16)
    b = rng.standard_normal(512).astype(np.float16)
    out = np.zeros(512, np.float32)
    r = launch(MATH, "half2_ops", (1, 1, 1), (256, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(out, "out", "out"),
                Scalar(256, ".s32")])
    assert r.findings == ()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    s = (a64 * b64 + (a64 + b64).astype(np.float16)).astype(np.float16).astype(np.float64)
    want = s + np.where(np.arange(512) % 2 == 0, a64, b64)
    assert np.array_equal(out, want.astype(np.float32))


def test_local_array_indexed_at_run_time() -> None:
    rng = np.random.default_rng(32)
    x = rng.integers(-100, 100, 256).astype(np.int32)
    y = np.zeros(256, np.int32)
    r = launch(MATH, "local_array", (1, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(256, ".s32")])
    assert r.findings == ()
    buf = np.array([[x[(i + k) % 256] * k for k in range(16)] for i in range(256)])
    j = x & 15
    assert np.array_equal(y, buf[np.arange(256), j] + buf[np.arange(256), 15 - j])


def test_f16_conversion_exhaustive_at_every_tie() -> None:
    """Every finite half h, the midpoint to its successor, and the float32 values one ulp
    either side of that midpoint: RNE must pick the right neighbour at every boundary."""
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)
    with np.errstate(over="ignore"):  # the successor of 65504 is inf: its midpoint overflows
        nxt = np.nextafter(h, np.float16(np.inf))
    mid = ((h.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(np.float32)
    x = np.concatenate([h.astype(np.float32), mid, np.nextafter(mid, np.float32(0)),
                        np.nextafter(mid, np.float32(np.inf))])
    x = np.concatenate([x, -x])
    n = x.size
    y = np.zeros(n, np.float16)
    r = launch(mod("f16cvt"), "to_half", ((n + 255) // 256, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(n, ".s32")])
    assert r.findings == ()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(y.view(np.uint16), want.view(np.uint16))
    # ties go to the even neighbour
    ties = y[h.size: 2 * h.size].view(np.uint16)
    assert not (ties & 1).any()
    # and back: every half bit pattern, NaN payloads aside, widens exactly
    allh = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16)
    back = np.zeros(allh.size, np.float32)
    r = launch(mod("f16cvt"), "from_half", (256, 1, 1), (256, 1, 1),
               [Buffer(allh.view(np.float16), "in", "x"), Buffer(back, "out", "y"),
                Scalar(allh.size, ".s32")])
    ref = allh.view(np.float16).astype(np.float32)
    finite = ~np.isnan(ref)
    assert r.findings == () and np.array_equal(back[finite].view(np.uint32),
                                                ref[finite].view(np.uint32))
    assert np.isnan(back[~finite]).all()
