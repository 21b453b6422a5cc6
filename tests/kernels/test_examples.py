"""The bundled kernels: bundles load, rebuild byte for byte, hold the expected PTX, assemble for
sm_86 within their contracts' budgets, and name only Lean theorems their .lean files prove
(issue 4; kernels/build.py, bundles/, contracts/)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from ledger.core.bundle import MAX_FILES, Bundle

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "bundles"
KERNELS = ("vector_add", "f16_convert", "dot_shfl", "softmax_rows", "gemm_tiled", "gemm_mma")
BUILT = tuple(k for k in KERNELS if (ROOT / "kernels" / k / f"{k}.cu").is_file())
# every kernel build.py builds: the six above and the later ones (tests/ledger_cli/test_scaffold.py)
# (the Triton kernels' sources are <name>.py: tests/kernels/test_examples_triton.py)
ALL_BUILT = sorted(
    p.parent.name
    for p in [*(ROOT / "kernels").glob("*/*.cu"), *(ROOT / "kernels").glob("*/*.py")]
    if p.stem == p.parent.name
)

# PTX instructions each kernel must contain (issue 4: the feature each kernel exercises).
EXPECTED_PTX = {
    "vector_add": ("add.f32", "ld.global", "st.global.f32"),
    "f16_convert": ("cvt.rn.f16.f32", "st.global.u16"),
    "dot_shfl": ("shfl.sync.bfly.b32", "bar.sync", "st.shared.f32", "ld.shared.f32"),
    "softmax_rows": ("bar.sync", "ex2.approx", "max.f32", "ld.shared.f32", "div.rn.f32"),
    "gemm_tiled": ("bar.sync", "fma.rn.f32", "ld.shared.f32", "st.shared.f32"),
    "gemm_mma": (
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "bar.sync",
    ),
}

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


def load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kbuild", ROOT / "kernels" / "build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kbuild"] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def contract(name: str) -> Any:
    """The bundled contract as plain YAML data (the typed loader is tested elsewhere)."""
    doc = yaml.safe_load((BUNDLES / name / "contract.yaml").read_bytes())
    assert isinstance(doc, dict)
    return doc


def lean_theorems(text: str) -> set[str]:
    """Fully qualified theorem names of a Lean file written as these kernels write them."""
    names: set[str] = set()
    ns: list[str] = []
    for line in text.splitlines():
        if m := re.match(r"namespace (\S+)", line):
            ns.append(m.group(1))
        elif re.match(r"end \S+", line) and ns:
            ns.pop()
        elif m := re.match(r"theorem (\S+)", line):
            names.add(".".join([*ns, m.group(1)]))
    return names


def test_all_six_kernels_are_built() -> None:
    assert BUILT == KERNELS


@pytest.mark.parametrize("name", BUILT)
def test_bundle_loads_and_is_small(name: str) -> None:
    b = Bundle.from_dir(BUNDLES / name)
    paths = {f.path for f in b.files}
    assert paths == {
        "contract.yaml",
        f"{name}.ptx",
        f"{name}.cu",
        f"{name}.lean",
        f"{name}.fut",
        "BUILD-INFO.txt",
    }
    assert len(paths) < MAX_FILES
    assert len(b.manifest) < 1024
    assert b.file("contract.yaml") == (ROOT / "contracts" / f"{name}.yaml").read_bytes()


@pytest.mark.parametrize("name", BUILT)
def test_contract_matches_sources(name: str) -> None:
    doc = contract(name)
    kernel = doc["kernel"]
    assert kernel["name"] == kernel["entry"] == name
    assert kernel["build"] == ["nvcc", "-arch=sm_86", "-ptx", "-o", f"{name}.ptx", f"{name}.cu"]
    ptx = (BUNDLES / name / f"{name}.ptx").read_text()
    entry = re.search(rf"\.visible \.entry {name}\((.*?)\)", ptx, re.S)
    assert entry is not None, 'extern "C" entry with the plain kernel name'
    assert entry.group(1).count(".param") == len(kernel["params"])
    from verify.references import REFERENCES

    assert kernel["reference"] in REFERENCES


@pytest.mark.parametrize("name", BUILT)
def test_lean_names_exist_and_no_escapes(name: str) -> None:
    text = (BUNDLES / name / f"{name}.lean").read_text()
    for bad in ("sorry", "admit", "axiom", "native_decide", "#exit", "import Mathlib"):
        assert bad not in text, bad
    have = lean_theorems(text)
    doc = contract(name)
    named = [po["lean"]["theorem"] for po in doc["proof_obligations"]]
    named += [c["theorem"] for c in doc["certificate"]]
    assert set(named) <= have, set(named) - have
    assert all(po["lean"]["status"] == "proved" for po in doc["proof_obligations"])


@pytest.mark.parametrize("name", BUILT)
def test_certificate_is_backed_by_tests(name: str) -> None:
    doc = contract(name)
    listed = {p for t in doc["falsification_tests"] for p in t["properties"]}
    claims = doc["certificate"]
    obligations = {c["obligation"] for c in claims}
    assert {"PO1", "PO2", "PO5", "PO8"} <= obligations
    for c in claims:
        assert c["property"] == "resources" or c["property"] in listed, c
    ptx = (BUNDLES / name / f"{name}.ptx").read_text()
    if "bar.sync" in ptx:
        assert {"PO3", "PO6", "PO7"} <= obligations
    if name in ("f16_convert", "gemm_mma"):
        assert "PO4" in obligations


@pytest.mark.parametrize("name", BUILT)
def test_ptx_has_expected_instructions(name: str) -> None:
    ptx = (BUNDLES / name / f"{name}.ptx").read_text()
    assert ".target sm_86" in ptx
    for insn in EXPECTED_PTX[name]:
        assert insn in ptx, insn


@needs_ptxas
@pytest.mark.parametrize("name", BUILT)
def test_ptxas_assembles_within_budget(name: str, tmp_path: Path) -> None:
    res = subprocess.run(
        ["ptxas", "-arch=sm_86", "-v", "-o", str(tmp_path / "k.cubin"), f"{name}.ptx"],
        cwd=BUNDLES / name,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    used = re.search(r"Used (\d+) registers", res.stderr)
    assert used is not None, res.stderr
    regs = int(used.group(1))
    smem = re.search(r"(\d+) bytes smem", res.stderr)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", res.stderr)
    budget = contract(name)["kernel"]["resources"]
    assert regs <= budget["max_registers"]
    assert (int(smem.group(1)) if smem else 0) <= budget["max_shared_bytes"]
    assert spills is not None and spills.groups() == ("0", "0")


@needs_nvcc
def test_build_check_passes() -> None:
    res = subprocess.run(
        [sys.executable, "kernels/build.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(ALL_BUILT)} bundles checked, 0 differences" in res.stdout


def test_build_compare_reports_each_difference() -> None:
    build = load_build()
    spec = build.Spec("k", BUNDLES / "k", b"c", {}, "k.ptx", ("nvcc",), "k 1")
    want = {"contract.yaml": b"c", "k.ptx": b"ptx", "BUILD-INFO.txt": b"i"}
    have = {"contract.yaml": b"c", "k.ptx": b"PTX!", "stray.bin": b""}
    problems = build.compare(spec, want, have, True)
    assert problems == [
        f"k: BUILD-INFO.txt missing from {BUNDLES / 'k'}",
        "k: k.ptx differs (4 vs 3 bytes)",
        f"k: stray.bin in {BUNDLES / 'k'} is not a build output",
    ]
    assert build.compare(spec, want, dict(want), True) == []


def test_build_check_without_nvcc_compares_the_rest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build = load_build()
    monkeypatch.setattr(build, "find_nvcc", lambda: None)  # fault: no CUDA toolkit
    assert build.main(["--check"]) == 0
    out = capsys.readouterr().out
    assert "nvcc not found: PTX and BUILD-INFO.txt were not rebuilt" in out
    assert f"{len(ALL_BUILT)} bundles checked, 0 differences" in out
    assert build.main([]) == 3  # building (not checking) needs nvcc
    assert "nvcc not found" in capsys.readouterr().err


def test_build_check_without_nvcc_still_sees_source_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    build = load_build()
    monkeypatch.setattr(build, "find_nvcc", lambda: None)
    spec = next(s for s in build.bundle_specs() if s.name == "vector_add")
    want = build.expected_files(spec, None, "", False)
    assert set(want) == {"contract.yaml", "vector_add.cu", "vector_add.lean", "vector_add.fut"}
    have = build.current_files(spec.out_dir)
    have["vector_add.cu"] += b"// edited\n"
    assert build.compare(spec, want, have, False) == [
        f"vector_add: vector_add.cu differs ({len(have['vector_add.cu'])} vs "
        f"{len(want['vector_add.cu'])} bytes)"
    ]


@needs_nvcc
def test_build_is_deterministic(tmp_path: Path) -> None:
    build = load_build()
    nvcc = build.find_nvcc()
    spec = next(s for s in build.bundle_specs() if s.name == "dot_shfl")
    first = build.compile_ptx(spec, nvcc)
    assert first == build.compile_ptx(spec, nvcc)
    assert first == (BUNDLES / "dot_shfl" / "dot_shfl.ptx").read_bytes()
