"""Contract waivers (issue 32): ``kernel.waivers`` names a finding class, a PTX location (entry
and line, or label) and a written reason. A waived finding is shown as waived in the falsify
detail and the certificate, never dropped, and the run goes on; a waiver that matches no
instruction fails ``contract.lint`` (gate ``waivers``), one that matches no finding in any test
fails the falsify check. The kernel (tests/fixtures/waivers/shift_read.cu, built by the real
nvcc) has a real but harmless global race: a neighbour's element read and multiplied by zero."""

from __future__ import annotations

import re
from pathlib import Path

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
from verify.waivers import resolve

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "waivers"
REASON = "the neighbour's value is multiplied by zero: which value is read never matters"

CONTRACT = """
metadata: {version: "1.0.0", description: "a[i] = 2 a[i]"}
equations:
  shift_read: {formula: "a_i = 2 a_i"}
kernel:
  name: shift_read
  version: "1.0.0"
  entry: shift_read
  ptx: shift_read.ptx
  reference: test_double
  params:
    - {name: a, ptr: f32, intent: inout, shape: [n]}
    - {name: n, scalar: s32, value: n}
  launch: {grid: ["ceil_div(n, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    n: {min: 1, max: 4096}
WAIVERSfalsification_tests:
  - id: FALSIFY-SHIFT-001
    rule: "matches reference"
    prediction: "a == 2 a exactly"
    sizes: [{n: 300}]
    tolerance: {ulp: 0}
    properties: [reference, race_free]
certificate:
  - {obligation: PO7, theorem: Shift.race_free, property: race_free}
"""


def double(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    return {"a": 2.0 * inputs["a"].astype(np.float64)}


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return build_ptx(FIX / "shift_read.cu", tmp_path_factory.mktemp("waivers"))


def store_line(ptx: bytes) -> int:
    lines = ptx.decode().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if "st.global.f32" in ln)


def contract_text(*waivers: str) -> str:
    block = "".join(f"    - {w}\n" for w in waivers)
    return CONTRACT.replace("WAIVERS", f"  waivers:\n{block}" if waivers else "")


def waiver(where: str, finding: str = "global_race", reason: str = REASON) -> str:
    return f"{{finding: {finding}, entry: shift_read, {where}, reason: \"{reason}\"}}"


def check(ptx: bytes, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[
        tuple[str, str]]:
    """Every falsify.* check of a bundle of ``text`` and the PTX, through ``falsify.run``."""
    monkeypatch.setitem(REFERENCES, "test_double", double)
    bundle = Bundle.from_files({"contract.yaml": text.encode(), "shift_read.ptx": ptx,
                                "ShiftRead.lean": b"-- no theorem\n", "s.fut": b"--\n"})
    ctx = Context(bundle, Options(use_gpu=False, seed=3))
    ctx.contract = load_contract(text.encode())
    return [(c.status, c.detail) for c in falsify.run(ctx)]


def test_without_a_waiver_the_race_fails(ptx: bytes, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ((status, detail),) = check(ptx, contract_text(), tmp_path, monkeypatch)
    assert status == "failed" and "global_race [race_free/PO7]" in detail


def test_a_waived_race_passes_and_is_shown(ptx: bytes, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    line = store_line(ptx)
    text = contract_text(waiver(f"line: {line}"))
    ((status, detail),) = check(ptx, text, tmp_path, monkeypatch)
    assert status == "passed", detail
    assert f"; waived: global_race at PTX line {line}: element" in detail
    assert f"(waiver 0: {REASON!r})" in detail
    c = load_contract(text.encode())
    gates = {g.name: g.status for g in lint_contract(c, {"shift_read.ptx": ptx})}
    assert gates["waivers"] == "passed"


def test_a_waiver_of_another_class_does_not_hide_the_race(
        ptx: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = contract_text(waiver(f"line: {store_line(ptx)}", finding="out_of_bounds"))
    ((status, detail),) = check(ptx, text, tmp_path, monkeypatch)
    assert status == "failed" and "global_race [race_free/PO7]" in detail


def test_a_waiver_that_matches_no_finding_fails(ptx: bytes, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    label = re.search(r"^(\$L__BB0_\d+):", ptx.decode(), re.M)
    assert label is not None
    text = contract_text(waiver(f"line: {store_line(ptx)}"),
                         waiver(f"label: \"{label.group(1)}\"", finding="out_of_bounds"))
    ((status, detail),) = check(ptx, text, tmp_path, monkeypatch)
    assert status == "failed"
    assert detail.startswith(f"waiver 1 (out_of_bounds at shift_read block {label.group(1)}")
    assert "matched no finding in any falsification test" in detail


def test_lint_refuses_a_waiver_that_matches_no_instruction(ptx: bytes) -> None:
    lines = ptx.decode().splitlines()
    blank = next(i + 1 for i, ln in enumerate(lines) if ln.strip().startswith(".reg"))
    c = load_contract(contract_text(waiver(f"line: {blank}"), waiver("label: \"$nowhere\""),
                                    waiver("line: 1").replace("shift_read", "other")).encode())
    assert c.kernel is not None
    _, problems = resolve(c.kernel.waivers, ptx, "shift_read")
    assert problems == [
        f"waiver 0 (global_race at shift_read PTX line {blank}) matches nothing: PTX line "
        f"{blank} is not an instruction of shift_read",
        "waiver 1 (global_race at shift_read block $nowhere) matches nothing: no label "
        "'$nowhere' in shift_read, or no instruction after it",
        "waiver 2 (global_race at other PTX line 1): entry 'other' is not the kernel's entry "
        "'shift_read'",
    ]
    gates = {g.name: (g.status, g.reason) for g in lint_contract(c, {"shift_read.ptx": ptx})}
    assert gates["waivers"][0] == "failed"
    assert gates["waivers"][1].startswith("waiver 0 (global_race")


def test_the_certificate_lists_waivers(ptx: bytes) -> None:
    from verify import certificate

    c = load_contract(contract_text(waiver(f"line: {store_line(ptx)}")).encode())
    files = {"contract.yaml": b"metadata: {}\n", "shift_read.ptx": ptx, "S.lean": b"--\n",
             "s.fut": b"--\n"}
    ctx = Context(Bundle.from_files(files), Options(use_gpu=False))
    ctx.contract = c
    (cert,) = certificate.run(ctx)
    assert f"waived: global_race at shift_read PTX line {store_line(ptx)} ({REASON!r})" in \
        cert.detail


@pytest.mark.parametrize(("w", "message"), [
    ("{finding: global_race, entry: k, line: 3}", "kernel.waivers[0].reason: missing"),
    ("{finding: global_race, entry: k, line: 3, label: x, reason: \"long enough reason\"}",
     "kernel.waivers[0]: give exactly one PTX location, line or label"),
    ("{finding: global_race, entry: k, reason: \"long enough reason\"}",
     "kernel.waivers[0]: give exactly one PTX location, line or label"),
    ("{finding: data_race, entry: k, line: 3, reason: \"long enough reason\"}",
     "kernel.waivers[0].finding: 'data_race' is not a finding class"),
    ("{finding: race, entry: k, line: 3, reason: \"ok\"}",
     "kernel.waivers[0].reason: a written reason is required"),
    ("{finding: race, entry: k, line: 3, reason: \"long enough reason\", why: x}",
     "kernel.waivers[0]"),
])
def test_bad_waivers_are_refused(w: str, message: str) -> None:
    with pytest.raises(ContractError, match=re.escape(message)):
        load_contract(contract_text(w).encode())


def test_schema_accepts_waivers() -> None:
    import yaml

    doc = yaml.safe_load(contract_text(waiver("line: 47"), waiver("label: \"$L__BB0_2\"")))
    assert schema_errors(doc) == []
    bad = yaml.safe_load(contract_text(waiver("line: 47") .replace("}", ", label: x}")))
    assert schema_errors(bad) != []
