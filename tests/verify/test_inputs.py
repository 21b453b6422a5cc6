"""Inputs with meaning and values the verifier chooses (issue 32; verify/inputs.py,
contracts/README.md "Input domains", docs/falsification.md "Values the verifier chooses").

The kernels (tests/fixtures/inputs/kernels.cu, built by the real nvcc) need a contract that says
what their inputs are: token ids in [0, V), a precondition ``targets[i] < V``, ``v >= 0`` on one
pointer, CSR offsets, a nullable bias, a ``__constant__`` table, a block size tied to the launch,
all-negative rows for an argmax, and NaN inputs under a stated NaN rule. Each runs through
``falsify.run`` on the PTX interpreter, with its reference registered for the test."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import ContractError
from tests.helpers.nvcc import build_ptx
from verify import falsify
from verify.context import Context, Options
from verify.contract import load_contract
from verify.contract_lint import lint_contract, schema_errors
from verify.references import REFERENCES

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inputs"
Ref = Callable[[dict[str, np.ndarray], dict[str, int]], dict[str, np.ndarray]]

HEAD = """
metadata: {version: "1.0.0", description: "issue 32 input domains"}
equations:
  k: {formula: "see the kernel"}
kernel:
  name: ENTRY
  version: "1.0.0"
  entry: ENTRY
  ptx: kernels.ptx
  reference: test_ref
"""
TEST = """falsification_tests:
  - id: FALSIFY-IN-001
    rule: "matches reference"
    prediction: "PREDICTION"
    sizes: SIZES
    tolerance: TOL
    properties: [reference, bounds]
"""


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return build_ptx(FIX / "kernels.cu", tmp_path_factory.mktemp("inputs"))


def contract(entry: str, kernel: str, sizes: str, *, tol: str = "{ulp: 0}",
             test: str = "", prediction: str = "out == reference exactly") -> str:
    head = HEAD.replace("ENTRY", entry) + kernel
    body = TEST.replace("SIZES", sizes).replace("TOL", tol).replace("PREDICTION", prediction)
    return head + body + test


def run(ptx: bytes, text: str, ref: Ref, monkeypatch: pytest.MonkeyPatch,
        seed: int = 3) -> tuple[str, str]:
    monkeypatch.setitem(REFERENCES, "test_ref", ref)
    bundle = Bundle.from_files({"contract.yaml": text.encode(), "kernels.ptx": ptx,
                                "K.lean": b"-- none\n", "k.fut": b"--\n"})
    ctx = Context(bundle, Options(use_gpu=False, seed=seed))
    ctx.contract = load_contract(text.encode())
    ((status, detail),) = [(c.status, c.detail) for c in falsify.run(ctx)]
    return status, detail


def lint(ptx: bytes, text: str) -> dict[str, tuple[str, str]]:
    c = load_contract(text.encode())
    return {g.name: (g.status, g.reason) for g in lint_contract(c, {"kernels.ptx": ptx})}


# --- embedding: token ids in [0, V), data in its own range ----------------------------------

EMBEDDING = """  params:
    - {name: ids, ptr: s32, shape: [T], index_of: V}
    - {name: table, ptr: f32, shape: [V, C], range: {low: -3.0, high: 3.0}}
    - {name: out, ptr: f32, intent: out, shape: [T, C]}
    - {name: T, scalar: s32, value: T}
    - {name: C, scalar: s32, value: C}
  launch: {grid: ["ceil_div(T * C, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    T: {min: 1, max: 64}
    V: {min: 1, max: 50}
    C: {min: 1, max: 16}
"""


def embedding_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    table = inputs["table"].reshape(sizes["V"], sizes["C"])
    assert inputs["ids"].min() >= 0 and inputs["ids"].max() < sizes["V"]
    assert np.abs(table).max() <= 3.0
    return {"out": table[inputs["ids"]]}


def test_embedding_ids_index_the_vocabulary(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("embedding", EMBEDDING, "[{T: 7, V: 5, C: 3}, {T: 64, V: 2, C: 16}]")
    status, detail = run(ptx, text, embedding_ref, monkeypatch)
    assert status == "passed", detail
    assert "all-negative rows" in detail
    assert lint(ptx, text)["inputs"][0] == "passed"


def test_without_index_of_the_ids_run_out_of_the_table(ptx: bytes,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("embedding", EMBEDDING.replace(", index_of: V", ""),
                    "[{T: 7, V: 5, C: 3}]").replace("sizes:", "inputs: {low: -3, high: 3}\n"
                                                    "    sizes:")
    status, detail = run(ptx, text, lambda i, s: {"out": np.zeros(s["T"] * s["C"])},
                         monkeypatch)
    assert status == "failed" and "out_of_bounds" in detail


# --- cross entropy: a precondition targets[i] < V -------------------------------------------

CROSS_ENTROPY = """  params:
    - {name: probs, ptr: f32, shape: [B, V], range: {low: 0.01, high: 1.0}}
    - {name: targets, ptr: s32, shape: [B], range: {low: 0, high: 100000}}
    - {name: loss, ptr: f32, intent: out, shape: [B]}
    - {name: B, scalar: s32, value: B}
    - {name: V, scalar: s32, value: V}
  preconditions: ["targets[i] < V"]
  launch: {grid: ["ceil_div(B, 64)", 1, 1], block: [64, 1, 1]}
  size_domain:
    B: {min: 1, max: 200}
    V: {min: 1, max: 300}
"""


def cross_entropy_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]
                      ) -> dict[str, np.ndarray]:
    probs = inputs["probs"].reshape(sizes["B"], sizes["V"]).astype(np.float64)
    t = inputs["targets"]
    assert t.min() >= 0 and t.max() < sizes["V"], "the precondition was not honoured"
    return {"loss": -np.log(probs[np.arange(sizes["B"]), t])}


def test_cross_entropy_targets_below_v(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("cross_entropy", CROSS_ENTROPY, "[{B: 10, V: 7}, {B: 3, V: 200}]",
                    tol="{ulp: 2}", prediction="loss == -log(p[target]) within 2 ulp")
    status, detail = run(ptx, text, cross_entropy_ref, monkeypatch)
    assert status == "passed", detail


def test_a_precondition_on_an_unknown_array_fails_lint(ptx: bytes) -> None:
    text = contract("cross_entropy", CROSS_ENTROPY.replace("targets[i] < V", "labels[i] < V"),
                    "[{B: 10, V: 7}]", tol="{ulp: 2}", prediction="within 2 ulp")
    status, reason = lint(ptx, text)["inputs"]
    assert status == "failed"
    assert reason == ("kernel.preconditions[0]: 'labels' is not an in or inout pointer "
                      "parameter")


# --- an optimizer's v >= 0 on one pointer only ----------------------------------------------

RMS = """  params:
    - {name: w, ptr: f32, intent: inout, shape: [n]}
    - {name: g, ptr: f32, shape: [n]}
    - {name: v, ptr: f32, shape: [n], range: {low: 0.0, high: 4.0}}
    - {name: n, scalar: s32, value: n}
  launch: {grid: ["ceil_div(n, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    n: {min: 1, max: 3000}
"""


def rms_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    v = inputs["v"].astype(np.float32)
    assert (v >= 0).all(), "v < 0 was drawn"
    step = np.float32(0.01) * inputs["g"] / (np.sqrt(v) + np.float32(1e-3))
    return {"w": inputs["w"] - step.astype(np.float32)}


def test_optimizer_second_moment_is_not_negative(ptx: bytes,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("rms_step", RMS, "[{n: 100}]", tol="{ulp: 4}",
                    prediction="within 4 ulp").replace(
        "    sizes:", "    inputs: {low: -5.0, high: 5.0}\n    sizes:")
    status, detail = run(ptx, text, rms_ref, monkeypatch)
    assert status == "passed", detail
    case = falsify.make_case(load_contract(text.encode()).kernel,  # type: ignore[arg-type]
                             load_contract(text.encode()).falsification[0], {"n": 500},
                             np.random.default_rng(1))
    assert case.inputs["v"].min() >= 0 and case.inputs["g"].min() < -1.0


# --- CSR SpMV: offsets ----------------------------------------------------------------------

SPMV = """  params:
    - {name: row_ptr, ptr: u32, shape: ["rows + 1"], offsets_of: val, total: nnz}
    - {name: col, ptr: s32, shape: [nnz], index_of: n}
    - {name: val, ptr: f32, shape: [nnz]}
    - {name: x, ptr: f32, shape: [n]}
    - {name: y, ptr: f32, intent: out, shape: [rows]}
    - {name: rows, scalar: s32, value: rows}
  launch: {grid: ["ceil_div(rows, 64)", 1, 1], block: [64, 1, 1]}
  size_domain:
    rows: {min: 1, max: 300}
    nnz: {min: 0, max: 2000}
    n: {min: 1, max: 500}
"""


def spmv_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rp, col, val, x = (inputs[k] for k in ("row_ptr", "col", "val", "x"))
    assert rp[0] == 0 and rp[-1] == sizes["nnz"] and (np.diff(rp.astype(np.int64)) >= 0).all()
    y = np.zeros(sizes["rows"])
    for r in range(sizes["rows"]):
        j = slice(int(rp[r]), int(rp[r + 1]))
        y[r] = np.dot(val[j].astype(np.float64), x[col[j]].astype(np.float64))
    return {"y": y}


SPMV_SIZES = "[{rows: 5, nnz: 12, n: 9}, {rows: 40, nnz: 0, n: 3}]"
SPMV_TOL = "{abs: 1e-5, rel: 1e-5}"


def test_a_correct_spmv_passes_with_offsets(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("spmv_csr", SPMV, SPMV_SIZES, tol=SPMV_TOL,
                    prediction="within 1e-5")
    status, detail = run(ptx, text, spmv_ref, monkeypatch)
    assert status == "passed", detail


def test_an_spmv_reading_past_nnz_is_caught(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("spmv_csr_past", SPMV, SPMV_SIZES, tol=SPMV_TOL,
                    prediction="within 1e-5")
    status, detail = run(ptx, text, spmv_ref, monkeypatch)
    assert status == "failed" and "out_of_bounds" in detail and "'val'" in detail


def test_offsets_of_an_unknown_array_fails_lint(ptx: bytes) -> None:
    text = contract("spmv_csr", SPMV.replace("offsets_of: val", "offsets_of: vals"), SPMV_SIZES)
    assert lint(ptx, text)["inputs"] == (
        "failed", "kernel.params[0].offsets_of: 'vals' is not a pointer parameter")


# --- a nullable bias ------------------------------------------------------------------------

BIAS = """  params:
    - {name: x, ptr: f32, shape: [n]}
    - {name: bias, ptr: f32, shape: [n], nullable: true}
    - {name: out, ptr: f32, intent: out, shape: [n]}
    - {name: n, scalar: s32, value: n}
  launch: {grid: ["ceil_div(n, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    n: {min: 1, max: 3000}
"""
SEEN: list[bool] = []


def bias_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    bias = inputs.get("bias")
    SEEN.append(bias is None)
    out = inputs["x"] * np.float32(2.0)
    return {"out": out if bias is None else out + bias}


def test_a_null_bias_path_is_run(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    SEEN.clear()
    status, detail = run(ptx, contract("scale_bias", BIAS, "[{n: 300}]"), bias_ref, monkeypatch)
    assert status == "passed", detail
    assert True in SEEN and False in SEEN, detail  # run once with a null pointer, and with buffers
    assert "nullable pointers null" in detail


def test_a_kernel_ignoring_null_is_caught(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    status, detail = run(ptx, contract("scale_bias_nocheck", BIAS, "[{n: 300}]"), bias_ref,
                         monkeypatch)
    assert status == "failed" and "out_of_bounds" in detail


# --- a __constant__ table -------------------------------------------------------------------

CONST = """  params:
    - {name: x, ptr: f32, shape: [n]}
    - {name: out, ptr: f32, intent: out, shape: [n]}
    - {name: n, scalar: s32, value: n}
  constants:
    - {name: coef, dtype: f32, values: [1.0, -2.0, 0.5, 4.0, 0.25, -1.0, 3.0, 8.0]}
  launch: {grid: ["ceil_div(n, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    n: {min: 1, max: 3000}
"""


def const_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    coef = inputs["coef"]
    return {"out": coef[np.arange(sizes["n"]) % 8] * inputs["x"]}


def test_a_constant_table_is_set_by_the_contract(ptx: bytes,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract("const_scale", CONST, "[{n: 300}]")
    status, detail = run(ptx, text, const_ref, monkeypatch)
    assert status == "passed", detail
    assert lint(ptx, text)["inputs"][0] == "passed"
    # a reference that assumes the table is all zeros (the module's initialiser) fails
    status, _ = run(ptx, text, lambda i, s: {"out": 0 * i["x"]}, monkeypatch)
    assert status == "failed"


def test_a_constant_not_in_the_ptx_fails_lint(ptx: bytes) -> None:
    text = contract("const_scale", CONST.replace("name: coef", "name: coeffs"), "[{n: 300}]")
    assert lint(ptx, text)["inputs"] == (
        "failed", "kernel.constants[0].name: 'coeffs' is not a .const array of kernels.ptx "
        "(.const: coef)")


# --- a block size tied to the launch --------------------------------------------------------

COPY_BS = """  params:
    - {name: x, ptr: f32, shape: [n]}
    - {name: out, ptr: f32, intent: out, shape: [n]}
    - {name: n, scalar: s32, value: n}
    - {name: block_size, scalar: s32, tied: block.x}
  launch: {grid: ["ceil_div(n, 96)", 1, 1], block: [96, 1, 1]}
  size_domain:
    n: {min: 1, max: 3000}
"""


def test_a_block_size_scalar_tied_to_the_launch(ptx: bytes,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    status, detail = run(ptx, contract("copy_bs", COPY_BS, "[{n: 300}]"),
                         lambda i, s: {"out": i["x"]}, monkeypatch)
    assert status == "passed", detail
    k = load_contract(contract("copy_bs", COPY_BS, "[{n: 300}]").encode()).kernel
    assert k is not None and k.params[3].tied == "block.x"
    gates = lint(ptx, contract("copy_bs", COPY_BS, "[{n: 300}]"))
    assert all(status == "passed" for name, (status, _) in gates.items()
               if name in ("executable", "launch", "domain", "inputs")), gates


# --- the row argmax whose running max starts at 0.0 -----------------------------------------

ARGMAX = """  params:
    - {name: x, ptr: f32, shape: [rows, C]}
    - {name: out, ptr: s32, intent: out, shape: [rows]}
    - {name: rows, scalar: s32, value: rows}
    - {name: C, scalar: s32, value: C}
  launch: {grid: ["ceil_div(rows, 32)", 1, 1], block: [32, 1, 1]}
  size_domain:
    rows: {min: 1, max: 64}
    C: {min: 8, max: 256}
"""


def argmax_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    return {"out": np.argmax(inputs["x"].reshape(sizes["rows"], sizes["C"]), axis=1)}


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_argmax_from_zero_is_caught_on_every_seed(ptx: bytes, monkeypatch: pytest.MonkeyPatch,
                                                  seed: int) -> None:
    text = contract("argmax_zero", ARGMAX, "[{rows: 4, C: 64}]").replace(
        "    sizes:", "    inputs: {low: -1.0, high: 1.0}\n    sizes:")
    status, detail = run(ptx, text, argmax_ref, monkeypatch, seed=seed)
    assert status == "failed", detail
    # the all-negative rows alone catch it, at rows long enough that random rows never are
    monkeypatch.setitem(REFERENCES, "test_ref", argmax_ref)
    c = load_contract(text.encode())
    assert c.kernel is not None
    engine = falsify.choose_engine(Options(use_gpu=False))
    only = [falsify.Binding({"rows": 8, "C": 256}, seed, "all-negative rows", "negative")]
    check = falsify.run_test(c.kernel, c.falsification[0], ptx, seed, engine, bindings=only)
    assert check.status == "failed" and "out[0]: got np.int32(0)" in check.detail
    random_only = [falsify.Binding({"rows": 8, "C": 256}, seed, "random")]
    check = falsify.run_test(c.kernel, c.falsification[0], ptx, seed, engine,
                             bindings=random_only)
    assert check.status == "passed", check.detail
    ok, detail = run(ptx, text.replace("argmax_zero", "argmax_ok"), argmax_ref, monkeypatch,
                     seed=seed)
    assert ok == "passed", detail


# --- fminf against numpy's minimum on NaN ---------------------------------------------------

VMIN = """  params:
    - {name: a, ptr: f32, shape: [n]}
    - {name: b, ptr: f32, shape: [n]}
    - {name: out, ptr: f32, intent: out, shape: [n]}
    - {name: n, scalar: s32, value: n}
  launch: {grid: ["ceil_div(n, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    n: {min: 1, max: 3000}
"""


def minimum_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    return {"out": np.minimum(inputs["a"], inputs["b"])}


def fmin_ref(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    return {"out": np.fmin(inputs["a"], inputs["b"])}


def vmin(specials: str) -> str:
    return contract("vmin", VMIN, "[{n: 300}]", test=specials)


def test_fminf_against_np_minimum_under_a_nan_rule(ptx: bytes,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # NaN inputs, NaN must equal NaN: fminf(NaN, x) = x but np.minimum gives NaN
    status, detail = run(ptx, vmin("    specials: [nan]\n    nan: equal\n"), minimum_ref,
                         monkeypatch)
    assert status == "failed" and "a NaN in every row" in detail
    # np.fmin is fminf's rule: it passes under the same claim
    status, detail = run(ptx, vmin("    specials: [nan]\n    nan: equal\n"), fmin_ref,
                         monkeypatch)
    assert status == "passed", detail
    # "nan: any": a NaN of the reference accepts any value of the kernel
    status, detail = run(ptx, vmin("    specials: [nan, inf]\n    nan: any\n"), minimum_ref,
                         monkeypatch)
    assert status == "passed", detail
    # no NaN in the claim: none is drawn, and np.minimum agrees with fminf
    status, detail = run(ptx, vmin(""), minimum_ref, monkeypatch)
    assert status == "passed", detail and "NaN" not in detail


# --- the contract format --------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "message"), [
    ("index_of: V}", "index_of: V, sorted: maybe}", "kernel.params[0].sorted: expected true or "
     "false, got a string"),
    ("index_of: V}", "index_of: V, range: {low: 0, high: 3}}", "kernel.params[0].range: an "
     "index_of array takes its values from index_of, not a range"),
    ("range: {low: -3.0, high: 3.0}", "range: {low: 3.0, high: -3.0}",
     "kernel.params[1].range: low 3.0 is above high -3.0"),
    ("range: {low: -3.0, high: 3.0}", "index_of: V", "kernel.params[1].index_of: an index or "
     "offsets array has an integer dtype"),
    ("range: {low: -3.0, high: 3.0}", "sorted: true", "kernel.params[1].sorted: only an index "
     "array (index_of) has sorted"),
    ("{name: T, scalar: s32, value: T}", "{name: T, scalar: s32, value: T, nullable: true}",
     "kernel.params[3].nullable: only pointers have nullable"),
    ("{name: T, scalar: s32, value: T}", "{name: T, scalar: s32, tied: warp.x}",
     "kernel.params[3].tied: 'warp.x' is not one of grid.x"),
    ("{name: T, scalar: s32, value: T}", "{name: T, scalar: s32, value: random}",
     "kernel.params[3].value: 'random' is only allowed for a float scalar"),
])
def test_bad_domains_are_refused(old: str, new: str, message: str) -> None:
    text = contract("embedding", EMBEDDING.replace(old, new), "[{T: 7, V: 5, C: 3}]")
    with pytest.raises(ContractError, match=re.escape(message)):
        load_contract(text.encode())


def test_a_nan_test_states_its_rule() -> None:
    with pytest.raises(ContractError, match=re.escape("falsification_tests[0].nan: a test with "
                                                      "NaN inputs states how a NaN is compared")):
        load_contract(vmin("    specials: [nan]\n").encode())


def test_index_of_an_unknown_size_fails_lint(ptx: bytes) -> None:
    text = contract("embedding", EMBEDDING.replace("index_of: V", "index_of: W"),
                    "[{T: 7, V: 5, C: 3, W: 3}]")
    status, reason = lint(ptx, text)["inputs"]
    assert status == "failed"
    assert reason.startswith("kernel.params[0].index_of: 'W' is not a size variable of "
                             "kernel.size_domain")


def test_schema_accepts_the_new_fields() -> None:
    from verify.contract import parse_yaml

    for text in (contract("embedding", EMBEDDING, "[{T: 7, V: 5, C: 3}]"),
                 contract("spmv_csr", SPMV, SPMV_SIZES, tol=SPMV_TOL, prediction="within"),
                 contract("scale_bias", BIAS, "[{n: 3}]"),
                 contract("const_scale", CONST, "[{n: 3}]"),
                 contract("copy_bs", COPY_BS, "[{n: 3}]"),
                 contract("cross_entropy", CROSS_ENTROPY, "[{B: 1, V: 2}]"),
                 vmin("    specials: [nan]\n    nan: any\n")):
        doc: Any = parse_yaml(text.encode())
        assert schema_errors(doc) == [], text


def test_index_arrays_keep_their_order() -> None:
    from verify.inputs import index_values
    from verify.model import InputDomain

    rng = np.random.default_rng(0)
    perm = index_values(rng, "s32", 50, InputDomain(index_of="V", permutation=True), {"V": 50},
                        "p")
    assert sorted(perm.tolist()) == list(range(50))
    uniq = index_values(rng, "s32", 30, InputDomain(index_of="V", unique=True, sorted=True),
                        {"V": 40}, "u")
    assert len(set(uniq.tolist())) == 30 and (np.diff(uniq) > 0).all() and uniq.max() < 40


def test_a_range_outside_an_integer_dtype_fails_lint(ptx: bytes) -> None:
    text = contract("embedding", EMBEDDING.replace("{name: ids, ptr: s32, shape: [T], index_of: V}",
                                                   "{name: ids, ptr: u8, shape: [T], range: "
                                                   "{low: -1, high: 300}}"), "[{T: 7, V: 5, C: 3}]")
    assert lint(ptx, text)["inputs"] == (
        "failed", "kernel.params[0].range: -1 .. 300 does not fit u8 (0 .. 255)")


def test_preconditions_are_honoured_or_refused() -> None:
    from ledger.core.errors import BadInput

    text = contract("cross_entropy", CROSS_ENTROPY.replace(
        '"targets[i] < V"', '"targets[i] < V", "probs[i] >= 0.5"').replace(
        "{name: targets, ptr: s32, shape: [B]", "{name: lo, ptr: s32, shape: [B], range: "
        "{low: 0, high: 9}}\n    - {name: targets, ptr: s32, shape: [B]"), "[{B: 10, V: 7}]",
        tol="{ulp: 2}", prediction="within 2 ulp")
    c = load_contract(text.replace('"probs[i] >= 0.5"', '"targets[i] >= lo[i]"').encode())
    assert c.kernel is not None
    case = falsify.make_case(c.kernel, c.falsification[0], {"B": 300, "V": 7},
                             np.random.default_rng(0))
    t, lo = case.inputs["targets"], case.inputs["lo"]
    assert (t < 7).all() and (t >= lo).all()
    c = load_contract(text.replace('"probs[i] >= 0.5"', '"targets[i] > V"').encode())
    assert c.kernel is not None
    with pytest.raises(BadInput, match="param targets: no value meets its range and "
                                       "preconditions"):
        falsify.make_case(c.kernel, c.falsification[0], {"B": 3, "V": 7},
                          np.random.default_rng(0))


def test_the_interpreter_sets_constants_and_refuses_unknown_ones(ptx: bytes) -> None:
    from verify import ptxsim

    module = ptxsim.load_module(ptx)
    x = np.arange(1, 17, dtype=np.float32)
    out = np.zeros(16, np.float32)
    coef = np.array([2, 3, 4, 5, 6, 7, 8, 9], np.float32).tobytes()
    args: list[ptxsim.Buffer | ptxsim.Scalar] = [
        ptxsim.Buffer(x, "in", "x"), ptxsim.Buffer(out, "out", "out"), ptxsim.Scalar(16, ".s32")]
    r = ptxsim.launch(module, "const_scale", (1, 1, 1), (32, 1, 1), args, constants={"coef": coef})
    assert not r.findings
    assert out.tolist() == (np.tile(np.arange(2, 10), 2) * x).tolist()
    ptxsim.launch(module, "const_scale", (1, 1, 1), (32, 1, 1), args)
    assert not out.any()  # without them, the module's initialiser (zeros)
    with pytest.raises(ptxsim.PtxSyntaxError, match=re.escape(
            "__constant__ 'coeff' is not a .const variable of the module")):
        ptxsim.launch(module, "const_scale", (1, 1, 1), (32, 1, 1), args,
                      constants={"coeff": coef})
    with pytest.raises(ptxsim.PtxSyntaxError, match="holds 32 bytes, the contract gives 36"):
        ptxsim.launch(module, "const_scale", (1, 1, 1), (32, 1, 1), args,
                      constants={"coef": coef + b"\0" * 4})


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "f64", "s32"])
def test_patterns_stay_inside_the_range(dtype: str) -> None:
    from verify.compare import values_of
    from verify.inputs import PATTERNS, apply_pattern, random_values

    rng = np.random.default_rng(5)
    for low, high in ((-2.0, 3.0), (0.0, 1.0), (-4.0, -1.0)):
        for pattern in (*PATTERNS, "nan", "inf"):
            data = random_values(rng, dtype, 24, low, high)  # a draw, then its layout
            apply_pattern(data, pattern, low, high, dtype, 6, rng)
            v = values_of(dtype, data).astype(np.float64)
            fin = v[np.isfinite(v)]
            assert ((fin >= low) & (fin <= high)).all(), (pattern, low, high, v)
            rows = v.reshape(4, 6)
            if pattern == "negative" and low < 0:
                assert (rows < 0).all()
            if pattern == "positive" and high > 0:
                assert (rows > 0).all()
            if pattern == "extreme":
                assert all(high in r or low in r for r in rows)
            if pattern == "subnormal" and dtype != "s32" and low <= 0 <= high:
                tiny = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126,
                        "f64": 2.0**-1022}[dtype]
                assert ((np.abs(v) < tiny) & (v != 0)).all()
            if pattern == "nan" and dtype != "s32":
                assert all(np.isnan(r).sum() == 1 for r in rows)
            if pattern == "zeros" and low <= 0 <= high:
                assert not v.any() and (dtype == "s32" or np.signbit(v).any())
