"""Benchmark: contract reading and lint, this tree's code against the code before issue 35's
library change (generated fastjsonschema code and jsonschema for the schema, msgspec models for
the contract's fixed-shape sections).

The base is ``verify/contract.py`` and ``verify/contract_lint.py`` of ``--base`` (default
7eb5031, the commit before the change), extracted with ``git show`` into a temporary folder and
loaded beside this tree's modules (everything else they import is shared). Over every shipped
contract (``contracts/*.yaml``, ``bundles/*/contract.yaml``) and every corpus contract
(``/work/shared/corpus/contracts``, or ``tests/fixtures/contracts/corpus``):

1. ``read``: ``parse_yaml`` + ``contract_from_doc`` + ``schema_errors``, what ``contract.schema``
   runs (a refused file, such as the corpus's binding registry, is timed up to its refusal);
2. ``read + lint``: the same, then ``lint_contract`` over the bare contract;
3. ``JSON Schema alone``: ``schema_errors`` over the documents already parsed;
   ``model alone``: ``contract_from_doc`` over them (the parser: msgspec models of the
   fixed-shape sections against the hand-written reader, where the base has it);
4. ``cold start``: a fresh interpreter importing the two modules and reading one contract (the
   imports of the schema check and msgspec, the models built once).

Rounds alternate which side runs first; each round times every contract ``--inner`` times on each
side. Reported: per-round ratios new / base (above 1: the new code is slower), min, median, max.

    .venv/bin/python bench/bench_contract_lint.py [--repeat 5] [--inner 3] [--base REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.core.errors import ContractError  # noqa: E402
from verify import contract as new_contract  # noqa: E402
from verify import contract_lint as new_lint  # noqa: E402

CORPUS = Path("/work/shared/corpus/contracts")
BASE = "7eb5031"


def _inputs() -> list[tuple[str, bytes]]:
    corpus = CORPUS if CORPUS.is_dir() else ROOT / "tests" / "fixtures" / "contracts" / "corpus"
    paths = sorted((ROOT / "contracts").glob("*.yaml"))
    paths += sorted((ROOT / "bundles").glob("*/contract.yaml"))
    paths += sorted(corpus.glob("*.yaml"))
    return [(str(p), p.read_bytes()) for p in paths]


def _load_base(rev: str, into: Path) -> tuple[ModuleType, ModuleType]:
    """The base revision's contract.py and contract_lint.py as modules ``base_contract`` and
    ``base_contract_lint``; the schema file they read is the base's too."""
    mods = []
    for name in ("contract", "contract_lint"):
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:verify/{name}.py"],
                             check=True, capture_output=True, text=True).stdout
        (into / f"base_{name}.py").write_text(src)
    schema = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:verify/contract_schema.json"],
                            check=True, capture_output=True, text=True).stdout
    (into / "contract_schema.json").write_text(schema)
    for name in ("contract", "contract_lint"):
        spec = importlib.util.spec_from_file_location(f"base_{name}", into / f"base_{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"base_{name}"] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[0], mods[1]


def _reader(contract: Any, lint: Any, with_lint: bool) -> Callable[[bytes], object]:
    def read(data: bytes) -> object:
        try:
            doc = contract.parse_yaml(data)
            c = contract.contract_from_doc(doc)
            problems = lint.schema_errors(doc)
        except ContractError as e:
            return str(e)
        return lint.lint_contract(c) if with_lint else problems

    return read


def _round(fn: Callable[[bytes], object], inputs: list[tuple[str, bytes]], inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        for _, data in inputs:
            fn(data)
    return time.perf_counter() - t0


def _ratios(new: Callable[[bytes], object], base: Callable[[bytes], object],
            inputs: list[tuple[str, bytes]], repeat: int, inner: int) -> dict[str, Any]:
    new(inputs[0][1]), base(inputs[0][1])  # first use: validator, models, caches
    ratios, t_new, t_base = [], [], []
    for r in range(repeat):
        order = [("new", new), ("base", base)] if r % 2 == 0 else [("base", base), ("new", new)]
        got = {side: _round(fn, inputs, inner) for side, fn in order}
        t_new.append(got["new"] / inner / len(inputs) * 1e3)
        t_base.append(got["base"] / inner / len(inputs) * 1e3)
        ratios.append(got["new"] / got["base"])
    return {"new_ms": t_new, "base_ms": t_base, "ratios": ratios}


COLD = """
import sys, time
t0 = time.perf_counter()
sys.path[:0] = [{root!r}, {base!r}]
if {side!r} == "new":
    from verify import contract as c, contract_lint as l
else:
    import importlib.util
    for n in ("contract", "contract_lint"):
        s = importlib.util.spec_from_file_location("base_" + n, {base!r} + "/base_" + n + ".py")
        m = importlib.util.module_from_spec(s)
        sys.modules["base_" + n] = m
        s.loader.exec_module(m)
    c, l = sys.modules["base_contract"], sys.modules["base_contract_lint"]
data = open({path!r}, "rb").read()
doc = c.parse_yaml(data); c.contract_from_doc(doc); l.schema_errors(doc)
print(time.perf_counter() - t0)
"""


def _cold(side: str, base_dir: Path, path: str) -> float:
    code = COLD.format(root=str(ROOT), base=str(base_dir), side=side, path=path)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip()) * 1e3


def _fmt(xs: list[float]) -> str:
    return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--inner", type=int, default=3, help="passes over every contract per round")
    ap.add_argument("--base", default=BASE, help=f"revision of today's code (default {BASE})")
    args = ap.parse_args()
    inputs = _inputs()
    with tempfile.TemporaryDirectory() as tmp:
        base_contract, base_lint = _load_base(args.base, Path(tmp))
        print(f"# contract read and lint: this tree against {args.base}, {len(inputs)} contracts")
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, nproc {os.cpu_count()}, "
              f"{platform.machine()}, load {open('/proc/loadavg').read().split()[:3]}, "
              f"Python {platform.python_version()}")
        print(f"# {' '.join(sys.argv)}")
        print("| what | new ms/contract (min/median/max) | base ms/contract | ratio new/base "
              "(min/median/max) |")
        print("|---|---:|---:|---:|")
        for label, with_lint in (("read (YAML, model, JSON Schema)", False),
                                 ("read + lint (bare contract)", True)):
            r = _ratios(_reader(new_contract, new_lint, with_lint),
                        _reader(base_contract, base_lint, with_lint), inputs, args.repeat,
                        args.inner)
            print(f"| {label} | {_fmt(r['new_ms'])} | {_fmt(r['base_ms'])} | "
                  f"{_fmt(r['ratios'])} |")
        docs = []
        for _, data in inputs:
            try:
                docs.append((data, new_contract.parse_yaml(data)))
            except ContractError:
                continue
        parsed = {id(data): doc for data, doc in docs}
        r = _ratios(lambda data: new_lint.schema_errors(parsed[id(data)]),
                    lambda data: base_lint.schema_errors(parsed[id(data)]),
                    [("", data) for data, _ in docs], args.repeat, args.inner)
        print(f"| JSON Schema alone ({len(docs)} parsed documents) | {_fmt(r['new_ms'])} | "
              f"{_fmt(r['base_ms'])} | {_fmt(r['ratios'])} |")
        def model(contract: Any) -> Callable[[bytes], object]:
            def build(data: bytes) -> object:
                try:
                    return contract.contract_from_doc(parsed[id(data)])
                except ContractError as e:
                    return str(e)

            return build

        r = _ratios(model(new_contract), model(base_contract),
                    [("", data) for data, _ in docs], args.repeat, args.inner)
        print(f"| model alone ({len(docs)} parsed documents) | {_fmt(r['new_ms'])} | "
              f"{_fmt(r['base_ms'])} | {_fmt(r['ratios'])} |")
        clean = str(ROOT / "tests" / "fixtures" / "contracts" / "clean.yaml")
        cold_new, cold_base, cold_r = [], [], []
        for r in range(args.repeat):
            sides = ("new", "base") if r % 2 == 0 else ("base", "new")
            got = {s: _cold(s, Path(tmp), clean) for s in sides}
            cold_new.append(got["new"])
            cold_base.append(got["base"])
            cold_r.append(got["new"] / got["base"])
        print(f"| cold start: imports + first read of clean.yaml | {_fmt(cold_new)} | "
              f"{_fmt(cold_base)} | {_fmt(cold_r)} |")


if __name__ == "__main__":
    main()
