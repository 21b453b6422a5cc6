"""PTX interpreter: warp shuffles, votes, atomics, ldmatrix, cp.async and mma.sync on nvcc output
(SPEC 8, issue 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from verify.ptxsim import Buffer, Scalar, launch, load_module

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim"
WARP = load_module((FIX / "warp.ptx").read_bytes())
MMA = load_module((FIX / "mma.ptx").read_bytes())


def test_shfl_dot_product() -> None:
    rng = np.random.default_rng(7)
    n = 3000
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    r = launch(WARP, "dot", (4, 1, 1), (128, 1, 1),
               [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(out, "out", "out"),
                Scalar(n, ".s32")])
    assert r.findings == ()
    assert abs(float(out[0]) - float(np.dot(a.astype(np.float64), b))) < 1e-3


def shfl_ref(x: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    up, down, idx = x.copy(), x.copy(), x.copy()
    for i in range(x.size):
        lane = i % 32
        seg = lane - lane % width
        w0 = i - lane
        if lane - 3 >= seg:
            up[i] = x[i - 3]
        if lane + 5 < seg + width:
            down[i] = x[i + 5]
        idx[i] = x[w0 + seg + ((lane * 7) & 31) % width]
    return up, down, idx


def test_shfl_up_down_idx_with_width() -> None:
    rng = np.random.default_rng(8)
    x = rng.integers(-1000, 1000, 64).astype(np.int32)
    for width in (32, 16, 8):
        outs = [np.zeros(64, np.int32) for _ in range(3)]
        r = launch(WARP, "shfl_modes", (1, 1, 1), (64, 1, 1),
                   [Buffer(x, "in", "x"), *(Buffer(o, "out", f"o{i}") for i, o in
                                            enumerate(outs)), Scalar(width, ".s32")])
        assert r.findings == ()
        for got, want in zip(outs, shfl_ref(x, width), strict=True):
            assert np.array_equal(got, want), width


def test_votes() -> None:
    x = np.array([1] * 32 + [(-1) ** i for i in range(32)], np.int32)
    ballot, all_, any_ = (np.zeros(64, np.int32) for _ in range(3))
    r = launch(WARP, "votes", (1, 1, 1), (64, 1, 1),
               [Buffer(x, "in", "x"), Buffer(ballot, "out", "ballot"), Buffer(all_, "out", "all"),
                Buffer(any_, "out", "any")])
    assert r.findings == ()
    assert (ballot[:32].view(np.uint32) == 0xFFFFFFFF).all()
    assert (ballot[32:].view(np.uint32) == 0x55555555).all()
    assert list(all_[[0, 40]]) == [1, 0] and list(any_[[0, 40]]) == [1, 1]


def test_atomics_global_and_shared() -> None:
    rng = np.random.default_rng(9)
    x = rng.integers(0, 100, 256).astype(np.int32)
    s = np.zeros(1, np.int32)
    m = np.zeros(1, np.uint32)
    mx = np.full(1, -5, np.int32)
    mn = np.full(1, 500, np.int32)
    ex = np.zeros(2, np.int32)
    o = np.zeros(1, np.uint32)
    f = np.zeros(1, np.float32)
    r = launch(WARP, "atomics", (2, 1, 1), (128, 1, 1),
               [Buffer(x, "in", "x"), Buffer(s, "inout", "s"), Buffer(m, "inout", "m"),
                Buffer(mx, "inout", "mx"), Buffer(mn, "inout", "mn"), Buffer(ex, "out", "ex"),
                Buffer(o, "inout", "o"), Buffer(f, "inout", "f")])
    assert r.findings == ()
    assert s[0] == x.sum() and mx[0] == x.max() and mn[0] == x.min() and m[0] == 7
    assert list(ex) == [x[:128].sum(), x[128:].sum()]  # per-block shared sums
    bits = 0
    for v in x:
        bits |= 1 << (int(v) & 31)
    assert int(o[0]) == bits
    assert f[0] == np.float32(x.sum())  # small integers: exact in any order


def mma_run(M: int, N: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray, object]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(M * K).astype(np.float16)
    bt = rng.standard_normal(N * K).astype(np.float16)
    c = np.zeros(M * N, np.float32)
    r = launch(MMA, "mma_gemm", ((N + 15) // 16, (M + 31) // 32, 1), (128, 1, 1),
               [Buffer(a, "in", "A"), Buffer(bt, "in", "Bt"), Buffer(c, "out", "C"),
                Scalar(M, ".s32"), Scalar(N, ".s32"), Scalar(K, ".s32")])
    want = a.reshape(M, K).astype(np.float64) @ bt.reshape(N, K).astype(np.float64).T
    return c.reshape(M, N), want, r


def test_mma_gemm_cp_async_ldmatrix() -> None:
    got, want, r = mma_run(64, 48, 40, 10)
    assert r.findings == ()  # type: ignore[attr-defined]
    # f16 products are exact; each mma sums in float64 and rounds to f32 once per k-step
    assert np.allclose(got, want, rtol=0, atol=1e-4)


def test_mma_gemm_ragged_m_n() -> None:
    got, want, r = mma_run(40, 20, 16, 11)
    assert r.findings == ()  # type: ignore[attr-defined]
    assert np.allclose(got, want, rtol=0, atol=1e-4)


def test_mma_gemm_k_not_multiple_of_8_is_caught() -> None:
    _, _, r = mma_run(32, 16, 12, 12)
    ks = {f.kind for f in r.findings}  # type: ignore[attr-defined]
    assert "misaligned" in ks  # 16-byte cp.async from a row starting at 24 bytes


def test_mma_m16n8k16_ldmatrix_x4_trans() -> None:
    rng = np.random.default_rng(13)
    a = rng.standard_normal(256).astype(np.float16)
    b = rng.standard_normal(128).astype(np.float16)
    c = np.zeros(128, np.float32)
    r = launch(MMA, "mma_k16", (1, 1, 1), (32, 1, 1),
               [Buffer(a, "in", "A"), Buffer(b, "in", "B"), Buffer(c, "out", "C")])
    assert r.findings == ()
    want = (a.reshape(16, 16).astype(np.float64) @ b.reshape(16, 8).astype(np.float64))
    assert np.array_equal(c.reshape(16, 8), want.astype(np.float32))
