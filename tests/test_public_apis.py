"""No private API of any dependency (issue 30), read from the sources with ``ast``.

A name that starts with one underscore (``_x``, not a ``__dunder__``) is private to the package
that defines it: it may change or vanish in any release, and the project pins no upper version of
its dependencies. Every module of ``ledger``, ``ledger_cli`` and ``verify`` is held to:

* no import of a third-party module path with a private part (``import nacl._sodium``,
  ``from typer._coercion import ...``) and no private name imported from one
  (``from typer.core import _TyperParameter``);
* no attribute read of a private name the project itself never defines (``key._signing_key``):
  the project's own ``_x`` (methods, attributes, module names) are fine, so the scan collects
  every private name the project defines and flags any other one read with a dot;
* no ``getattr``/``setattr``/``hasattr``/``delattr`` of such a name given as a string.

The standard library is not a dependency here (``sys._getframe`` and the like are the
interpreter's own, versioned with it)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("ledger", "ledger_cli", "verify")
STDLIB = set(sys.stdlib_module_names)
REFLECTION = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _sources() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text(encoding="utf-8"))
        for root in ROOTS
        for path in sorted((REPO / root).rglob("*.py"))
    }


def _third_party(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top not in ROOTS and top not in STDLIB


def _own_base(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def _defined(trees: dict[Path, ast.Module]) -> set[str]:
    """Every private name the project defines: functions, classes, names assigned, attributes
    set on ``self``/``cls``, parameters, ``__slots__`` strings, its own modules and what it
    imports from itself. An attribute set on anything else (``transport._pool = ...``) defines
    nothing: that object may be a dependency's."""
    names = {p.stem for p in trees if _private(p.stem)}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if _own_base(node):
                    names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.ImportFrom) and (node.level or not _third_party(
                    node.module or "")):
                names.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return {n for n in names if _private(n)}


def _import_hits(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names
                if _third_party(a.name) and any(_private(p) for p in a.name.split("."))]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        if not _third_party(node.module):
            return []
        if any(_private(p) for p in node.module.split(".")):
            return [node.module]
        return [f"{node.module}.{a.name}" for a in node.names if _private(a.name)]
    return []


def _stdlib_aliases(tree: ast.Module) -> set[str]:
    """The names a module binds to standard-library modules (``import os``, ``import sys as s``)."""
    return {
        (a.asname or a.name).split(".")[0]
        for node in ast.walk(tree) if isinstance(node, ast.Import)
        for a in node.names if not _third_party(a.name)
    }


def _read_hits(node: ast.AST, own: set[str], stdlib: set[str]) -> list[str]:
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in stdlib:
            return []  # the interpreter's own (os._exit, sys._getframe)
        if not _private(node.attr) or node.attr in own:
            return []
        return [f".{node.attr}" + (" =" if isinstance(node.ctx, ast.Store) else "")]
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in REFLECTION and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
    ):
        name = node.args[1].value
        return [f"{node.func.id}({name!r})"] if _private(name) and name not in own else []
    return []


def private_uses(trees: dict[Path, ast.Module]) -> dict[str, list[str]]:
    """``{file: [what it imports or reads]}`` for every private name of a dependency."""
    own = _defined(trees)
    found: dict[str, list[str]] = {}
    for path, tree in trees.items():
        hits = []
        stdlib = _stdlib_aliases(tree)
        for node in ast.walk(tree):
            hits += [f"{getattr(node, 'lineno', '?')}: {h}" for h in _import_hits(node)]
            hits += [f"{getattr(node, 'lineno', '?')}: {h}" for h in _read_hits(node, own, stdlib)]
        if hits:
            found[str(path.relative_to(REPO))] = hits
    return found


def test_no_private_name_of_a_dependency() -> None:
    assert private_uses(_sources()) == {}


def test_the_scan_sees_what_it_looks_for() -> None:
    """The forms issue 30 removed are each found (in a module given as text)."""
    sample = ast.parse(
        "import nacl._sodium\n"
        "from typer._coercion import build_runtime_param\n"
        "from typer.core import _TyperParameter\n"
        "import os, uvicorn\n"
        "def f(key, core):\n"
        "    os._exit(0)\n"  # the standard library's own: allowed
        "    getattr(core, '_TyperParameter', None)\n"
        "    key._pool = None\n"
        "    return key._signing_key\n"
    )
    trees = {REPO / "ledger" / "sample.py": sample}
    hits = private_uses(trees)["ledger/sample.py"]
    assert "1: nacl._sodium" in hits
    assert "2: typer._coercion" in hits
    assert "3: typer.core._TyperParameter" in hits
    assert "7: getattr('_TyperParameter')" in hits
    assert "8: ._pool =" in hits
    assert "9: ._signing_key" in hits
    assert len(hits) == 6  # and nothing else (os._exit is the interpreter's)


def test_the_projects_own_private_names_pass() -> None:
    sample = ast.parse(
        "class A:\n"
        "    __slots__ = ('_b',)\n"
        "    def _c(self):\n"
        "        self._d = 1\n"
        "        return self._b, self._c(), self._d, getattr(self, '_d')\n"
    )
    assert private_uses({REPO / "ledger" / "sample.py": sample}) == {}
