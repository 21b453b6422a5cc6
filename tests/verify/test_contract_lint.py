"""contract.lint gates, the contract JSON Schema, and the contract check group over real bundles."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from ledger.core.bundle import Bundle
from verify import contract as contract_group
from verify.context import Context
from verify.contract import load_contract, parse_yaml
from verify.contract_lint import GATES, lint_check, lint_contract, load_schema, schema_errors

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "contracts"
GATE_NAMES = [g[0] for g in GATES]
BUNDLE_FILES = ("vadd.ptx", "vadd.cu", "vadd.fut", "Clean.lean")


def _files(contract_name: str) -> dict[str, bytes]:
    files = {name: (FIX / name).read_bytes() for name in BUNDLE_FILES}
    files["contract.yaml"] = (FIX / contract_name).read_bytes()
    return files


def _statuses(contract_name: str) -> dict[str, str]:
    files = _files(contract_name)
    gates = lint_contract(load_contract(files["contract.yaml"]), files)
    assert [g.name for g in gates] == GATE_NAMES
    return {g.name: g.status for g in gates}


def test_clean_fixture_passes_every_gate() -> None:
    got = _statuses("clean.yaml")
    want = {g: "passed" for g in GATE_NAMES}
    assert got == want


@pytest.mark.parametrize("gate", GATE_NAMES)
def test_each_fixture_trips_exactly_its_gate(gate: str) -> None:
    got = _statuses(f"lint-{gate}.yaml")
    want = {g: "passed" for g in GATE_NAMES}
    want[gate] = "failed"
    assert got == want


@pytest.mark.parametrize(
    "name, reason",
    [
        ("metadata", "metadata.description is missing"),
        ("equations", "equations.vector_add has no formula"),
        ("obligations", "no proof_obligations and no certificate claims"),
        ("falsification", "test id 'falsify-clean-1' does not match FALSIFY-[A-Z0-9-]+"),
        ("executable", "FALSIFY-CLEAN-001 sizes[1] does not bind n"),
        ("launch", "FALSIFY-CLEAN-001 sizes[1] (n=0): grid[0] = 0 (must be 1..2147483647)"),
        ("kernel", "kernel.futhark 'missing.fut' is not in the bundle"),
        (
            "reference",
            "kernel.reference 'no_such_reference' is not in the trusted reference registry",
        ),
        ("certificate", "certificate[3] property race_free is listed by no executable test"),
        (
            "tolerance",
            "FALSIFY-CLEAN-001: the prediction says 'exactly' but the tolerance allows ulp 1e+06 "
            "(make it {ulp: 0} or state the real bound); FALSIFY-CLEAN-001: tolerance ulp 1e+06 "
            "is above 4 with no justification (add tolerance.why: the error analysis that needs "
            "this bound)",
        ),
        (
            "domain",
            "kernel.size_domain is missing: declare the sizes the claim covers, e.g. size_domain: "
            "{n: {min: 1, max: 1048576}} (one entry per size variable: n; add multiple_of: N for "
            'a real restriction and size_constraints: ["..."] for relations); the verifier '
            "chooses its own sizes inside it",
        ),
        ("lean-status", "Clean.guard_in_bounds (proof_obligations[1].lean) has status 'sorry'"),
    ],
)
def test_gate_reasons(name: str, reason: str) -> None:
    files = _files(f"lint-{name}.yaml")
    check = lint_check(load_contract(files["contract.yaml"]), files)
    assert check.id == "contract.lint" and check.status == "failed"
    assert check.detail == f"{name}: {reason}"


def test_lean_exists_reason() -> None:
    files = _files("lint-lean-exists.yaml")
    check = lint_check(load_contract(files["contract.yaml"]), files)
    assert check.status == "failed"
    assert check.detail == (
        "lean-exists: Clean.work_bounded_missing (certificate[3].theorem) is not in the "
        "bundle's Lean files"
    )


def _with_contract(text: str) -> dict[str, bytes]:
    return {**_files("clean.yaml"), "contract.yaml": text.encode()}


def test_scaffold_todo_left_without_the_marker_fails_unfinished() -> None:
    """Deleting the marker lines does not finish a scaffold: a TODO `ledger new` wrote (an
    unchecked guess) still fails the gate, and the reason lists where it is."""
    clean = (FIX / "clean.yaml").read_text()
    lines = clean.splitlines()
    at = next(i for i, ln in enumerate(lines) if "name: b, ptr: f32" in ln)
    lines[at] += "  # TODO: shape guessed: one element per thread"
    text = "\n".join(lines) + "\n"
    text = text.replace("tolerance: {ulp: 0}", "tolerance: {ulp: 0}  # TODO")
    text = text.replace('description: "f32 vector add (test fixture)"', 'description: "TODO"')
    files = _with_contract(text)
    check = lint_check(load_contract(files["contract.yaml"]), files)
    assert check.status == "failed"
    assert check.detail == (
        f"unfinished: contract.yaml TODO at line 6 (description), line {at + 1} (param b), "
        f"line {text.splitlines().index('    tolerance: {ulp: 0}  # TODO') + 1} (tolerance) "
        "(left by `ledger new`: check each line, then delete its TODO)"
    )


def test_todo_word_that_ledger_new_did_not_write_passes() -> None:
    """Only the scaffold's own TODO forms count: the word inside a value or a comment does not."""
    text = (FIX / "clean.yaml").read_text().replace(
        'description: "f32 vector add (test fixture)"',
        'description: "TODO list merge kernel: adds a TODO: weight"  # see the TODO file',
    )
    files = _with_contract(text)
    assert lint_check(load_contract(files["contract.yaml"]), files).status == "passed"


def test_theorem_that_the_scan_rejects_fails() -> None:
    files = _files("clean.yaml")
    files["Clean.lean"] = files["Clean.lean"].replace(
        b"theorem guard_in_bounds", b"axiom cheat : False\n\ntheorem guard_in_bounds"
    )
    check = lint_check(load_contract(files["contract.yaml"]), files)
    assert check.status == "failed"
    assert check.detail == (
        "lean-exists: Clean.index_injective (proof_obligations[0].lean, certificate[0].theorem) "
        "is rejected by lean.scan; Clean.guard_in_bounds (proof_obligations[1].lean, "
        "certificate[1].theorem) is rejected by lean.scan; Clean.resources_fit "
        "(certificate[2].theorem) is rejected by lean.scan; Clean.work_bounded "
        "(certificate[3].theorem) is rejected by lean.scan; first lean.scan problem: "
        "Clean.lean:7:1: axiom declaration"
    )


def test_theorem_that_is_a_def_fails() -> None:
    files = _files("clean.yaml")
    files["Clean.lean"] = files["Clean.lean"].replace(b"theorem work_bounded", b"def work_bounded")
    check = lint_check(load_contract(files["contract.yaml"]), files)
    assert check.detail == (
        "lean-exists: Clean.work_bounded (certificate[3].theorem) is not a theorem"
    )


def test_lean_scan_error_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.core.errors import BadInput

    def broken(files: object) -> object:
        raise BadInput("injected fault")

    monkeypatch.setattr(importlib.import_module("verify.lean"), "scan_sources", broken)
    files = _files("clean.yaml")
    check = lint_check(load_contract(files["contract.yaml"]), files)
    assert (check.status, check.detail) == (
        "failed",
        "lean-exists: lean.scan could not read the bundle's Lean files: injected fault",
    )


def test_more_certificate_problems() -> None:
    text = (FIX / "clean.yaml").read_text()
    text = (
        text.replace("obligation: PO8", "obligation: PO9")
        .replace("property: coverage\n    statement", "property: speed\n    statement")
        .replace("resources: {max_registers: 32, max_shared_bytes: 0, spills: forbid}", "")
    )
    gates = {g.name: g for g in lint_contract(load_contract(text.encode()))}
    assert gates["certificate"].reason == (
        "certificate[0] property 'speed' is unknown; certificate[2] claims resources but "
        "kernel.resources sets no budget; certificate[3] obligation 'PO9' is not one of PO1..PO8"
    )


def test_more_kernel_problems() -> None:
    text = (FIX / "clean.yaml").read_text()
    text = text.replace("  entry: vector_add\n", "").replace("ptx: vadd.ptx", "ptx: ../x.ptx")
    text = text.replace("  source: vadd.cu\n", "")
    text = text.replace(
        '  launch:\n    grid: ["ceil_div(n, 256)", 1, 1]\n'
        "    block: [256, 1, 1]\n    shared_bytes: 0\n",
        "",
    )
    files = _files("clean.yaml")
    gates = {g.name: g for g in lint_contract(load_contract(text.encode()), files)}
    assert gates["kernel"].reason == (
        "kernel.entry is missing; kernel.launch is missing; kernel.build is given without "
        "kernel.source; kernel.ptx bad file name in bundle: '../x.ptx'"
    )


def test_launch_gate_evaluates_every_binding() -> None:
    text = (FIX / "clean.yaml").read_text()
    text = text.replace("block: [256, 1, 1]", "block: [2048, 1, 1]")
    text = text.replace("shared_bytes: 0\n", "shared_bytes: 4 * n // (n - 1000)\n")
    text = text.replace("{name: n, scalar: u32, value: n}", "{name: n, scalar: u32, value: n - 2}")
    gates = {g.name: g for g in lint_contract(load_contract(text.encode()))}
    assert gates["launch"].reason == (
        "FALSIFY-CLEAN-001 sizes[0] (n=1): n = -1 does not fit u32; "
        "FALSIFY-CLEAN-001 sizes[0] (n=1): block[0] = 2048 (must be 1..1024); "
        "FALSIFY-CLEAN-001 sizes[0] (n=1): block has 2048 threads (at most 1024); "
        "FALSIFY-CLEAN-001 sizes[0] (n=1): shared_bytes = -1 is negative; "
        "FALSIFY-CLEAN-001 sizes[1] (n=1000): expression '4 * n // (n - 1000)': division by zero; "
        "FALSIFY-CLEAN-001 sizes[2] (n=4099): block[0] = 2048 (must be 1..1024); "
        "FALSIFY-CLEAN-001 sizes[2] (n=4099): block has 2048 threads (at most 1024); "
        "FALSIFY-CLEAN-001 sizes[2] (n=4099): shared_bytes = 5 is over max_shared_bytes 0"
    )


@pytest.mark.parametrize(
    "build, reason",
    [
        ("[nvcc, -arch=sm_86, -ptx, -o, vadd.ptx, vadd.cu]", None),
        ("[nvcc, --gpu-architecture, sm_86, --ptx, --output-file=vadd.ptx, vadd.cu]", None),
        ("[nvcc, -arch=compute_86, -ptx, -o, vadd.ptx, vadd.cu]", None),
        (
            "[nvcc, -arch=sm_80, -ptx, -o, vadd.ptx, vadd.cu]",
            "kernel.build -arch sm_80 does not match kernel.target sm_86",
        ),
        (
            "[nvcc, -ptx, -o, vadd.ptx, vadd.cu]",
            "kernel.build sets no -arch (nvcc would not target sm_86)",
        ),
        (
            "[nvcc, -arch=sm_86, -cubin, -o, vadd.ptx, vadd.cu]",
            "kernel.build does not ask nvcc for PTX (-ptx)",
        ),
        (
            "[nvcc, -arch=sm_86, -ptx, -o, other.ptx, vadd.cu]",
            "kernel.build does not write kernel.ptx (-o vadd.ptx)",
        ),
        (
            "[nvcc, -arch=sm_86, -ptx, -o, vadd.ptx, -o, x.ptx, vadd.cu]",
            "kernel.build does not write kernel.ptx (-o vadd.ptx)",
        ),
        (
            "[nvcc, -arch=sm_86, -ptx, -o, vadd.ptx, other.cu]",
            "kernel.build does not compile kernel.source 'vadd.cu'",
        ),
    ],
)
def test_build_must_make_the_ptx_from_the_source(build: str, reason: str | None) -> None:
    text = (
        (FIX / "clean.yaml")
        .read_text()
        .replace("build: [nvcc, -arch=sm_86, -ptx, -o, vadd.ptx, vadd.cu]", f"build: {build}")
    )
    gates = {g.name: g for g in lint_contract(load_contract(text.encode()), _files("clean.yaml"))}
    assert gates["kernel"].reason == (reason or "")


def test_kernel_without_outputs() -> None:
    text = (FIX / "clean.yaml").read_text().replace("intent: out", "intent: in")
    gates = {g.name: g for g in lint_contract(load_contract(text.encode()), _files("clean.yaml"))}
    assert gates["kernel"].reason == (
        "kernel.params has no output (a pointer with intent out or inout)"
    )


def test_executable_gate_reports_unknown_property_and_prose_tests() -> None:
    c = load_contract(
        (FIX / "clean.yaml")
        .read_text()
        .replace(
            "properties: [reference, coverage, bounds]",
            "properties: [reference, speed]\n  - {id: FALSIFY-CLEAN-002, rule: r, prediction: p}",
        )
        .encode()
    )
    gates = {g.name: g for g in lint_contract(c)}
    assert gates["executable"].reason == (
        "FALSIFY-CLEAN-001 lists unknown properties speed; FALSIFY-CLEAN-002 is prose only "
        "(no sizes, tolerance, properties)"
    )


def test_bare_contract_skips_bundle_gates() -> None:
    gates = {g.name: g for g in lint_contract(load_contract((FIX / "clean.yaml").read_bytes()))}
    assert (gates["kernel"].status, gates["kernel"].reason) == ("skipped", "no bundle")
    assert (gates["lean-exists"].status, gates["lean-exists"].reason) == ("skipped", "no bundle")
    assert gates["reference"].status == "passed"


def test_plain_pv_contract_in_a_bundle_fails_kernel_and_reference() -> None:
    files = _files("clean.yaml")
    files["contract.yaml"] = (FIX / "pv-plain.yaml").read_bytes()
    gates = {g.name: g for g in lint_contract(load_contract(files["contract.yaml"]), files)}
    assert gates["kernel"].reason == "no kernel extension: nothing in this contract can be run"
    assert gates["reference"].reason == "no kernel extension, so no kernel.reference"
    assert gates["executable"].status == "failed"


# --- JSON Schema ---------------------------------------------------------------------------


def _all_contracts() -> list[Path]:
    found = sorted(FIX.glob("*.yaml")) + sorted((ROOT / "contracts").glob("*.yaml"))
    found += sorted((ROOT / "bundles").glob("*/contract.yaml"))
    return found


@pytest.mark.parametrize("path", _all_contracts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bundled_and_fixture_contract_loads_and_fits_the_schema(path: Path) -> None:
    data = path.read_bytes()
    load_contract(data)
    assert schema_errors(parse_yaml(data)) == []


def test_schema_is_valid_draft_04() -> None:
    """Draft-04, which both validators implement (fastjsonschema: 04/06/07) and whose "integer"
    is an int, as the contract means it (from draft-06 on, ``1.0`` would be one)."""
    from jsonschema import Draft4Validator

    schema = load_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    Draft4Validator.check_schema(schema)


def test_generated_schema_check_is_up_to_date() -> None:
    """``verify/_contract_schema_check.py`` is what ``scripts/contract_schema_check.py`` generates
    from today's schema with the installed fastjsonschema, byte for byte."""
    spec = importlib.util.spec_from_file_location(
        "contract_schema_check", ROOT / "scripts" / "contract_schema_check.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (ROOT / "verify" / "_contract_schema_check.py").read_text(encoding="utf-8") \
        == gen.generate()


def test_fast_check_accepts_only_what_jsonschema_accepts() -> None:
    """The fast path's answer, "valid", is jsonschema's: a float where an integer belongs and a
    pattern's match before a trailing newline are refused by both (the second by the fast code
    only, which then defers to jsonschema's full list)."""
    from verify.contract_lint import _accepts, _validator

    doc = parse_yaml((FIX / "clean.yaml").read_bytes())
    assert _accepts(doc) and list(_validator().iter_errors(doc)) == []
    doc["kernel"]["resources"] = {"max_registers": 32.0}
    assert not _accepts(doc)
    assert schema_errors(doc) == ["kernel.resources.max_registers: expected integer"]
    doc["kernel"]["resources"] = {}
    doc["kernel"]["params"][0]["name"] = "a\n"
    assert not _accepts(doc) and schema_errors(doc) == []


def test_schema_catches_structural_errors() -> None:
    doc = parse_yaml((FIX / "clean.yaml").read_bytes())
    doc["kernel"]["params"][0]["scalar"] = "f32"
    doc["kernel"]["launch"]["grid"] = [1, 1]
    doc["kernel"]["build"][0] = "sh"
    doc["kernel"]["surprise"] = 1
    doc["falsification_tests"][0].pop("tolerance")
    del doc["metadata"]
    assert schema_errors(doc) == [
        "(document): missing 'metadata'",
        "kernel.build[0]: 'sh' is not one of ['nvcc', 'triton']",
        "kernel.params[0]: matches 0 of the 2 allowed shapes",
        "kernel.launch.grid: needs at least 3 items",
        "kernel.surprise: unknown key",
        "falsification_tests[0]: has 'sizes' but not 'tolerance'",
        "falsification_tests[0]: has 'properties' but not 'tolerance'",
    ]


# --- the check group over bundles ----------------------------------------------------------


def test_run_on_clean_bundle_sets_the_contract() -> None:
    ctx = Context(Bundle.from_files(_files("clean.yaml")))
    schema, lint = contract_group.run(ctx)
    assert schema.id == "contract.schema" and schema.status == "passed"
    assert schema.detail == (
        "contract.yaml parsed: kernel clean_vadd version 1.0.0, 1 falsification tests, "
        "4 claims, 4 Lean theorems named (6 references); size domain: 1 ≤ n ≤ 2^20"
    )
    assert (schema.tool, schema.version) == ("PyYAML", yaml.__version__)
    assert ctx.contract is not None and ctx.contract.name == "clean_vadd"
    assert lint.status == "passed"
    assert lint.detail.startswith("gates passed: metadata, equations, obligations, falsification")


def test_run_on_broken_contract() -> None:
    files = _files("clean.yaml")
    files["contract.yaml"] = b"metadata: {version: '1'\n"
    ctx = Context(Bundle.from_files(files))
    schema, lint = contract_group.run(ctx)
    assert schema.status == "failed" and "YAML syntax error" in schema.detail
    assert (lint.status, lint.detail) == ("skipped", "not run: contract.schema failed")
    assert ctx.contract is None


def test_run_reports_json_schema_problems() -> None:
    files = _files("clean.yaml")
    files["contract.yaml"] = files["contract.yaml"].replace(
        b'invariants: ["c_i is the round-to-nearest f32 sum"]', b"invariants: one string"
    )
    ctx = Context(Bundle.from_files(files))
    schema, lint = contract_group.run(ctx)
    assert (schema.status, schema.detail) == (
        "failed",
        "equations.vector_add.invariants: expected array",
    )
    assert lint.status == "skipped" and ctx.contract is None


def test_run_on_lint_failure() -> None:
    ctx = Context(Bundle.from_files(_files("lint-kernel.yaml")))
    schema, lint = contract_group.run(ctx)
    assert schema.status == "passed" and ctx.contract is not None
    assert (lint.status, lint.detail) == (
        "failed",
        "kernel: kernel.futhark 'missing.fut' is not in the bundle",
    )


@pytest.mark.parametrize("bundle", sorted((ROOT / "bundles").glob("*/")), ids=lambda p: p.name)
def test_run_on_shipped_bundles(bundle: Path) -> None:
    ctx = Context(Bundle.from_dir(bundle))
    schema, lint = contract_group.run(ctx)
    assert schema.status == "passed", schema.detail
    assert lint.status == "passed", lint.detail
