"""The corpus of real open-source kernels (corpus/real/, docs/falsification.md "Real open-source
kernels") and their buggy twins (corpus/real/twins.yaml), for the tests that check them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.ledgers import cli_json

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "real"


def names() -> list[str]:
    """Every bundle of the corpus (a directory holding a contract.yaml), sorted."""
    return sorted(p.parent.name for p in CORPUS.glob("*/contract.yaml"))


def twins() -> dict[str, dict[str, str]]:
    """corpus/real/twins.yaml: bundle name -> {bug, find, replace}."""
    table: dict[str, dict[str, str]] = yaml.safe_load((CORPUS / "twins.yaml").read_text())
    return table


def make_twin(tmp: Path, name: str) -> Path:
    """A copy of bundle ``name`` in ``tmp`` with its twin's one-line bug patched into the .cu
    and the PTX rebuilt (`ledger rebuild`)."""
    tw = twins()[name]
    d = tmp / f"{name}_twin"
    shutil.copytree(CORPUS / name, d)
    cu = d / f"{name}.cu"
    src = cu.read_text()
    assert src.count(tw["find"]) == 1, f"{name}: the twin's find text must occur exactly once"
    cu.write_text(src.replace(tw["find"], tw["replace"]))
    out = cli_json("rebuild", str(d))
    assert out["changed"], f"{name}: the twin's patch did not change the PTX"
    return d


def check(d: Path, seed: int = 1) -> dict[str, Any]:
    """`ledger check D --json --seed SEED`: the report (exit 0 or 1)."""
    rep: dict[str, Any] = cli_json("check", str(d), "--seed", str(seed), ok=(0, 1))
    return rep


def falsify_failures(rep: dict[str, Any]) -> list[str]:
    """The failed falsify.* checks of a report, each as 'id: detail'."""
    return [f"{c['id']}: {c['detail']}" for c in rep["checks"]
            if c["id"].startswith("falsify.") and c["status"] == "failed"]
