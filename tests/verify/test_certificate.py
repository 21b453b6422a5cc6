"""The ``certificate`` check: claims backed by theorem (static scan + Lean kernel) and evidence.

Built on the real vector_add bundle and its contract; the earlier checks' results are set by
hand (they are what the certificate reads), and contracts are varied with ``dataclasses.replace``
so that one claim loses exactly one leg. The Lean scan is the real ``verify.lean.scan_sources``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ledger.core.bundle import Bundle
from verify import certificate
from verify.context import Context
from verify.contract import load_contract
from verify.model import Claim, Contract
from verify.report import Check, failed, passed, skipped

ROOT = Path(__file__).resolve().parents[2]
VADD = ROOT / "bundles" / "vector_add"
TESTS = ("FALSIFY-VADD-001", "FALSIFY-VADD-002")


def evidence(**override: str) -> list[Check]:
    """Every earlier check passed, except those given as id=status (underscores for dots)."""
    ids = ["lean.scan", "lean.kernel", "ptx.assemble", *(f"falsify.{t}" for t in TESTS)]
    out = []
    for cid in ids:
        status = override.get(cid.replace(".", "_").replace("-", "_"), "passed")
        if status == "absent":
            continue
        make = {"passed": passed, "failed": failed, "skipped": skipped}[status]
        out.append(make(cid, f"{cid} {status} (reason here)"))
    return out


def context(
    results: list[Check], contract: Contract | None = None, lean: bytes | None = None
) -> Context:
    files = {f.path: f.data for f in Bundle.from_dir(VADD).files}
    if lean is not None:
        files["vector_add.lean"] = lean
    bundle = Bundle.from_files(files)
    ctx = Context(bundle)
    ctx.contract = contract or load_contract(bundle.file("contract.yaml"))
    ctx.results = results
    return ctx


def run(ctx: Context) -> Check:
    [check] = certificate.run(ctx)
    assert check.id == "certificate"
    return check


def with_claims(*claims: Claim) -> Contract:
    base = load_contract(Bundle.from_dir(VADD).file("contract.yaml"))
    return dataclasses.replace(base, claims=claims)


def test_all_backed_passes_with_the_evidence_per_obligation() -> None:
    check = run(context(evidence()))
    assert check.status == "passed", check.detail
    assert check.detail == (
        "4 obligations backed by theorem and evidence: "
        "PO1 ok (VectorAdd.index_injective; falsify.FALSIFY-VADD-001; falsify.FALSIFY-VADD-002); "
        "PO2 ok (VectorAdd.guard_in_bounds; falsify.FALSIFY-VADD-001; falsify.FALSIFY-VADD-002); "
        "PO5 ok (VectorAdd.resources_fit; ptx.assemble); "
        "PO8 ok (VectorAdd.work_bounded; falsify.FALSIFY-VADD-001; falsify.FALSIFY-VADD-002; "
        "tolerance ulp 0); "
        "not claimed: PO3, PO4, PO6, PO7; size domain: 1 ≤ n ≤ 2^24"
    )


def test_lean_kernel_skipped_makes_it_partial() -> None:
    check = run(context(evidence(lean_kernel="skipped")))
    assert check.status == "skipped"
    assert check.detail.startswith("partial: lean.kernel skipped (lean.kernel skipped (reason")
    assert (
        "PO1 partial (VectorAdd.index_injective; falsify.FALSIFY-VADD-001; "
        "falsify.FALSIFY-VADD-002; missing lean.kernel)" in check.detail
    )
    assert (
        "PO5 partial (VectorAdd.resources_fit; ptx.assemble; missing lean.kernel)" in check.detail
    )


def test_lean_kernel_absent_is_partial_and_failed_is_failed() -> None:
    assert run(context(evidence(lean_kernel="absent"))).detail.startswith(
        "partial: lean.kernel did not run"
    )
    check = run(context(evidence(lean_kernel="failed")))
    assert check.status == "failed"
    assert check.detail.startswith("PO1, PO2, PO5, PO8 not backed: PO1 FAILED")


def test_no_claims_fails() -> None:
    check = run(context(evidence(), with_claims()))
    assert (check.status, check.detail) == ("failed", "no proof obligations claimed")


def test_no_contract_fails() -> None:
    ctx = context(evidence())
    ctx.contract = None
    assert run(ctx).status == "failed"


def test_theorem_missing_from_the_lean_files_fails() -> None:
    claim = Claim("PO1", "VectorAdd.no_such_theorem", "coverage")
    check = run(context(evidence(), with_claims(claim)))
    assert check.status == "failed"
    assert check.detail == (
        "PO1 not backed: PO1 FAILED (VectorAdd.no_such_theorem: VectorAdd.no_such_theorem not "
        "found in the bundle's Lean files); not claimed: PO2, PO3, PO4, PO5, PO6, PO7, PO8; "
        "size domain: 1 ≤ n ≤ 2^24"
    )


def test_theorem_the_scan_rejects_fails() -> None:
    lean = Bundle.from_dir(VADD).file("vector_add.lean")
    lean += (
        b"\nnamespace VectorAdd\ntheorem cheat (n : Nat) : n = n + 1 := by sorry\nend VectorAdd\n"
    )
    claim = Claim("PO1", "VectorAdd.cheat", "coverage")
    check = run(context(evidence(), with_claims(claim), lean=lean))
    assert check.status == "failed"
    assert (
        "PO1 FAILED (VectorAdd.cheat: VectorAdd.cheat rejected by the scan (vector_add.lean:"
        in check.detail
    )
    assert check.detail.split("(vector_add.lean:")[1].split(")")[0].endswith(": sorry")


def test_lean_scan_failed_or_skipped() -> None:
    check = run(context(evidence(lean_scan="failed")))
    assert check.status == "failed" and "lean.scan failed (lean.scan failed" in check.detail
    check = run(context(evidence(lean_scan="skipped")))
    assert check.status == "skipped" and check.detail.startswith("partial: lean.scan skipped")


def test_property_no_test_lists_fails() -> None:
    claim = Claim("PO7", "VectorAdd.index_injective", "race_free")
    check = run(context(evidence(), with_claims(claim)))
    assert check.status == "failed"
    assert (
        "PO7 FAILED (VectorAdd.index_injective: no executable falsification test lists "
        "race_free)" in check.detail
    )


def test_falsify_failed_contradicts_the_claim() -> None:
    check = run(context(evidence(falsify_FALSIFY_VADD_002="failed")))
    assert check.status == "failed"
    assert check.detail.startswith("PO1, PO2, PO8 not backed:")
    assert "PO1 FAILED (VectorAdd.index_injective: falsify.FALSIFY-VADD-002 failed)" in check.detail
    assert "PO5 ok (VectorAdd.resources_fit; ptx.assemble)" in check.detail


def test_one_falsify_passed_other_skipped_backs_it() -> None:
    check = run(context(evidence(falsify_FALSIFY_VADD_002="skipped")))
    assert check.status == "passed"
    assert "PO1 ok (VectorAdd.index_injective; falsify.FALSIFY-VADD-001)" in check.detail


def test_all_falsify_skipped_is_partial_and_absent_is_failed() -> None:
    check = run(
        context(evidence(falsify_FALSIFY_VADD_001="skipped", falsify_FALSIFY_VADD_002="skipped"))
    )
    assert check.status == "skipped"
    assert check.detail.startswith(
        "partial: falsify.FALSIFY-VADD-001 skipped; falsify.FALSIFY-VADD-002 skipped - "
    )
    assert "PO1 partial (VectorAdd.index_injective; missing falsify.FALSIFY-VADD-001, " in (
        check.detail
    )
    check = run(
        context(evidence(falsify_FALSIFY_VADD_001="absent", falsify_FALSIFY_VADD_002="absent"))
    )
    assert check.status == "failed"
    assert "falsify checks for coverage did not run" in check.detail


def test_resources_backed_by_ptx_assemble() -> None:
    check = run(context(evidence(ptx_assemble="skipped")))
    assert check.status == "skipped" and "PO5 partial" in check.detail
    check = run(context(evidence(ptx_assemble="failed")))
    assert check.status == "failed" and check.detail.startswith("PO5 not backed:")


def test_unknown_obligation_or_property_fails() -> None:
    check = run(context(evidence(), with_claims(Claim("PO9", "VectorAdd.index_injective", "x"))))
    assert check.status == "failed"
    assert (
        "PO9 FAILED (VectorAdd.index_injective: unknown obligation 'PO9'; unknown property "
        "'x')" in check.detail
    )


def test_a_failure_tagged_with_another_property_leaves_this_one_unbacked() -> None:
    results = evidence()
    results[3] = failed(
        "falsify.FALSIFY-VADD-001",
        "interpreter ptxsim 0.1.0 (CPU): n=1; seed 7: out_of_bounds [bounds/PO2]: global load ...",
    )
    results[4] = skipped("falsify.FALSIFY-VADD-002", "interpreter could not run it: ...")
    check = run(context(results))
    assert check.status == "failed"
    assert check.detail.startswith("PO2 not backed: ")
    assert "PO2 FAILED (VectorAdd.guard_in_bounds: falsify.FALSIFY-VADD-001 (bounds) failed)" in (
        check.detail
    )
    # coverage and reference are neither backed nor contradicted by an out-of-bounds run
    assert (
        "PO1 partial (VectorAdd.index_injective; missing "
        "falsify.FALSIFY-VADD-001, falsify.FALSIFY-VADD-002)" in check.detail
    )
    assert certificate.broken_property(results[3].detail) == "bounds"
    assert certificate.broken_property("c[0]: got 1.0, want 2.0 (1 ulp)") is None


def test_planted_race_fails_only_the_race_obligation_end_to_end() -> None:
    """The whole verifier (verify.runner) on the planted missing-barrier softmax bundle."""
    from verify.context import Options
    from verify.runner import check_bundle

    planted = ROOT / "tests" / "fixtures" / "planted" / "missing_barrier"
    report = check_bundle(Bundle.from_dir(planted), Options(use_gpu=False))
    assert report.verdict == "failed"
    cert = report.get("certificate")
    assert cert is not None and cert.status == "failed"
    assert cert.detail.startswith("PO7 not backed: ")
    assert "PO7 FAILED (SoftmaxRows.step_disjoint: falsify.FALSIFY-SOFTMAX-002 (race_free) " in (
        cert.detail
    )


def test_bundled_vector_add_end_to_end() -> None:
    from verify.context import Options
    from verify.runner import check_bundle

    report = check_bundle(Bundle.from_dir(VADD), Options(use_gpu=False))
    cert = report.get("certificate")
    kernel = report.get("lean.kernel")
    assert cert is not None and kernel is not None
    if kernel.status == "skipped":  # no Lean toolchain: the certificate is partial, never passed
        assert cert.status == "skipped" and cert.detail.startswith("partial: lean.kernel skipped")
        assert report.verdict == "partial"
    else:
        assert (kernel.status, cert.status) == ("passed", "passed"), cert.detail
    assert "PO1 " in cert.detail and "not claimed: PO3, PO4, PO6, PO7" in cert.detail


def test_tests_run_at_author_sizes_only_leave_the_obligation_partial() -> None:
    from verify.falsify import AUTHOR_ONLY

    results = evidence()
    results = [
        passed(c.id, f"n=1; seed 7; {AUTHOR_ONLY}: the contract declares no kernel.size_domain")
        if c.id.startswith("falsify.")
        else c
        for c in results
    ]
    check = run(context(results))
    assert check.status == "skipped"
    assert check.detail.startswith(
        "partial: falsify.FALSIFY-VADD-001 backed by author-chosen sizes only (sizes not extended)"
    )
    assert "PO1 partial (VectorAdd.index_injective; missing falsify.FALSIFY-VADD-001, " in (
        check.detail
    )


def test_tolerance_relied_on_is_reported_for_value_claims() -> None:
    base = load_contract(Bundle.from_dir(ROOT / "bundles" / "gemm_tiled").file("contract.yaml"))
    claim = Claim("PO8", "VectorAdd.work_bounded", "reference")
    tests = tuple(
        dataclasses.replace(t, id=i) for t, i in zip(base.falsification, TESTS, strict=True)
    )
    contract = dataclasses.replace(with_claims(claim), falsification=tests)
    check = run(context(evidence(), contract))
    assert (
        "PO8 ok (VectorAdd.work_bounded; falsify.FALSIFY-VADD-001; falsify.FALSIFY-VADD-002; "
        "tolerance rel 1e-05 or abs 0.001)"
    ) in check.detail
