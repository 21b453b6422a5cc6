"""PTX interpreter: shared memory, bar.sync and the findings tied to them (SPEC 8, issue 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from verify.ptxsim import Buffer, Scalar, launch, load_module

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim"
REDUCE = load_module((FIX / "reduce.ptx").read_bytes())


def line_text(line: int | None) -> str:
    assert line is not None
    return (FIX / "reduce.ptx").read_text().splitlines()[line - 1].strip()


def run_sum(kernel: str, n: int = 1000) -> tuple[np.ndarray, np.ndarray, object]:
    rng = np.random.default_rng(5)
    nb = (n + 255) // 256
    x = rng.standard_normal(nb * 256).astype(np.float32)
    out = np.zeros(nb, np.float32)
    r = launch(REDUCE, kernel, (nb, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(out, "out", "out"), Scalar(n, ".s32")])
    xz = x.copy()
    xz[n:] = 0
    return out, xz, r


def tree_sum(v: np.ndarray) -> np.float32:
    """The kernel's own order: pairwise halving in float32."""
    v = v.astype(np.float32).copy()
    k = v.size // 2
    while k > 0:
        v[:k] = v[:k] + v[k:2 * k]
        k //= 2
    return np.float32(v[0])


def test_block_reduction_exact_and_clean() -> None:
    out, x, r = run_sum("block_sum")
    assert r.findings == ()  # type: ignore[attr-defined]
    want = [tree_sum(x[i * 256:(i + 1) * 256]) for i in range(out.size)]
    assert np.array_equal(out, np.array(want, np.float32))


def test_missing_barrier_is_a_race_with_both_threads_and_lines() -> None:
    _, _, r = run_sum("block_sum_race")
    f = r.findings  # type: ignore[attr-defined]
    assert [x.kind for x in f] == ["race"]
    msg = f[0].message
    assert "read by thread (block (0, 0, 0), thread (0, 0, 0))" in msg
    assert "written by thread (block (0, 0, 0), thread (64, 0, 0))" in msg
    assert "shared offset 256" in msg  # s[64]
    assert line_text(f[0].line).startswith("ld.shared.f32")


def test_barrier_in_divergent_branch() -> None:
    _, _, r = run_sum("block_sum_divbar", 1024)
    ks = [x.kind for x in r.findings]  # type: ignore[attr-defined]
    assert ks[0] == "divergent_barrier" and "partial_barrier" in ks
    f = r.findings[0]  # type: ignore[attr-defined]
    assert f.thread == (0, 0, 0) and "16 other thread(s) of the same warp" in f.message
    assert line_text(f.line).startswith("bar.sync")


def test_dynamic_shared_reverse() -> None:
    x = np.arange(512, dtype=np.int32)
    y = np.zeros(512, np.int32)
    r = launch(REDUCE, "reverse_dyn", (2, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y")], dynamic_shared=1024)
    assert r.findings == ()
    assert np.array_equal(y, np.concatenate([x[:256][::-1], x[256:][::-1]]))


def test_too_little_dynamic_shared_is_out_of_bounds() -> None:
    x = np.arange(256, dtype=np.int32)
    y = np.zeros(256, np.int32)
    r = launch(REDUCE, "reverse_dyn", (1, 1, 1), (256, 1, 1),
               [Buffer(x, "in", "x"), Buffer(y, "out", "y")], dynamic_shared=512)
    f = r.findings[0]
    assert f.kind == "out_of_bounds" and f.thread == (128, 0, 0)
    assert "512 bytes of shared memory" in f.message


def test_uninitialised_shared_read() -> None:
    y = np.zeros(64, np.int32)
    r = launch(REDUCE, "uninit", (1, 1, 1), (64, 1, 1), [Buffer(y, "out", "y")])
    assert [f.kind for f in r.findings] == ["uninitialised_read"]
    f = r.findings[0]
    assert f.thread == (32, 0, 0) and "shared offset 128" in f.message
    assert np.array_equal(y[:32], np.arange(32))


def test_tiled_sgemm() -> None:
    rng = np.random.default_rng(6)
    gemm = load_module((FIX / "gemm.ptx").read_bytes())
    M, N, K = 40, 24, 50
    a = rng.standard_normal(M * K).astype(np.float32)
    b = rng.standard_normal(K * N).astype(np.float32)
    c = np.zeros(M * N, np.float32)
    r = launch(gemm, "sgemm", ((N + 15) // 16, (M + 15) // 16, 1), (16, 16, 1),
               [Buffer(a, "in", "A"), Buffer(b, "in", "B"), Buffer(c, "out", "C"),
                Scalar(M, ".s32"), Scalar(N, ".s32"), Scalar(K, ".s32")])
    assert r.findings == ()
    # the kernel's order: fma over k in float32, tiles padded with zeros
    A, B = a.reshape(M, K), b.reshape(K, N)
    acc = np.zeros((M, N), np.float32)
    from verify.ptxsim.ops_float import fma32

    for k in range(K):
        acc = fma32(A[:, k:k + 1], B[k:k + 1, :], acc)
    assert np.array_equal(c.reshape(M, N), acc)
