"""Benchmark: `ledger mirror` against the raw fetch of the same files, from `ledger serve` and from
a static location (`ledger publish` behind nginx); and `ledger publish` throughput (issues 12, 13).

An origin ledger of N bundle entries (each a 5-file bundle with one distinct file, signed by a
registered node key) is built once (cached under --work). It is published to a directory
(timed: the publish throughput; peer: `cp -r` of the published files, same disk, same run), then
served two ways at once: `ledger serve` in a subprocess, and nginx (Debian nginx-light, one
worker) on the published directory. Each round, for each server:

* **raw fetch** (the peer): curl (one process, keep-alive, `--parallel --parallel-max 8`, the
  mirror's own concurrency) fetches exactly the files a mirror needs, no verification, no
  storage: every entry tile, and every bundle file (from `ledger serve` as the 64-digest batches
  `GET /api/v1/blobs?d=...` the mirror asks for; from nginx as `api/v1/blobs/<hex>` files);
* **mirror**: `Mirror.sync` from scratch into a fresh directory, in this process: checkpoint
  signature, every entry's chaining, signature and signer, every manifest, every blob's BLAKE3,
  the tree proved against the signed root batch by batch, everything stored in SQLite.

The ratio is mirror entries/s over raw-fetch entries/s in the same round (goal: >= 0.5). Reported
as min-max over --rounds, with the load average.

    .venv/bin/python bench/bench_mirror.py [--entries 100000] [--rounds 3] [--work DIR]

Prints a markdown section (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from ledger.core.bundle import Bundle, manifest_digests
from ledger.core.tiles import TILE_WIDTH, entries_tile_path
from ledger.keys import load_node_secret, new_node_key
from ledger.log import Log
from ledger.mirror import BLOBS_PER_REQUEST, Mirror, Remote
from ledger.publish import DirTarget, publish
from ledger.store import open_store
from tests.helpers.nginx import free_port, nginx_serving

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rounds import cpu

REPO = Path(__file__).resolve().parent.parent




def build_origin(home: Path, count: int) -> None:
    """N bundle entries, sealed in batches of 5,000 (one transaction and checkpoint each)."""
    log = Log.init(home, "bench.example/log")
    log.register(new_node_key(log.keydir, "node"))
    sk, _ = load_node_secret(log.keydir, "node")
    shared = {
        "contract.yaml": b"metadata:\n  version: '1.0.0'\n" * 4,
        "proof.lean": b"theorem t : 1 = 1 := rfl\n" * 20,
        "spec.fut": b"entry main (x: i32) = x\n" * 10,
        "kernel.cu": b"__global__ void k() {}\n" * 10,
    }
    for start in range(0, count, 5000):
        items = []
        for i in range(start, min(count, start + 5000)):
            files = {**shared, f"k{i}.ptx": (f"// kernel {i}\n" + ".visible .entry k()\n{}\n" * 8)
                     .encode()}
            fields = {
                "kernel": {"name": f"kernel{i}", "version": "1.0.0"},
                "obligations": [{"obligation": "PO1", "theorem": "t", "property": "p"}],
                "checks": [
                    {"id": c, "status": "passed", "detail": "bench", "tool": "", "version": ""}
                    for c in ("integrity.manifest", "contract.schema", "lean.scan")
                ],
            }
            items.append((Bundle.from_files(files), fields))
        log.seal_many(items, sk)
    log.close()


def start_server(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "LEDGER_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "ledger_cli", "serve", "--port", str(port)],
                            cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/checkpoint", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("server did not start")


def mirror_paths(home: Path, batch: bool) -> list[str]:
    """The files a mirror fetches from scratch (after the checkpoint and a few hash tiles):
    every entry tile, and every distinct bundle file in order of first use (batched as the
    mirror batches them against ``ledger serve``, single files from a static location)."""
    store = open_store(home)
    try:
        size = store.size()
        paths: list[str] = []
        seen: set[bytes] = set()
        for t in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
            width = min(TILE_WIDTH, size - t * TILE_WIDTH)
            paths.append(entries_tile_path(t, width))
            wanted: list[bytes] = []
            for data in store.entries(t * TILE_WIDTH, t * TILE_WIDTH + width):
                obj = json.loads(data)
                if obj.get("type") == "bundle":
                    for d in manifest_digests(obj["manifest"].encode()):
                        if d not in seen:
                            seen.add(d)
                            wanted.append(d)
            if batch:
                for i in range(0, len(wanted), BLOBS_PER_REQUEST):
                    q = "&".join(f"d={d.hex()}" for d in wanted[i : i + BLOBS_PER_REQUEST])
                    paths.append(f"api/v1/blobs?{q}")
            else:
                paths.extend(f"api/v1/blobs/{d.hex()}" for d in wanted)
        return paths
    finally:
        store.close()


def curl_fetch(url: str, paths: list[str], work: Path) -> tuple[float, int]:
    """The raw peer: one curl process, keep-alive, 8 transfers in flight, bodies discarded."""
    cfg = work / "curl.cfg"
    with open(cfg, "w") as f:
        for p in paths:
            f.write(f'url = "{url}/{p}"\noutput = "/dev/null"\n')
    t0 = time.perf_counter()
    res = subprocess.run(
        ["curl", "-sS", "--fail", "--parallel", "--parallel-max", "8", "-K", str(cfg),
         "-w", "%{size_download}\n"],
        capture_output=True, text=True, check=False,
    )
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"curl failed: {res.stderr[-300:]}")
    return seconds, sum(int(x) for x in res.stdout.split())


def mirror_once(url: str, vkey: str, work: Path) -> tuple[float, int, int]:
    home = Path(tempfile.mkdtemp(prefix="mirror-", dir=work))
    remote = Remote(url)
    try:
        t0 = time.perf_counter()
        r = Mirror(home, remote, vkey).sync()
        seconds = time.perf_counter() - t0
    finally:
        remote.close()
        shutil.rmtree(home, ignore_errors=True)
    return seconds, r.requests, r.blobs


def proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the live processes ``pids`` have used so far (``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(stat[11]) + int(stat[12])) / tick
    return total


def named_pids(name: str) -> list[int]:
    """The live processes whose command is ``name`` (nginx's master and worker)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                    out.append(int(pid))
            except OSError:
                continue
    return out


def own_cpu() -> float:
    """CPU seconds of this process (every thread) and its reaped children (curl)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def span(values: list[float], fmt: str = "{:,.0f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else \
        f"{fmt.format(lo)}-{fmt.format(hi)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledger-bench-mirror"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", choices=["serve", "static", "both"], default="both")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    origin = args.work / f"origin-{args.entries}"
    if not (origin / "ledger.db").exists():
        shutil.rmtree(origin, ignore_errors=True)
        t0 = time.perf_counter()
        build_origin(origin, args.entries)
        print(f"built origin of {args.entries} bundles in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    store = open_store(origin)
    size, vkey = store.size(), str(store.meta("vkey"))
    store.close()
    loads = [os.getloadavg()[0]]

    # publish throughput, against cp -r of the same files
    static = args.work / f"static-{args.entries}"
    shutil.rmtree(static, ignore_errors=True)
    pub = publish(origin, DirTarget(static))
    copy = args.work / "static-copy"
    shutil.rmtree(copy, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run(["cp", "-r", str(static), str(copy)], check=True)
    subprocess.run(["sync"], check=True)
    cp_s = time.perf_counter() - t0
    shutil.rmtree(copy, ignore_errors=True)
    t0 = time.perf_counter()
    again = publish(origin, DirTarget(static))
    noop_s = time.perf_counter() - t0
    files = pub.tiles + pub.blobs + 1

    results: dict[str, dict[str, list[float]]] = {}
    proc, serve_url = start_server(origin)
    try:
        with nginx_serving(static, args.work / "nginx") as static_url:
            where = {"serve": (serve_url, True), "static": (static_url, False)}
            if args.only != "both":
                where = {args.only: where[args.only]}
            paths = {k: mirror_paths(origin, batch) for k, (_u, batch) in where.items()}
            for k, (u, _b) in where.items():  # warm page caches and connections
                curl_fetch(u, paths[k][:200], args.work)
            servers = {"serve": [proc.pid], "static": named_pids("nginx")}
            for _round in range(args.rounds):
                for k, (u, _b) in where.items():
                    s0, c0 = proc_cpu(servers[k]), own_cpu()
                    raw_s, raw_bytes = curl_fetch(u, paths[k], args.work)
                    s1, c1 = proc_cpu(servers[k]), own_cpu()
                    m_s, m_requests, m_blobs = mirror_once(u, vkey, args.work)
                    s2, c2 = proc_cpu(servers[k]), own_cpu()
                    r = results.setdefault(k, {"raw": [], "mirror": [], "ratio": [],
                                               "requests": [], "mib": [], "blobs": [],
                                               "curl_us": [], "serve_raw_us": [],
                                               "mirror_us": [], "serve_m_us": [],
                                               "bound": []})
                    # CPU per entry: what the mirror and its server spend for one entry, and
                    # the rate both CPUs could at most sustain for them together
                    r["curl_us"].append((c1 - c0) / size * 1e6)
                    r["serve_raw_us"].append((s1 - s0) / size * 1e6)
                    r["mirror_us"].append((c2 - c1) / size * 1e6)
                    r["serve_m_us"].append((s2 - s1) / size * 1e6)
                    cpus = len(os.sched_getaffinity(0))
                    bound = cpus / ((c2 - c1 + s2 - s1) / size)
                    r["bound"].append(bound / (size / raw_s))
                    r["raw"].append(size / raw_s)
                    r["mirror"].append(size / m_s)
                    r["ratio"].append(raw_s / m_s)
                    r["requests"].append(m_requests)
                    r["mib"].append(raw_bytes / 2**20)
                    r["blobs"].append(m_blobs)
                    loads.append(os.getloadavg()[0])
                    print(f"{k}: raw {size / raw_s:,.0f}/s, mirror {size / m_s:,.0f}/s, "
                          f"ratio {raw_s / m_s:.2f}, load {loads[-1]:.1f}", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(30)

    cmd = f".venv/bin/python bench/bench_mirror.py --entries {args.entries} --rounds {args.rounds}"
    rows, cpu_rows = [], []
    names = {"serve": "`ledger serve` (subprocess)", "static": "nginx on `ledger publish` output"}
    for k, r in results.items():
        rows.append(f"| {names[k]} | {span(r['raw'])} | {span(r['mirror'])} | "
                    f"**{span(r['ratio'], '{:.2f}')}** | {span(r['requests'])} | "
                    f"{span(r['mib'], '{:.1f}')} |")
        cpu_rows.append(f"| {names[k]} | {span(r['curl_us'], '{:.0f}')} | "
                        f"{span(r['serve_raw_us'], '{:.0f}')} | {span(r['mirror_us'], '{:.0f}')} | "
                        f"{span(r['serve_m_us'], '{:.0f}')} | {span(r['bound'], '{:.2f}')} |")
    text = f"""### Mirror against raw fetch, and publish (bench/bench_mirror.py)

Command: `{cmd}`; {size:,} entries, {args.rounds} rounds.
Machine: {cpu()}, Python {platform.python_version()}; servers on 127.0.0.1 sharing the CPUs;
1-minute load average {min(loads):.1f}-{max(loads):.1f} during the run.

| source | raw fetch, entries/s | mirror, entries/s | mirror / raw | requests | MiB raw |
|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

CPU time per entry, µs (this process and curl from `getrusage`, the server from `/proc`), and
the bound it sets: the {len(os.sched_getaffinity(0))} CPUs' seconds over (mirror + its server's
CPU per entry) is the most entries/s the mirror and its server could sustain together on this
machine, given as a fraction of the raw fetch's rate (the goal asks 0.5):

| source | curl | server, for curl | mirror | server, for the mirror | bound / raw |
|---|---:|---:|---:|---:|---:|
{chr(10).join(cpu_rows)}

`ledger publish` of the {size:,} entries to a directory from scratch: {pub.seconds:.1f} s,
{size / pub.seconds:,.0f} entries/s ({files:,} files, {pub.bytes / 2**20:.1f} MiB); `cp -r` of
the same files then `sync`: {cp_s:.1f} s (publish / copy time {pub.seconds / cp_s:.2f}x). A re-run
with nothing new: {noop_s:.2f} s ({again.tiles} tiles, {again.blobs} files written).
"""
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
