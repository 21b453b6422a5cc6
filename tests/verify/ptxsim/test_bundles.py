"""PTX interpreter on the six bundled kernels (bundles/) and the planted-bug bundles
(tests/fixtures/planted): correct kernels give reference results and no finding at the contract
sizes; each planted bug gives the finding its README names (SPEC 8 falsify.*, issue 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verify.ptxsim import Buffer, Module, Scalar, SimResult, launch, load_module

ROOT = Path(__file__).resolve().parents[3]
PLANTED = Path(__file__).resolve().parents[2] / "fixtures" / "planted"


def bundle(name: str, folder: Path = ROOT / "bundles") -> Module:
    (path,) = (folder / name).glob("*.ptx")
    return load_module(path.read_bytes())


def cd(a: int, b: int) -> int:
    return (a + b - 1) // b


def vec_launch(m: Module, entry: str, n: int, seed: int, **kw: int) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, SimResult]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.full(n, np.nan, np.float32)
    r = launch(m, entry, (cd(n, 256), 1, 1), (256, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                Scalar(n, ".u32")], **kw)
    return a, b, c, r


@pytest.mark.parametrize("n", [1, 256, 1000, 4099])
def test_vector_add(n: int) -> None:
    a, b, c, r = vec_launch(bundle("vector_add"), "vector_add", n, n)
    assert r.findings == () and np.array_equal(c, a + b)


def test_f16_convert() -> None:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(2048) * 30000).astype(np.float32)
    y = np.zeros(2048, np.float16)
    r = launch(bundle("f16_convert"), "f16_convert", (8, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(2048, ".u32")])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert r.findings == () and np.array_equal(y.view(np.uint16), want.view(np.uint16))


def dot_launch(m: Module, entry: str, n: int) -> tuple[np.ndarray, list[float], SimResult]:
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(cd(n, 256), np.float32)
    r = launch(m, entry, (cd(n, 256), 1, 1), (256, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(out, "out", "out"),
                Scalar(n, ".u32")])
    ref = [float(np.dot(a[i:i + 256].astype(np.float64), b[i:i + 256])) for i in range(0, n, 256)]
    return out, ref, r


@pytest.mark.parametrize("n", [1, 31, 1000, 2051])
def test_dot_shfl(n: int) -> None:
    out, ref, r = dot_launch(bundle("dot_shfl"), "dot_shfl", n)
    assert r.findings == () and np.allclose(out, ref, rtol=1e-5, atol=1e-5)


def softmax_launch(m: Module, entry: str, rows: int, cols: int) -> tuple[
        np.ndarray, np.ndarray, SimResult]:
    rng = np.random.default_rng(rows * 1000 + cols)
    x = rng.standard_normal(rows * cols).astype(np.float32)
    y = np.zeros_like(x)
    r = launch(m, entry, (rows, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(rows, ".u32"),
                Scalar(cols, ".u32")])
    X = x.reshape(rows, cols).astype(np.float64)
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return y.reshape(rows, cols), e / e.sum(axis=1, keepdims=True), r


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 255), (3, 300), (2, 1000)])
def test_softmax_rows(rows: int, cols: int) -> None:
    y, ref, r = softmax_launch(bundle("softmax_rows"), "softmax_rows", rows, cols)
    assert r.findings == () and np.allclose(y, ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (33, 17, 20), (40, 45, 37)])
def test_gemm_tiled(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal(m * k).astype(np.float32)
    b = rng.standard_normal(k * n).astype(np.float32)
    c = np.zeros(m * n, np.float32)
    r = launch(bundle("gemm_tiled"), "gemm_tiled", (cd(n, 16), cd(m, 16), 1), (16, 16, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                Scalar(m, ".u32"), Scalar(n, ".u32"), Scalar(k, ".u32")])
    want = a.reshape(m, k).astype(np.float64) @ b.reshape(k, n)
    assert r.findings == () and np.allclose(c.reshape(m, n), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "n", "k"), [(32, 32, 16), (64, 32, 48), (32, 96, 64)])
def test_gemm_mma(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(41)
    a = rng.uniform(-1, 1, m * k).astype(np.float16)
    b = rng.uniform(-1, 1, k * n).astype(np.float16)
    c = np.zeros(m * n, np.float32)
    r = launch(bundle("gemm_mma"), "gemm_mma", (n // 32, m // 32, 1), (128, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                Scalar(m, ".u32"), Scalar(n, ".u32"), Scalar(k, ".u32")])
    want = a.reshape(m, k).astype(np.float64) @ b.reshape(k, n).astype(np.float64)
    assert r.findings == () and np.allclose(c.reshape(m, n), want, rtol=1e-4, atol=2e-4)


def test_planted_off_by_one() -> None:
    _, _, _, r = vec_launch(bundle("off_by_one", PLANTED), "vadd_off_by_one", 1000, 1)
    assert {f.kind for f in r.findings} == {"out_of_bounds"}
    assert all(f.thread == (232, 0, 0) and f.block == (3, 0, 0) for f in r.findings)


def test_planted_unwritten_tail() -> None:
    _, _, _, r = vec_launch(bundle("off_by_one_unwritten", PLANTED), "vadd_unwritten_tail",
                            1000, 2)
    assert [f.kind for f in r.findings] == ["unwritten"]
    assert "1 of 1000 elements" in r.findings[0].message
    assert "element 999" in r.findings[0].message


def test_planted_double_write() -> None:
    _, _, _, r = vec_launch(bundle("double_write", PLANTED), "vadd_double_write", 256, 3)
    assert [f.kind for f in r.findings] == ["double_write"]
    assert "element 0 of buffer 'c'" in r.findings[0].message


def test_planted_infinite_loop() -> None:
    _, _, _, r = vec_launch(bundle("infinite_loop", PLANTED), "vadd_infinite_loop", 32, 4,
                            step_limit=20_000)
    assert [f.kind for f in r.findings] == ["step_limit"]


def test_planted_divergent_barrier() -> None:
    _, _, r = dot_launch(bundle("divergent_barrier", PLANTED), "dot_divergent_barrier", 1000)
    kinds = [f.kind for f in r.findings]
    assert kinds[0] == "divergent_barrier" and "partial_barrier" in kinds
    assert "16 other thread(s) of the same warp" in r.findings[0].message


def test_planted_missing_barrier() -> None:
    _, _, r = softmax_launch(bundle("missing_barrier", PLANTED), "softmax_missing_barrier", 2, 255)
    assert r.findings and {f.kind for f in r.findings} == {"race"}
    assert "in the same barrier interval" in r.findings[0].message
