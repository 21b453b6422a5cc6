"""Append on a small and a large ledger, batches alternating in one run (issue 12: append flat
from 10^4 to 10^6 entries).

``bench_limits.py`` measures each size after filling up to it, so whatever the fill leaves behind
(a gigabyte the kernel is still writing back, a cold page cache) lands on the larger sizes. Here
both ledgers exist before the first timing, and ``--rounds`` batches of ``--batch`` entries go to
each in turn, so the machine's state is the same for both; the ratio of their median rates is the
flatness.

    .venv/bin/python bench/bench_flatness.py [--big 1000000] [--small 30000] [--batch 10000]
        [--rounds 5] [--ledger DIR]

``--ledger DIR``: use an existing ledger as the big one (its node key named ``node``, as the
benchmarks' ledgers have) instead of building one of ``--big`` entries.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_ledger import _bundles, build  # noqa: E402
from ledger.keys import load_node_secret  # noqa: E402
from ledger.log import Log  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--small", type=int, default=30_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ledger", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-flat-"))
    try:
        small = build(tmp / "small", args.small)[0]
        big = Log.open(args.ledger) if args.ledger else build(tmp / "big", args.big)[0]
        keys = {id(log): load_node_secret(log.keydir, "node")[0] for log in (small, big)}
        os.sync()
        rates: dict[str, list[float]] = {"small": [], "big": []}
        load0 = os.getloadavg()[0]
        for r in range(args.rounds):
            for name, log in (("small", small), ("big", big)):
                items = _bundles(args.batch, f"f{r}{name}{time.time()}-")
                t = time.perf_counter()
                log.seal_many(items, keys[id(log)])
                log.store.wait_checkpoint()  # each batch pays for its own WAL checkpoint
                rates[name].append(args.batch / (time.perf_counter() - t))
        print(f"# Append flatness, {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} CPUs, "
              f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}\n")
        print("| ledger | entries after | `seal_many` entries/s, each batch | median |")
        print("|---|---:|---|---:|")
        for name, log in (("small", small), ("big", big)):
            print(f"| {name} | {log.store.size():,} | "
                  f"{', '.join(f'{x:,.0f}' for x in rates[name])} | "
                  f"{statistics.median(rates[name]):,.0f} |")
        print(f"\nFlatness (median big / median small): "
              f"{statistics.median(rates['big']) / statistics.median(rates['small']):.2f}")
        small.close()
        big.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
