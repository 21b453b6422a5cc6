"""Benchmark: tiles from `ledger serve` against nginx serving the same tiles as files (issue 12).

A ledger of --entries bundle entries (bench_mirror.build_origin, cached under --work) is exported
with `ledger.export.export_tiles`; nginx (Debian's nginx-light, run unprivileged-style from a
temporary prefix: its own config, pid and logs in the work directory, `daemon off`, loopback
port) serves that directory, and `ledger serve` (a subprocess, one process) serves the ledger.
Before any load, every path is fetched from both and the bytes compared.

The load generator is wrk (`wrk -t2 -c64 -d10s --latency` by default) with a small Lua script
that walks the list of tile paths round-robin: every hash tile of the tree (full and partial, all
levels), and with --entry-tiles the entry tiles too. For each of --repeat rounds both servers are
measured back to back (the order alternates), and the ratio ledger / nginx is taken within the
round. The report gives requests/s, p50 and p99 latency, non-2xx answers, the load (`uptime`)
before each round, and the ratio range over the rounds (min / median / max).

wrk runs on the same machine: on a 2-CPU machine wrk and the server share the CPUs (and other
jobs share them too), so both figures are below what the server alone would reach; the ratio is
what the bench is for.

    .venv/bin/python bench/bench_serve.py [--entries 20000] [--repeat 3] [--duration 10]

Needs `wrk` and `nginx` (scripts/setup.sh --test installs nginx-light and wrk); without them it
says skipped and why, and exits 3.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from bench_mirror import build_origin, cpu, free_port

from ledger.core.tiles import entries_tile_path, tile_path, tiles_for_size
from ledger.export import export_tiles
from ledger.store import open_store

REPO = Path(__file__).resolve().parent.parent

LUA = """
local paths = {}
for line in io.lines(os.getenv("BENCH_PATHS")) do paths[#paths + 1] = line end
local i = 0
function setup(thread)
  thread:set("offset", math.random(#paths))
end
function init(args)
  i = offset or 0
end
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
"""

NGINX_CONF = """
worker_processes {workers};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
{user}
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_requests 1000000;
  keepalive_timeout 65;
  default_type application/octet-stream;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location /tile/ {{ add_header Cache-Control "public, max-age=31536000, immutable"; }}
  }}
}}
"""


def load() -> str:
    parts = Path("/proc/loadavg").read_text().split()[:3]
    return " ".join(parts)


def tile_paths(size: int, entry_tiles: bool) -> list[str]:
    out = []
    for level, n, width in tiles_for_size(size):
        out.append("/" + tile_path(level, n, width))
        if entry_tiles and level == 0:
            out.append("/" + entries_tile_path(n, width))
    return out


def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/checkpoint", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"bench_serve: server at {url} did not start")
        time.sleep(0.05)


def start_nginx(root: Path, tmp: Path, workers: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    user = "user root;" if os.geteuid() == 0 else ""  # workers read the tiles as we wrote them
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(workers=workers, tmp=tmp, user=user, port=port, root=root))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    proc = subprocess.Popen([nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "err.log")],
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_up(url, proc)
    return proc, url


def start_ledger(home: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    port = free_port()
    env = {**os.environ, "LEDGER_HOME": str(home)}
    err = home.parent / "serve.err"
    with err.open("wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "ledger_cli", "serve", "--port", str(port)],
                                cwd=REPO, env=env, stderr=f)
    url = f"http://127.0.0.1:{port}"
    wait_up(url, proc)
    line = err.read_text().strip().splitlines()
    return proc, url, line[0] if line else ""


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def same_answers(a: str, b: str, paths: list[str]) -> None:
    with httpx.Client(timeout=30) as ca, httpx.Client(timeout=30) as cb:
        for p in paths:
            ra, rb = ca.get(a + p), cb.get(b + p)
            if ra.status_code != 200 or rb.status_code != 200 or ra.content != rb.content:
                raise SystemExit(f"bench_serve: {p} differs ({ra.status_code} / {rb.status_code})")


_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    if not m:
        return float("nan")
    return float(m.group(1)) * _UNIT[m.group(2)]


def run_wrk(url: str, script: Path, paths_file: Path, threads: int, conns: int,
            duration: int) -> dict[str, float]:
    env = {**os.environ, "BENCH_PATHS": str(paths_file)}
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency", "-s", str(script),
         url],
        env=env, capture_output=True, text=True, check=True, timeout=duration + 60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors: (.*)", out)
    return {
        "rps": rps,
        "p50": _ms(lat.get("50", "")),
        "p99": _ms(lat.get("99", "")),
        "non2xx": float(bad.group(1)) if bad else 0.0,
        "socket_errors": 1.0 if errs else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_serve"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--nginx-workers", default="auto")
    ap.add_argument("--entry-tiles", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    missing = [t for t in ("wrk", "nginx")
               if not (shutil.which(t) or Path(f"/usr/sbin/{t}").exists())]
    if missing:
        print(f"bench_serve: skipped: {' and '.join(missing)} not installed "
              "(scripts/setup.sh --test installs nginx-light and wrk)", file=sys.stderr)
        return 3

    home = args.work / f"ledger-{args.entries}"
    if not (home / "ledger.db").exists():
        shutil.rmtree(home, ignore_errors=True)
        t0 = time.perf_counter()
        build_origin(home, args.entries)
        print(f"built {args.entries} entries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    store = open_store(home)
    size = store.size()
    store.close()
    tiles = args.work / f"tiles-{args.entries}"
    export_tiles(home, tiles)
    paths = tile_paths(size, args.entry_tiles)
    paths_file = args.work / "paths.txt"
    paths_file.write_text("\n".join(paths) + "\n")
    script = args.work / "paths.lua"
    script.write_text(LUA)

    nginx, nginx_url = start_nginx(tiles, args.work / "nginx", args.nginx_workers)
    ledger, ledger_url, started = start_ledger(home)
    rows: list[tuple[int, str, str, dict[str, float]]] = []
    try:
        same_answers(nginx_url, ledger_url, paths)  # also warms both (every full tile cached)
        for rnd in range(args.repeat):
            order = [("nginx", nginx_url), ("ledger serve", ledger_url)]
            if rnd % 2:
                order.reverse()
            for name, url in order:
                before = load()
                r = run_wrk(url, script, paths_file, args.threads, args.connections, args.duration)
                rows.append((rnd, name, before, r))
                print(f"round {rnd + 1} {name}: {r['rps']:.0f} req/s p50 {r['p50']:.2f} ms "
                      f"p99 {r['p99']:.2f} ms non-2xx {r['non2xx']:.0f} (load {before})",
                      file=sys.stderr)
    finally:
        stop(ledger)
        stop(nginx)

    ratios = []
    for rnd in range(args.repeat):
        got = {name: r for k, name, _, r in rows if k == rnd}
        ratios.append(got["ledger serve"]["rps"] / got["nginx"]["rps"])
    lines = [
        f"machine: {cpu()}; python {sys.version.split()[0]}; "
        f"`{started}`; nginx worker_processes {args.nginx_workers}",
        f"load: wrk -t{args.threads} -c{args.connections} -d{args.duration}s --latency, "
        f"round-robin over {len(paths)} tile paths of a {size}-entry tree "
        f"({'hash and entry' if args.entry_tiles else 'hash'} tiles); wrk on the same CPUs",
        "",
        "| round | server | req/s | p50 ms | p99 ms | non-2xx | load before |",
        "|---|---|---|---|---|---|---|",
    ]
    for rnd, name, before, r in rows:
        lines.append(f"| {rnd + 1} | {name} | {r['rps']:,.0f} | {r['p50']:.2f} | {r['p99']:.2f} "
                     f"| {r['non2xx']:.0f} | {before} |")
    lines.append("")
    lines.append("ratio ledger serve / nginx (req/s, per round): min / median / max = "
                 f"**{min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}**")
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
