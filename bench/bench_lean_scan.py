"""Throughput of the Lean scan (``lean.scan``, SPEC 8) against a naive regex scan, same run.

Generates a deterministic multi-MB corpus of realistic Lean 4 (namespaces, doc comments, nested
comments, theorems with tactic proofs, definitions with strings, interpolated strings, char and
name literals, mentions of ``sorry``/``axiom`` in comments and strings) split into files of about
1 MB, then times:

- ``scan_sources`` (lexer + command walk + names), the product;
- the peer: ``re.findall`` of the rejected keywords over the same bytes (what a deny-list grep
  does; it cannot tell comments, strings or ``sorry_free`` from code, so it reports false hits).

Times are CPU seconds of the process (``time.process_time``), the scan and its peer one after the
other in each of ``--repeat`` rounds; every figure is min / median / max over the rounds (the
ratio per round), never a best run.

``--claims`` times instead what issue 33 added to ``lean.scan``: the statement check
(``verify.lean.claims.verdicts_for``: read, translate, one z3 process per bundle) over the named
theorems of every example bundle, with a cold cache, wall-clock time (the solver is a child
process), beside the scan of the same bundle's ``.lean`` files.

Usage: .venv/bin/python bench/bench_lean_scan.py [--mb 8] [--repeat 5] [--claims]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rounds import mmm, per_round, timed_rounds

from verify.lean import scan_sources
from verify.lean.scan import REJECT_WORDS

WORDS = ["foo", "bar", "len", "idx", "acc", "tile", "warp", "lane", "blk", "sum", "row", "col"]


def theorem(rng: random.Random, i: int) -> str:
    a, b = rng.choice(WORDS), rng.choice(WORDS)
    return (
        f"/-- `{a}_{i}`: the {b} stays in bounds (no sorry here). -/\n"
        f"theorem {a}_{b}_{i} (n m : Nat) (h : n < m) (h' : m ≤ 4096) : n < 4096 := by\n"
        f"  -- the proof does not use admit or native_decide\n"
        f"  have key : n < m := h\n"
        f"  /- a block comment /- nested: axiom -/ still comment -/\n"
        f"  exact Nat.lt_of_lt_of_le key h'\n\n"
    )


def definition(rng: random.Random, i: int) -> str:
    a = rng.choice(WORDS)
    return (
        f'def {a}Name_{i} : String := "{a} -- not a comment, sorry_free \\"quoted\\""\n'
        f'def {a}Show_{i} (x : Nat) : String := s!"{a} = {{x + {i}}} and {{toString x}}"\n'
        f"def {a}Char_{i} : Char := '\"'\n"
        f'def {a}Raw_{i} : String := r#"raw "{a}" sorry"#\n'
        f"@[simp] theorem {a}_spec_{i} : {a}Name_{i}.length = {a}Name_{i}.length := rfl\n\n"
    )


def corpus(total_mb: float, seed: int = 7) -> dict[str, bytes]:
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    target = int(total_mb * (1 << 20))
    size = 0
    k = 0
    while size < target:
        parts = [f"/-! Generated module {k} for the scanner benchmark. -/\nnamespace Gen{k}\n\n"]
        n = 0
        while n < (1 << 20):
            i = len(parts)
            part = theorem(rng, i) if rng.random() < 0.6 else definition(rng, i)
            parts.append(part)
            n += len(part)
        parts.append(f"end Gen{k}\n")
        data = "".join(parts).encode()
        files[f"Gen/M{k}.lean"] = data
        size += len(data)
        k += 1
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--claims", action="store_true", help="time the statement check instead")
    args = ap.parse_args()
    if args.claims:
        claims_bench(args.repeat)
        return
    files = corpus(args.mb)
    total = sum(len(b) for b in files.values())
    scan = scan_sources(files)
    assert not scan.problems, scan.problems[:3]
    naive = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in REJECT_WORDS) + r")\b")
    texts = [b.decode() for b in files.values()]
    hits = sum(len(naive.findall(t)) for t in texts)
    load = os.getloadavg()
    t = timed_rounds(
        {
            "scan": lambda: scan_sources(files),
            "naive": lambda: [naive.findall(b.decode()) for b in files.values()],
        },
        args.repeat,
        clock=time.process_time,
    )
    mb = total / (1 << 20)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
          f"load average {load[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
          f"{args.repeat} rounds (CPU time)")
    print(
        f"corpus: {len(files)} files, {mb:.2f} MiB, {len(scan.theorems)} theorems, "
        f"{len(scan.declarations)} declarations"
    )
    print("| scanner | MiB/s, min / median / max | problems reported |")
    print("|---|---|---|")
    print(f"| verify.lean scan_sources | {mmm([mb / x for x in t['scan']])} | "
          f"{len(scan.problems)} |")
    print(f"| naive re.findall (peer) | {mmm([mb / x for x in t['naive']])} | {hits} (all false) |")
    ratio = mmm(per_round(t["naive"], t["scan"]), "{:.3f}")
    print(f"ratio scan/naive throughput per round: {ratio}")


def claims_bench(repeat: int) -> None:
    """Wall-clock ms per example bundle: the scan, and the statement check of its named
    theorems (cold cache: every round starts the solver)."""
    from verify.contract import load_contract
    from verify.lean import claims
    from verify.lean.kernel import named_theorems

    root = Path(__file__).resolve().parent.parent / "bundles"
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
        f"{repeat} rounds (wall clock, cold cache); solver {claims.solver()}"
    )
    print("| bundle | named theorems | scan ms | statement check ms, min / median / max |")
    print("|---|---:|---:|---|")
    for bundle in sorted(p for p in root.iterdir() if (p / "contract.yaml").is_file()):
        files = {p.name: p.read_bytes() for p in bundle.glob("*.lean")}
        names = named_theorems(load_contract((bundle / "contract.yaml").read_bytes()))
        t0 = time.perf_counter()
        scan = scan_sources(files)
        scan_ms = (time.perf_counter() - t0) * 1000
        times = []
        for _ in range(max(1, repeat)):
            claims._CACHE.clear()
            t0 = time.perf_counter()
            verdicts = claims.verdicts_for(scan, names)
            times.append((time.perf_counter() - t0) * 1000)
            assert all(v.kind == "claims" for v in verdicts.values()), verdicts
        print(f"| {bundle.name} | {len(names)} | {scan_ms:.1f} | {mmm(times, '{:.0f}')} |")


if __name__ == "__main__":
    main()
