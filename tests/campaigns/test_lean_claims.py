"""Issue 33 item 2: statements checked as claims.

A named PO theorem whose hypotheses contradict each other, whose conclusion holds by logic alone,
or whose conclusion restates its hypotheses proves nothing: ``lean.scan`` fails it,
``contract.lint`` (``lean-exists``) and the ``certificate`` refuse it, even with ``lean.kernel``
passed. Each hostile statement replaces ``VectorAdd.work_bounded`` (PO8, a claim and a
``lean_refs`` entry) in the vector_add bundle, and the checks run for real (the solver too).
A statement outside the decidable fragment passes ``lean.scan`` with ``unchecked: ...`` in the
detail and leaves its claim partial; every example bundle's theorems still pass.

The five statements of the issue run in the suite (tests/verify/lean/test_claims.py, whose
helpers build the bundles here); this campaign holds their variants.
"""

from __future__ import annotations

import pytest

from ledger.core.bundle import Bundle
from tests.verify.lean.test_claims import FIVE, ROOT, assert_proves_nothing
from tests.verify.lean.test_claims import bundle_with as _ctx
from tests.verify.lean.test_claims import certificate_with as _certificate
from verify.context import Context
from verify.contract import load_contract
from verify.contract_lint import lint_check
from verify.lean import run as lean_run

OUTSIDE = "unchecked: statement outside the decidable fragment"

# Variants of each class of the five statements of the issue (those are in the suite: FIVE).
VACUOUS = {
    # contradictory hypotheses
    "one-is-zero": "theorem work_bounded (n : Nat) (h : 1 = 0) : n < 4 := by omega",
    "two-bounds": "theorem work_bounded (a b : Nat) (h₁ : a < b) (h₂ : b ≤ a) : a = 7 := by omega",
    "succ-le": "theorem work_bounded (n : Nat) (h : n + 1 ≤ n) : n = 5 := by omega",
    "x-ne-x": "theorem work_bounded (x : Nat) (h : x ≠ x) : x = 1 := absurd rfl h",
    "not-true": "theorem work_bounded (n : Nat) (h : ¬True) : n = 2 := (h trivial).elim",
    "false-arrow": "theorem work_bounded (i : Nat) : False → i = 7 := False.elim",
    "forall-below-zero": "theorem work_bounded (i : Nat) : ∀ j < 0, i < j := by omega",
    "forall-arrow": "theorem work_bounded : ∀ i : Nat, i < 0 → i = 3 := by omega",
    "fin-zero": "theorem work_bounded (t : Fin 0) : t.val = 3 := t.elim0",
    "fact-instance": "theorem work_bounded [Fact (1 < 0)] (n : Nat) : n = 2 := by omega",
    "square-negative": "theorem work_bounded (x : Int) (h : x * x < 0) : x = 2 := by nlinarith",
    "implicit": "theorem work_bounded {n : Nat} (h : n < n) : n = 9 := absurd h (Nat.lt_irrefl n)",
    # conclusions true by logic alone
    "excluded-middle": "theorem work_bounded (p : Prop) : p ∨ ¬p := Classical.em p",
    "commute": "theorem work_bounded (a b : Nat) : a + b = b + a := Nat.add_comm a b",
    "double": "theorem work_bounded (n : Nat) : 2 * n = n + n := by omega",
    "le-refl-and-true": "theorem work_bounded (x : Nat) : x ≤ x ∧ True := ⟨Nat.le_refl x, trivial⟩",
    "ge-refl": "theorem work_bounded (x y : Nat) : x * y ≥ y * x := Nat.le_of_eq rfl",
    "iff-self": "theorem work_bounded (i n : Nat) : i < n ↔ i < n := Iff.rfl",
    "implies-self": "theorem work_bounded (i n : Nat) : i < n → i < n := id",
    "true-implies": "theorem work_bounded (i n : Nat) (h : i < n) : True := trivial",
    # conclusions that restate the hypotheses
    "restate": "theorem work_bounded (i n : Nat) (h : i < n) : i < n := h",
    "restate-and": (
        "theorem work_bounded (i n : Nat) (h₁ : i < n) (h₂ : n < 9) : n < 9 ∧ i < n := ⟨h₂, h₁⟩"
    ),
    "restate-shifted": "theorem work_bounded (i n : Nat) (h : i + 1 < n + 1) : i + 1 < 1 + n := h",
}


@pytest.mark.parametrize("statement", list(VACUOUS.values()), ids=list(VACUOUS))
def test_a_statement_that_proves_nothing_fails_the_scan_the_lint_and_the_certificate(
    statement: str,
) -> None:
    assert_proves_nothing(_ctx(statement))


def test_the_reasons_say_which_kind_of_nothing() -> None:
    found = {}
    for key in ("h-false", "true-or-false", "restate"):
        scan, _ = lean_run(_ctx(VACUOUS[key] if key in VACUOUS else FIVE[key][0]))
        found[key] = scan.detail
    assert "its hypotheses contradict each other" in found["h-false"]
    assert "its conclusion holds by logic alone" in found["true-or-false"]
    assert "its conclusion follows from its hypotheses by logic alone" in found["restate"]


def test_a_variable_hypothesis_counts() -> None:
    # ``variable (h : False)`` then ``include h``: Lean adds h to the theorem; the scan does too
    ctx = _ctx("theorem work_bounded (n i : Nat) : i < n := h.elim", "variable (h : False)\n"
               "include h\n")  # fmt: skip
    scan, _ = lean_run(ctx)
    assert scan.status == "failed" and "contradict" in scan.detail, scan.detail


@pytest.mark.parametrize(
    "statement",
    [
        # fine statements about the kernel's arithmetic (as the example bundles write them)
        "theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := by omega",
        "theorem work_bounded (n i : Nat) (h : i < n) : i / 256 < (n + 255) / 256 := by omega",
        "theorem work_bounded (a : Nat) (ha : a ≤ 256) : a + (256 - a) = 256 := by omega",
        "theorem work_bounded (n : Nat) (h : 0 < n) : ∀ i < n, i / 256 < (n + 255) / 256 := "
        "by omega",
        "theorem work_bounded (x : Int) (h : 0 ≤ x) : x - 1 < x := by omega",
        "theorem work_bounded : 256 ≤ 1024 ∧ 0 ≤ 48 * 1024 := by decide",
    ],
)
def test_statements_that_claim_something_pass(statement: str) -> None:
    ctx = _ctx(statement)
    scan, _ = lean_run(ctx)
    assert scan.status == "passed", scan.detail
    assert OUTSIDE not in scan.detail
    cert = _certificate(ctx, scan)
    assert cert.status == "passed", cert.detail


@pytest.mark.parametrize(
    "statement",
    [
        # a contradiction hidden behind a field the reader gives no meaning: not decided
        "theorem work_bounded (xs : List Nat) (h : xs.length < 0) : xs = [] := by omega",
        "theorem work_bounded (x : UInt32) (h : x + 1 < x) : x = 0 := by omega",
        "theorem work_bounded (f : Nat → Nat) (h : ∀ i, f i < i) : f 0 = 7 := by omega",
        "theorem work_bounded (n : Nat) (h : n ∈ ({} : List Nat)) : n = 7 := nomatch h",
    ],
)
def test_outside_the_fragment_is_unchecked_and_the_claim_partial(statement: str) -> None:
    ctx = _ctx(statement)
    scan, _ = lean_run(ctx)
    assert scan.status == "passed", scan.detail
    assert f"1 {OUTSIDE}: VectorAdd.work_bounded" in scan.detail, scan.detail
    cert = _certificate(ctx, scan)
    assert cert.status == "skipped" and cert.detail.startswith("partial:"), cert.detail
    assert f"VectorAdd.work_bounded {OUTSIDE}" in cert.detail
    assert "PO8 partial" in cert.detail


@pytest.mark.parametrize(
    "extra, statement",
    [
        # ``<`` on Nat redefined to False: every hypothesis ``i < n`` is then contradictory
        (
            "instance : LT Nat := ⟨fun _ _ => False⟩\n",
            "theorem work_bounded (i n : Nat) (h : i < n) : i < n + 1 := by omega",
        ),
        (
            "@[instance] def ltFalse : LT Nat := ⟨fun _ _ => False⟩\n",
            "theorem work_bounded (i n : Nat) (h : i < n) : i < n + 1 := by omega",
        ),
        # ``Int`` in this namespace is Nat: ``x < 0`` contradicts, though read as Int it does not
        ("def Int := Nat\n", "theorem work_bounded (x : Int) (h : x < 0) : x = 1 := by omega"),
    ],
)
def test_a_bundle_that_may_change_what_symbols_mean_is_unchecked(
    extra: str, statement: str
) -> None:
    ctx = _ctx(statement, extra)
    scan, _ = lean_run(ctx)
    assert scan.status == "passed", scan.detail
    assert OUTSIDE in scan.detail and "may change what its symbols mean" in scan.detail
    cert = _certificate(ctx, scan)
    assert cert.status == "skipped" and "PO8 partial" in cert.detail, cert.detail


def test_every_example_bundle_still_passes_and_is_decided() -> None:
    for bundle in sorted((ROOT / "bundles").iterdir()):
        if not (bundle / "contract.yaml").is_file():
            continue
        ctx = Context(Bundle.from_dir(bundle))
        ctx.contract = load_contract(ctx.bundle.file("contract.yaml"))
        scan, _ = lean_run(ctx)
        assert scan.status == "passed", (bundle.name, scan.detail)
        assert "statement(s) claim something" in scan.detail, (bundle.name, scan.detail)
        assert OUTSIDE not in scan.detail, (bundle.name, scan.detail)
        lint = lint_check(ctx.contract, {f.path: f.data for f in ctx.bundle.files})
        assert "proves nothing" not in lint.detail, (bundle.name, lint.detail)


def test_hostile_signatures_are_bounded() -> None:
    # deep nesting, a long chain, a huge numeral, a statement the reader cannot read: each is
    # unchecked (or decided), never a crash or a recursion error
    deep = "theorem work_bounded (n : Nat) : " + "(" * 5000 + "n" + ")" * 5000 + " = n := rfl"
    chain = "theorem work_bounded (n : Nat) : " + " + ".join(["n"] * 3000) + " = 0 := sorry_x"
    big = "theorem work_bounded (n : Nat) (h : n < 1" + "0" * 5000 + ") : n = 1 := by omega"
    odd = "theorem work_bounded (n : Nat) : (fun x => x) n = n := rfl"
    power = "theorem work_bounded (n : Nat) (h : n < 2 ^ 100000) : n < 2 ^ 99999 := by omega"
    blowup = "theorem work_bounded (a b c d : Nat) : (a + b + c + d) ^ 8 = a ^ 8 := by omega"
    for statement in (deep, chain, big, odd, power, blowup):
        scan, _ = lean_run(_ctx(statement))
        assert scan.status in ("passed", "failed"), scan.detail
        # the expansion of (a + b + c + d) ^ 8 is too large to compare as a polynomial, but the
        # statement is in the fragment (non-linear) and decided: it claims something (false)
        if scan.status == "passed" and statement != blowup:
            assert OUTSIDE in scan.detail, scan.detail


def test_bundle_text_never_reaches_the_solver_as_syntax() -> None:
    # an escaped identifier holding SMT-LIB: were it pasted into the script, the hypotheses
    # would read as contradictory; it is one unknown, so the statement is unchecked
    hostile = "«x) (assert false) (check-sat» "
    statement = f"theorem work_bounded (n : Nat) (h : {hostile}n = 0) : n < 7 := by omega"
    scan, _ = lean_run(_ctx(statement))
    assert scan.status == "passed" and OUTSIDE in scan.detail, scan.detail


def test_without_a_solver_statements_are_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.lean import claims

    monkeypatch.setattr(claims, "solver", lambda: None)
    monkeypatch.setattr(claims, "_CACHE", {})
    ctx = _ctx(FIVE["h-false"][0])
    scan, _ = lean_run(ctx)
    assert scan.status == "passed", scan.detail
    assert "no SMT solver" in scan.detail and OUTSIDE in scan.detail
    assert _certificate(ctx, scan).status == "skipped"
