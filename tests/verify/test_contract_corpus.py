"""Real provable-contracts / trueno contracts (tests/fixtures/contracts/corpus, unmodified copies of
/work/shared/corpus/contracts; see its README.md for sources): each loads or is refused with an
exact message, and contract lint gives the expected gate results."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.errors import ContractError
from verify.contract import load_contract, parse_yaml
from verify.contract_lint import GATES, lint_contract, schema_errors

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "contracts" / "corpus"
GATE_NAMES = [g[0] for g in GATES]
BUNDLE_ONLY = ("kernel", "unfinished", "lean-exists")  # skipped for a bare contract

REJECTED = {
    "binding.yaml": "not a contract: this is a provable-contracts binding registry (top-level "
    "'bindings'), not a kernel contract (no 'metadata')",
    "cgp-gpu-gemm-cpasync-v1.yaml": "not a contract: kind 'PerformanceContract' is not "
    "supported; expected a provable-contracts contract with a 'metadata' mapping",
    "cgp-gpu-mma-sync-v1.yaml": "not a contract: kind 'PerformanceContract' is not supported; "
    "expected a provable-contracts contract with a 'metadata' mapping",
}

# Gates that fail for each loadable file (every other gate passes, or is skipped without a bundle;
# "reference" and "launch" are skipped because none of them has the kernel extension). Every pv
# contract fails "executable": its falsification tests are prose (no sizes, tolerance, properties).
FAILING = {
    "adamw-kernel-v1.yaml": {"executable"},
    "bias-add-v1.yaml": {"executable"},
    "cooperative-matrix-gemm-v1.yaml": {"executable"},
    "cuda-kernel-safety-v1.yaml": {"executable"},
    "dimension-independent-kernels-v1.yaml": {"executable"},
    "dot-kernel-v1.yaml": {"executable"},
    "f16-conversion-v1.yaml": {"executable"},
    "flash-attention-v1.yaml": {"executable"},
    "gelu-kernel-v1.yaml": {"executable"},
    "gemv-kernel-v1.yaml": {"obligations", "falsification"},  # trueno-style `falsification:` map
    "kernel-launch-budget-v1.yaml": {"executable"},
    "layernorm-kernel-v1.yaml": {"executable"},
    "matmul-kernel-v1.yaml": {"executable"},
    "quantized-dot-product-v1.yaml": {"equations", "obligations", "executable"},
    "softmax-kernel-v1.yaml": {"executable", "lean-status"},
    "solve-lu-v1.yaml": {"executable"},
}


def test_every_corpus_file_is_classified() -> None:
    names = {p.name for p in CORPUS.glob("*.yaml")}
    assert names == set(REJECTED) | set(FAILING)
    assert len(names) == 19


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_with_exact_message(name: str) -> None:
    with pytest.raises(ContractError) as ei:
        load_contract((CORPUS / name).read_bytes())
    assert str(ei.value) == REJECTED[name]


@pytest.mark.parametrize("name", sorted(FAILING))
def test_loads_and_lints_as_expected(name: str) -> None:
    data = (CORPUS / name).read_bytes()
    c = load_contract(data)
    assert c.kernel is None
    assert schema_errors(parse_yaml(data)) == []
    got = {g.name: g.status for g in lint_contract(c)}
    want = {}
    for gate in GATE_NAMES:
        if gate in FAILING[name]:
            want[gate] = "failed"
        elif gate in BUNDLE_ONLY or gate in ("reference", "launch", "domain"):
            want[gate] = "skipped"
        else:
            want[gate] = "passed"
    assert got == want


def _gate(name: str, gate: str) -> str:
    c = load_contract((CORPUS / name).read_bytes())
    (g,) = [g for g in lint_contract(c) if g.name == gate]
    return g.reason


def test_softmax_sorry_theorems() -> None:
    assert _gate("softmax-kernel-v1.yaml", "lean-status") == (
        "Softmax.softmax_bounded (proof_obligations[2].lean) has status 'sorry'; "
        "Softmax.shift_invariance (proof_obligations[5].lean) has status 'sorry'"
    )
    c = load_contract((CORPUS / "softmax-kernel-v1.yaml").read_bytes())
    assert [(r.theorem, r.status) for r in c.lean_refs] == [
        ("Softmax.partition_of_unity", "proved"),
        ("Softmax.softmax_pos", "proved"),
        ("Softmax.softmax_bounded", "sorry"),
        ("Softmax.monotone", "proved"),
        ("Softmax.shift_invariance", "sorry"),
    ]


def test_gemv_has_no_obligations_and_no_pv_falsification_tests() -> None:
    assert _gate("gemv-kernel-v1.yaml", "obligations") == (
        "no proof_obligations and no certificate claims"
    )
    assert _gate("gemv-kernel-v1.yaml", "falsification") == "no falsification_tests"


def test_quantized_dot_product_has_no_equations() -> None:
    assert _gate("quantized-dot-product-v1.yaml", "equations") == "no equations"


def test_equation_level_lean_theorems_are_collected() -> None:
    c = load_contract((CORPUS / "cooperative-matrix-gemm-v1.yaml").read_bytes())
    assert [(r.theorem, r.status, r.where) for r in c.lean_refs] == [
        (
            "ProvableContracts.CooperativeMatrix.matmul_block_sum",
            "claimed",
            "equations.cooperative_gemm.lean_theorem",
        ),
        (
            "ProvableContracts.CooperativeMatrix.f16_accumulation_error_bound",
            "claimed",
            "equations.f16_error_bound.lean_theorem",
        ),
    ]
    c = load_contract((CORPUS / "cuda-kernel-safety-v1.yaml").read_bytes())
    assert [r.theorem for r in c.lean_refs] == [
        "Theorems.Kernel_Ffi",
        "Theorems.Qualifier_Preservation",
        "Theorems.Host_Transpilation",
    ]


# A stand-in for upstream's CooperativeTiling.lean as the corpus README describes it: the first
# theorem is an `rfl` tautology, the second is stated as an axiom.
COOP_LEAN = """namespace ProvableContracts.CooperativeMatrix

def blockSum (xs : List Nat) : Nat := xs.foldl (· + ·) 0

theorem matmul_block_sum (xs : List Nat) : blockSum xs = blockSum xs := rfl

axiom f16_accumulation_error_bound (k : Nat) : k * 0 = 0

end ProvableContracts.CooperativeMatrix
""".encode()


def test_cooperative_gemm_in_a_bundle_with_its_axiom() -> None:
    # The axiom taints its file, so the rfl theorem beside it is rejected too; the axiom itself
    # is no theorem at all. (An rfl tautology alone is well-formed Lean: no static gate can tell
    # that it proves nothing about the kernel; lean.kernel and review of `formal` must.)
    data = (CORPUS / "cooperative-matrix-gemm-v1.yaml").read_bytes()
    files = {"contract.yaml": data, "lean/CooperativeTiling.lean": COOP_LEAN}
    gates = {g.name: g for g in lint_contract(load_contract(data), files)}
    assert gates["kernel"].reason == "no kernel extension: nothing in this contract can be run"
    assert gates["lean-exists"].status == "failed"
    assert gates["lean-exists"].reason == (
        "ProvableContracts.CooperativeMatrix.matmul_block_sum "
        "(equations.cooperative_gemm.lean_theorem) is rejected by lean.scan; "
        "ProvableContracts.CooperativeMatrix.f16_accumulation_error_bound "
        "(equations.f16_error_bound.lean_theorem) is not in the bundle's Lean files; "
        "first lean.scan problem: lean/CooperativeTiling.lean:7:1: axiom declaration"
    )
