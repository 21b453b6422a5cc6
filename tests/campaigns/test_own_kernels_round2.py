"""Second red-team of kernels users bring (docs/falsification.md, "Red-team of bring-your-own
kernels"): each class of problem found, as a user meets it, with a real nvcc build and the real
CLI (skipped without nvcc).

1. ``ledger new`` on source shapes it misread: a parameter called ``off`` or ``on`` (YAML 1.1
   booleans) gave a contract its own reader refused; a struct passed by value became a one-byte
   size variable; a kernel in a namespace, launch bounds given by a macro, a template's element
   types, float4 elements; an uninitialised ``__constant__`` and ``extern __shared__`` went
   unmentioned (``ledger_cli.scaffold``; the reader's hint in ``verify.contract``).
2. Several kernels in one source: ``ptx.assemble`` held every entry to the contract entry's
   resource budget, refusing a correct bundle (``verify.ptx.start_assemble``).
3. Order-dependent rounding: a float ``atomicAdd`` total was ``schedule_dependent`` under any
   tolerance; the second schedule's outputs are now judged against the oracle under the test's
   tolerance (``verify.falsify.judge_case``), so a fitting tolerance passes and a last-writer-wins
   exchange still fails.
4. The size note said ``max K=64 not run`` of a maximum that ran in a joint binding
   (``verify.sizes.choose_sizes``).
5. Round trip: a bring-your-own bundle sealed in a fresh ledger verifies by digest and offline
   from its receipt; a changed file fails ``integrity.manifest``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledger.core.errors import ContractError
from tests.helpers import byo
from tests.helpers.ledgers import assert_one_error_line, cli_json, run_cli
from verify.contract import load_contract
from verify.tools import find_tool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "redteam2"
needs_nvcc = pytest.mark.skipif(
    find_tool("nvcc", cuda=True) is None, reason="no nvcc: ledger new cannot build the PTX"
)
GEMM_ENTRY = "_Z10gemm_tiledPKfS0_Pfiii"


# ---------------------------------------------------------------- helpers


def _fut(p: Path, fn: str) -> None:
    """A Futhark entry with one test case."""
    p.write_text(
        f"-- ==\n-- entry: {fn}\n-- input {{ [1f32] }}\n-- output {{ [1f32] }}\n\n"
        f"entry {fn} [n] (x: [n]f32) : [n]f32 = x\n"
    )


def _bundle(tmp: Path, name: str, source: str, kernel: dict[str, Any], test: dict[str, Any],
            ref: str, entry: str | None = None) -> Path:
    return byo.bundle(tmp, name, source, kernel, test, ref, entry, _fut)


_new = byo.new
_checks = byo.checks
_falsify = byo.falsify


def _params(d: Path) -> dict[str, Any]:
    c = load_contract((d / "contract.yaml").read_bytes())
    return {p.name: p for p in c.kernel.params} if c.kernel else {}


# ---------------------------------------------------------------- 1. ledger new


@needs_nvcc
def test_yaml_boolean_names_are_quoted(tmp_path: Path) -> None:
    d, _ = _new(tmp_path, "yn", (FIX / "yamlnames.cu").read_text())
    params = _params(d)  # the reader takes the scaffold (it refused it: "got a boolean")
    assert list(params) == ["x", "y", "on", "off", "yes", "no", "null"]
    assert params["x"].shape == ("on",) and params["off"].value == "off"
    # every integer scalar is a size: declared and bound, each name quoted
    text = (d / "contract.yaml").read_text()
    assert "sizes: [{'on': 1, 'off': 1, 'yes': 1, 'no': 1, 'null': 1}," in text
    assert "    'null': {min: 1, max: 1048576}  # TODO: its domain" in text


def test_reader_says_why_a_name_is_a_boolean() -> None:
    doc = b"kernel:\n  size_domain:\n    off: {min: 1, max: 2}\n"
    with pytest.raises(ContractError, match=r"unquoted off as a boolean: quote it, 'off'"):
        load_contract(doc)
    bad = (FIX / "param_off.yaml").read_bytes()
    with pytest.raises(ContractError, match=r"name: expected a string, got a boolean \(YAML"):
        load_contract(bad)


@needs_nvcc
def test_struct_by_value_is_refused_in_one_line(tmp_path: Path) -> None:
    res = run_cli("new", str(tmp_path / "s"), "--cu", str(FIX / "structv.cu"))
    line = assert_one_error_line(res, 2)
    assert "parameter 0 (Affine p) by value as a 12-byte aggregate" in line
    assert not (tmp_path / "s").exists()


@needs_nvcc
def test_namespace_macro_bounds_vectors_constant_and_dynamic_shared(tmp_path: Path) -> None:
    src = (FIX / "shapes.cu").read_text()
    d, out = _new(tmp_path, "twice", src, entry="twice")
    assert out["function"] == "twice" and out["entry"].startswith("_ZN5mylib5twiceE")
    assert out["launch"]["block"] == [128, 1, 1]  # __launch_bounds__(BLOCK), from .maxntid
    todo = "\n".join(out["todo"])
    assert "signature was not found" not in todo
    assert "__constant__ coef has no initializer" in todo
    assert "dynamic shared memory (extern __shared__ stage)" in todo
    p = _params(d)
    assert p["x"].dtype == "f32" and p["x"].shape == ("4 * n4",)  # float4: 4 floats each
    assert p["n4"].kind == "scalar"


@needs_nvcc
def test_template_instantiation_element_types(tmp_path: Path) -> None:
    src = (FIX / "shapes.cu").read_text()
    res = run_cli("new", str(tmp_path / "t"), "--cu", str(FIX / "shapes.cu"), "--entry", "axpy")
    assert "2 kernels of that name" in assert_one_error_line(res, 2)
    d, out = _new(tmp_path, "axpy_d", src, entry="_Z4axpyIdEvT_PKS0_PS0_i")
    p = _params(d)
    assert (p["a"].dtype, p["x"].dtype, p["y"].dtype) == ("f64", "f64", "f64")
    assert p["y"].intent == "inout" and not any("unknown" in t for t in out["todo"])
    d, _ = _new(tmp_path, "axpy_f", src, entry="_Z4axpyIfEvT_PKS0_PS0_i")
    assert _params(d)["x"].dtype == "f32"


# ---------------------------------------------------------------- 2. several kernels, one PTX

GEMM = {
    "params": [
        {"name": "A", "ptr": "f32", "intent": "in", "shape": ["M", "K"]},
        {"name": "B", "ptr": "f32", "intent": "in", "shape": ["K", "N"]},
        {"name": "C", "ptr": "f32", "intent": "out", "shape": ["M", "N"]},
        {"name": "M", "scalar": "s32", "value": "M"},
        {"name": "N", "scalar": "s32", "value": "N"},
        {"name": "K", "scalar": "s32", "value": "K"},
    ],
    "launch": {
        "grid": ["ceil_div(N, 16)", "ceil_div(M, 16)", 1],
        "block": [16, 16, 1],
        "shared_bytes": 0,
    },
    "size_domain": {n: {"min": 1, "max": 64} for n in ("M", "N", "K")},
}
GEMM_TEST = {"sizes": [{"M": 32, "N": 32, "K": 32}], "tolerance": {"abs": 1e-5, "rel": 1e-4}}
GEMM_REF = """def FN(inputs, sizes):
    m, n, k = sizes['M'], sizes['N'], sizes['K']
    a = inputs['A'].astype(np.float64).reshape(m, k)
    return {'C': a @ inputs['B'].astype(np.float64).reshape(k, n)}
"""


@needs_nvcc
def test_budget_is_the_entrys_and_the_k_tail_bug_is_caught(tmp_path: Path) -> None:
    src = (FIX / "gemm.cu").read_text()
    good = _bundle(tmp_path, "gemm", src, GEMM, GEMM_TEST, GEMM_REF, entry="gemm_tiled")
    checks = _checks(good)
    asm = checks["ptx.assemble"]  # gemm_naive needs more registers than the tiled entry's budget
    assert asm["status"] == "passed", asm["detail"]
    assert "budget not applied to the other entries (_Z10gemm_naivePKfS0_Pfiii)" in asm["detail"]
    f = _falsify(checks)
    assert f["status"] == "passed", f["detail"]
    # 4. the maximum of K runs (since issue 32 every maximum up to 2^12 runs: alone, the other
    # sizes at their minimum) and also in the joint "all primes" binding: the note says so
    assert "max K=64 run (every block)" in f["detail"]
    assert "(37,37,64)" in f["detail"]
    assert "max K=64 not run" not in f["detail"]
    bad = _bundle(tmp_path, "gemm_bug", "#define BUG\n" + src, GEMM, GEMM_TEST, GEMM_REF,
                  entry="gemm_tiled")
    f = _falsify(_checks(bad))
    assert f["status"] == "failed", f["detail"]
    assert "out_of_bounds [bounds/PO2]" in f["detail"] and "buffer 'A'" in f["detail"]


# ---------------------------------------------------------------- 3. order-dependent rounding

ASUM = {
    "params": [
        {"name": "x", "ptr": "f32", "intent": "in", "shape": ["n"]},
        {"name": "y", "ptr": "f32", "intent": "inout", "shape": [1]},
        {"name": "n", "scalar": "s32", "value": "n"},
    ],
    "launch": {"grid": ["ceil_div(n, 128)", 1, 1], "block": [128, 1, 1], "shared_bytes": 0},
    "size_domain": {"n": {"min": 1, "max": 4096}},
}
ASUM_REF = """def FN(inputs, sizes):
    return {'y': inputs['y'].astype(np.float64) + inputs['x'].astype(np.float64).sum()}
"""


@needs_nvcc
def test_float_atomic_sum_passes_only_with_a_fitting_tolerance(tmp_path: Path) -> None:
    src = (FIX / "atomsum.cu").read_text()
    test = {"sizes": [{"n": 1000}], "tolerance": {"abs": 1e-4, "rel": 1e-5}}
    fit = _bundle(tmp_path, "asum_fit", src, ASUM, test, ASUM_REF)
    f = _falsify(_checks(fit))
    assert f["status"] == "passed", f["detail"]
    assert re.search(r"outputs differ there within abs 0.0001 or rel 1e-05 at n=1000\b",
                     f["detail"]), f["detail"]
    exact = _bundle(tmp_path, "asum_0", src, ASUM, {**test, "tolerance": {"ulp": 0}}, ASUM_REF)
    f = _falsify(_checks(exact))
    assert f["status"] == "failed", f["detail"]
    assert "outside 0 ulp" in f["detail"]


@needs_nvcc
def test_last_writer_wins_is_still_schedule_dependent(tmp_path: Path) -> None:
    ref = "def FN(inputs, sizes):\n    return {'y': inputs['x'][-1:]}\n"
    test = {"sizes": [{"n": 300}], "tolerance": {"abs": 1e-3}}
    d = _bundle(tmp_path, "lastwins", (FIX / "lastwins.cu").read_text(), ASUM, test, ref)
    f = _falsify(_checks(d))
    assert f["status"] == "failed", f["detail"]
    assert "schedule_dependent [race_free/PO7]: element 0 of output buffer 'y'" in f["detail"]
    assert "under the second schedule y[0]: got" in f["detail"]
    assert "outside abs 0.001" in f["detail"]


# ---------------------------------------------------------------- 5. seal, verify, tamper


@needs_nvcc
def test_seal_verify_offline_and_tamper(tmp_path: Path) -> None:
    test = {"sizes": [{"n": 1000}], "tolerance": {"abs": 1e-4, "rel": 1e-5}}
    d = _bundle(tmp_path, "asum", (FIX / "atomsum.cu").read_text(), ASUM, test, ASUM_REF)
    home = tmp_path / "home"
    cli_json("init", "--origin", "x.example/log", home=home)
    cli_json("keys", "new", "a", home=home)
    cli_json("keys", "register", "a", home=home)
    (entry,) = cli_json("seal", str(d), "--key", "a", "--no-gpu", "--trust-bundle-code",
                        home=home)["entries"]
    digest, receipt = entry["bundle_digest"], entry["receipt"]
    assert entry["report"]["verdict"] == "partial"  # no Lean toolchain here: never "verified"
    flags = ("--no-gpu", "--trust-bundle-code", "--seed", "1")
    got = cli_json("verify", digest, *flags, home=home)
    assert got["verdict"] == "partial"
    assert all(c["status"] != "failed" for c in got["checks"]), got["checks"]
    vkey = (home / "log.vkey").read_text().strip()
    off = cli_json("verify", digest, "--receipt", receipt, "--vkey", vkey, *flags,
                   home=tmp_path / "elsewhere")
    assert off["verdict"] == "partial"
    (d / "reference.py").write_text((d / "reference.py").read_text() + "# changed\n")
    bad = cli_json("verify", digest, "--bundle", str(d), *flags, home=home, ok=(1,))
    failed = {c["id"]: c["detail"] for c in bad["checks"] if c["status"] == "failed"}
    assert "reference.py: BLAKE3 does not match the manifest" in failed["integrity.manifest"]
