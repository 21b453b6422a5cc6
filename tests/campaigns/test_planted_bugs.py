"""The planted-bug fixtures (tests/fixtures/planted/) are well-formed bundles whose PTX really
carries the bug: they load, rebuild byte for byte, assemble, and their contracts pass the
contract gates, so that only the falsification engine can refute them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "fixtures" / "planted"
BUGS = {
    "missing_barrier": "softmax_missing_barrier",
    "off_by_one": "vadd_off_by_one",
    "off_by_one_unwritten": "vadd_unwritten_tail",
    "divergent_barrier": "dot_divergent_barrier",
    "double_write": "vadd_double_write",
    "infinite_loop": "vadd_infinite_loop",
    "vadd4_tail": "vadd4_tail",
    "gemm_edge_tiles": "gemm_edge_tiles",
}


def ptx(bug: str) -> str:
    return (PLANTED / bug / f"{BUGS[bug]}.ptx").read_text()


def body(text: str) -> list[str]:
    """The instruction lines of a PTX entry, without labels, comments and blank lines."""
    return [
        ln.strip()
        for ln in text.splitlines()
        if ln.startswith("\t") and ln.strip() and not ln.strip().startswith("//")
    ]


def test_every_bug_has_a_fixture() -> None:
    dirs = {d.name for d in PLANTED.iterdir() if d.is_dir()}
    assert set(BUGS) <= dirs  # the fixtures of later kernels: tests/ledger_cli/test_scaffold.py


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_fixture_is_a_bundle(bug: str) -> None:
    b = Bundle.from_dir(PLANTED / bug)
    entry = BUGS[bug]
    paths = {f.path for f in b.files}
    assert {
        "contract.yaml",
        f"{entry}.cu",
        f"{entry}.ptx",
        f"{entry}.fut",
        "BUILD-INFO.txt",
    } < paths
    assert any(p.endswith(".lean") for p in paths)
    assert f".visible .entry {entry}(" in ptx(bug)
    assert "BUG" in b.file(f"{entry}.cu").decode()


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_fixture_contract_passes_the_gates(bug: str) -> None:
    from verify.context import Context
    from verify.contract import run

    ctx = Context(Bundle.from_dir(PLANTED / bug))
    checks = {c.id: c for c in run(ctx)}
    assert checks["contract.schema"].status == "passed", checks["contract.schema"].detail
    assert checks["contract.lint"].status in ("passed", "skipped"), checks["contract.lint"].detail
    assert ctx.contract is not None and ctx.contract.kernel is not None
    assert ctx.contract.kernel.entry == BUGS[bug]


def test_missing_barrier_drops_the_loop_barriers() -> None:
    good = (ROOT / "bundles" / "softmax_rows" / "softmax_rows.ptx").read_text()
    assert good.count("bar.sync") == 19  # 1 + 8 + 1 + 1 + 8: each tree step synchronises
    assert ptx("missing_barrier").count("bar.sync") == 5  # only the ones outside the trees


def test_off_by_one_guards() -> None:
    # i <= n skips only when i > n; i < n - 1 compares with n - 1 (an add of -1)
    assert any(re.match(r"setp\.gt\.u32", ln) for ln in body(ptx("off_by_one")))
    lines = body(ptx("off_by_one_unwritten"))
    assert any(re.match(r"add\.s32\s+%r\d+, %r\d+, -1;", ln) for ln in lines)


def test_divergent_barrier_is_branched_around() -> None:
    lines = body(ptx("divergent_barrier"))
    i = lines.index("bar.sync \t0;") if "bar.sync \t0;" in lines else lines.index("bar.sync 0;")
    assert re.match(r"setp\.gt\.u32\s+%p\d+, %r\d+, 15;", lines[i - 2])
    assert re.match(r"@%p\d+ bra", lines[i - 1])


def test_double_write_stores_twice() -> None:
    assert sum(ln.startswith("st.global.f32") for ln in body(ptx("double_write"))) == 2


def test_infinite_loop_is_kept() -> None:
    text = ptx("infinite_loop")
    loop = re.search(r"(\$L__BB0_\d+):\n(.*?)@%p\d+ bra \t\1;", text, re.S)
    assert loop is not None, "a backward branch to the loop head"
    assert "add.f32" in loop.group(2) and "0f3F800000" in loop.group(2)  # x += 1.0f


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_fixture_assembles(bug: str, tmp_path: Path) -> None:
    res = subprocess.run(
        [
            "ptxas",
            "-arch=sm_86",
            "-o",
            str(tmp_path / "k.cubin"),
            str(PLANTED / bug / f"{BUGS[bug]}.ptx"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_planted_build_check_passes() -> None:
    res = subprocess.run(
        [sys.executable, "kernels/build.py", "--planted", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    fixtures = [d for d in PLANTED.iterdir() if (d / "contract.yaml").is_file()]
    assert f"{len(fixtures)} bundles checked, 0 differences" in res.stdout
