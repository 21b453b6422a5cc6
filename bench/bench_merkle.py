"""Benchmark: Merkle proof generation at 1,000,000 leaves, ledger.core.merkle vs pymerkle 7.0.

Both trees hold the same entries ``entry-<i>`` (RFC 6962 hashing, the roots are checked equal).
ledger.core.merkle reads stored hashes from an in-memory dict filled by ``Frontier.append`` (the
shape the SQLite store keeps); pymerkle uses its ``InmemoryTree``. For the same random indices
and size pairs, each proof is timed alone; the report gives the median and 90th percentile per
proof and the ratio pymerkle / ledger (above 1: ledger is faster). Verification and the build
(appending every leaf) are timed too.

    .venv/bin/python bench/bench_merkle.py [--leaves 1000000] [--samples 2000] [--out FILE]

Writes docs/bench/merkle.md (or --out).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pymerkle  # type: ignore[import-untyped]

from ledger.core import merkle

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rounds import cpu


def _time_each(fn: Callable[[int], object], args: list[int]) -> list[float]:
    out = []
    for a in args:
        t0 = time.perf_counter_ns()
        fn(a)
        out.append((time.perf_counter_ns() - t0) / 1000)  # microseconds
    return out




def _stats(samples: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(samples, n=10)
    return statistics.median(samples), q[8]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=Path("docs/bench/merkle.md"))
    args = ap.parse_args()
    n, k = args.leaves, args.samples
    entries = [b"entry-%d" % i for i in range(n)]

    t0 = time.perf_counter()
    store: dict[tuple[int, int], bytes] = {}
    frontier = merkle.Frontier()
    for e in entries:
        for level, idx, h in frontier.append(merkle.leaf_hash(e)):
            store[(level, idx)] = h
    ours_build = time.perf_counter() - t0
    ours_root = frontier.root()

    t0 = time.perf_counter()
    tree = pymerkle.InmemoryTree(algorithm="sha256")
    for e in entries:
        tree.append_entry(e)
    theirs_build = time.perf_counter() - t0
    if tree.get_root(n) != ours_root:
        raise SystemExit("roots differ: the two trees are not the same tree")

    def get(level: int, idx: int) -> bytes:
        return store[(level, idx)]

    rng = random.Random(20261129)
    indices = [rng.randrange(n) for _ in range(k)]
    olds = [rng.randrange(1, n) for _ in range(k)]
    # Cross-check a few proofs: pymerkle's path is the leaf followed by RFC 9162's path.
    for i in indices[:20]:
        their_path = [bytes.fromhex(h) for h in tree.prove_inclusion(i + 1, n).serialize()["path"]]
        if their_path[1:] != merkle.inclusion_proof(i, n, get):
            raise SystemExit(f"inclusion proofs differ at index {i}")

    rows = []
    ours = _time_each(lambda i: merkle.inclusion_proof(i, n, get), indices)
    theirs = _time_each(lambda i: tree.prove_inclusion(i + 1, n), indices)
    rows.append(("inclusion proof", ours, theirs))
    ours = _time_each(lambda m: merkle.consistency_proof(m, n, get), olds)
    theirs = _time_each(lambda m: tree.prove_consistency(m, n), olds)
    rows.append(("consistency proof", ours, theirs))

    proofs = {i: merkle.inclusion_proof(i, n, get) for i in indices}
    their_proofs = {i: tree.prove_inclusion(i + 1, n) for i in indices}
    hashes = {i: merkle.leaf_hash(entries[i]) for i in indices}
    ours = _time_each(
        lambda i: merkle.verify_inclusion(hashes[i], i, n, proofs[i], ours_root), indices
    )
    theirs = _time_each(
        lambda i: pymerkle.verify_inclusion(hashes[i], ours_root, their_proofs[i]), indices
    )
    rows.append(("inclusion verification", ours, theirs))

    lines = [
        "# Merkle proofs: ledger.core.merkle vs pymerkle 7.0",
        "",
        f"Command: `.venv/bin/python bench/bench_merkle.py --leaves {n} --samples {k}`",
        "",
        f"Machine: {cpu()}, Python "
        f"{platform.python_version()}, pymerkle {pymerkle.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{os.getloadavg()[0]:.2f}. One tree of {n:,} "
        "leaves each (same entries, same RFC 6962 root, checked); ledger.core.merkle reads stored "
        "hashes from an in-memory dict, pymerkle uses `InmemoryTree`. "
        f"{k:,} random indices / old sizes, each proof timed alone (microseconds).",
        "",
        "| operation | ledger median | ledger p90 | pymerkle median | pymerkle p90 "
        "| ratio (pymerkle / ledger, median) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, a, b in rows:
        am, a90 = _stats(a)
        bm, b90 = _stats(b)
        lines.append(f"| {name} | {am:.1f} | {a90:.1f} | {bm:.1f} | {b90:.1f} | {bm / am:.2f} |")
    lines += [
        f"| build: append {n:,} leaves (seconds, total) | {ours_build:.1f} s | | "
        f"{theirs_build:.1f} s | | {theirs_build / ours_build:.2f} |",
        "",
        "Ratios above 1 mean ledger.core.merkle is faster. Proofs through the SQLite store are "
        "benchmarked separately (docs/bench/ledger.md, docs/bench/proofs.md).",
        "",
    ]
    text = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
