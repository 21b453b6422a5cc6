"""Reliability runs for docs/reliability.md (issue 2): the crash and concurrency procedures of
tests/campaigns/test_reliability.py at larger counts, with their figures.

usage: python bench/reliability.py [--kills 200] [--procs 4] [--each 250]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.ledgers import add_node, new_ledger  # noqa: E402
from tests.helpers.reliability import concurrent_seal, crash_rounds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--each", type=int, default=250)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="reliability-"))
    try:
        home = tmp / "crash"
        add_node(new_ledger(home))
        t = time.perf_counter()
        stats = crash_rounds(home, args.kills, args.seed)
        crash_s = time.perf_counter() - t
        home2 = tmp / "conc"
        add_node(new_ledger(home2))
        t = time.perf_counter()
        n = concurrent_seal(home2, args.procs, args.each)
        conc_s = time.perf_counter() - t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"command: .venv/bin/python bench/reliability.py --kills {args.kills} "
          f"--procs {args.procs} --each {args.each} --seed {args.seed}")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"kill -9 rounds: {stats['killed']} (every one killed mid-run), seals reported done "
          f"before a kill: {stats['reported_done']}, all present; audit passed after every "
          f"kill; {crash_s:.0f} s")
    print(f"concurrency: {args.procs} processes x {args.each} seals = {n} bundle entries, "
          f"contiguous indices, audit passed; {conc_s:.1f} s "
          f"({n / conc_s:.0f} seals/s with fsync per seal)")


if __name__ == "__main__":
    main()
