"""Print every function of the project longer than a bound (80 lines unless ``--over N``).

One line per function, longest first: ``LINES<TAB>module:qualname``. A function's length is its
``def`` line through its last line (decorators left out; its docstring, comments and nested
functions counted). Generated modules (their docstring starts ``GENERATED FILE``, such as
``verify/_contract_schema_check.py``) are left out: nobody reads or edits them by hand.
``tests/test_layering.py`` runs this script and fails when a function over 80
lines is not in its allow-list (one entry per exception, with the reason); docs/design.md lists
what it prints.

    python scripts/long_functions.py            # ledger/, ledger_cli/, verify/
    python scripts/long_functions.py --over 60 ledger
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("ledger", "ledger_cli", "verify")
LIMIT = 80

Func = ast.FunctionDef | ast.AsyncFunctionDef


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Func]]:
    """Every function in ``tree`` with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def long_functions(roots: tuple[str, ...] = ROOTS, over: int = LIMIT) -> list[tuple[int, str]]:
    """(lines, ``module:qualname``) of every function longer than ``over`` lines, longest
    first."""
    found = []
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if (ast.get_docstring(tree) or "").startswith("GENERATED FILE"):
                continue
            for name, node in functions(tree):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > over:
                    found.append((lines, f"{module_name(path)}:{name}"))
    return sorted(found, key=lambda f: (-f[0], f[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", default=list(ROOTS), help="folders of the repository")
    parser.add_argument("--over", type=int, default=LIMIT, help="print functions longer than this")
    args = parser.parse_args()
    for lines, name in long_functions(tuple(args.roots), args.over):
        print(f"{lines}\t{name}")


if __name__ == "__main__":
    main()
