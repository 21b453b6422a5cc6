"""verify.lean.claims in the suite (issue 33 item 2): the five statements of the issue prove
nothing, each judged by the real solver, and each fails ``lean.scan``, ``contract.lint``
(``lean-exists``) and the ``certificate`` (even with ``lean.kernel`` and a forged ``lean.scan``
passed). Each replaces ``VectorAdd.work_bounded`` (PO8, a claim and a ``lean_refs`` entry) in the
vector_add bundle. Their variants, the statements outside the fragment and the hostile
signatures are the campaign's (tests/campaigns/test_lean_claims.py, which builds its bundles
with the helpers here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from verify import certificate
from verify.context import Context
from verify.contract import load_contract
from verify.contract_lint import lint_check
from verify.lean import run as lean_run
from verify.lean.claims import judge
from verify.lean.lexer import lex_raw
from verify.report import Check, passed

ROOT = Path(__file__).resolve().parents[3]
VADD = ROOT / "bundles" / "vector_add"
LEAN = (VADD / "vector_add.lean").read_text("utf-8")
WORK = "theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := by\n  split <;> omega\n"

# The five statements of the issue, with the kind of nothing each is.
FIVE = {
    "h-false": ("theorem work_bounded (n i : Nat) (h : False) : i < n := h.elim",
                "contradictory"),
    "nat-below-zero": ("theorem work_bounded (n i : Nat) (h : i < 0) : i < n := by omega",
                       "contradictory"),
    "true-or-false": ("theorem work_bounded : True ∨ False := Or.inl trivial", "trivial"),
    "not-false": ("theorem work_bounded : ¬False := fun h => h", "trivial"),
    "n-plus-zero": ("theorem work_bounded (n : Nat) : n = n + 0 := rfl", "trivial"),
}


def bundle_with(statement: str, extra: str = "") -> Context:
    """The vector_add bundle with ``work_bounded`` replaced by ``statement`` (after ``extra``),
    its contract read."""
    assert WORK in LEAN
    files = {f.path: f.data for f in Bundle.from_dir(VADD).files}
    files["vector_add.lean"] = LEAN.replace(WORK, extra + statement + "\n").encode()
    ctx = Context(Bundle.from_files(files))
    ctx.contract = load_contract(ctx.bundle.file("contract.yaml"))
    return ctx


def certificate_with(ctx: Context, scan: Check) -> Check:
    """The certificate of ``ctx`` given ``scan`` and every other piece of evidence passed
    (``lean.kernel`` too: the statement is the problem)."""
    ids = ["lean.kernel", "ptx.assemble", "falsify.FALSIFY-VADD-001", "falsify.FALSIFY-VADD-002"]
    ctx.results = [scan, *(passed(i, f"{i} passed") for i in ids)]
    [cert] = certificate.run(ctx)
    return cert


def assert_proves_nothing(ctx: Context) -> None:
    """``lean.scan``, the certificate (on its own: a forged scan pass changes nothing) and
    ``contract.lint`` each refuse ``VectorAdd.work_bounded`` as proving nothing."""
    scan, kernel = lean_run(ctx)
    assert scan.status == "failed", scan.detail
    assert scan.detail.startswith("theorem VectorAdd.work_bounded: ") and "proves nothing" in (
        scan.detail
    ), scan.detail
    assert kernel.status == "skipped"
    cert = certificate_with(ctx, passed("lean.scan", "forged"))
    assert cert.status == "failed" and cert.detail.startswith("PO8 not backed"), cert.detail
    assert "VectorAdd.work_bounded" in cert.detail and "proves nothing" in cert.detail
    assert ctx.contract is not None
    lint = lint_check(ctx.contract, {f.path: f.data for f in ctx.bundle.files})
    assert lint.status == "failed" and "proves nothing" in lint.detail, lint.detail


@pytest.mark.parametrize(("statement", "kind"), list(FIVE.values()), ids=list(FIVE))
def test_the_five_statements_of_the_issue_prove_nothing(statement: str, kind: str) -> None:
    signature = statement.split(" := ")[0].removeprefix("theorem work_bounded")
    verdict = judge({"t": [t[1] for t in lex_raw(signature)]})["t"]
    assert (verdict.kind, verdict.vacuous) == (kind, True), verdict
    assert_proves_nothing(bundle_with(statement))
