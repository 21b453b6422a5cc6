"""The corpus of real open-source kernels (corpus/real/README.md): its layout (every kernel names
its upstream file, commit and licence; the licence texts are kept; the README lists every
kernel; every contract lints; every kernel has a twin whose patch applies once), and ONE small
kernel with its buggy twin through `ledger check`. The whole corpus runs in the campaign
tests/campaigns/test_real_kernels.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ledger.core.bundle import Bundle
from tests.helpers import real_corpus
from verify.confine import sandbox_status
from verify.contract import load_contract
from verify.contract_lint import lint_contract
from verify.tools import find_tool

CORPUS = real_corpus.CORPUS
NAMES = real_corpus.names()
COMMITS = {
    "karpathy/llm.c": "f1e2ace651495b74ae22d45d1723443fd00ecd3a",
    "NVIDIA/cuda-samples": "c94ff366aed18c797b8a85dfaac7817b0228b420",
}
LICENCE_FILES = {"MIT": "llm.c-LICENSE", "BSD-3-Clause": "cuda-samples-LICENSE"}


def test_the_corpus_has_between_ten_and_sixteen_kernels_each_with_a_twin() -> None:
    assert 10 <= len(NAMES) <= 16, NAMES
    assert sorted(real_corpus.twins()) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_kernel_names_its_upstream_and_licence(name: str) -> None:
    head = (CORPUS / name / f"{name}.cu").read_text().splitlines()[:2]
    m = re.match(r"// Upstream: (\S+), (\S+) @ ([0-9a-f]{40})$", head[0])
    assert m, head[0]
    repo, _path, commit = m.groups()
    assert COMMITS[repo] == commit
    lic = re.search(r"licence: (\S+) \(corpus/real/LICENSES/\)", head[1])
    assert lic, head[1]
    licence_text = (CORPUS / "LICENSES" / LICENCE_FILES[lic.group(1)]).read_text()
    assert ("MIT License" if lic.group(1) == "MIT" else "Redistribution and use") in licence_text
    meta = yaml.safe_load((CORPUS / name / "contract.yaml").read_text())["metadata"]
    refs = " ".join(meta["references"])
    assert f"github.com/{repo}/blob/{commit}/" in refs and "licence:" in refs


def test_the_readme_lists_every_kernel() -> None:
    readme = (CORPUS / "README.md").read_text()
    listed = re.findall(r"^\| `([a-z0-9_]+)` \|", readme, flags=re.M)
    assert sorted(listed) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_contract_lints(name: str) -> None:
    bundle = Bundle.from_dir(CORPUS / name)
    files = {f.path: f.data for f in bundle.files}
    gates = lint_contract(load_contract(files["contract.yaml"]), files)
    assert [g for g in gates if g.status == "failed"] == []


@pytest.mark.parametrize("name", NAMES)
def test_each_twin_patch_applies_once(name: str) -> None:
    tw = real_corpus.twins()[name]
    assert tw["bug"] and tw["find"] != tw["replace"]
    assert (CORPUS / name / f"{name}.cu").read_text().count(tw["find"]) == 1


@pytest.mark.skipif(find_tool("nvcc", cuda=True) is None, reason="no nvcc: the twin needs it")
@pytest.mark.skipif(sandbox_status()[0] is None, reason="no bubblewrap sandbox for the reference")
def test_one_real_kernel_passes_and_its_twin_is_caught(tmp_path: Path) -> None:
    name = "residual_forward"  # the smallest: llm.c's bf16 residual add
    rep = real_corpus.check(CORPUS / name)
    assert rep["verdict"] in ("passed", "partial"), rep
    assert not [c for c in rep["checks"] if c["status"] == "failed"]
    twin = real_corpus.check(real_corpus.make_twin(tmp_path, name))
    assert twin["verdict"] == "failed"
    (failure,) = real_corpus.falsify_failures(twin)
    assert "out_of_bounds" in failure, failure  # the guard idx <= N lets thread N read past the end
