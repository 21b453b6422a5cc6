"""docs/seal-your-own-kernel.md, followed end to end through the real CLI: a new kernel (saxpy)
goes from a .cu file through `ledger new`, filled-in stubs, `ledger check`, `ledger seal` and
`ledger verify`, in a fresh LEDGER_HOME, with no change to the verifier. Also `ledger new`'s bad
input and the unfinished scaffold that can never pass."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.ledgers import assert_one_error_line, cli_json, run_cli
from verify import sandbox
from verify.tools import find_tool

GUIDE = Path(__file__).parent.parent / "docs" / "seal-your-own-kernel.md"
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
    (root / "saxpy.cu").write_text(_block("cuda"))
    out = cli_json("new", str(root / "saxpy"), "--cu", str(root / "saxpy.cu"))
    assert out["entry"] == "_Z5saxpyfPKfPfi" and out["function"] == "saxpy"
    return root / "saxpy"


def test_scaffold_params_and_files(scaffold: Path) -> None:
    assert sorted(p.name for p in scaffold.iterdir()) == [
        "contract.yaml",
        "reference.py",
        "saxpy.cu",
        "saxpy.fut",
        "saxpy.lean",
        "saxpy.ptx",
    ]
    text = (scaffold / "contract.yaml").read_text()
    assert "- {name: a, scalar: f32, value: random}" in text
    assert "- {name: x, ptr: f32, intent: in, shape: [n]}" in text
    assert "- {name: y, ptr: f32, intent: inout, shape: [n]}" in text
    assert "- {name: n, scalar: s32, value: n}" in text
    assert "sizes: [{n: 1}, {n: 255}, {n: 257}, {n: 775}]" in text
    assert "reference: {file: reference.py, function: saxpy}" in text


def test_unfinished_scaffold_cannot_pass(scaffold: Path) -> None:
    rep = cli_json("check", str(scaffold), "--no-gpu", ok=(1,))
    st = {c["id"]: c for c in rep["checks"]}
    assert rep["verdict"] == "failed"
    assert st["lean.scan"]["status"] == "failed" and "sorry" in st["lean.scan"]["detail"]
    lint = st["contract.lint"]["detail"]
    assert lint.startswith("unfinished: contract.yaml, reference.py, saxpy.fut, saxpy.lean still")
    assert (
        "lean-status: Saxpy.guard_in_bounds (proof_obligations[0].lean) has status 'sorry'" in lint
    )
    assert st["rebuild.ptx"]["status"] == "passed"
    assert st["certificate"]["status"] == "failed"


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
    """Step 3-5 of the guide, with the guide's own code blocks."""
    (d / "reference.py").write_text(_block("python"))
    (d / "saxpy.fut").write_text(_block("futhark"))
    (d / "saxpy.lean").write_text(_block("lean"))
    text = (d / "contract.yaml").read_text()
    text = "\n".join(text.splitlines()[2:]) + "\n"  # the two marker lines
    text = text.replace('"TODO: what saxpy computes"', '"f32 saxpy: y = a * x + y"')
    text = re.sub(r'formula: "TODO[^"]*"', 'formula: "y_i = a * x_i + y_i"', text)
    text = text.replace("status: sorry", "status: proved")
    text = text.replace('statement: "TODO"', 'statement: "guarded one-element-per-thread access"')
    text = text.replace("tolerance: {ulp: 0}", "tolerance: {ulp: 1}")
    assert "UNFINISHED" not in text
    (d / "contract.yaml").write_text(text)


@pytest.mark.skipif(BWRAP is None, reason=WHY)
def test_guide_end_to_end(scaffold: Path, tmp_path: Path) -> None:
    d = tmp_path / "saxpy"
    d.mkdir()
    for p in scaffold.iterdir():
        (d / p.name).write_bytes(p.read_bytes())
    _fill_in(d)
    rep = cli_json("check", str(d), "--no-gpu")
    bad = [c for c in rep["checks"] if c["status"] == "failed"]
    assert bad == [], json.dumps(bad, indent=1)
    st = {c["id"]: c for c in rep["checks"]}
    falsify = st["falsify.FALSIFY-SAXPY-001"]
    assert falsify["status"] == "passed", falsify["detail"]
    assert "n=1,255,257,775" in falsify["detail"]
    assert "oracle bundle:reference.py#saxpy (bubblewrap" in falsify["detail"]
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
    assert vst["falsify.FALSIFY-SAXPY-001"] == "passed"
    assert all(s != "failed" for s in vst.values()), vst
