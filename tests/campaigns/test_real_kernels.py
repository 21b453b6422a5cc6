"""The corpus of real open-source kernels (corpus/real/, docs/falsification.md "Real open-source
kernels"): every kernel, taken verbatim from karpathy/llm.c or NVIDIA/cuda-samples and brought
in with ``ledger new``, passes ``ledger check`` (verdict passed or partial, no failed check: no
false alarm), and every buggy twin (corpus/real/twins.yaml: one realistic one-line bug in the
.cu, the PTX rebuilt) fails a ``falsify.*`` check. A campaign (tests/conftest.py CAMPAIGNS):
33 tests in about 2.5 minutes; ``bash scripts/campaigns.sh`` runs it, or
``.venv/bin/python -m pytest tests/campaigns/test_real_kernels.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import real_corpus
from verify.confine import sandbox_status
from verify.tools import find_tool

pytestmark = [
    pytest.mark.skipif(find_tool("nvcc", cuda=True) is None,
                       reason="no nvcc: rebuild.ptx and the twins' PTX need it"),
    pytest.mark.skipif(sandbox_status()[0] is None,
                       reason="no bubblewrap sandbox: the bundles' references cannot run"),
]

NAMES = real_corpus.names()


def test_every_kernel_has_a_twin() -> None:
    assert len(NAMES) >= 10
    assert sorted(real_corpus.twins()) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_real_kernel_passes(name: str) -> None:
    rep = real_corpus.check(real_corpus.CORPUS / name)
    failed = [f"{c['id']}: {c['detail']}" for c in rep["checks"] if c["status"] == "failed"]
    assert rep["verdict"] in ("passed", "partial") and not failed, failed
    falsify = [c for c in rep["checks"] if c["id"].startswith("falsify.")]
    assert falsify and all(c["status"] == "passed" for c in falsify), falsify


@pytest.mark.parametrize("name", NAMES)
def test_the_buggy_twin_is_caught(name: str, tmp_path: Path) -> None:
    rep = real_corpus.check(real_corpus.make_twin(tmp_path, name))
    assert rep["verdict"] == "failed"
    assert real_corpus.falsify_failures(rep), [
        (c["id"], c["status"]) for c in rep["checks"]]
