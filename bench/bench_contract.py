"""Benchmark: the cost of reading contracts safely, and of size expressions.

1. ``verify.contract.load_contract`` (safe loader: no aliases, bounded depth and nodes, duplicate
   keys refused, then the typed model) against two peers on the same bytes: PyYAML's pure-Python
   ``yaml.safe_load`` (what a naive reader would call; no model) and libyaml's ``CSafeLoader``.
   Also ``contract.schema`` + ``contract.lint`` as ``verify.contract.run`` does them.
2. ``verify.contract.eval_expr`` (cached parse, tree walk) against CPython evaluating the same
   expression compiled once (``eval`` of a code object with the sizes as locals; never used by
   the verifier, only a speed peer).

    .venv/bin/python bench/bench_contract.py [--repeat 300] [--out FILE]

Writes docs/bench/contract.md (or --out). Ratios above 1 mean the peer is faster.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from verify.contract import contract_from_doc, eval_expr, load_contract, parse_yaml  # noqa: E402
from verify.contract_lint import lint_contract, schema_errors  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "contracts"
INPUTS = [
    ("clean.yaml (kernel contract, 2.7 KB)", FIX / "clean.yaml"),
    ("softmax-kernel-v1.yaml (pv, 6.3 KB)", FIX / "corpus" / "softmax-kernel-v1.yaml"),
    (
        "quantized-dot-product-v1.yaml (pv, 12.5 KB)",
        FIX / "corpus" / "quantized-dot-product-v1.yaml",
    ),
]
HEADER = (
    "| contract | load_contract | load + lint + JSON Schema | yaml.safe_load (pure Python) "
    "| yaml CSafeLoader | ratio ours / safe_load | ratio ours / CSafeLoader |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)
EXPRS = [
    ("ceil_div(n, 256)", {"n": 4099}),
    ("max(ceil_div(m*n, 32), 1) + k % 7", {"m": 5, "n": 7, "k": 9}),
]


def _medians_us(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Median time of each function, run interleaved so that load from other processes on the
    machine hits every contender alike (the ratios are what this benchmark reports)."""
    for fn in fns:
        fn()  # warm caches
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter_ns()
            fn()
            out[i].append((time.perf_counter_ns() - t0) / 1000)
    return [statistics.median(x) for x in out]


def _contract_row(label: str, data: bytes, repeat: int) -> str:
    files = {"contract.yaml": data}

    def full() -> object:  # as verify.contract.run does it: parse once, model, schema, lint
        doc = parse_yaml(data)
        return lint_contract(contract_from_doc(doc), files), schema_errors(doc)

    ours, whole, py, c = _medians_us(
        [
            lambda: load_contract(data),
            full,
            lambda: yaml.safe_load(data),
            lambda: yaml.load(data, Loader=yaml.CSafeLoader),
        ],
        repeat,
    )
    return (
        f"| {label} | {ours:.0f} | {whole:.0f} | {py:.0f} | {c:.0f} | "
        f"{ours / py:.2f} | {ours / c:.2f} |"
    )


def _expr_row(expr: str, sizes: dict[str, int], repeat: int) -> str:
    code = compile(expr.replace("ceil_div", "_cd"), "<expr>", "eval")
    env = {"_cd": lambda a, b: -((-a) // b), "min": min, "max": max, "__builtins__": {}}
    ours, peer = _medians_us(
        [lambda: eval_expr(expr, sizes), lambda: eval(code, env, dict(sizes))], repeat
    )
    return f"| `{expr}` | {ours:.2f} | {peer:.2f} | {ours / peer:.2f} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "docs" / "bench" / "contract.md"))
    args = ap.parse_args()
    r = args.repeat
    rows = [_contract_row(label, path.read_bytes(), r) for label, path in INPUTS]
    erows = [_expr_row(expr, sizes, r * 20) for expr, sizes in EXPRS]
    cmd = f".venv/bin/python bench/bench_contract.py --repeat {r}"
    text = f"""# Contract reading: verify.contract vs PyYAML

Command: `{cmd}`

Machine: {platform.processor() or platform.machine()} ({os.cpu_count()} CPUs), Python
{platform.python_version()}, PyYAML {yaml.__version__} (libyaml {yaml.__with_libyaml__}),
{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, load average {os.getloadavg()[0]:.2f}.
Median of {r} runs each (expressions: {r * 20}), run interleaved, microseconds.

{HEADER}
{chr(10).join(rows)}

`load_contract` parses with a pure-Python `SafeLoader` subclass (it needs the composer hooks that
refuse aliases and bound depth), so its peer is `yaml.safe_load`; the ratio is the cost of the
checks and the typed model. libyaml is about ten times faster, but its composer runs in C and
cannot be hooked to refuse anchors, bound the depth or count nodes before building them.

| expression | eval_expr (us) | CPython eval of compiled code (us) | ratio |
|---|---:|---:|---:|
{chr(10).join(erows)}

`eval_expr` caches each parsed expression; a falsification run evaluates a handful per size
binding, so neither cost matters next to running the kernel.
"""
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
