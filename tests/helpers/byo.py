"""Bring-your-own-kernel bundles for the red-team tests (tests/test_redteam_byo*.py): `ledger new`
on a CUDA source, then filled in as docs/seal-your-own-kernel.md says, and checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.ledgers import cli_json


def new(tmp: Path, name: str, source: str, entry: str | None = None) -> tuple[Path, Any]:
    """`ledger new TMP/NAME --cu TMP/NAME.cu [--entry ENTRY]`: the directory and the JSON."""
    cu = tmp / f"{name}.cu"
    cu.write_text(source)
    d = tmp / name
    out = cli_json("new", str(d), "--cu", str(cu), *(["--entry", entry] if entry else []))
    return d, out


def fill(d: Path, fn: str, name: str, kernel: dict[str, Any], test: dict[str, Any],
         ref: str) -> None:
    """The scaffold in ``d`` filled in: the contract's kernel and first test fields from
    ``kernel`` / ``test``, the numpy reference ``ref`` (``FN`` for the function's name), the
    obligations proved, no ``LEDGER-NEW`` marker left in the Lean stubs."""
    text = (d / "contract.yaml").read_text()
    c = yaml.safe_load("\n".join(text.splitlines()[2:]))
    c["metadata"]["description"] = f"red-team {name}"
    c["equations"][fn]["formula"] = "see reference.py"
    for po in c["proof_obligations"]:
        po["lean"]["status"] = "proved"
    for claim in c["certificate"]:
        claim["statement"] = "as reference.py says"
    c["kernel"].update(kernel)
    c["falsification_tests"][0].update(test)
    (d / "contract.yaml").write_text(yaml.safe_dump(c, sort_keys=False))
    (d / "reference.py").write_text("import numpy as np\n\n\n" + ref.replace("FN", fn))
    for p in d.glob("*.lean"):
        lines = [ln for ln in p.read_text().splitlines() if "LEDGER-NEW" not in ln]
        p.write_text(
            "\n".join(ln for ln in lines if "Replace every" not in ln).replace("sorry", "omega")
            + "\n"
        )


def bundle(
    tmp: Path,
    name: str,
    source: str,
    kernel: dict[str, Any],
    test: dict[str, Any],
    ref: str,
    entry: str | None,
    futhark: Callable[[Path, str], None],
) -> Path:
    """``new`` then ``fill``; ``futhark(path, function)`` writes each ``.fut`` stub's spec."""
    d, out = new(tmp, name, source, entry)
    fn = out["function"]
    fill(d, fn, name, kernel, test, ref)
    for p in d.glob("*.fut"):
        futhark(p, fn)
    return d


def checks(d: Path) -> dict[str, dict[str, Any]]:
    """`ledger check D --no-gpu --seed 1 --trust-bundle-code`: each check by its id."""
    rep = cli_json("check", str(d), "--no-gpu", "--seed", "1", "--trust-bundle-code", ok=(0, 1))
    return {c["id"]: c for c in rep["checks"]}


def falsify(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The one falsify.* check of a report with one test."""
    (f,) = [c for cid, c in found.items() if cid.startswith("falsify.")]
    return f


def fut_identity(p: Path, fn: str) -> None:
    """A Futhark entry with one test case (the spec is not what the red-team rounds test)."""
    p.write_text(
        f"-- ==\n-- entry: {fn}\n-- input {{ [1f32] }}\n-- output {{ [1f32] }}\n\n"
        f"entry {fn} [n] (x: [n]f32) : [n]f32 = x\n"
    )


def run_case(tmp: Path, name: str, case: dict[str, Any], bug: bool) -> dict[str, Any]:
    """A red-team case (``src``, ``kernel``, ``test``, ``ref``) built as a bundle, with
    ``#define BUG`` first when ``bug``, and checked: its one falsify check."""
    src = ("#define BUG\n" if bug else "") + case["src"]
    d = bundle(tmp, name, src, case["kernel"], case["test"], case["ref"], None, fut_identity)
    f = falsify(checks(d))
    (test,) = yaml.safe_load((d / "contract.yaml").read_text())["falsification_tests"]
    assert f["id"] == f"falsify.{test['id']}", f["id"]  # the check of the contract's one test
    return f


def ptr(name: str, dtype: str, intent: str, shape: list[Any]) -> dict[str, Any]:
    """A pointer parameter of a contract's kernel."""
    return {"name": name, "ptr": dtype, "intent": intent, "shape": shape}


def scalar(name: str, dtype: str = "s32") -> dict[str, Any]:
    """A scalar parameter that is the size variable of the same name."""
    return {"name": name, "scalar": dtype, "value": name}


def launch(grid: list[Any], block: list[Any], shared: int = 0) -> dict[str, Any]:
    return {"grid": grid, "block": block, "shared_bytes": shared}


def assert_caught(tmp: Path, name: str, case: dict[str, Any], kind: str, phrase: str) -> None:
    """The case with its bug fails its falsify check, naming ``kind`` and ``phrase``."""
    f = run_case(tmp, name, case, bug=True)
    assert f["status"] == "failed", f["detail"]
    assert kind in f["detail"] and phrase in f["detail"], f["detail"]


def assert_twin_passes(tmp: Path, name: str, case: dict[str, Any]) -> str:
    """The case without its bug passes with no finding (no false positive); its detail."""
    f = run_case(tmp, name, case, bug=False)
    assert f["status"] == "passed", f["detail"]
    assert "no race/bounds/barrier/coverage/initialisation/step-limit findings" in f["detail"]
    return str(f["detail"])
