"""Benchmark: `ledger mirror` syncing a 100,000-entry ledger over loopback, with full verification.

An origin ledger of N bundle entries (each a 5-file bundle with one distinct file, signed by a
registered node key) is built once (cached under --work) and served by `ledger serve` in a
subprocess. The mirror then syncs from scratch: checkpoint signature, every entry's chaining,
node signature and signer registration, every manifest digest, every blob's BLAKE3 (batched
fetch), the tree recomputed and proved against the signed root batch by batch, and every batch
appended to its own SQLite store.

Peer, measured in the same run against the same server: a raw httpx fetch of the same entry tiles
and the same blob batches, sequentially, with no verification and no storage. The ratio says what
verification and storage cost on top of the transfer.

    .venv/bin/python bench/bench_mirror.py [--entries 100000] [--work /tmp/ledger-bench-mirror]

Writes docs/bench/server-mirror.md (or --out); docs/bench/server.md holds the figures with notes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from ledger.bundle import Bundle, parse_manifest
from ledger.keys import load_node_secret, new_node_key
from ledger.log import Log
from ledger.mirror import BLOBS_PER_REQUEST, Mirror, Remote
from ledger.store import Store
from ledger.tiles import TILE_WIDTH, entries_tile_path, parse_entry_bundle

REPO = Path(__file__).resolve().parent.parent


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return platform.machine()


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "LEDGER_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "ledger.cli", "serve", "--port", str(port)],
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


def raw_fetch(url: str, size: int) -> tuple[float, int, int]:
    """The peer: the same entry tiles and blob batches, fetched with no verification."""
    t0 = time.perf_counter()
    nbytes = requests = 0
    seen: set[bytes] = set()
    with httpx.Client(base_url=url, timeout=60) as c:
        for t in range(0, (size + TILE_WIDTH - 1) // TILE_WIDTH):
            width = min(TILE_WIDTH, size - t * TILE_WIDTH)
            body = c.get("/" + entries_tile_path(t, width)).content
            requests += 1
            nbytes += len(body)
            wanted = []
            for e in parse_entry_bundle(body):  # only to name the same blobs the mirror fetches
                obj = json.loads(e)
                if obj["type"] == "bundle":
                    for _, d in parse_manifest(obj["manifest"].encode()):
                        if d not in seen:
                            seen.add(d)
                            wanted.append(d)
            for i in range(0, len(wanted), BLOBS_PER_REQUEST):
                batch = wanted[i : i + BLOBS_PER_REQUEST]
                r = c.get("/api/v1/blobs", params=[("d", d.hex()) for d in batch])
                requests += 1
                nbytes += len(r.content)
    return time.perf_counter() - t0, requests, nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ledger-bench-mirror"))
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "bench" / "server-mirror.md")
    args = ap.parse_args()
    origin = args.work / f"origin-{args.entries}"
    if not (origin / "ledger.db").exists():
        shutil.rmtree(origin, ignore_errors=True)
        t0 = time.perf_counter()
        build_origin(origin, args.entries)
        print(f"built origin of {args.entries} bundles in {time.perf_counter() - t0:.1f} s")
    store = Store.open(origin)
    size, vkey = store.size(), str(store.meta("vkey"))
    store.close()
    load_before = os.getloadavg()[0]
    proc, url = start_server(origin)
    try:
        raw_fetch(url, min(size, 2048))  # warm the server's page cache and connections
        peer_s, peer_requests, peer_bytes = raw_fetch(url, size)
        mirror_home = args.work / "mirror"
        shutil.rmtree(mirror_home, ignore_errors=True)
        remote = Remote(url)
        t0 = time.perf_counter()
        result = Mirror(mirror_home, remote, vkey).sync()
        mirror_s = time.perf_counter() - t0
        remote.close()
    finally:
        proc.terminate()
        proc.wait(30)
    assert result.new_size == size
    load_after = os.getloadavg()[0]
    rate, peer_rate = size / mirror_s, size / peer_s
    cmd = f".venv/bin/python bench/bench_mirror.py --entries {args.entries}"
    row_mirror = (f"| `ledger mirror` from scratch, full verification, stored | {size} | "
                  f"{mirror_s:.2f} | {rate:,.0f} | {result.requests} | - |")
    row_peer = (f"| peer: raw httpx fetch of the same entry tiles and blob batches | {size} | "
                f"{peer_s:.2f} | {peer_rate:,.0f} | {peer_requests} | {peer_bytes / 2**20:.1f} |")
    text = f"""## Mirror sync over loopback (bench/bench_mirror.py)

Command: `{cmd}`
Machine: {cpu()}, Python {platform.python_version()}; `ledger serve` in a subprocess on 127.0.0.1;
1-minute load average {load_before:.1f} before, {load_after:.1f} after (other work shares the CPUs).

| what | entries | seconds | entries/s | requests | MiB transferred |
|---|---:|---:|---:|---:|---:|
{row_mirror}
{row_peer}

Ratio mirror time / raw fetch time: **{mirror_s / peer_s:.2f}x** (the cost of verifying every
signature, chain link, manifest, blob hash and the tree, and of storing it all).
Blobs fetched and checked: {result.blobs}. Target: >= 5,000 entries/s with full verification.
"""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
