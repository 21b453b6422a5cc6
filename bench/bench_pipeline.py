"""Issue 30: is the raw-socket pipelined fetch (``ledger.net.pipeline``) still needed for the
mirror's speed, or does httpx with its connection pool come within 10%?

An origin of ``--entries`` bundle entries (``bench_mirror.build_origin``) is served by ``ledger
serve`` (a subprocess). Each round runs ``Mirror.sync`` from scratch into a fresh directory twice,
in alternating order: once as ``ledger mirror`` runs it (the entry tiles and the blob batches
pipelined over raw sockets, ``Remote.pipe``), once with ``Remote.pipe`` set to None, so that the
same requests go through ``HttpClient`` (httpx over its connection pool, the blob batches
``BLOB_REQUESTS_IN_FLIGHT`` threads at a time) and ``LeanGet``. Entries per second of each (wall
time) and per CPU second of this process (its threads included; the figure that holds on a
shared machine), the ratios httpx / pipelined per round (min-median-max), with the load average.

    .venv/bin/python bench/bench_pipeline.py [--entries 5000] [--rounds 5] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from bench_mirror import build_origin, free_port

from ledger.mirror import Mirror, Remote
from ledger.store import open_store

REPO = Path(__file__).resolve().parent.parent


def sync_rate(url: str, vkey: str, work: Path, pipelined: bool) -> tuple[float, float]:
    """(entries per second of wall time, entries per CPU second of this process, its threads
    included) of one sync from scratch."""
    home = Path(tempfile.mkdtemp(dir=work))
    remote = Remote(url)
    if not pipelined:
        remote.pipe = None
    t0, c0 = time.perf_counter(), time.process_time()
    result = Mirror(home / "m", remote, vkey).sync()
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    remote.close()
    shutil.rmtree(home, ignore_errors=True)
    return result.entries / took, result.entries / cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledger-bench-pipeline"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    origin = args.work / f"origin-{args.entries}"  # built once, kept for the next run
    if not (origin / "ledger.db").exists():
        shutil.rmtree(origin, ignore_errors=True)
        build_origin(origin, args.entries)
    store = open_store(origin)
    vkey = str(store.meta("vkey"))
    store.close()
    port = free_port()
    env = {**os.environ, "LEDGER_HOME": str(origin)}
    server = subprocess.Popen([sys.executable, "-m", "ledger_cli", "serve", "--port", str(port)],
                              cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    rates: dict[str, list[float]] = {"pipelined": [], "httpx": []}
    cpus: dict[str, list[float]] = {"pipelined": [], "httpx": []}
    try:
        for _ in range(200):
            try:
                httpx.get(url + "/checkpoint", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        print(f"cpus {os.cpu_count()}, load at start {os.getloadavg()}", flush=True)
        for r in range(args.rounds):
            order = ["pipelined", "httpx"] if r % 2 == 0 else ["httpx", "pipelined"]
            for which in order:
                rate, per_cpu = sync_rate(url, vkey, work, which == "pipelined")
                rates[which].append(rate)
                cpus[which].append(per_cpu)
            print(f"round {r + 1}: pipelined {rates['pipelined'][-1]:.0f}/s "
                  f"({cpus['pipelined'][-1]:.0f}/CPU s), httpx {rates['httpx'][-1]:.0f}/s "
                  f"({cpus['httpx'][-1]:.0f}/CPU s), load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    for label, got in (("entries/s", rates), ("entries per CPU s", cpus)):
        ratios = [h / p for h, p in zip(got["httpx"], got["pipelined"], strict=True)]
        print(f"{label}: pipelined median {statistics.median(got['pipelined']):.0f}, httpx "
              f"median {statistics.median(got['httpx']):.0f}; httpx / pipelined per round "
              f"(min-median-max): {min(ratios):.3f}-{statistics.median(ratios):.3f}-"
              f"{max(ratios):.3f}")
    print(f"load at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
