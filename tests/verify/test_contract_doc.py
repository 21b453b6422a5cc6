"""verify.contract_doc: the fixed-shape sections as msgspec models, refusals worded as before.

The wording of every section is checked against main's hand-written reader by
``bench/diff_contract.py`` (mutated contracts); these pin the cases where the order of the
checks decides which refusal comes first, and the models' own properties."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ledger.core.errors import ContractError
from verify import contract_doc as doc
from verify.contract_doc import section


def _refusal(model: type[doc.Section], value: Any, path: str = "s") -> str:
    with pytest.raises(ContractError) as e:
        section(model, value, path)
    return str(e.value)


def test_a_section_is_a_frozen_typed_model() -> None:
    ld = section(doc.LaunchDoc, {"grid": ["ceil_div(n, 256)", 1, 1], "block": [256, 1, 1]}, "l")
    assert ld.grid == ("ceil_div(n, 256)", "1", "1") and ld.shared_bytes == "0"
    with pytest.raises(AttributeError):
        ld.grid = ("1", "1", "1")  # type: ignore[misc]
    assert isinstance(ld, msgspec.Struct)


@pytest.mark.parametrize(("value", "want"), [
    ("x", "s: expected a mapping, got a string"),
    ({"block": "x", "zz": 1, "grid": 1},
     "s.zz: unknown field (allowed: grid, block, shared_bytes)"),
    ({"block": "x"}, "s.grid: missing"),
    ({"grid": None, "block": [1, 1, 1]}, "s.grid: expected a list, got null"),
    ({"grid": [1, 2], "block": [1, 1, 1]}, "s.grid: expected 3 expressions, got 2"),
    ({"grid": [1, True, 1], "block": 5}, "s.grid[1]: expected an expression, got a boolean "
     "(YAML reads unquoted on, off, yes, no, true and false as booleans: quote it, 'off')"),
    ({"grid": [1, 1, 1], "block": [1, 1, 1], "shared_bytes": None},
     "s.shared_bytes: expected an expression, got null"),
])
def test_launch_refusals(value: Any, want: str) -> None:
    assert _refusal(doc.LaunchDoc, value) == want


def test_the_reader_s_order_decides_the_first_refusal() -> None:
    # a waiver: the finding class, then one location, then the reason, line, label and entry
    w = {"finding": "global_race", "entry": 5, "reason": "short", "line": 3, "label": "L"}
    assert _refusal(doc.WaiverDoc, w) == "s: give exactly one PTX location, line or label"
    assert _refusal(doc.WaiverDoc, {**w, "finding": "nope"}).startswith(
        "s.finding: 'nope' is not a finding class (")
    w.pop("label")
    assert _refusal(doc.WaiverDoc, w) == (
        "s.reason: a written reason is required (at least 10 characters) saying why the finding "
        "is harmless")
    assert _refusal(doc.WaiverDoc, {**w, "reason": "  ten chars  ", "entry": None}) == (
        "s.entry: missing")
    # a size: min against max before multiple_of is read
    assert _refusal(doc.SizeSpec, {"min": 5, "max": 1, "multiple_of": "x"}) == (
        "s: min 5 is above max 1")
    assert _refusal(doc.SizeSpec, {"min": 1, "max": 5, "multiple_of": 8}) == (
        "s: no multiple of 8 lies in [1, 5]")
    # a tolerance: why before the bounds
    assert _refusal(doc.ToleranceDoc, {"ulp": -1, "why": 3}) == (
        "s.why: expected a string, got an integer")
    assert _refusal(doc.ToleranceDoc, {"ulp": -1}) == "s.ulp: must not be negative"
    assert _refusal(doc.ToleranceDoc, {"rel": float("nan")}) == "s.rel: expected a finite number"
    assert _refusal(doc.ToleranceDoc, {"why": None}) == "s: needs ulp, rel or abs"


def test_constants() -> None:
    c = section(doc.ConstantDoc, {"name": "k", "dtype": "f32", "values": [1, 2.5], "count": "x"},
                "c")
    assert c.values == (1.0, 2.5) and c.count is None  # count is not read beside values
    assert _refusal(doc.ConstantDoc, {"dtype": "f32"}) == "s.name: expected a string, got null"
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f31", "values": []}) == (
        "s.dtype: 'f31' is not one of f16, bf16, f32, f64, s32, u32, s64, u64, u8, s8")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32"}) == (
        "s: give values, or count and range")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32", "values": []}) == (
        "s.values: 1 to 65536 values")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32", "range": None}) == (
        "s.count: expected an integer, got null")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32", "count": 2, "range": None}) == (
        "s.range: expected a mapping, got null")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32", "count": 2,
                                      "range": {"high": 1}}) == (
        "s.range.low: expected a number, got null")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32", "count": 2,
                                      "range": {"low": 2, "high": 1}}) == (
        "s.range: low 2.0 is above high 1.0")
    assert _refusal(doc.ConstantDoc, {"name": "k", "dtype": "f32", "count": 0,
                                      "range": {"low": 0, "high": 1}}) == (
        "s.count: 0 is out of range [1, 65536]")


def test_names_references_and_claims() -> None:
    assert _refusal(doc.Oracle, {"entry": "main", "results": ["a\n"]}) == (
        "s.results[0]: 'a\\n' is not a name ([A-Za-z_][A-Za-z0-9_]*)")
    assert _refusal(doc.Oracle, {"entry": "main"}) == (
        "s.results: must name at least one output parameter")
    assert _refusal(doc.BundleReference, {"file": " ", "function": "f"}) == "s.file: empty"
    assert _refusal(doc.BundleReference, {"file": None, "function": "f"}) == (
        "s.file: missing (a bundle reference needs file and function)")
    assert _refusal(doc.Resources, {"max_registers": 2**64}) == (
        f"s.max_registers: {2**64} is out of range [1, 255]")
    assert _refusal(doc.Resources, {"spills": "maybe"}) == (
        "s.spills: 'maybe' is not forbid or allow")
    claim = section(doc.ClaimDoc, {"obligation": "PO1", "theorem": "T", "property": "p",
                                   "statement": None, "provable_contracts_field": 1}, "c")
    assert claim.statement == ""  # other keys of a claim are allowed (provable-contracts' own)
