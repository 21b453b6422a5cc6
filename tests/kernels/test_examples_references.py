"""verify.references against plain, loop-by-loop numpy computations on small seeded inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verify.references import REFERENCES

RNG_SEED = 20261129


def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def test_registry_names() -> None:
    assert set(REFERENCES) == {
        "vector_add_f32",
        "f32_to_f16_rne",
        "dot_partials_f32_b256",
        "softmax_rows_f32",
        "gemm_f32",
        "gemm_f16_f32acc",
    }


@pytest.mark.parametrize("n", [1, 7, 300])
def test_vector_add(n: int) -> None:
    a = rng().uniform(-100, 100, n).astype(np.float32)
    b = rng().uniform(-1, 1, n).astype(np.float32)
    out = REFERENCES["vector_add_f32"]({"a": a, "b": b}, {"n": n})
    assert out["c"].dtype == np.float32 and out["c"].shape == (n,)
    for i in range(n):
        assert out["c"][i] == np.float32(a[i] + b[i])  # f32 + f32 in numpy is the IEEE f32 sum


def test_vector_add_near_f32_max_overflows_to_inf() -> None:
    a = np.array([3.0e38, -3.0e38, 1.0e38], dtype=np.float32)
    out = REFERENCES["vector_add_f32"]({"a": a, "b": a}, {"n": 3})
    assert list(out["c"]) == [np.inf, -np.inf, np.float32(2.0e38)]


def test_f16_known_bits() -> None:
    x = np.array(
        [1.0, 1.00048828125, 1.00146484375, 65504.0, 65519.0, 65520.0, 6e-8, 1e-8, -0.0, np.nan],
        dtype=np.float32,
    )
    y = REFERENCES["f32_to_f16_rne"]({"x": x}, {"n": x.size})["y"]
    assert y.dtype == np.float16
    bits = [int(v) for v in y.view(np.uint16)]
    # ties to even (1 + 2^-11 -> 1.0; 1 + 3*2^-11 -> 1 + 2^-9), max finite, overflow threshold,
    # least subnormal, underflow to zero, negative zero kept, NaN stays NaN
    assert bits[:9] == [0x3C00, 0x3C00, 0x3C02, 0x7BFF, 0x7BFF, 0x7C00, 0x0001, 0x0000, 0x8000]
    assert bits[9] & 0x7C00 == 0x7C00 and bits[9] & 0x03FF != 0


def rne_f16_by_hand(v: float) -> float:
    """Round a finite double to f16 by hand: scale to the f16 grid, round half to even."""
    if v == 0:
        return v
    e = max(math.floor(math.log2(abs(v))), -14)  # f16 subnormals share the exponent -14
    ulp = 2.0 ** (e - 10)
    q = abs(v) / ulp
    r = math.floor(q)
    if q - r > 0.5 or (q - r == 0.5 and r % 2 == 1):
        r += 1
    out = math.copysign(r * ulp, v)
    return math.copysign(math.inf, v) if abs(out) > 65504 else out


def test_f16_matches_hand_rounding() -> None:
    x = np.concatenate(
        [
            rng().uniform(-70000, 70000, 400),
            rng().uniform(-1e-4, 1e-4, 400),
            rng().uniform(-2, 2, 400),
        ]
    ).astype(np.float32)
    y = REFERENCES["f32_to_f16_rne"]({"x": x}, {"n": x.size})["y"]
    for xi, yi in zip(x, y, strict=True):
        assert float(yi) == rne_f16_by_hand(float(xi)), xi


@pytest.mark.parametrize("n", [1, 255, 256, 257, 700])
def test_dot_partials(n: int) -> None:
    a = rng().uniform(-1, 1, n).astype(np.float32)
    b = rng().uniform(-1, 1, n).astype(np.float32)
    out = REFERENCES["dot_partials_f32_b256"]({"a": a, "b": b}, {"n": n})["out"]
    blocks = (n + 255) // 256
    assert out.dtype == np.float32 and out.shape == (blocks,)
    for j in range(blocks):
        want = math.fsum(float(a[i]) * float(b[i]) for i in range(256 * j, min(n, 256 * j + 256)))
        assert out[j] == np.float32(want)
    assert math.isclose(float(out.sum(dtype=np.float64)), float(np.dot(a, b)), rel_tol=1e-5)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (3, 5), (4, 300)])
def test_softmax_rows(rows: int, cols: int) -> None:
    x = rng().uniform(-20, 20, rows * cols).astype(np.float32)
    y = REFERENCES["softmax_rows_f32"]({"x": x}, {"rows": rows, "cols": cols})["y"]
    assert y.dtype == np.float32 and y.shape == (rows, cols)
    for r in range(rows):
        row = [float(v) for v in x[r * cols : (r + 1) * cols]]
        m = max(row)
        s = math.fsum(math.exp(v - m) for v in row)
        for c in range(cols):
            assert math.isclose(float(y[r, c]), math.exp(row[c] - m) / s, rel_tol=1e-6)
        assert math.isclose(float(y[r].sum(dtype=np.float64)), 1.0, rel_tol=1e-5)


def test_softmax_large_inputs_do_not_overflow() -> None:
    x = np.array([1000.0, 1000.0, -1000.0], dtype=np.float32)
    y = REFERENCES["softmax_rows_f32"]({"x": x}, {"rows": 1, "cols": 3})["y"]
    assert list(y[0]) == [0.5, 0.5, 0.0]


def naive_gemm(a: np.ndarray, b: np.ndarray, m: int, n: int, k: int) -> list[list[float]]:
    return [
        [math.fsum(float(a[i * k + p]) * float(b[p * n + j]) for p in range(k)) for j in range(n)]
        for i in range(m)
    ]


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (3, 5, 7), (17, 9, 33)])
def test_gemm_f32(m: int, n: int, k: int) -> None:
    a = rng().uniform(-1, 1, m * k).astype(np.float32)
    b = rng().uniform(-1, 1, k * n).astype(np.float32)
    c = REFERENCES["gemm_f32"]({"a": a, "b": b}, {"m": m, "n": n, "k": k})["c"]
    assert c.dtype == np.float32 and c.shape == (m, n)
    want = naive_gemm(a, b, m, n, k)
    for i in range(m):
        for j in range(n):
            assert math.isclose(float(c[i, j]), want[i][j], rel_tol=1e-6, abs_tol=1e-6)


@pytest.mark.parametrize(("m", "n", "k"), [(16, 8, 8), (32, 32, 16)])
def test_gemm_f16(m: int, n: int, k: int) -> None:
    a = rng().uniform(-1, 1, m * k).astype(np.float16)
    b = rng().uniform(-1, 1, k * n).astype(np.float16)
    c = REFERENCES["gemm_f16_f32acc"]({"a": a, "b": b}, {"m": m, "n": n, "k": k})["c"]
    assert c.dtype == np.float32 and c.shape == (m, n)
    want = naive_gemm(a, b, m, n, k)
    for i in range(m):
        for j in range(n):
            # the inputs are f16, so every product is exact; only the final cast rounds
            assert float(c[i, j]) == float(np.float32(want[i][j]))
