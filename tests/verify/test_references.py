"""``kernel.reference: {file, function}``: the contract form, lint, and the falsify checks that run
the bundle's own reference in the sandbox and name their oracle (SPEC 3, issue 8)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import ContractError
from verify import falsify, sandbox
from verify.context import Context, Options
from verify.contract import load_contract, parse_yaml
from verify.contract_lint import lint_contract, schema_errors
from verify.runner import check_bundle

ROOT = Path(__file__).resolve().parents[2]
VADD = ROOT / "bundles" / "vector_add"
BWRAP, WHY = sandbox.sandbox_status()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=WHY)

REFERENCE = b'''"""The author's own reference for vector_add."""
import numpy as np


def vadd(inputs, sizes):
    n = sizes["n"]
    a = inputs["a"].astype(np.float64)[:n]
    b = inputs["b"].astype(np.float64)[:n]
    assert inputs["n"].shape == () and inputs["n"].dtype == np.uint32  # scalars come as 0-d
    return {"c": (a + b).astype(np.float32)}
'''
BUNDLE_REF = "reference: {file: reference.py, function: vadd}"


def _files(reference: bytes = REFERENCE, ref_line: str = BUNDLE_REF) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in VADD.iterdir() if p.is_file()}
    contract = files["contract.yaml"].decode()
    assert "reference: vector_add_f32" in contract
    files["contract.yaml"] = contract.replace("reference: vector_add_f32", ref_line).encode()
    files["reference.py"] = reference
    return files


def _bundle(tmp: Path, files: dict[str, bytes]) -> Bundle:
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return Bundle.from_dir(tmp)


def _falsify(tmp: Path, files: dict[str, bytes], **opts: object) -> list[falsify.Check]:
    bundle = _bundle(tmp, files)
    ctx = Context(bundle, Options(use_gpu=False, **opts))  # type: ignore[arg-type]
    ctx.contract = load_contract(files["contract.yaml"])
    return falsify.run(ctx)


def test_contract_reads_both_reference_forms() -> None:
    k = load_contract(_files()["contract.yaml"]).kernel
    assert k is not None
    assert (k.reference, k.reference_file, k.reference_function) == ("", "reference.py", "vadd")
    k = load_contract((VADD / "contract.yaml").read_bytes()).kernel
    assert k is not None and (k.reference, k.reference_file) == ("vector_add_f32", "")
    assert schema_errors(parse_yaml(_files()["contract.yaml"])) == []


@pytest.mark.parametrize(
    "line, msg",
    [
        ("reference: {file: reference.py}", "kernel.reference.function: missing"),
        ("reference: {function: vadd}", "kernel.reference.file: missing"),
        (
            "reference: {file: reference.py, function: vadd, name: vector_add_f32}",
            "kernel.reference.name: unknown field (allowed: file, function)",
        ),
        ("reference: {file: reference.py, function: 'os.system'}", "is not a name"),
        ("reference: [vector_add_f32]", "expected a trusted reference name or {file, function}"),
    ],
)
def test_bad_reference_forms_are_contract_errors(line: str, msg: str) -> None:
    with pytest.raises(ContractError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        load_contract(_files(ref_line=line)["contract.yaml"])


def _reference_gate(files: dict[str, bytes]) -> tuple[str, str]:
    gates = {g.name: g for g in lint_contract(load_contract(files["contract.yaml"]), files)}
    return gates["reference"].status, gates["reference"].reason


def test_lint_reference_gate() -> None:
    assert _reference_gate(_files()) == ("passed", "")
    files = _files()
    del files["reference.py"]
    assert _reference_gate(files) == (
        "failed",
        "kernel.reference.file 'reference.py' is not in the bundle",
    )
    bad = _files(ref_line="reference: {file: ../reference.py, function: vadd}")
    assert _reference_gate(bad)[0] == "failed"
    status, why = _reference_gate(
        _files(reference=b"import os\nimport numpy\ndef other(i, s): pass\n")
    )
    assert status == "failed"
    assert "reference.py imports 'os' (a reference uses numpy only)" in why
    assert "kernel.reference.function 'vadd' is not a top-level def in reference.py" in why
    assert _reference_gate(_files(reference=b"def vadd(:\n"))[1].startswith(
        "kernel.reference.file 'reference.py' is not valid Python"
    )
    lint = lint_contract(load_contract(_files()["contract.yaml"]), None)
    assert {g.name: g.status for g in lint}["reference"] == "skipped"


@needs_bwrap
def test_falsify_runs_the_bundle_reference_in_the_sandbox(tmp_path: Path) -> None:
    checks = _falsify(tmp_path, _files())
    assert [c.status for c in checks] == ["passed", "passed"], [c.detail for c in checks]
    for c in checks:
        assert "oracle bundle:reference.py#vadd (bubblewrap" in c.detail


@needs_bwrap
def test_a_wrong_bundle_reference_fails_and_names_its_oracle(tmp_path: Path) -> None:
    wrong = REFERENCE.replace(b"(a + b)", b"(a - b)")
    checks = _falsify(tmp_path, _files(reference=wrong))
    assert checks[0].status == "failed"
    assert checks[0].detail.endswith("(oracle bundle:reference.py#vadd)")
    hostile = REFERENCE.replace(b"    n = sizes", b"    while True: pass\n    n = sizes")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox, "DEFAULT_LIMITS", sandbox.Limits(wall_seconds=3, cpu_seconds=2))
        checks = _falsify(tmp_path, _files(reference=hostile))
    assert checks[0].status == "failed"
    assert "oracle bundle:reference.py#vadd: " in checks[0].detail


def test_without_a_sandbox_bundle_tests_are_skipped_or_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_SANDBOX", "off")
    checks = _falsify(tmp_path, _files())
    assert [c.status for c in checks] == ["skipped", "skipped"]
    assert "no sandbox: turned off (LEDGER_SANDBOX=off)" in checks[0].detail
    assert "oracle bundle:reference.py#vadd" in checks[0].detail
    checks = _falsify(tmp_path, _files(), trust_bundle_code=True)
    assert [c.status for c in checks] == ["passed", "passed"]
    assert "bundle code ran with rlimits only" in checks[0].detail


@needs_bwrap
def test_certificate_says_a_bundle_reference_is_weaker(tmp_path: Path) -> None:
    report = check_bundle(_bundle(tmp_path, _files()), Options(use_gpu=False))
    cert = next(c for c in report.checks if c.id == "certificate")
    assert "oracle bundle:reference.py#vadd only: the author's own executable spec" in cert.detail
    trusted = check_bundle(Bundle.from_dir(VADD), Options(use_gpu=False))
    cert = next(c for c in trusted.checks if c.id == "certificate")
    assert cert.detail.endswith("; oracle trusted:vector_add_f32")
    assert dataclasses.asdict(cert)  # a plain check


def test_cli_trust_bundle_code_without_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.ledgers import run_cli

    monkeypatch.setenv("LEDGER_SANDBOX", "off")
    res = run_cli("check", str(VADD.parent / "saxpy"), "--no-gpu", "--json")
    assert res.returncode == 0, res.stderr
    checks = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    falsify_checks = [c for i, c in checks.items() if i.startswith("falsify.")]
    assert falsify_checks and all(c["status"] == "skipped" for c in falsify_checks)
    assert "no sandbox: turned off (LEDGER_SANDBOX=off)" in falsify_checks[0]["detail"]
    res = run_cli("check", str(VADD.parent / "saxpy"), "--no-gpu", "--json", "--trust-bundle-code")
    assert res.returncode == 0, res.stderr
    checks = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    falsify_checks = [c for i, c in checks.items() if i.startswith("falsify.")]
    assert all(c["status"] == "passed" for c in falsify_checks), falsify_checks
    assert "bundle code ran with rlimits only" in falsify_checks[0]["detail"]


@pytest.mark.parametrize(
    "value, want",
    [("random", "random"), ("2.5", "2.5"), ("-1e-3", "-0.001"), ("n", "n"), ("3", "3")],
)
def test_float_scalar_values(value: str, want: str) -> None:
    text = _files()["contract.yaml"].decode()
    text = text.replace(
        "- {name: n, scalar: u32, value: n}",
        f"- {{name: n, scalar: u32, value: n}}\n    - {{name: alpha, scalar: f32, value: {value}}}",
    )
    k = load_contract(text.encode()).kernel
    assert k is not None and k.params[-1].value == want


@pytest.mark.parametrize(
    "param, msg",
    [
        ("{name: m, scalar: u32, value: random}", "'random' is only allowed for a float scalar"),
        ("{name: m, scalar: s32, value: 2.5}", "2.5 is only allowed for a float scalar"),
    ],
)
def test_random_and_literals_are_for_float_scalars(param: str, msg: str) -> None:
    text = _files()["contract.yaml"].decode()
    text = text.replace(
        "- {name: n, scalar: u32, value: n}", f"- {{name: n, scalar: u32, value: n}}\n    - {param}"
    )
    with pytest.raises(ContractError, match=msg):
        load_contract(text.encode())


def test_random_scalar_is_drawn_in_range_and_passed_as_0d() -> None:
    import numpy as np

    text = (
        _files()["contract.yaml"]
        .decode()
        .replace(
            "- {name: n, scalar: u32, value: n}",
            "- {name: n, scalar: u32, value: n}\n    - {name: alpha, scalar: f32, value: random}\n"
            "    - {name: beta, scalar: f16, value: 0.1}",
        )
    )
    c = load_contract(text.encode())
    assert c.kernel is not None
    test = c.falsification[1]  # inputs within +-1.5e38
    case = falsify.make_case(c.kernel, test, {"n": 4}, np.random.default_rng(3))
    alpha = next(a for a in case.args if a.name == "alpha")
    beta = next(a for a in case.args if a.name == "beta")
    assert isinstance(alpha, falsify.ScalarArg) and -1.5e38 <= alpha.value <= 1.5e38
    assert alpha.value == float(np.float32(alpha.value))  # already rounded to f32
    assert isinstance(beta, falsify.ScalarArg) and beta.value == float(np.float16(0.1))
    oc = falsify.oracle_case(c.kernel, case)
    assert oc.inputs["alpha"].shape == () and oc.inputs["alpha"].dtype == np.float32
    assert oc.inputs["n"].dtype == np.uint32 and int(oc.inputs["n"]) == 4
    assert [o.name for o in oc.outputs] == ["c"] and oc.outputs[0].shape == (4,)


@needs_bwrap
def test_gpu_path_cross_checks_with_a_second_batch_of_the_same_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a (fake) GPU the values come from CuPy and the interpreter re-runs the smallest
    binding: the bundle reference answers both from one sandbox start."""
    import sys

    from tests.verify.test_falsify import fake_cupy

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    files = _files()
    bundle = _bundle(tmp_path, files)
    ctx = Context(bundle, Options(use_gpu=True, seed=5))
    ctx.contract = load_contract(files["contract.yaml"])
    starts: list[object] = []
    real = sandbox.Session.__init__

    def counting(self: sandbox.Session, *a: object, **kw: object) -> None:
        starts.append(a)
        real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sandbox.Session, "__init__", counting)
    checks = falsify.run(ctx)
    assert [c.status for c in checks] == ["passed", "passed"], [c.detail for c in checks]
    assert checks[0].detail.startswith("cupy 99.0 on Fake GPU 9000 (GPU)")
    assert "coverage from poison; interpreter ptxsim" in checks[0].detail
    assert "oracle bundle:reference.py#vadd (bubblewrap" in checks[0].detail
    assert len(starts) == 1
