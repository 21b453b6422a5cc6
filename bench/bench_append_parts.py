"""Where `Log.seal_many`'s time goes (issue 12: append at 0.6 of the signing rate), in one run.

1. **Threads and the GIL.** libsodium's ``crypto_sign`` on one thread; on two threads at once;
   and on one thread while another thread runs pure Python. The third is what a signing thread
   beside ``seal_many``'s own Python work would get: each call must take the GIL back, which a
   busy Python thread hands over only every switch interval (5 ms).
2. **The bound without signatures.** ``seal_many`` of ``--batch`` entries with its one signing
   call (``ledger.core.native.sign_many``, as ``ledger.core.entries`` holds it) replaced by
   constant 64-byte
   signatures, against real signing
   of the same entry bytes timed just before: the ratio ``seal_many`` could reach if signing
   cost nothing.
   Then the same batch, signatures real, on this thread alone (``workers=0``) and with the
   forked sealing workers (``ledger/sealers.py``, one per CPU), alternating in the same run.
3. **SQLite's share.** The time in ``Writer.flush`` (the batched ``executemany`` inserts) per
   entry, at the ledger size reached after the fill (``--fill``) and, with ``--ledger DIR``, on an
   existing ledger (e.g. one of 10^6 entries left by ``bench_limits.py``), to show how the
   inserts grow with the log.
4. **What a batch writes.** The WAL frames one batch commits (automatic checkpoints held off for
   that batch, then a checkpoint of it timed), in KiB per entry, at both sizes: the entries
   append at the end of their table, and the leaf-hash index, the digest index and the blobs
   are keyed by part first (``ledger/store/sqlite.py``, "Parts"), so a batch dirties only the newest
   part's pages of them; keyed by digest alone (before migration 2) every insert dirtied a
   random page of each once they outgrew a batch.

Each part is repeated ``--reps`` times; the output gives every repetition (min / median / max)
and the load average.

    .venv/bin/python bench/bench_append_parts.py [--fill 30000] [--batch 10000] [--reps 3]
        [--ledger DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import nacl.bindings  # noqa: E402
import nacl.signing  # noqa: E402

from bench.bench_ledger import _bundles  # noqa: E402
from ledger import sealers  # noqa: E402
from ledger.core import entries as entries_mod  # noqa: E402
from ledger.keys import load_node_secret  # noqa: E402
from ledger.log import Log  # noqa: E402
from ledger.store import writer as store_mod  # noqa: E402
from tests.helpers.ledgers import add_node  # noqa: E402


def _span(xs: list[float], fmt: str = "{:,.0f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def wal_written(
    lg: Log, key: nacl.signing.SigningKey, salt: str, n: int = 10_000
) -> tuple[float, float]:
    """(KiB of WAL frames per entry that one batch of ``n`` commits, seconds to checkpoint them)"""
    conn = lg.store.conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    try:
        lg.seal_many(_bundles(n, salt), key)
        t = time.perf_counter()
        _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        spent = time.perf_counter() - t
    finally:
        conn.execute("PRAGMA wal_autocheckpoint=1000")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    return frames * page / n / 1024, spent


def gil(n: int) -> tuple[float, float, float]:
    """Signatures/s: one thread; two threads at once; one thread beside a pure-Python one."""
    sk = entries_mod.secret_key64(nacl.signing.SigningKey.generate())
    msg = b"x" * 600

    def sign(k: int) -> None:
        for _ in range(k):
            nacl.bindings.crypto_sign(msg, sk)

    def timed(threads: list[threading.Thread]) -> float:
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return n / (time.perf_counter() - t)

    one = timed([threading.Thread(target=sign, args=(n,))])
    two = timed([threading.Thread(target=sign, args=(n // 2,)) for _ in range(2)])
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    k = max(50, n // 50)  # it is slow: fewer calls
    t = time.perf_counter()
    sign(k)
    beside = k / (time.perf_counter() - t)
    stop.set()
    spinner.join()
    return one, two, beside


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fill", type=int, default=30_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ledger", type=Path, help="also measure SQLite's share on this ledger")
    args = ap.parse_args()
    print(f"# seal_many parts, {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} CPUs, "
          f"load {_load()}\n")

    rows = [gil(8000) for _ in range(args.reps)]
    print("| signing | signatures/s (min / median / max) |\n|---|---:|")
    for label, k in (("one thread", 0), ("two threads at once", 1),
                     ("one thread beside a pure-Python thread", 2)):
        print(f"| {label} | {_span([r[k] for r in rows])} |")

    home = Path(tempfile.mkdtemp(prefix="bench-append-")) / "home"
    log = Log.init(home, "bench.example/log")
    sk = add_node(log)
    for done in range(0, args.fill, 20_000):
        log.seal_many(_bundles(min(20_000, args.fill - done), f"f{done}-"), sk)
    sk64 = bytes(sk) + bytes(sk.verify_key)
    msgs = [log.store.entry(i) for i in range(1, 2001)]
    real = nacl.bindings.crypto_sign
    real_many = entries_mod.sign_many
    spent = [0.0]
    flush = store_mod.Writer.flush

    def timed_flush(self: store_mod.Writer) -> None:
        t = time.perf_counter()
        flush(self)
        spent[0] += time.perf_counter() - t

    store_mod.Writer.flush = timed_flush  # type: ignore[method-assign]

    def batch(
        lg: Log, key: nacl.signing.SigningKey, salt: str, free: bool, workers: int | None = 0
    ) -> tuple[float, float]:
        """(entries/s of one seal_many, µs per entry in Writer.flush)"""
        spent[0] = 0.0
        items = _bundles(args.batch, salt)
        if free:  # the one signing call of the entries (ledger.core.native.sign_many)
            entries_mod.sign_many = lambda k, ms: [b"\1" * 64] * len(ms)
        try:
            t = time.perf_counter()
            lg.seal_many(items, key, workers=workers)
            rate = args.batch / (time.perf_counter() - t)
        finally:
            entries_mod.sign_many = real_many
        return rate, spent[0] / args.batch * 1e6

    def sign_rate() -> float:
        t = time.perf_counter()
        for m in msgs * 5:
            real(m, sk64)
        return len(msgs) * 5 / (time.perf_counter() - t)

    free, signed, pooled, flushes = [], [], [], []
    for r in range(args.reps):
        peer = sign_rate()
        rate, _ = batch(log, sk, f"free{r}-", True)
        free.append(rate / peer)
        peer = sign_rate()
        rate, fl = batch(log, sk, f"real{r}-", False)
        signed.append(rate / peer)
        flushes.append(fl)
        peer = sign_rate()
        rate, _ = batch(log, sk, f"pool{r}-", False, None)
        pooled.append(rate / peer)
    print(f"\nLedger of {log.store.size():,} entries after the runs, batches of {args.batch:,}, "
          f"load {_load()}:\n")
    print("| what | min / median / max |\n|---|---:|")
    print(f"| seal_many / signing rate, one thread, signatures free | {_span(free, '{:.2f}')} |")
    print(f"| seal_many / signing rate, one thread, signatures real | {_span(signed, '{:.2f}')} |")
    print(f"| seal_many / signing rate, sealing workers ({sealers.worker_count(args.batch)}), "
          f"signatures real | {_span(pooled, '{:.2f}')} |")
    print(f"| Writer.flush (SQLite inserts), µs per entry | {_span(flushes, '{:.1f}')} |")
    wal = [wal_written(log, sk, f"wal{r}-") for r in range(args.reps)]
    print(f"| WAL written by one batch at {log.store.size():,} entries, KiB per entry / "
          f"checkpoint s | {_span([w[0] for w in wal], '{:.1f}')} / "
          f"{_span([w[1] for w in wal], '{:.2f}')} |")
    log.close()

    if args.ledger is not None:
        big = Log.open(args.ledger)
        key, _ = load_node_secret(big.keydir, "node")
        got = [batch(big, key, f"big{r}-{time.time()}", False)[1] for r in range(args.reps)]
        print(f"| Writer.flush on {args.ledger} ({big.store.size():,} entries after), µs per "
              f"entry | {_span(got, '{:.1f}')} |")
        wal = [wal_written(big, key, f"bigwal{r}-{time.time()}") for r in range(args.reps)]
        print(f"| WAL written by one batch at {big.store.size():,} entries, KiB per entry / "
              f"checkpoint s | {_span([w[0] for w in wal], '{:.1f}')} / "
              f"{_span([w[1] for w in wal], '{:.2f}')} |")
        big.close()
    print(f"\nload average at end {_load()}")


if __name__ == "__main__":
    main()
