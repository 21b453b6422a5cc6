"""verify.falsify's pure parts: ulp distance, tolerance comparison, inputs, launch cases, poison.

These need no interpreter: they test the arithmetic the falsify checks rest on against numpy's
own float encodings (``np.nextafter`` steps, float16 rounding).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.errors import BadInput
from verify import falsify
from verify.model import FalsificationTest, Kernel, Launch, Param, Tolerance


def f32(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


def test_ulp_distance_known_values() -> None:
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2.0))
    tiny = np.nextafter(np.float32(0), np.float32(1))
    big = np.finfo(np.float32).max
    got = f32(1.0, float(up), 0.0, -float(tiny), float(big), -2.0)
    want = f32(float(up), 1.0, -0.0, float(tiny), np.inf, -2.0)
    assert falsify.ulp_distance(got, want).tolist() == [1.0, 1.0, 0.0, 2.0, 1.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=40),
)
def test_ulp_distance_counts_nextafter_steps(x: float, k: int) -> None:
    a = np.float32(x)
    b = a
    steps = 0
    with np.errstate(over="ignore"):
        while steps < k and not np.isinf(b):  # max finite -> inf is one step too
            b = np.nextafter(b, np.float32(np.inf))
            steps += 1
    d = falsify.ulp_distance(np.array([a]), np.array([b], dtype=np.float32))
    assert d[0] == steps


def test_ulp_distance_f16_and_f64() -> None:
    h = np.array([1.0], dtype=np.float16)
    h2 = np.nextafter(h, np.float16(2))
    assert falsify.ulp_distance(h, h2)[0] == 1.0
    d = np.array([1e300, -1e300])
    assert falsify.ulp_distance(d, d)[0] == 0.0
    assert falsify.ulp_distance(d[:1], d[1:])[0] > 1e18  # across zero: no int64 overflow


def test_compare_exact_ulp_zero_passes_and_reports_zero() -> None:
    want = np.array([1.0, 2.0, 3.0])
    c = falsify.compare_output("c", f32(1, 2, 3), want, "f32", Tolerance(ulp=0))
    assert c.bad == 0 and c.max_ulp == 0.0 and c.first == ""


def test_compare_one_ulp_off_fails_with_first_element() -> None:
    want = f32(1, 2, 3)
    got = want.copy()
    got[1] = np.nextafter(got[1], np.float32(9))
    c = falsify.compare_output("c", got, want, "f32", Tolerance(ulp=0))
    assert c.bad == 1
    assert c.first.startswith("c[1]: got ") and "(1 ulp)" in c.first
    assert falsify.compare_output("c", got, want, "f32", Tolerance(ulp=1)).bad == 0


def test_compare_nan_rules() -> None:
    nan = float("nan")
    tol = Tolerance(ulp=4)
    # expected NaN and got NaN: fine; got NaN where a number is expected: bad; and the reverse.
    assert falsify.compare_output("y", f32(nan), f32(nan), "f32", tol).bad == 0
    assert falsify.compare_output("y", f32(nan), f32(1.0), "f32", tol).bad == 1
    assert falsify.compare_output("y", f32(1.0), f32(nan), "f32", tol).bad == 1
    # poison 0xFFFFFFFF is a NaN: an unwritten element never matches a number
    poison = np.full(4, 0xFF, dtype=np.uint8).view(np.float32)
    assert falsify.compare_output("y", poison, f32(0.0), "f32", Tolerance(rel=1.0)).bad == 1
    # same infinities match, different ones do not
    assert falsify.compare_output("y", f32(np.inf), f32(np.inf), "f32", Tolerance(ulp=0)).bad == 0
    assert falsify.compare_output("y", f32(-np.inf), f32(np.inf), "f32", Tolerance(rel=1)).bad == 1


def test_compare_rel_abs() -> None:
    want = np.array([1.0, 1e-9, 100.0])
    got = f32(1.00001, 0.0, 100.0)
    c = falsify.compare_output("y", got, want, "f32", Tolerance(rel=1e-4, abs=1e-8))
    assert c.bad == 0 and c.max_abs == pytest.approx(1e-5, rel=0.01)
    c = falsify.compare_output("y", got, want, "f32", Tolerance(rel=1e-6))
    assert c.bad == 2 and c.first.startswith("y[0]") and "rel" in c.first


def test_compare_f16_uses_the_f16_encoding() -> None:
    x = np.array([1.0, 65504.0], dtype=np.float16)
    want = x.astype(np.float64)
    assert falsify.compare_output("y", x, want, "f16", Tolerance(ulp=0)).bad == 0
    off = np.nextafter(x, np.float16(0))
    c = falsify.compare_output("y", off, want, "f16", Tolerance(ulp=0))
    assert c.bad == 2 and c.max_ulp == 1.0


def test_compare_integers_exact_or_abs() -> None:
    got = np.array([1, 2, 4_000_000_000], dtype=np.uint32)
    want = np.array([1, 3, 4_000_000_000])
    c = falsify.compare_output("k", got, want, "u32", Tolerance())
    assert c.bad == 1 and c.first == "k[1]: got np.uint32(2), want np.int64(3) (abs 1)"
    assert falsify.compare_output("k", got, want, "u32", Tolerance(abs=1)).bad == 0


def test_compare_shape_mismatch_is_bad_input() -> None:
    with pytest.raises(BadInput, match="the reference gives 2 values for c, the buffer holds 3"):
        falsify.compare_output("c", f32(1, 2, 3), np.zeros(2), "f32", Tolerance())


def test_random_values_range_dtype_and_seed() -> None:
    a = falsify.random_values(np.random.default_rng(7), "f32", 1000, -100.0, 100.0)
    b = falsify.random_values(np.random.default_rng(7), "f32", 1000, -100.0, 100.0)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert a.min() >= -100 and a.max() <= 100 and a.std() > 10
    h = falsify.random_values(np.random.default_rng(1), "f16", 10, -1.0, 1.0)
    assert h.dtype == np.float16
    i = falsify.random_values(np.random.default_rng(1), "u8", 500, -5.0, 3.5)
    assert i.dtype == np.uint8 and set(np.unique(i).tolist()) == {0, 1, 2, 3}


KERNEL = Kernel(
    name="vector_add",
    version="1",
    entry="vector_add",
    ptx="vector_add.ptx",
    reference="vector_add_f32",
    params=(
        Param("a", "ptr", "f32", "in", ("n",)),
        Param("b", "ptr", "f32", "in", ("n",)),
        Param("c", "ptr", "f32", "out", ("n",)),
        Param("n", "scalar", "u32", value="n"),
    ),
    launch=Launch(("ceil_div(n, 256)", "1", "1"), ("256", "1", "1"), "0"),
)
TEST = FalsificationTest(
    id="FALSIFY-VADD-001",
    rule="r",
    prediction="p",
    sizes=({"n": 1000},),
    tolerance=Tolerance(ulp=0),
    properties=("reference",),
    seed=7,
    input_low=-2.0,
    input_high=2.0,
)


def test_make_case_builds_poisoned_outputs_and_launch_shape() -> None:
    case = falsify.make_case(KERNEL, TEST, {"n": 1000}, np.random.default_rng(7))
    assert case.grid == (4, 1, 1) and case.block == (256, 1, 1) and case.dynamic_shared == 0
    a, _b, c, n = case.args
    assert isinstance(a, falsify.BufferArg) and a.data.dtype == np.float32 and a.data.size == 1000
    assert isinstance(c, falsify.BufferArg) and np.all(c.data.view(np.uint32) == 0xFFFFFFFF)
    assert n == falsify.ScalarArg("n", 1000, "u32")
    assert set(case.inputs) == {"a", "b"} and np.array_equal(case.inputs["a"], a.data)
    assert case.inputs["a"] is not a.data  # the reference gets copies


def test_make_case_rejects_bad_launch_and_huge_buffers() -> None:
    bad = Kernel(**{**KERNEL.__dict__, "launch": Launch(("0", "1", "1"), ("256", "1", "1"))})
    with pytest.raises(BadInput, match=r"launch.grid must be three positive integers"):
        falsify.make_case(bad, TEST, {"n": 8}, np.random.default_rng(0))
    big = Kernel(**{**KERNEL.__dict__, "launch": Launch(("1", "1", "1"), ("2048", "1", "1"))})
    with pytest.raises(BadInput, match=r"launch.block \[2048, 1, 1\] has more than 1024"):
        falsify.make_case(big, TEST, {"n": 8}, np.random.default_rng(0))
    with pytest.raises(falsify.TooLarge, match="exceed 512 MiB"):
        falsify.make_case(KERNEL, TEST, {"n": 1 << 28}, np.random.default_rng(0))
    with pytest.raises(BadInput, match="param a shape"):
        falsify.make_case(KERNEL, TEST, {"m": 3}, np.random.default_rng(0))


def test_poison_findings_name_the_first_unwritten_element() -> None:
    case = falsify.make_case(KERNEL, TEST, {"n": 10}, np.random.default_rng(0))
    c = case.args[2]
    assert isinstance(c, falsify.BufferArg)
    c.data[:] = 1.0
    c.data[[3, 7]] = np.full(2, 0xFF, np.uint8).repeat(4).view(np.float32)
    found = falsify.poison_findings(case, {"c": np.ones(10)})
    assert [f.kind for f in found] == ["unwritten"]
    assert found[0].message.startswith("c[3] never written")
    assert "2 of 10 elements unwritten" in found[0].message
    # an element whose expected value IS the poison pattern is not reported
    want = c.data.copy()
    assert falsify.poison_findings(case, {"c": want}) == []


def test_make_case_caps_threads_shared_and_scalar_range() -> None:
    wide = Kernel(**{**KERNEL.__dict__, "launch": Launch(("n", "1", "1"), ("1024", "1", "1"))})
    with pytest.raises(falsify.TooLarge, match=r"5120000 threads in one launch \(at most 4194304"):
        falsify.make_case(wide, TEST, {"n": 5000}, np.random.default_rng(0))
    shared = Kernel(
        **{**KERNEL.__dict__, "launch": Launch(("1", "1", "1"), ("32", "1", "1"), "n * 1024")}
    )
    with pytest.raises(BadInput, match=r"launch.shared_bytes 1024000 is outside \[0, 232448\]"):
        falsify.make_case(shared, TEST, {"n": 1000}, np.random.default_rng(0))
    neg = Kernel(
        **{
            **KERNEL.__dict__,
            "params": (*KERNEL.params[:3], Param("n", "scalar", "u32", value="n - 5")),
        }
    )
    with pytest.raises(BadInput, match="param n: value -4 does not fit u32"):
        falsify.make_case(neg, TEST, {"n": 1}, np.random.default_rng(0))


def test_f16_inputs_beyond_range_become_infinities_quietly() -> None:
    h = falsify.random_values(np.random.default_rng(3), "f16", 100, -1e6, 1e6)
    assert h.dtype == np.float16 and np.isinf(h).any()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), max_size=40))
def test_zero_ulp_flags_exactly_the_differing_encodings(pairs: list[tuple[int, int]]) -> None:
    """Any f32 bit patterns: 0 ulp fails exactly where the values differ (NaN = NaN, +0 = -0)."""
    g = np.array([p[0] for p in pairs], dtype=np.uint32).view(np.float32)
    w = np.array([p[1] for p in pairs], dtype=np.uint32).view(np.float32)
    c = falsify.compare_output("y", g, w, "f32", Tolerance(ulp=0))
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    assert c.bad == int((~same).sum())
    assert (c.first == "") == bool(same.all())
