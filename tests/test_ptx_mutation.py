"""A bounded slice of the PTX mutation campaign (issue 10; the whole campaign is
``scripts/mutate_ptx.py``, its figures in docs/ptx-interpreter.md): every barrier and every
cp.async wait dropped from the mma.sync GEMM is caught, and one mutant of each operator on the
other bundled kernels. Mutants ptxas rejects do not count (skipped where ptxas is absent, they
are judged anyway)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verify.ptxsim.mutate import OPERATORS, calibrate, judge, mutants, ptxas_accepts

ROOT = Path(__file__).resolve().parent.parent
PTXAS = shutil.which("ptxas") or (
    "/usr/local/cuda-13.0/bin/ptxas" if Path("/usr/local/cuda-13.0/bin/ptxas").exists() else None)
GEMM = ROOT / "bundles" / "gemm_mma"


def ptx_of(bundle: Path) -> bytes:
    return next(bundle.glob("*.ptx")).read_bytes()


def test_mutant_generation_keeps_line_numbers() -> None:
    ptx = ptx_of(GEMM)
    ms = list(mutants(ptx))
    ops = {op: [m for m in ms if m.operator == op] for op in OPERATORS}
    assert len(ops["drop_barrier"]) == 10 and len(ops["drop_wait"]) == 5
    assert ops["flip_bound"] and ops["add_to_sub"] and ops["drop_store"]
    n_lines = ptx.count(b"\n")
    for m in ms:
        assert m.ptx.count(b"\n") == n_lines and m.ptx != ptx
        assert m.ptx.split(b"\n")[m.line - 1].strip().decode() == m.after
    shfl = [m for m in mutants(ptx_of(ROOT / "bundles" / "dot_shfl"))
            if m.operator == "halve_shuffle"]
    assert shfl and all(m.before.startswith("mov.") for m in shfl)  # the offset's constant
    assert any(m.before.endswith(", 16;") and m.after.endswith(", 8;") for m in shfl)


@pytest.fixture(scope="module")
def gemm_limit() -> int:
    return calibrate(GEMM, ptx_of(GEMM))


@pytest.mark.parametrize("op", ["drop_barrier", "drop_wait"])
def test_every_barrier_and_wait_dropped_from_the_mma_gemm_is_caught(op: str,
                                                                      gemm_limit: int) -> None:
    for m in mutants(ptx_of(GEMM)):
        if m.operator != op or (PTXAS and not ptxas_accepts(m.ptx, PTXAS)):
            continue
        status, detail = judge(GEMM, m, gemm_limit)
        assert status == "killed", (m.line, m.before, detail)
        assert any(k in detail for k in ("race", "cp_async_in_flight", "uninitialised_read",
                                         "outside")), detail


SAMPLE = [("vector_add", "flip_bound"), ("vector_add", "drop_store"),
          ("dot_shfl", "halve_shuffle"), ("dot_shfl", "drop_barrier"),
          ("softmax_rows", "drop_barrier"), ("gemm_tiled", "add_to_sub"),
          ("histogram_u32", "drop_barrier"),
          ("f16_convert", "flip_bound")]


@pytest.mark.parametrize(("bundle", "op"), SAMPLE)
def test_one_mutant_per_operator_is_caught(bundle: str, op: str) -> None:
    bdir = ROOT / "bundles" / bundle
    m = next(m for m in mutants(ptx_of(bdir)) if m.operator == op)
    if PTXAS and not ptxas_accepts(m.ptx, PTXAS):
        pytest.skip("ptxas rejects this mutant: it does not count")
    status, detail = judge(bdir, m, 2_000_000)
    assert status == "killed", (m.line, m.before, detail)
