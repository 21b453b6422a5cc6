"""Block sampling and domain maxima up to 2^12 (issue 32, "Sizes"): ``verify.sampling``, the
interpreter's ``launch(blocks=...)`` and the runner's use of both (docs/falsification.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from verify import falsify, ptxsim, sizes
from verify.contract import load_contract
from verify.model import Contract
from verify.sampling import SAMPLE_BLOCKS, pick_blocks, unsafe_reason

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "bundles"
VADD_PTX = (BUNDLES / "vector_add" / "vector_add.ptx").read_text()


def test_pick_blocks_keeps_corners_and_faces_and_is_seeded() -> None:
    grid = (8, 5, 3)
    a = pick_blocks(grid, SAMPLE_BLOCKS, np.random.default_rng(1))
    assert a == pick_blocks(grid, SAMPLE_BLOCKS, np.random.default_rng(1))
    assert len(a) == SAMPLE_BLOCKS == len(set(a)) and list(a) == sorted(a)
    for x in (0, 7):
        for y in (0, 4):
            for z in (0, 2):
                assert x + 8 * (y + 5 * z) in a
    assert pick_blocks((3, 2, 1), SAMPLE_BLOCKS, np.random.default_rng(1)) == tuple(range(6))
    last = pick_blocks((4096, 1, 1), SAMPLE_BLOCKS, np.random.default_rng(2))
    assert 0 in last and 4095 in last and len(last) == SAMPLE_BLOCKS


def test_blocks_that_may_communicate_are_not_sampled() -> None:
    assert unsafe_reason(VADD_PTX.encode()) is None
    assert unsafe_reason((BUNDLES / "softmax_rows" / "softmax_rows.ptx").read_bytes()) is None
    atomic = VADD_PTX.replace("st.global.f32 \t[%rd10], %f3;", "red.global.add.f32 \t[%rd10], %f3;")
    assert unsafe_reason(atomic.encode()) == "the kernel uses global atomics"
    fenced = VADD_PTX.replace("ret;", "membar.gl;\n\tret;")
    assert unsafe_reason(fenced.encode()) == "the kernel has a gpu-scope fence"
    shared_only = VADD_PTX.replace("ret;", "atom.shared.add.u32 \t%r5, [%rd1], 1;\n\tret;")
    assert unsafe_reason(shared_only.encode()) is None
    state = VADD_PTX.replace("// .globl", ".global .align 4 .u32 count;\n// .globl")
    assert unsafe_reason(state.encode()) == "the kernel has module .global variables"


def test_interpreter_runs_only_the_named_blocks_and_says_what_they_wrote() -> None:
    m = ptxsim.load_module((BUNDLES / "softmax_rows" / "softmax_rows.ptx").read_bytes())
    rows, cols = 64, 300
    x = np.random.default_rng(0).uniform(-1, 1, rows * cols).astype(np.float32)
    y = np.full(rows * cols, np.nan, np.float32)
    args = [ptxsim.Buffer(x, "in", "x"), ptxsim.Buffer(y, "out", "y"),
            ptxsim.Scalar(rows, ".u32"), ptxsim.Scalar(cols, ".u32")]
    r = ptxsim.launch(m, "softmax_rows", (rows, 1, 1), (256, 1, 1), args, out_undefined=True,
                      blocks=[63, 0, 5])
    assert r.findings == ()  # no "unwritten": the other rows belong to blocks not run
    w = r.written["y"].reshape(rows, cols)
    assert list(np.flatnonzero(w.all(axis=1))) == [0, 5, 63] and w.sum() == 3 * cols
    xr = x.reshape(rows, cols).astype(np.float64)
    e = np.exp(xr - xr.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    assert np.abs(y.reshape(rows, cols)[w] - want[w]).max() < 1e-6
    with pytest.raises(ptxsim.PtxSyntaxError):
        ptxsim.launch(m, "softmax_rows", (rows, 1, 1), (256, 1, 1), args, blocks=[64])


def _softmax_4096() -> Contract:
    """softmax_rows with a domain of 2^12 per dimension: the softmax over C=4096 of the issue."""
    text = (BUNDLES / "softmax_rows" / "contract.yaml").read_text()
    text = text.replace("rows: {min: 1, max: 65535}", "rows: {min: 1, max: 4096}")
    text = text.replace("cols: {min: 1, max: 65536}", "cols: {min: 1, max: 4096}")
    return load_contract(text.encode())


def test_softmax_maximum_cols_4096_is_run_and_rows_4096_sampled() -> None:
    c = _softmax_4096()
    k, t = c.kernel, c.falsification[1]
    assert k is not None
    ptx = (BUNDLES / "softmax_rows" / "softmax_rows.ptx").read_bytes()
    # before issue 32 both maxima were over a quarter of the cap: "max cols=4096 not run"
    assert sizes.cost(k, {"rows": 1, "cols": 4096}) > falsify.CPU_COST_CAP // sizes.BIG_SHARE
    plan, phrase = falsify.plan_bindings(k, t, 5, falsify.CPU_COST_CAP, SAMPLE_BLOCKS, "")
    assert "not run (over the cost cap" not in phrase
    assert "max cols=4096 run (every block)" in phrase
    assert "max rows=4096 run on 16 of 4096 blocks (edge blocks and a sample)" in phrase
    tops = [b for b in plan if b.chosen.endswith(" max")]
    assert {(b.sizes["rows"], b.sizes["cols"], b.sample) for b in tops} >= {
        (1, 4096, 0), (4096, 1, SAMPLE_BLOCKS)}
    check = falsify.run_test(k, t, ptx, t.seed, falsify.InterpreterEngine(), run_seed=5,
                             bindings=tops)
    assert check.status == "passed", check.detail
    assert "once at (rows,cols)=(4096,1) (run on a sample of its blocks)" in check.detail


# vector_add with 32-thread blocks and n up to 2^12: 128 blocks at the maximum
VADD32 = (BUNDLES / "vector_add" / "contract.yaml").read_text().replace(
    'grid: ["ceil_div(n, 256)", 1, 1]', 'grid: ["ceil_div(n, 32)", 1, 1]').replace(
    "block: [256, 1, 1]", "block: [32, 1, 1]").replace(
    "n: {min: 1, max: 16777216}", "n: {min: 1, max: 4096}")
PTX32 = VADD_PTX.replace("shl.b32 \t%r4, %r3, 8;", "shl.b32 \t%r4, %r3, 5;")


def _block_bug(which: str) -> str:
    """PTX32 with c = a - b in one block (``which``: "last" or a block id) of a grid over 64
    blocks."""
    target = ("mov.u32 \t%r6, %nctaid.x;\n\tadd.s32 \t%r7, %r6, -1;" if which == "last"
              else f"mov.u32 \t%r6, %nctaid.x;\n\tmov.u32 \t%r7, {which};")
    return PTX32.replace(".reg .pred \t%p<2>;", ".reg .pred \t%p<5>;").replace(
        ".reg .b32 \t%r<6>;", ".reg .b32 \t%r<8>;").replace(
        "add.f32 \t%f3, %f2, %f1;",
        f"{target}\n\tsetp.eq.u32 \t%p2, %r3, %r7;\n\tsetp.gt.u32 \t%p3, %r6, 64;\n"
        "\tand.pred \t%p4, %p2, %p3;\n\tadd.f32 \t%f3, %f2, %f1;\n"
        "\t@%p4 sub.f32 \t%f3, %f2, %f1;")


def _vadd_max(ptx: str, monkeypatch: pytest.MonkeyPatch, sample: int) -> falsify.Check:
    """The test's n=4096 binding alone, under a cap that makes it a sampled launch."""
    monkeypatch.setattr(falsify, "CPU_COST_CAP", 1 << 13)  # n=4096 (20480 units) is over it
    c = load_contract(VADD32.encode())
    k, t = c.kernel, c.falsification[0]
    assert k is not None
    plan, phrase = falsify.plan_bindings(k, t, 3, falsify.CPU_COST_CAP, SAMPLE_BLOCKS, "")
    (top,) = [b for b in plan if b.chosen == "n max"]
    assert top.sizes == {"n": 4096} and top.sample == SAMPLE_BLOCKS
    assert "max n=4096 run on 16 of 128 blocks (edge blocks and a sample)" in phrase
    top = dataclasses.replace(top, sample=sample)
    return falsify.run_test(k, t, ptx.encode(), t.seed, falsify.InterpreterEngine(), run_seed=3,
                            bindings=[top])


def test_a_bug_in_the_last_block_only_is_caught_on_a_sample(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _vadd_max(PTX32, monkeypatch, SAMPLE_BLOCKS).status == "passed"
    check = _vadd_max(_block_bug("last"), monkeypatch, SAMPLE_BLOCKS)
    assert check.status == "failed"
    assert "n=4096 (chosen: n max)" in check.detail and "c[4064]" in check.detail


def test_a_bug_in_one_interior_block_can_be_missed_by_the_sample(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Honest limit: an interior block outside run seed 3's sample (the corners and 14 others)
    is never run, so the sampled run passes; the same size run on every block fails."""
    picked = pick_blocks((128, 1, 1), SAMPLE_BLOCKS, falsify._stream(3, "FALSIFY-VADD-001", 2))
    missed = next(b for b in range(1, 127) if b not in picked)
    assert _vadd_max(_block_bug(str(missed)), monkeypatch, SAMPLE_BLOCKS).status == "passed"
    full = _vadd_max(_block_bug(str(missed)), monkeypatch, 0)
    assert full.status == "failed" and f"c[{missed * 32}]" in full.detail


def test_a_kernel_whose_blocks_may_communicate_is_not_sampled() -> None:
    atomic = PTX32.replace("ret;", "red.global.add.f32 \t[%rd3], %f3;\n\tret;")
    c = load_contract(VADD32.encode())
    k, t = c.kernel, c.falsification[0]
    assert k is not None
    why = unsafe_reason(atomic.encode())
    assert why == "the kernel uses global atomics"
    cap = 1 << 9  # n=4096 (20480 units) is over 32 launches of it
    plan, phrase = falsify.plan_bindings(k, t, 3, cap, 0, why)
    assert not any(b.sample for b in plan)
    assert "max n=4096 not run (over the cost cap of 128 for it; " in phrase
    assert "blocks not sampled: the kernel uses global atomics)" in phrase
