"""The dependencies as declared, documented and used (issue 35, docs/dependencies.md):

* the README's dependency table names exactly the packages of pyproject.toml, each with the group
  (runtime or extras) that installs it;
* a fresh ``scripts/setup.sh`` (the runtime dependencies) installs nothing that nothing imports:
  every runtime dependency is imported somewhere in ``ledger/``, ``ledger_cli/`` or ``verify/``
  (statically, or by ``importlib.import_module`` with a literal name), except the short
  allow-list of packages used only as programs, each with its reason;
* every third-party module those packages import comes from a declared dependency (a module
  imported directly is declared directly, even where another dependency brings it too)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CODE = ("ledger", "ledger_cli", "verify")

# runtime dependencies used without an import, and why
RUN_ONLY = {
    "z3-solver": "installs the z3 executable, which verify.lean.claims runs as a separate, "
    "limited process (never imported: a solver crash must not take the verifier down)",
}
# extras used without an import
EXTRA_RUN_ONLY = {
    "nvidia-cuda-nvcc": "installs the ptxas executable (verify.ptx runs it)",
}
# packages not installed here whose import name is not their distribution's
NOT_INSTALLED = {"cupy-cuda12x": {"cupy"}, "cupy-cuda13x": {"cupy"}}


def _norm(name: str) -> str:
    """PEP 503 normalised distribution name of a requirement string."""
    m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip())
    assert m, name
    return re.sub(r"[-_.]+", "-", m.group(0)).lower()


def _declared() -> dict[str, set[str]]:
    """Distribution -> the groups that install it ("runtime" or an extra's name)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups: dict[str, set[str]] = {}
    for req in project["dependencies"]:
        groups.setdefault(_norm(req), set()).add("runtime")
    for extra, reqs in project["optional-dependencies"].items():
        for req in reqs:
            groups.setdefault(_norm(req), set()).add(extra)
    return groups


def _readme_table() -> dict[str, set[str]]:
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Dependencies\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| `([^`]+)` \| ([^|]+) \|", line)
        if m:
            assert _norm(m.group(1)) not in rows, f"{m.group(1)} twice in the README table"
            rows[_norm(m.group(1))] = {g.strip() for g in m.group(2).split(",")}
    return rows


def test_readme_table_matches_pyproject() -> None:
    table, declared = _readme_table(), _declared()
    assert len(declared) > 20
    assert sorted(set(declared) - set(table)) == [], "declared but not in the README table"
    assert sorted(set(table) - set(declared)) == [], "in the README table but not declared"
    wrong = {d: (table[d], g) for d, g in declared.items() if table[d] != g}
    assert wrong == {}, "README group differs from pyproject (README, pyproject)"


def test_sqlite_utils_and_psycopg_are_not_runtime() -> None:
    declared = _declared()
    assert "sqlite-utils" not in declared
    assert declared["psycopg"] == {"postgres"}


def _imported_modules() -> set[str]:
    """Top-level names of every module the code imports (also ``import_module("name")``)."""
    names: set[str] = set()
    for pkg in CODE:
        for path in (REPO / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
                elif (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    names.add(node.args[0].value.split(".")[0])
    return names - {*CODE, "__future__"}


@functools.cache
def _provided() -> dict[str, list[str]]:
    return md.packages_distributions()


def _modules_of(dist: str) -> set[str]:
    """The top-level import names an installed distribution provides."""
    provided = {m for m, ds in _provided().items() if dist in map(_norm, ds)}
    if not provided and dist in NOT_INSTALLED:
        return NOT_INSTALLED[dist]
    if not provided:
        pytest.fail(f"{dist} is declared but not installed here (run scripts/setup.sh --test)")
    return provided


def test_every_runtime_dependency_is_imported() -> None:
    """What a fresh ``scripts/setup.sh`` installs (the runtime group) is all used by the code."""
    imported = _imported_modules()
    runtime = sorted(d for d, g in _declared().items() if "runtime" in g)
    unused = [d for d in runtime if d not in RUN_ONLY and not _modules_of(d) & imported]
    assert unused == [], "runtime dependencies nothing imports: remove them or allow-list them"
    assert set(RUN_ONLY) <= set(runtime), "allow-listed but not a runtime dependency"
    for dist in RUN_ONLY:  # and a run-only one really is unused as a module
        assert not _modules_of(dist) & imported, f"{dist} is imported: drop it from RUN_ONLY"


def test_every_extra_but_dev_is_imported() -> None:
    """The user-facing extras (postgres, s3, gpu-cuda12/13, cuda) are used by the code too."""
    imported = _imported_modules()
    extras = sorted(d for d, g in _declared().items() if "runtime" not in g and g - {"dev"})
    unused = [d for d in extras if d not in EXTRA_RUN_ONLY and not _modules_of(d) & imported]
    assert unused == []


def test_every_third_party_import_is_declared() -> None:
    """Nothing the code imports is missing from pyproject.toml (dev tools aside)."""
    declared_modules: set[str] = set()
    for dist, groups in _declared().items():
        if groups != {"dev"}:
            declared_modules |= _modules_of(dist) if dist not in EXTRA_RUN_ONLY else set()
    third_party = {m for m in _imported_modules() if m not in sys.stdlib_module_names}
    undeclared = sorted(third_party - declared_modules)
    assert undeclared == [], "imported but not declared in pyproject.toml"
