"""docs/seal-your-own-kernel.md, followed end to end through the real CLI: a new kernel (a leaky
ReLU, not one of bundles/*) goes from a .cu file through `ledger new`, the guide's filled-in
stubs and TODOs, `ledger check`, `ledger seal` and `ledger verify`, in a fresh LEDGER_HOME, with
no change to the verifier. Also `ledger new`'s bad input and the unfinished scaffold whose first
check is the to-do list."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ledger.core.bundle import read_dir
from tests.helpers.ledgers import assert_one_error_line, cli_json, run_cli
from verify import sandbox
from verify.contract import load_contract
from verify.contract_lint import lint_check
from verify.tools import find_tool

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "seal-your-own-kernel.md"
needs_nvcc = pytest.mark.skipif(
    find_tool("nvcc", cuda=True) is None, reason="no nvcc: ledger new cannot build PTX"
)
BWRAP, WHY = sandbox.sandbox_status()


def _block(lang: str, n: int = 0) -> str:
    """The n-th ```lang fenced block of the guide (the test uses the guide's own text)."""
    blocks = re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    return str(blocks[n])


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if find_tool("nvcc", cuda=True) is None:
        pytest.skip("no nvcc: ledger new cannot build PTX")
    root = tmp_path_factory.mktemp("own")
    (root / "leaky_relu.cu").write_text(_block("cuda"))
    out = cli_json("new", str(root / "leaky_relu"), "--cu", str(root / "leaky_relu.cu"))
    assert out["entry"] == "_Z10leaky_relufPKfPfi" and out["function"] == "leaky_relu"
    return root / "leaky_relu"


def test_scaffold_params_and_files(scaffold: Path) -> None:
    assert sorted(p.name for p in scaffold.iterdir()) == [
        "contract.yaml",
        "leaky_relu.cu",
        "leaky_relu.fut",
        "leaky_relu.lean",
        "leaky_relu.ptx",
        "reference.py",
    ]
    text = (scaffold / "contract.yaml").read_text()
    assert "- {name: a, scalar: f32, value: random}" in text
    assert "- {name: x, ptr: f32, intent: in, shape: [n]}" in text
    assert "- {name: y, ptr: f32, intent: out, shape: [n]}" in text
    assert "- {name: n, scalar: s32, value: n}" in text
    assert "sizes: [{n: 1}, {n: 255}, {n: 257}, {n: 775}]" in text
    assert "reference: {file: reference.py, function: leaky_relu}" in text
    assert re.search(r"max_registers: (\d+),", text)


def test_unfinished_scaffold_cannot_pass(scaffold: Path) -> None:
    """The first `ledger check` is the to-do list the guide's section describes."""
    rep = cli_json("check", str(scaffold), "--no-gpu", ok=(1,))
    st = {c["id"]: c for c in rep["checks"]}
    assert rep["verdict"] == "failed"
    assert st["lean.scan"]["status"] == "failed" and "sorry" in st["lean.scan"]["detail"]
    # the scaffold names one theorem four times: counted once
    assert "1 Lean theorem named (4 references)" in st["contract.schema"]["detail"]
    lint = st["contract.lint"]["detail"]
    assert lint.startswith(
        "unfinished: contract.yaml, leaky_relu.fut, leaky_relu.lean, reference.py still"
    )
    for todo in (
        "(description)",
        "(formula)",
        "(param x)",
        "(param y)",
        "(grid)",
        "(tolerance)",
        "(statement)",
    ):
        assert todo in lint, todo
    assert (
        "lean-status: Leaky_relu.guard_in_bounds (proof_obligations[0].lean) has status 'sorry'"
        in lint
    )
    assert "test block for leaky_relu has no cases" in st["futhark.spec"]["detail"]
    assert "NotImplementedError: TODO" in st["falsify.FALSIFY-LEAKY-RELU-001"]["detail"]
    assert st["rebuild.ptx"]["status"] == "passed"
    assert st["certificate"]["status"] == "failed"
    # the guide's to-do list quotes these
    guide = GUIDE.read_text(encoding="utf-8")
    assert "A TODO that `ledger new` wrote and\nyou leave in `contract.yaml` fails" in guide
    assert "contract.yaml TODO at line 5 (description), line 9 (formula), line 27 (param x)" in (
        guide
    )
    assert "contract.yaml TODO at line 5 (description), line 9 (formula), line 27 (param x)" in (
        lint
    )


def test_ledger_new_bad_input(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* y) { y[0] = 1; }\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    cases = [
        (["new", str(tmp_path / "full"), "--cu", str(cu)], "exists and is not empty"),
        (["new", str(tmp_path / "b"), "--cu", str(tmp_path / "nope.cu")], "no such file"),
        (["new", str(tmp_path / "b"), "--cu", str(tmp_path / "full" / "x")], "(.cu)"),
    ]
    if find_tool("nvcc", cuda=True) is not None:
        bad = tmp_path / "bad.cu"
        bad.write_text("__global__ void k(float* y) { y[0] = undefined_thing; }\n")
        two = tmp_path / "two.cu"
        two.write_text(
            "__global__ void f(float* y) { y[0] = 1; }\n__global__ void g(float* y) { y[0] = 2; }\n"
        )
        cases += [
            (
                ["new", str(tmp_path / "b"), "--cu", str(bad)],
                "nvcc -arch=sm_86 -ptx -o bad.ptx bad.cu failed",
            ),
            (["new", str(tmp_path / "b"), "--cu", str(two)], "has 2 kernels: give --entry"),
            (
                ["new", str(tmp_path / "b"), "--cu", str(two), "--entry", "h"],
                "--entry h: no kernel",
            ),
        ]
    for args, want in cases:
        line = assert_one_error_line(run_cli(*args), 2)
        assert want in line, line
        assert not (tmp_path / "b").exists()


def _fill_in(d: Path) -> None:
    """Steps 3-5 of the guide, with the guide's own code blocks and filled-in values."""
    (d / "reference.py").write_text(_block("python"))
    (d / "leaky_relu.fut").write_text(_block("futhark"))
    (d / "leaky_relu.lean").write_text(_block("lean"))
    values = yaml.safe_load(_block("yaml"))
    text = (d / "contract.yaml").read_text()
    text = "\n".join(text.splitlines()[2:]) + "\n"  # the two marker lines
    text = re.sub(r'description: "TODO[^"]*"', f'description: "{values["description"]}"', text)
    text = re.sub(r'formula: "TODO[^"]*"', f'formula: "{values["formula"]}"', text)
    text = text.replace("status: sorry", f"status: {values['status']}")
    text = text.replace('statement: "TODO"', f'statement: "{values["statement"]}"')
    assert "UNFINISHED" not in text and '"TODO' not in text
    (d / "contract.yaml").write_text(text)
    # with the marker lines gone, the `# TODO` comments left still block sealing (the guide's
    # step 5): every line they mark is right for leaky ReLU, so each comment is deleted
    files = read_dir(d)
    lint = lint_check(load_contract(files["contract.yaml"]), files)
    assert lint.status == "failed" and lint.detail.startswith("unfinished: contract.yaml TODO at")
    assert "(param x)" in lint.detail and "(tolerance)" in lint.detail, lint.detail
    text = re.sub(r"\s+# TODO\b.*$", "", text, flags=re.M)
    assert "TODO" not in text
    (d / "contract.yaml").write_text(text)


@pytest.mark.skipif(BWRAP is None, reason=WHY)
def test_guide_end_to_end(scaffold: Path, tmp_path: Path) -> None:
    d = tmp_path / "leaky_relu"
    d.mkdir()
    for p in scaffold.iterdir():
        (d / p.name).write_bytes(p.read_bytes())
    _fill_in(d)
    rep = cli_json("check", str(d), "--no-gpu")
    bad = [c for c in rep["checks"] if c["status"] == "failed"]
    assert bad == [], json.dumps(bad, indent=1)
    st = {c["id"]: c for c in rep["checks"]}
    falsify = st["falsify.FALSIFY-LEAKY-RELU-001"]
    assert falsify["status"] == "passed", falsify["detail"]
    assert "n=1,255,257,775" in falsify["detail"]
    assert "oracle bundle:reference.py#leaky_relu (bubblewrap" in falsify["detail"]
    assert (
        "weaker than agreement with a reference the verifier ships" in st["certificate"]["detail"]
    )

    home = tmp_path / "home"
    cli_json("init", "--origin", "example.org/kernels", home=home)
    cli_json("keys", "new", "me", home=home)
    cli_json("keys", "register", "me", home=home)
    sealed = cli_json("seal", str(d), "--no-gpu", home=home)
    (entry,) = sealed["entries"]
    assert entry["report"]["verdict"] in ("verified", "partial")
    got = cli_json("verify", entry["bundle_digest"], "--no-gpu", home=home)
    assert got["verdict"] == entry["report"]["verdict"]
    vst = {c["id"]: c["status"] for c in got["checks"]}
    assert vst["falsify.FALSIFY-LEAKY-RELU-001"] == "passed"
    assert all(s != "failed" for s in vst.values()), vst
