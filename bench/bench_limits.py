"""Ledger paths against their physical limits (issue 12), every figure a ratio taken in one run.

* append: ``Log.seal_many`` entries/s in batches of ``--batch`` when the ledger holds about each of
  ``--sizes`` entries (with its default sealing workers, one per CPU, ``ledger/sealers.py``),
  against the raw Ed25519 signing rate (libsodium ``crypto_sign`` through PyNaCl's binding, one
  core, the same entry-sized messages) timed right before and right after each measurement
  (the harmonic mean of the two: a shared VM's speed drifted by up to 30% within a run; the
  table gives the drift, after / before). A measurement is ``--sustain`` batches back to back
  (their bundles made before the timing), timed until the
  last one's WAL checkpoint, which ``seal_many`` leaves to a thread
  (``ledger.store.walcheckpoint``), is
  done: the rate of a steady stream of batches, every batch's checkpoint paid for. Every fill
  batch on the way prints its own rate and a signing peer (stderr), the curve for sizes beyond
  ``--sizes``;
* audit: ``ledger audit`` (a subprocess, start-up included) of the final ledger against the
  Ed25519 verify rate summed over the machine's cores (one process per core, each timing its own
  loop over its share of the ledger's own signatures, all running at once), timed right before
  and right after each audit as for append;
* proofs: inclusion and consistency proofs from the store of the final ledger against the same
  proofs computed by ``ledger.core.merkle`` from every stored hash held in Python lists in memory.

Each measurement is repeated ``--reps`` times, interleaved with its peer, each after ``sync``
(no dirty pages of the fill left to write back during it); the report gives min / median / max
of the ratios (never a best run) and the load average seen.

usage: .venv/bin/python bench/bench_limits.py [--sizes 10000,100000,1000000] [--batch 10000]
       [--sustain 3] [--reps 3] [--out docs/bench/limits.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import nacl.bindings  # noqa: E402

from bench.bench_ledger import _bundles  # noqa: E402
from ledger.core import merkle  # noqa: E402
from ledger.core.entries import decode_entry, signed_part  # noqa: E402
from ledger.log import Log  # noqa: E402
from tests.helpers.ledgers import add_node  # noqa: E402


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _span(xs: list[float], fmt: str = "{:,.0f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def _cpu() -> float:
    """CPU seconds of this process and of its children, the reaped ones and those still running
    (``seal_many``'s sealing workers stay for the next batch: their ``/proc`` counters)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == os.getpid():  # ppid; utime and stime are fields 14 and 15
            live += (int(stat[11]) + int(stat[12])) / tick
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + live


def _sign_rate(msgs: list[bytes], sk64: bytes) -> tuple[float, float]:
    """(wall-clock rate, CPU-time rate) of signing ``msgs``."""
    t, c = time.perf_counter(), time.process_time()
    for m in msgs:
        nacl.bindings.crypto_sign(m, sk64)
    return len(msgs) / (time.perf_counter() - t), len(msgs) / (time.process_time() - c)


def _bracket(before: float, after: float) -> float:
    """The peer's rate over a measurement it was timed just before and just after, on the same
    work: the harmonic mean (the rate of the two timings' total)."""
    return 2 / (1 / before + 1 / after)


def _verify_share(jobs: list[tuple[bytes, bytes, bytes]]) -> float:
    """One worker's verify rate over its share (run in a pool process)."""
    t = time.perf_counter()
    for public, msg, sig in jobs:
        nacl.bindings.crypto_sign_open(sig + msg, public)
    return len(jobs) / (time.perf_counter() - t)


def _proofs(home: Path, reps: int, count: int, lines: list[str]) -> None:
    """Proofs from the store of the ledger at ``home`` against the same proofs in memory."""
    n = Log.open(home).store.size()
    args = argparse.Namespace(reps=reps, proofs=count)
    loads: list[str] = []
    # -- proofs --------------------------------------------------------------------------
    log = Log.open(home)
    store = log.store
    levels: list[list[bytes]] = []
    for level, _n, h in store.conn.execute("SELECT level, n, hash FROM hashes ORDER BY level, n"):
        while len(levels) <= level:
            levels.append([])
        levels[level].append(bytes(h))

    def mem(level: int, i: int) -> bytes:
        return levels[level][i]

    rng = random.Random(1)
    p_rows = []
    for kind in ("inclusion", "consistency"):
        db_t, mem_t, old_t = [], [], []  # old: a point query per hash (before issue 12)
        for _ in range(args.reps):
            picks = [rng.randrange(1, n) for _ in range(args.proofs)]
            if kind == "inclusion":
                f_db = lambda i: store.inclusion_proof(i, n)  # noqa: E731
                f_mem = lambda i: merkle.inclusion_proof(i, n, mem)  # noqa: E731
                f_old = lambda i: merkle.inclusion_proof(i, n, store.stored_hash)  # noqa: E731
            else:
                f_db = lambda i: store.consistency_proof(i, n)  # noqa: E731
                f_mem = lambda i: merkle.consistency_proof(i, n, mem)  # noqa: E731
                f_old = lambda i: merkle.consistency_proof(i, n, store.stored_hash)  # noqa: E731
            for fn, acc in ((f_db, db_t), (f_mem, mem_t), (f_old, old_t)):
                ts = []
                for i in picks:
                    t0 = time.perf_counter()
                    fn(i)
                    ts.append(time.perf_counter() - t0)
                acc.append(statistics.median(ts) * 1e6)
        ratio = [a / b for a, b in zip(db_t, mem_t, strict=True)]
        p_rows.append((kind, db_t, mem_t, old_t, ratio))
    log.close()
    loads.append(_load())
    lines.append(f"## Proofs at {n:,} entries ({args.proofs} random proofs per repetition)\n")
    lines.append(
        "| proof | from SQLite, median µs | same proof from hashes in memory (Python), "
        "median µs | ratio | before: a point query per hash, median µs |\n|---|---:|---:|---:|---:|"
    )
    for kind, db_t, mem_t, old_t, r in p_rows:
        lines.append(
            f"| {kind} | {_span(db_t, '{:.1f}')} | {_span(mem_t, '{:.1f}')} | "
            f"{_span(r, '{:.2f}')} | {_span(old_t, '{:.1f}')} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--sustain", type=int, default=3, help="batches back to back per measurement")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--proofs", type=int, default=2000)
    ap.add_argument("--verify-sample", type=int, default=100_000)
    ap.add_argument("--out", default=str(REPO / "docs/bench/limits.md"))
    ap.add_argument("--proofs-only", metavar="LEDGER_HOME", help="only proofs, on this ledger")
    args = ap.parse_args()
    if args.proofs_only:
        out = [f"Proofs only, on {args.proofs_only}, load average {_load()}\n"]
        _proofs(Path(args.proofs_only), args.reps, args.proofs, out)
        out.append(f"load average after: {_load()}")
        print("\n".join(out))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    cpus = os.cpu_count() or 1
    tmp = Path(tempfile.mkdtemp(prefix="bench-limits-"))
    home = tmp / "home"
    loads = [_load()]
    lines = [
        "# Ledger paths against their limits (issue 12)\n",
        f"Command: `.venv/bin/python bench/bench_limits.py --sizes {args.sizes} "
        f"--batch {args.batch} --sustain {args.sustain} --reps {args.reps}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {cpus} CPUs, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')} UTC. Ranges are "
        "min / median / max over the repetitions.\n",
    ]
    try:
        log = Log.init(home, "bench.example/log")
        sk = add_node(log)
        sk64 = bytes(sk) + bytes(sk.verify_key)
        salt = 0

        def seal(n: int) -> tuple[list[bytes], float]:
            """The entries of a batch of ``n`` and its rate (the bundles made before timing)."""
            nonlocal salt
            salt += 1
            items = _bundles(n, f"s{salt}-")
            t = time.perf_counter()
            out = log.seal_many(items, sk)
            return [s.entry for s in out], n / (time.perf_counter() - t)

        msgs = seal(min(args.batch, 2000))[0]
        rows = []
        for size in sizes:
            measured = args.reps * args.sustain * args.batch
            while log.store.size() + measured < size:
                n = min(20_000, size - measured - log.store.size())
                peer = _sign_rate(msgs[:1000], sk64)[0]
                rate = seal(n)[1]
                # the fill's own rate, for a curve up to sizes the measured batches do not reach
                # (an extrapolation to 10^7 reads these lines)
                print(f"  filled {log.store.size()}: {rate:,.0f} entries/s (bundles made "
                      f"outside the timing), signing {peer:,.0f}/s, ratio {rate / peer:.2f}, "
                      f"load {_load()}", file=sys.stderr, flush=True)
            rates, peers, ratios, cpu_ratios, drifts = [], [], [], [], []
            for _ in range(args.reps):
                # every measured batch starts with no dirty pages left to the kernel: right
                # after the fill has written a GB, its write-back competes with the batch's
                # fsyncs, which would be measured as the ledger's size (bench_flatness.py
                # alternates batches on a small and a large ledger instead)
                log.store.wait_checkpoint()
                os.sync()
                peer_msgs = (msgs * (args.batch // len(msgs) + 1))[: args.batch]
                before = _sign_rate(peer_msgs, sk64)
                batches = []
                for _ in range(args.sustain):
                    batches.append(_bundles(args.batch, f"m{salt}-"))
                    salt += 1
                t, c = time.perf_counter(), _cpu()
                for items in batches:
                    sealed = log.seal_many(items, sk)
                log.store.wait_checkpoint()
                rate = args.sustain * args.batch / (time.perf_counter() - t)
                # the sealing workers' CPU time included
                cpu_rate = args.sustain * args.batch / (_cpu() - c)
                # the peer brackets the measurement (once before, once after: the machine's
                # speed drifted by up to 30% within a run on a shared VM), same messages
                after = _sign_rate(peer_msgs, sk64)
                wall_peer, cpu_peer = _bracket(before[0], after[0]), _bracket(before[1], after[1])
                drifts.append(after[0] / before[0])
                msgs = [s.entry for s in sealed[:2000]]
                rates.append(rate)
                peers.append(wall_peer)
                ratios.append(rate / wall_peer)
                cpu_ratios.append(cpu_rate / cpu_peer)
            loads.append(_load())
            rows.append((log.store.size(), rates, peers, ratios, cpu_ratios, drifts))
            print(f"  append at {log.store.size()}: {ratios}", file=sys.stderr)
        lines.append("## Append with signing (`Log.seal_many` with its sealing workers; the peer "
                     "signs on one core)\n")
        lines.append(
            "| entries in the ledger after | seal_many entries/s | Ed25519 sign/s, same "
            "messages (before and after) | ratio (wall clock) | ratio (CPU time, workers "
            "included) | peer after / before |\n"
            "|---:|---:|---:|---:|---:|---:|"
        )
        for size, rates, peers, ratios, cpu_ratios, drifts in rows:
            lines.append(
                f"| {size:,} | {_span(rates)} | {_span(peers)} | {_span(ratios, '{:.2f}')} | "
                f"{_span(cpu_ratios, '{:.2f}')} | {_span(drifts, '{:.2f}')} |"
            )
        first, last = statistics.median(rows[0][3]), statistics.median(rows[-1][3])
        lines.append(
            f"\nFlatness: median ratio at {rows[-1][0]:,} / at {rows[0][0]:,} entries = "
            f"{last / first:.2f}.\n"
        )
        n = log.store.size()
        log.close()

        # -- audit ---------------------------------------------------------------------------
        conn = sqlite3.connect(home / "ledger.db")
        pubs = {
            bytes.fromhex(k.hex()): bytes(p)
            for k, p in conn.execute("SELECT key_id, public_key FROM keys")
        }
        jobs: list[tuple[bytes, bytes, bytes]] = []
        for (data,) in conn.execute(
            "SELECT data FROM entries WHERE type='bundle' ORDER BY idx LIMIT ?",
            (args.verify_sample,),
        ):
            data = bytes(data)
            e = decode_entry(data)
            sig = __import__("base64").b64decode(e.signature)
            jobs.append((pubs[bytes.fromhex(str(e.signer))], signed_part(data, e.fields), sig))
        conn.close()
        shares = [jobs[i::cpus] for i in range(cpus)]
        timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
        env = dict(os.environ, LEDGER_HOME=str(home))
        a_rates, v_rates, a_ratios, rss, v_drifts = [], [], [], [], []
        with ProcessPoolExecutor(max_workers=cpus) as pool:
            list(pool.map(_verify_share, [s[:10] for s in shares]))  # start the workers
            for _ in range(args.reps):
                os.sync()  # as before each measured batch
                v_before = sum(pool.map(_verify_share, shares))
                t = time.perf_counter()
                proc = subprocess.run(
                    [*timer, sys.executable, "-m", "ledger_cli", "audit", "--json"],
                    env=env,
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                a = n / (time.perf_counter() - t)
                assert proc.returncode == 0, proc.stderr
                v_after = sum(pool.map(_verify_share, shares))  # the peer brackets the audit
                v = _bracket(v_before, v_after)
                v_drifts.append(v_after / v_before)
                if timer:
                    rss.append(int(proc.stderr.split()[-1]) / 1024)
                a_rates.append(a)
                v_rates.append(v)
                a_ratios.append(a / v)
                print(f"  audit {a:.0f}/s verify {v:.0f}/s", file=sys.stderr)
        loads.append(_load())
        lines.append(f"## Audit of {n:,} entries\n")
        lines.append(
            f"| `ledger audit` entries/s (subprocess, start-up included) | Ed25519 verify/s summed "
            f"over {cpus} cores (before and after) | ratio | peak RSS MB | peer after / before |"
            "\n|---:|---:|---:|---:|---:|"
        )
        lines.append(
            f"| {_span(a_rates)} | {_span(v_rates)} | {_span(a_ratios, '{:.2f}')} | "
            f"{_span(rss) if rss else 'n/a'} | {_span(v_drifts, '{:.2f}')} |\n"
        )

        _proofs(home, args.reps, args.proofs, lines)
        loads.append(_load())
        lines.append(f"\nLoad average (1/5/15 min) at each phase: {', '.join(loads)}.\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
