"""The benign-race rule (issue 32): lanes of ONE warp storing the SAME value to one address in
ONE instruction (``shared_sum[warp_id] = v`` after a butterfly reduction, as Triton emits) is a
note, not a race; lanes with different values, or lanes of several warps, stay findings. Kernels
built by the real nvcc (tests/fixtures/ptxsim_race/warp_store.cu, -arch=sm_86), plus hand-written
PTX for the single-instruction cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.nvcc import build_ptx
from verify.ptxsim import Buffer, Module, Scalar, SimResult, launch, load_module

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim_race"


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return build_ptx(FIX / "warp_store.cu", tmp_path_factory.mktemp("race"))


@pytest.fixture(scope="module")
def mod(ptx: bytes) -> Module:
    return load_module(ptx)


def rows(kernel: str, mod: Module, n: int = 300, nrows: int = 3, block: int = 128) -> tuple[
        np.ndarray, np.ndarray, SimResult]:
    x = np.random.default_rng(1).integers(-8, 8, nrows * n).astype(np.float32)  # exact sums
    out = np.zeros(nrows, np.float32)
    r = launch(mod, kernel, (nrows, 1, 1), (block, 1, 1),
               [Buffer(x, "in", "x"), Buffer(out, "out", "out"), Scalar(n, ".s32")])
    return x, out, r


def test_same_value_store_by_one_warp_is_a_note_not_a_race(mod: Module) -> None:
    x, out, r = rows("row_sum", mod)
    assert r.findings == ()
    assert (out == x.reshape(3, -1).sum(axis=1)).all()
    notes = r.notes
    assert len(notes) == 1
    assert notes[0].startswith("benign_store: shared byte at shared offset 0 of block")
    assert "written with the same value by 32 lanes of one warp" in notes[0]
    assert "(12 such addresses, each by one warp, in 3 block(s))" in notes[0]


def test_different_values_stay_a_race(mod: Module) -> None:
    _, _, r = rows("row_sum_raw", mod)
    kinds = [f.kind for f in r.findings]
    assert "race" in kinds
    assert r.notes == ()


def test_several_warps_storing_one_value_stay_a_race(mod: Module) -> None:
    _, _, r = rows("row_sum_one_slot", mod, n=5)
    race = [f for f in r.findings if f.kind == "race"]
    assert race and "in one instruction" in race[0].message


def test_global_same_value_store_by_one_warp(mod: Module) -> None:
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(8, np.float32)
    r = launch(mod, "warp_sums", (2, 1, 1), (128, 1, 1),
               [Buffer(x, "in", "x"), Buffer(out, "out", "out")])
    assert r.findings == ()
    assert (out == x.reshape(8, 32).sum(axis=1)).all()
    assert len(r.notes) == 1 and "of buffer 'out'" in r.notes[0]


PTX = """.version 8.0
.target sm_86
.address_size 64
.visible .entry k(.param .u64 po)
{
    .reg .b32 %r<8>;
    .reg .b64 %x<4>;
    .shared .align 4 .b8 s[64];
    ld.param.u64 %x1, [po];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, s;
    VALUE
    st.shared.u32 [%r1], %r2;
    bar.sync 0;
    ld.shared.u32 %r3, [%r1];
    mul.wide.u32 %x2, %r0, 4;
    add.s64 %x1, %x1, %x2;
    st.global.u32 [%x1], %r3;
    ret;
}
"""


@pytest.mark.parametrize(("value", "threads", "race"), [
    ("mov.u32 %r2, 7;", 32, False),          # one warp, one value
    ("mov.u32 %r2, 7;", 64, True),           # two warps, one value: a race
    ("and.b32 %r2, %r0, 1;", 32, True),      # one warp, two values: a race
    ("shr.u32 %r2, %r0, 5;", 64, True),      # per warp one value, but both warps: a race
])
def test_hand_written_single_store(value: str, threads: int, race: bool) -> None:
    out = np.zeros(threads, np.uint32)
    r = launch(load_module(PTX.replace("VALUE", value)), "k", (1, 1, 1), (threads, 1, 1),
               [Buffer(out, "out", "o")])
    assert ("race" in [f.kind for f in r.findings]) == race
    assert bool(r.notes) == (not race)


CONTRACT = """
metadata: {version: "1.0.0", description: "row sums"}
equations:
  row_sum: {formula: "out_r = sum_i x_{r,i}"}
kernel:
  name: row_sum
  version: "1.0.0"
  entry: ENTRY
  ptx: warp_store.ptx
  reference: test_row_sum
  params:
    - {name: x, ptr: f32, intent: in, shape: ["rows * n"]}
    - {name: out, ptr: f32, intent: out, shape: [rows]}
    - {name: n, scalar: s32, value: n}
  launch: {grid: [rows, 1, 1], block: [128, 1, 1]}
  size_domain:
    rows: {min: 1, max: 8}
    n: {min: 1, max: 512}
falsification_tests:
  - id: FALSIFY-ROWSUM-001
    rule: "matches reference"
    prediction: "sums within abs 1e-3"
    sizes: [{rows: 3, n: 300}]
    inputs: {low: -1.0, high: 1.0}
    tolerance: {abs: 0.001, why: "a tree sum of at most 512 values in [-1, 1]"}
    properties: [reference, race_free]
"""


def row_sums(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    return {"out": inputs["x"].astype(np.float64).reshape(sizes["rows"], -1).sum(axis=1)}


@pytest.mark.parametrize(("entry", "status"), [("row_sum", "passed"), ("row_sum_raw", "failed")])
def test_falsify_detail_shows_the_note(ptx: bytes, entry: str, status: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.contract import load_contract
    from verify.falsify import InterpreterEngine, run_test
    from verify.references import REFERENCES

    monkeypatch.setitem(REFERENCES, "test_row_sum", row_sums)
    c = load_contract(CONTRACT.replace("ENTRY", entry).encode())
    assert c.kernel is not None
    check = run_test(c.kernel, c.falsification[0], ptx, 0, InterpreterEngine(), run_seed=1)
    assert check.status == status, check.detail
    if status == "passed":
        assert "; note: benign_store: shared byte" in check.detail
    else:
        assert "race [race_free/PO7]" in check.detail
