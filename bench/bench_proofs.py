"""Benchmark: inclusion and consistency proofs at 10^6 entries, `ledger.store.sqlite.Store` against
Go's
golang.org/x/mod/sumdb/tlog over hashes in memory (issue 12: "within 3x of Go's tlog").

A Store of --entries entries ``entry <i>`` (synthetic bundle rows written by
``Writer.append_bundle``: the proof path reads only the ``hashes`` table; cached under --work) and
bench/go/tlogproof, which
builds tlog's own in-memory stored-hash slice from the same records, prove for the same random
indices (a file both read). Before timing, the Go program's tree hash and its proof of the first
index must equal the Store's, byte for byte.

Each round runs the Go program (its own timed batches: --batch proofs each, --rounds batches per
kind, after a warm-up batch and a GC) and then the same batches on the Store in this process
(after the warm-up proofs that fill the server's in-memory levels, ``FILL_ROWS`` rows per proof;
the time that takes and its slowest proof are reported separately). A batch's figure is its mean
time per proof, wall clock and CPU time; a round's figure is the median over its batches; the
ratio Store / Go is taken within the round. --repeat rounds give min / median / max. Also
reported: the first proofs of a fresh Store (one batched SQLite read per proof, the path of a
one-off `ledger` command).

    .venv/bin/python bench/bench_proofs.py [--entries 1000000] [--repeat 3]

Needs `go` and golang.org/x/mod under /usr/share/gocode (scripts/setup.sh --test); without them
it says skipped and why, and exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.core.encoding import b64_encode
from ledger.store import create_store, open_store
from ledger.store.base import PRELOAD_AFTER_PROOFS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rounds import cpu

REPO = Path(__file__).resolve().parent.parent
GO_SOURCE = REPO / "bench" / "go" / "tlogproof" / "main.go"
GOCODE = Path("/usr/share/gocode")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])




def build_store(home: Path, count: int) -> None:
    store = create_store(home, "bench.example/proofs")
    try:
        for start in range(0, count, 100_000):
            with store.writer() as w:
                for i in range(start, min(count, start + 100_000)):
                    w.append_bundle(b"entry %d" % i, bytes(32))
    finally:
        store.close()


def build_go(work: Path) -> Path:
    exe = work / "tlogproof"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work),
        "GO111MODULE": "off",
        "GOPATH": f"{GOCODE}:{work / 'gopath'}",
        "GOCACHE": str(work / "gocache"),
        "GOFLAGS": "",
        "GOTOOLCHAIN": "local",
    }
    subprocess.run(["go", "build", "-o", str(exe), str(GO_SOURCE)], env=env, check=True,
                   timeout=600, cwd=REPO)
    return exe


def batches(
    fn: Callable[[int], object], indices: list[int], batch: int, rounds: int
) -> tuple[list[float], list[float]]:
    """Mean µs per call of ``fn(i)`` for ``rounds`` batches of ``batch`` indices: wall clock,
    and CPU time of this process."""
    per, per_cpu = [], []
    k = 0
    for _ in range(rounds):
        picks = [indices[(k + j) % len(indices)] for j in range(batch)]
        k += batch
        c0 = time.process_time()
        t0 = time.perf_counter()
        for i in picks:
            fn(i)
        per.append((time.perf_counter() - t0) / batch * 1e6)
        per_cpu.append((time.process_time() - c0) / batch * 1e6)
    return per, per_cpu


def span(values: list[float], fmt: str = "{:.1f}") -> str:
    v = sorted(values)
    return " / ".join(fmt.format(x) for x in (v[0], statistics.median(v), v[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_proofs"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    if shutil.which("go") is None or not (GOCODE / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        print("bench_proofs: skipped: needs go and golang.org/x/mod in /usr/share/gocode "
              "(scripts/setup.sh --test)", file=sys.stderr)
        return 3
    args.work.mkdir(parents=True, exist_ok=True)
    n = args.entries
    home = args.work / f"store-{n}"
    if not (home / "ledger.db").exists():
        shutil.rmtree(home, ignore_errors=True)
        t0 = time.perf_counter()
        build_store(home, n)
        print(f"built a {n}-entry store in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    exe = build_go(args.work)
    rng = random.Random(12)
    indices = [rng.randrange(1, n) for _ in range(10_000)]
    idx_file = args.work / "indices.txt"
    idx_file.write_text("".join(f"{i}\n" for i in indices))

    # a fresh Store: the first proofs (one batched read each), as a one-off command runs them
    store = open_store(home)
    cold, _ = batches(lambda i: store.inclusion_proof(i, n), indices, PRELOAD_AFTER_PROOFS - 1, 1)
    t0 = time.perf_counter()
    calls, worst = 0, 0.0
    while store._levels is None or store._levels.size < n:  # FILL_ROWS rows per proof
        t1 = time.perf_counter()
        store.inclusion_proof(indices[calls % len(indices)], n)
        worst = max(worst, time.perf_counter() - t1)
        calls += 1
    fill_s = time.perf_counter() - t0
    levels = store._levels
    held = f"levels {levels.low}+ held, {levels.nbytes() / 2**20:.0f} MiB" if levels else "none"

    rows: list[dict[str, Any]] = []
    for rnd in range(args.repeat):
        before = load()
        go = json.loads(subprocess.run(
            [str(exe), "-n", str(n), "-indices", str(idx_file), "-batch", str(args.batch),
             "-rounds", str(args.rounds)],
            capture_output=True, text=True, check=True, timeout=900).stdout)
        if rnd == 0:
            ours = [b64_encode(h) for h in store.inclusion_proof(go["first_index"], n)]
            if b64_encode(store.root(n)) != go["root"] or ours != go["first_proof"]:
                raise SystemExit("bench_proofs: the Store and Go's tlog disagree on the tree")
        inc, inc_cpu = batches(lambda i: store.inclusion_proof(i, n), indices, args.batch,
                               args.rounds)
        con, con_cpu = batches(lambda i: store.consistency_proof(i, n), indices, args.batch,
                               args.rounds)
        us = {k: [x / 1000 for x in go[k]] for k in
              ("inclusion_ns", "consistency_ns", "inclusion_cpu_ns", "consistency_cpu_ns")}
        row = {
            "load": before,
            "inc": inc, "go_inc": us["inclusion_ns"], "con": con, "go_con": us["consistency_ns"],
            "inc_cpu": inc_cpu, "go_inc_cpu": us["inclusion_cpu_ns"],
            "con_cpu": con_cpu, "go_con_cpu": us["consistency_cpu_ns"],
        }
        rows.append(row)
        print(f"round {rnd + 1}: inclusion {statistics.median(inc):.2f} µs vs Go "
              f"{statistics.median(row['go_inc']):.2f} µs; consistency "
              f"{statistics.median(con):.2f} µs vs Go {statistics.median(row['go_con']):.2f} µs "
              f"(wall, medians; load {before})", file=sys.stderr)
    store.close()

    def ratios(ours: str, theirs: str) -> list[float]:
        return [statistics.median(r[ours]) / statistics.median(r[theirs])
                for r in rows]

    go_version = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"machine: {cpu()}; python {sys.version.split()[0]}; {go_version}",
        f"tree: {n:,} entries; {args.batch} random proofs per batch, {args.rounds} batches per "
        f"kind and round; Store: {held} (filled over the {calls} proofs after the first "
        f"{PRELOAD_AFTER_PROOFS - 1}: {fill_s:.2f} s in all, the slowest proof {worst:.2f} s)",
        f"fresh Store, first {PRELOAD_AFTER_PROOFS - 1} inclusion proofs (one batched SQLite "
        f"read each): {cold[0]:.1f} µs per proof",
        "",
        "µs per proof, min / median / max over a round's batches (wall clock; CPU time below)",
        "",
        "| round | load before | Store inclusion | Go ProveRecord | Store consistency "
        "| Go ProveTree |",
        "|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(rows, 1):
        cells = " | ".join(span(r[c], "{:.2f}")
                           for c in ("inc", "go_inc", "con", "go_con"))
        cpu_cells = " | ".join(span(r[c], "{:.2f}")
                               for c in ("inc_cpu", "go_inc_cpu", "con_cpu", "go_con_cpu"))
        lines.append(f"| {k} | {r['load']} | {cells} |")
        lines.append(f"| {k} CPU | | {cpu_cells} |")
    lines += [
        "",
        "ratio Store / Go per round (of the medians), min / median / max: inclusion "
        f"**{span(ratios('inc', 'go_inc'), '{:.2f}')}** wall, "
        f"{span(ratios('inc_cpu', 'go_inc_cpu'), '{:.2f}')} CPU; consistency "
        f"**{span(ratios('con', 'go_con'), '{:.2f}')}** wall, "
        f"{span(ratios('con_cpu', 'go_con_cpu'), '{:.2f}')} CPU",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
