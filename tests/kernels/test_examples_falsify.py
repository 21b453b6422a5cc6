"""Every shipped bundle passes its own falsification tests on the CPU (the PTX interpreter),
so each kernel is checked against its trusted reference with bounds, race, barrier, coverage and
initialisation tracking, not only compiled (issue 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from verify import contract, falsify
from verify.context import Context, Options

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ("vector_add", "f16_convert", "dot_shfl", "softmax_rows", "gemm_tiled", "gemm_mma")


@pytest.mark.parametrize("name", KERNELS)
def test_bundle_passes_its_falsification_tests(name: str) -> None:
    ctx = Context(Bundle.from_dir(ROOT / "bundles" / name), Options(use_gpu=False))
    try:
        ctx.results.extend(contract.run(ctx))
        assert ctx.contract is not None
        checks = falsify.run(ctx)
    finally:
        ctx.close()
    assert [c.id for c in checks] == [f"falsify.{t.id}" for t in ctx.contract.falsification]
    for c in checks:
        assert c.status == "passed", f"{c.id}: {c.detail}"
