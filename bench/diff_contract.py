"""Differential check: this tree's contract reader and schema check against another revision's.

Every shipped and corpus contract (as ``bench/bench_contract_lint.py`` finds them) is parsed once,
then mutated ``--count`` times, one to three random mutations each (a key deleted, an unknown key
added, a value replaced by one of a pool of hostile values or by another node of the same
document, a list item dropped or repeated). Each mutated document goes through both sides:

* the reader, ``contract_from_doc``: the same ``ContractError`` line, or equal ``Contract``
  values (the model types are shared);
* the schema check, ``schema_errors``: the same list of lines.

``--focus`` picks the first mutation of each document under one of the sections read by
``verify.contract_doc``'s msgspec models (``FOCUS``: launch, resources, reference, Futhark oracle,
size domain, waivers, constants, a test's tolerance and inputs, certificate claims), where the
document has one, so that most documents exercise them; and, one time in two, first grafts one
such section taken from another document (``kernel.waivers`` of the one contract that has them
into any other), so that the sections few contracts have are mutated as often as the others.

The base's ``verify/contract.py``, ``contract_lint.py`` and ``contract_schema.json`` are taken
with ``git show`` (default: ``main``). Prints the number of differences and the first few; exit 1
if there is any.

    .venv/bin/python bench/diff_contract.py [--count 5000] [--seed 1] [--base main] [--focus]
"""

from __future__ import annotations

import argparse
import copy
import random
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_contract_lint import _inputs, _load_base

from ledger.core.errors import ContractError
from verify import contract as new_contract
from verify import contract_lint as new_lint

POOL: list[Any] = [None, True, False, 0, 1, -1, 3, 2**40, 2**64, 1.0, 2.5, -0.5, float("nan"),
                   float("inf"), "", " ", "x", "n", "random", "f32", "s32", "in", "out", "grid.x",
                   "1", "1.5", "n + 1", "ceil_div(n, 256)", "a\n", "FALSIFY-X", [], [1], [1, 2, 3],
                   ["n"], ["n", 1, "m"], {}, {"a": 1}, {"low": 0, "high": 1}, {"min": 1, "max": 4}]


# the sections verify.contract_doc reads: a path starts with one of these (an int matches any index)
FOCUS: list[tuple[Any, ...]] = [
    ("kernel", "launch"), ("kernel", "resources"), ("kernel", "reference"),
    ("kernel", "futhark_oracle"), ("kernel", "size_domain"), ("kernel", "waivers"),
    ("kernel", "constants"), ("falsification_tests", 0, "tolerance"),
    ("falsification_tests", 0, "inputs"), ("certificate",),
]


# a refusal inside one of those sections (its message starts with the YAML path)
_SECTION = re.compile(r"kernel\.(launch|resources|reference|futhark_oracle|size_domain|waivers|"
                      r"constants)\b|falsification_tests\[\d+\]\.(tolerance|inputs)\b|"
                      r"certificate\[")


def _focused(path: tuple[Any, ...]) -> bool:
    def same(p: Any, q: Any) -> bool:
        return bool(p == q or (isinstance(p, int) and isinstance(q, int)))

    return any(len(path) >= len(f) and all(same(p, q) for p, q in zip(path, f, strict=False))
               for f in FOCUS)


def _graft_pool(docs: list[Any]) -> list[tuple[tuple[Any, ...], Any]]:
    """Every ``kernel.<section>`` and ``certificate`` value of ``docs``, with its path."""
    pool = []
    for d in docs:
        for p in _nodes(d):
            if p in {f for f in FOCUS if f[0] != "falsification_tests"}:
                pool.append((p, _get(d, p)))
    return pool


def _graft(doc: Any, pool: list[tuple[tuple[Any, ...], Any]], rng: random.Random) -> None:
    path, value = rng.choice(pool)
    parent = doc
    for p in path[:-1]:
        parent = parent.get(p) if isinstance(parent, dict) else None
    if isinstance(parent, dict):
        parent[path[-1]] = copy.deepcopy(value)


def _nodes(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _nodes(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _nodes(v, (*path, i))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _mutate(doc: Any, rng: random.Random, focus: bool = False) -> None:
    paths = [p for p in _nodes(doc) if p]
    if focus:
        paths = [p for p in paths if _focused(p)] or paths
    if not paths:
        return
    path = rng.choice(paths)
    parent = _get(doc, path[:-1])
    key = path[-1]
    kind = rng.randrange(6)
    if kind == 0:
        del parent[key]
    elif kind == 1 and isinstance(parent, dict):
        parent[rng.choice(["surprise", "name", "min", "value", "tied", "line", "why"])] = \
            copy.deepcopy(rng.choice(POOL))
    elif kind == 2:
        parent[key] = copy.deepcopy(rng.choice(POOL))
    elif kind == 3:
        parent[key] = copy.deepcopy(_get(doc, rng.choice(paths)))
    elif kind == 4 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
    else:
        parent[key] = copy.deepcopy(_get(doc, rng.choice(paths)))


def _outcome(fn: Callable[[Any], Any], doc: Any) -> Any:
    try:
        return ("ok", fn(copy.deepcopy(doc)))
    except ContractError as e:
        return ("error", str(e))
    except Exception as e:  # any other escape is a difference worth seeing
        return ("crash", f"{type(e).__name__}: {e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--base", default="main")
    ap.add_argument("--focus", action="store_true",
                    help="first mutation under a section the msgspec models read")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    docs = []
    for _, data in _inputs():
        try:
            docs.append(new_contract.parse_yaml(data))
        except ContractError:
            continue
    diffs: list[str] = []
    kinds = {"reader errors": 0, "reader errors in a model section": 0, "reader ok": 0,
             "schema errors": 0, "schema ok": 0}
    with tempfile.TemporaryDirectory() as tmp:
        base_contract, base_lint = _load_base(args.base, Path(tmp))
        pool = _graft_pool(docs)
        for n in range(args.count):
            doc = copy.deepcopy(rng.choice(docs))
            if args.focus and rng.random() < 0.5:
                _graft(doc, pool, rng)
            for m in range(rng.randint(1, 3)):
                _mutate(doc, rng, focus=args.focus and m == 0)
            for what, new, old in (
                ("reader", new_contract.contract_from_doc, base_contract.contract_from_doc),
                ("schema", new_lint.schema_errors, base_lint.schema_errors),
            ):
                a, b = _outcome(new, doc), _outcome(old, doc)
                if repr(a) != repr(b):
                    diffs.append(f"#{n} {what}: new {a!r:.300} / base {b!r:.300}")
                ok = a[0] == "ok" and (what == "reader" or a[1] == [])
                if what == "reader" and a[0] == "error" and _SECTION.match(a[1]):
                    kinds["reader errors in a model section"] += 1
                kinds[f"{what} {'ok' if ok else 'errors'}"] += 1
    print(f"{args.count} mutated contracts from {len(docs)} (seed {args.seed}, base {args.base}"
          f"{', focus' if args.focus else ''}):"
          f" {len(diffs)} differences; {kinds}")
    for d in diffs[:10]:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
