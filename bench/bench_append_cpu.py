"""Where `Log.seal_many` spends CPU, per entry and per thread (issue 12: append at 0.6 of the
signing rate), optionally against another checkout of this repository, alternating.

On a 2-CPU machine the append is CPU bound: the sealing workers and the process that stores
share the two cores, so the entries/s follow the CPU time per entry summed over every process.
The wall-clock ratio of ``bench_limits.py`` moves by 10-20% from one batch to the next on a noisy
VM; CPU time per entry, split by thread, is steadier and says which part a change made cheaper.

Each round runs one child process per tree (``--against`` names the other checkout: its
``ledger`` package is imported instead of this one's). The child builds ``--batches`` batches of
``--batch`` bundles first (outside the timing), seals one batch to start the workers, then seals
the rest and reads, from ``/proc``, the user and system time per entry of each thread of the
storing process (the main thread that stores; any other thread, which before ``d10b286`` were a
process pool's result thread and the queue feeder that pickled the tasks; the WAL checkpoint
thread) and of the sealing workers. The Ed25519
signing time of the same entry sizes is timed in the same child just after, on one core.

    .venv/bin/python bench/bench_append_cpu.py [--rounds 5] [--batches 20] [--batch 10000]
        [--against /path/to/other/checkout]

Prints a Markdown table: per tree, min / median / max over the rounds. The last two columns
give the workers' and the total CPU per entry in units of that round's signature: the VM's speed
moves by up to 1.5x between rounds, and those ratios far less than the times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
COLUMNS = (
    ("rate", "entries/s"),
    ("sign_us", "signing µs (one core)"),
    ("store_main", "storing thread µs (user + sys)"),
    ("store_other", "other threads µs (a process pool's result and feeder)"),
    ("checkpoint", "WAL checkpoint thread µs"),
    ("workers", "workers µs"),
    ("total", "total CPU µs"),
    ("workers_in_signs", "workers / signing"),
    ("total_in_signs", "total CPU / signing"),
)


def _thread_times(pid: str = "self") -> dict[int, tuple[float, float]]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            f = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(f[11]) / TICK, int(f[12]) / TICK)
    return out


def _process_time(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def child(repo: Path, batches: int, batch: int) -> dict[str, float]:
    """One measurement with the ``ledger`` package of ``repo`` (run in a fresh process)."""
    sys.path.insert(0, str(repo))
    import threading

    import nacl.bindings

    from bench.bench_ledger import _bundles
    from ledger.core.entries import secret_key64
    from ledger.log import Log
    from tests.helpers.ledgers import add_node

    home = Path(tempfile.mkdtemp(prefix="bench-append-cpu-")) / "home"
    log = Log.init(home, "bench.example/log")
    sk = add_node(log)
    made = [_bundles(batch, f"m{i}-") for i in range(batches)]
    log.seal_many(_bundles(batch, "start-"), sk)  # starts the workers, kept for the batches
    pids = log._sealers.pids() if log._sealers is not None else []
    w0 = [_process_time(p) for p in pids]
    t0 = _thread_times()
    start = time.perf_counter()
    for items in made:
        log.seal_many(items, sk)
    wall = time.perf_counter() - start
    t1 = _thread_times()
    w1 = [_process_time(p) for p in pids]
    n = batches * batch
    names = {t.native_id: t.name for t in threading.enumerate()}

    def per_entry(pred: Callable[[str], bool]) -> float:
        total = 0.0
        for tid, (u, s) in t1.items():
            name = names.get(tid, "")
            if pred(name):
                u0, s0 = t0.get(tid, (0.0, 0.0))
                total += (u - u0) + (s - s0)
        return total / n * 1e6

    entries = [log.store.entry(i) for i in range(1, 5001)]
    sk64 = secret_key64(sk)
    t = time.perf_counter()
    for e in entries:
        nacl.bindings.crypto_sign(e, sk64)
    sign_us = (time.perf_counter() - t) / len(entries) * 1e6
    log.close()
    out = {
        "rate": n / wall,
        "sign_us": sign_us,
        "store_main": per_entry(lambda name: name == "MainThread"),
        "store_other": per_entry(
            lambda name: name not in ("", "MainThread", "ledger-wal-checkpoint")),
        "checkpoint": per_entry(lambda name: name == "ledger-wal-checkpoint"),
        "workers": sum(b - a for a, b in zip(w0, w1, strict=True)) / n * 1e6,
    }
    out["total"] = out["store_main"] + out["store_other"] + out["checkpoint"] + out["workers"]
    # in units of one signature timed in the same child: the VM's speed moves by up to 1.5x
    # between rounds, and these ratios move far less than the times themselves
    out["workers_in_signs"] = out["workers"] / sign_us
    out["total_in_signs"] = out["total"] / sign_us
    shutil.rmtree(home.parent, ignore_errors=True)
    return out


def _span(xs: list[float], fmt: str) -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--against", type=Path, help="another checkout, measured alternately")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.batches, args.batch)))
        return
    trees = [REPO] + ([args.against.resolve()] if args.against else [])
    got: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            cmd = [sys.executable, __file__, "--child", str(tree), "--batches",
                   str(args.batches), "--batch", str(args.batch)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            got[tree].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(f"  round {r + 1} {tree}: {got[tree][-1]['rate']:,.0f} entries/s",
                  file=sys.stderr)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Command: `{' '.join(sys.argv)}`  ")
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs, load "
          f"{load} at the end. Per entry, min / median / max over {args.rounds} rounds.\n")
    print("| tree | " + " | ".join(label for _, label in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for tree in trees:
        cells = [_span([m[key] for m in got[tree]],
                       "{:,.0f}" if key == "rate" else "{:.2f}" if "_in_" in key else "{:.1f}")
                 for key, _ in COLUMNS]
        print(f"| `{tree}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
