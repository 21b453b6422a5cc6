"""verify.lean.statement and verify.lean.smt: a signature read with Lean's precedences, and the
questions written for the solver (issue 33 item 2). The verdicts themselves, with the real
solver, are in tests/verify/lean/test_claims.py (the five statements of the issue) and
tests/campaigns/test_lean_claims.py (their variants)."""

from __future__ import annotations

import pytest

from verify.lean.claims import judge
from verify.lean.lexer import lex_raw
from verify.lean.smt import queries
from verify.lean.statement import (
    MAX_DEPTH,
    Binder,
    Const,
    Num,
    Op,
    Opaque,
    Quant,
    StatementError,
    Var,
    parse_signature,
    text_of,
)


def toks(src: str) -> list[str]:
    return [t[1] for t in lex_raw(src)]


def sig(src: str) -> tuple[tuple[Binder, ...], str]:
    s = parse_signature(toks(src))
    return s.binders, text_of(s.type)


@pytest.mark.parametrize(
    "src, want",
    [
        (": a + b * c = d", "(= (+ a (* b c)) d)"),
        (": a - b - c < d", "(< (- (- a b) c) d)"),
        (": 2 ^ 3 ^ 2 = x", "(= (^ 2 (^ 3 2)) x)"),
        (": p → q → r", "(→ p (→ q r))"),
        (": p ∧ q ∨ r", "(∨ (∧ p q) r)"),
        (": p ↔ q → r", "(↔ p (→ q r))"),
        (": ¬ a = b ∧ c", "(∧ (¬ (= a b)) c)"),
        (": (if i < n then 3 else 0) ≤ 3", "(≤ (ite (< i n) 3 0) 3)"),
        (": f x y + 1 = 0x10", "(= (+ (f x y) 1) 16)"),
        (": ∀ i < n, i / 2 < n", "(∀ (i : «?») (hi : (< i n)), (< (/ i 2) n))"),
        (": ∃ x y : Nat, x ≠ y", "(∃ (x : Nat) (y : Nat), (≠ x y))"),
        (": xs = [1, 2] ∧ ⟨a, b⟩ = c", "(∧ (= xs «[ 1 , 2 ]») (= «⟨ a , b ⟩» c))"),
        (": True ∨ ¬False", "(∨ True (¬ False))"),
        (": a <= b /\\ c -> d", "(→ (∧ (≤ a b) c) d)"),
    ],
)
def test_precedences_and_forms(src: str, want: str) -> None:
    assert sig(src)[1] == want


def test_binders() -> None:
    binders, _ = sig(
        "(a b : Nat) {n : Nat} ⦃m : Int⦄ [inst : LT Nat] [Fact (1 < 2)] (h : a < b) : True"
    )
    assert [(b.name, text_of(b.type), b.kind) for b in binders] == [
        ("a", "Nat", "explicit"),
        ("b", "Nat", "explicit"),
        ("n", "Nat", "implicit"),
        ("m", "Int", "implicit"),
        ("inst", "(LT Nat)", "instance"),
        ("_", "(Fact (< 1 2))", "instance"),
        ("h", "(< a b)", "explicit"),
    ]
    assert parse_signature(toks(": True")).type == Const(True)
    assert parse_signature(toks("(x) : x = 1")).binders == (Binder("x", Opaque("?"), "explicit"),)


@pytest.mark.parametrize(
    "src",
    [
        "",  # no type
        "(a : Nat) := 3",
        "(a : Nat := 3) : a = 3",  # a default value
        ": fun x => x",
        ": if h : p then 1 else 2",  # a dependent if
        ": 1e10 = x",
        ": " + "1" * 41 + " = x",
        ": a b )",
        ": (" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1),
        ": " + " + ".join(["a"] * 500),
        ": ⟨a, b)",
    ],
)
def test_what_it_cannot_read_is_an_error(src: str) -> None:
    with pytest.raises(StatementError):
        parse_signature(toks(src))


def test_leaves() -> None:
    s = parse_signature(toks(": x = 0b101 ∧ ∀ y, y = y"))
    assert isinstance(s.type, Op) and s.type.op == "∧"
    left, right = s.type.args
    assert left == Op("=", (Var("x"), Num(5)))
    assert isinstance(right, Quant) and right.binders == (Binder("y", Opaque("?"), "explicit"),)


def test_queries_name_nothing_after_the_bundle() -> None:
    # variables, unknowns and questions get generated names: no text of the bundle
    q = queries(parse_signature(toks("(«sneaky)» : Nat) (h : f «sneaky)» = 1) : «sneaky)» < 3")))
    script = "\n".join(q.hyps + q.logic + q.restates + q.valid)
    assert "sneaky" not in script and "f " not in script
    assert q.abstracted  # f «sneaky)» has no arithmetic meaning


def test_nat_arithmetic_is_lean_s() -> None:
    q = queries(parse_signature(toks("(a b : Nat) (h : a - b = 0) (h2 : a / 0 = 0) : a % 0 = a")))
    text = "\n".join(q.hyps + q.valid)
    assert "(ite (>= v1 v2) (- v1 v2) 0)" in text  # truncated subtraction
    assert "(ite (= 0 0) 0 (div v1 0))" in text and "(ite (= 0 0) v1 (mod v1 0))" in text
    assert "(assert (>= v1 0))" in text


def test_judge_reads_and_caches() -> None:
    first = judge({"t": toks("(n : Nat) (h : n < 0) : n = 1")})
    assert first["t"].kind == "contradictory"
    again = judge({"u": toks("(n : Nat) (h : n < 0) : n = 1")})  # same signature: the cache
    assert again["u"] is first["t"]
    assert judge({"v": toks(": fun")})["v"].kind == "unchecked"
