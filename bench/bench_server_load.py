"""Benchmark: 1,000 concurrent clients fetching tiles from `ledger serve` (asyncio + httpx).

The server runs in a subprocess (`ledger serve`, one uvicorn process) over the ledger built by
bench/bench_mirror.py (cached under --work). 1,000 client tasks, each with its own
httpx.AsyncClient and one keep-alive connection, each fetch --per-client random paths: every hash
tile (full and partial, all levels) and the checkpoint, plus the large entry tiles with
--entry-tiles. At most 1,000 requests are in flight. Every answer must be 200 with the expected
length; the report gives p50 / p99 latency, throughput and the error count.

Peer, in the same run with the same client: the same paths served as static files (the tree
written by `ledger export-tiles`) by Starlette's StaticFiles under the same uvicorn settings. The
ratio says what serving tiles out of SQLite costs against serving files.

    .venv/bin/python bench/bench_server_load.py [--entries 100000] [--clients 1000]

Writes docs/bench/server-load.md (or --out); docs/bench/server.md holds the figures with notes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from bench_mirror import build_origin, cpu, free_port  # type: ignore[import-not-found]

from ledger.core.tiles import entries_tile_path, tile_path, tiles_for_size
from ledger.export import export_tiles
from ledger.store import open_store

REPO = Path(__file__).resolve().parent.parent
STATIC_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
app = Starlette(routes=[Mount("/", StaticFiles(directory=sys.argv[1]))])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            access_log=False, server_header=False, backlog=4096)
"""


def start(argv: list[str], env: dict[str, str], url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if httpx.get(url + "/checkpoint", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"server {argv} did not start")


def workload(
    size: int, clients: int, per_client: int, seed: int, entry_tiles: bool
) -> list[str]:
    """Random paths: every hash tile (full and partial, all levels) and the checkpoint; with
    ``entry_tiles``, the entry tiles too (each ~256 entries, hundreds of KiB)."""
    paths = ["/checkpoint"]
    for level, n, width in tiles_for_size(size):
        paths.append("/" + tile_path(level, n, width))
        if level == 0 and entry_tiles:
            paths.append("/" + entries_tile_path(n, width))
    rng = random.Random(seed)
    return [rng.choice(paths) for _ in range(clients * per_client)]


async def hammer(
    url: str, plan: list[str], clients: int, expect: dict[str, int]
) -> dict[str, float]:
    """``clients`` tasks, each its own httpx.AsyncClient with one keep-alive connection (one
    shared client with a 1,000-connection pool spends its time in the pool, not in requests)."""
    latencies: list[float] = []
    errors = 0
    per = len(plan) // clients
    timeout = httpx.Timeout(60.0, pool=120.0)

    async def one(k: int) -> None:
        nonlocal errors
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
            for path in plan[k * per : (k + 1) * per]:
                t0 = time.perf_counter()
                try:
                    r = await client.get(path)
                    ok = r.status_code == 200 and len(r.content) == expect[path]
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - t0)
                if not ok:
                    errors += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(clients)))
    wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100)
    return {"requests": len(latencies), "errors": errors, "wall": wall,
            "rps": len(latencies) / wall, "p50": statistics.median(latencies) * 1000,
            "p99": q[98] * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--per-client", type=int, default=5)
    ap.add_argument("--entry-tiles", action="store_true", help="Mix in the large entry tiles.")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledger-bench-mirror"))
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "bench" / "server-load.md")
    args = ap.parse_args()
    origin = args.work / f"origin-{args.entries}"
    if not (origin / "ledger.db").exists():
        build_origin(origin, args.entries)
    store = open_store(origin)
    size = store.size()
    store.close()
    static = args.work / f"static-{args.entries}"
    export_tiles(origin, static)
    plan = workload(size, args.clients, args.per_client, seed=7, entry_tiles=args.entry_tiles)
    expect = {p: (static / p.lstrip("/")).stat().st_size for p in set(plan)}
    results = {}
    load = os.getloadavg()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for name in ("ledger serve", "peer: static files"):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        if name == "ledger serve":
            argv = [sys.executable, "-m", "ledger_cli", "serve", "--port", str(port)]
        else:
            argv = [sys.executable, "-c", STATIC_APP, str(static), str(port)]
        proc = start(argv, {**os.environ, "LEDGER_HOME": str(origin)}, url)
        try:
            asyncio.run(hammer(url, plan[: args.clients], args.clients, expect))  # warm up
            results[name] = asyncio.run(hammer(url, plan, args.clients, expect))
        finally:
            proc.terminate()
            proc.wait(30)
    a, b = results["ledger serve"], results["peer: static files"]
    cmd = (f".venv/bin/python bench/bench_server_load.py --entries {args.entries} "
           f"--clients {args.clients} --per-client {args.per_client}"
           + (" --entry-tiles" if args.entry_tiles else ""))
    rows = "\n".join(
        f"| {k} | {v['requests']:.0f} | {v['errors']:.0f} | {v['wall']:.2f} | {v['rps']:,.0f} | "
        f"{v['p50']:.1f} | {v['p99']:.1f} |" for k, v in results.items()
    )
    text = f"""## {args.clients} concurrent clients fetching tiles (bench/bench_server_load.py)

Command: `{cmd}`
Machine: {cpu()}, Python {platform.python_version()}, {when} (load average {load[0]:.2f} at start,
{os.getloadavg()[0]:.2f} at end); server and clients on the same machine,
one uvicorn process each; tree of {size} entries; random full and partial hash tiles of every
level and the checkpoint{" and entry tiles" if args.entry_tiles else ""}; every answer checked
(status 200, expected length).

| server | requests | errors | seconds | requests/s | p50 ms | p99 ms |
|---|---:|---:|---:|---:|---:|---:|
{rows}

Ratio throughput ledger serve / static files: **{a['rps'] / b['rps']:.2f}x**;
p99 ratio: {a['p99'] / b['p99']:.2f}x.
Errors: {a['errors']:.0f} (ledger serve), {b['errors']:.0f} (peer).
"""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
