"""Ledger benchmarks (issue 2): append rate, proofs and audit at scale, one seal.

Each figure is compared with a peer measured in the same run:
* append: signed bundle entries per second in one batch (``Log.seal_many``: canonical JSON,
  Ed25519 signing, SHA-256 tree hashes, SQLite inserts) against pymerkle 7.0 ``SqliteTree``
  appending the same entry bytes (no signing);
* proofs: inclusion and consistency proofs from the store of an N-entry ledger against
  pymerkle 7.0 ``SqliteTree.prove_inclusion`` / ``prove_consistency`` at the same size;
* audit: entries per second and peak RSS of ``ledger audit`` (a subprocess), against the raw
  speed of streaming the same entries out of SQLite and SHA-256-hashing them;
* seal: the ledger's own time for one seal of bundles/vector_add (read, hash, sign, append,
  receipt), external tools and checks excluded.

usage: python bench/bench_ledger.py [--size N] [--out docs/bench/ledger.md]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.core.bundle import Bundle  # noqa: E402
from ledger.log import Log  # noqa: E402
from tests.helpers.ledgers import add_node, fake_fields  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from rounds import machine, mmm  # noqa: E402


def _bundles(n: int, salt: str) -> list[tuple[Bundle, dict[str, object]]]:
    return [
        (
            Bundle.from_files(
                {
                    "contract.yaml": f"{salt}{i}".encode(),
                    "k.ptx": b"p",
                    "p.lean": b"l",
                    "s.fut": b"f",
                }
            ),
            fake_fields(str(i)),
        )
        for i in range(n)
    ]


def build(home: Path, size: int, batch: int = 20_000) -> tuple[Log, list[float], list[bytes]]:
    """The ledger, each batch's entries per second, and the first 50,000 entries' bytes."""
    log = Log.init(home, "bench.example/log")
    sk = add_node(log)
    entries: list[bytes] = []
    rates: list[float] = []
    done = 1
    while done < size:
        n = min(batch, size - done)
        items = _bundles(n, f"b{done}-")
        t = time.perf_counter()
        sealed = log.seal_many(items, sk)
        rates.append(n / (time.perf_counter() - t))
        if len(entries) < 50_000:
            entries.extend(s.entry for s in sealed)
        done += n
        print(f"  built {done}/{size}", file=sys.stderr)
    return log, rates, entries


def pymerkle_tree(path: Path, entries: list[bytes], size: int) -> tuple[object, list[float]]:
    """The pymerkle tree of ``size`` entries and each 50,000-entry chunk's entries per second."""
    from pymerkle import SqliteTree

    tree = SqliteTree(str(path))
    chunk = entries[:50_000]
    rates: list[float] = []
    appended = 0
    while appended < size:
        n = min(len(chunk), size - appended)
        t = time.perf_counter()
        tree.append_entries(chunk[:n])
        rates.append(n / (time.perf_counter() - t))
        appended += n
    return tree, rates


def timed(fn, reps: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--proofs", type=int, default=500)
    ap.add_argument("--peer-proofs", type=int, default=20)
    ap.add_argument("--out", default=str(REPO / "docs/bench/ledger.md"))
    args = ap.parse_args()
    rng = random.Random(1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    lines = [
        "# Ledger benchmarks\n",
        f"Command: `.venv/bin/python bench/bench_ledger.py --size {args.size}`  ",
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.2f} at start\n",
    ]
    try:
        print("building ledger", file=sys.stderr)
        log, rates, entries = build(tmp / "home", args.size)
        print("building pymerkle SqliteTree", file=sys.stderr)
        tree, peer_rates = pymerkle_tree(tmp / "pymerkle.db", entries, args.size)
        lines.append("## Append (batches of 20,000, the sealing workers on every core)\n")
        lines.append("| what | entries/s per batch, min / median / max |\n|---|---:|")
        lines.append(
            "| ledger `seal_many`: canonical JSON + Ed25519 sign + tree + SQLite | "
            f"{mmm(rates, '{:,.0f}')} |"
        )
        lines.append(
            "| pymerkle 7.0 SqliteTree `append_entries` (no signing), chunks of 50,000 | "
            f"{mmm(peer_rates, '{:,.0f}')} |"
        )
        ratio = statistics.median(rates) / statistics.median(peer_rates)
        lines.append(f"\nratio of the medians ledger/pymerkle: {ratio:.2f}\n")

        n = args.size
        store = log.store
        idx = [rng.randrange(n) for _ in range(args.proofs)]
        olds = [rng.randrange(1, n) for _ in range(args.proofs)]
        inc = timed(lambda: store.inclusion_proof(idx.pop(), n), args.proofs)
        con = timed(lambda: store.consistency_proof(olds.pop(), n), args.proofs)
        pidx = [rng.randrange(n) for _ in range(args.peer_proofs)]
        polds = [rng.randrange(1, n) for _ in range(args.peer_proofs)]
        pinc = timed(lambda: tree.prove_inclusion(pidx.pop() + 1, n), args.peer_proofs)  # type: ignore[attr-defined]
        pcon = timed(lambda: tree.prove_consistency(polds.pop(), n), args.peer_proofs)  # type: ignore[attr-defined]
        ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
        lines.append(f"## Proofs in a {n:,}-entry ledger\n")
        lines.append(
            "| proof | ledger median | pymerkle SqliteTree median | ratio |\n|---|---:|---:|---:|"
        )
        lines.append(
            f"| inclusion | {ms(inc):.3f} ms | {ms(pinc):.1f} ms | {ms(pinc) / ms(inc):,.0f}x |"
        )
        lines.append(
            f"| consistency | {ms(con):.3f} ms | {ms(pcon):.1f} ms | {ms(pcon) / ms(con):,.0f}x |"
        )
        lines.append(
            f"\n({args.proofs} ledger proofs, {args.peer_proofs} pymerkle proofs, "
            "random indices; p99 ledger inclusion "
            f"{sorted(inc)[int(len(inc) * 0.99) - 1] * 1000:.3f} ms)\n"
        )
        log.close()

        print("auditing", file=sys.stderr)
        env = dict(os.environ, LEDGER_HOME=str(tmp / "home"))
        # Peak RSS through GNU time: a child forked from this (large) benchmark process would
        # carry the parent's resident pages into its ru_maxrss, which survives exec on Linux.
        timer = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
        t = time.perf_counter()
        proc = subprocess.run(
            [*timer, sys.executable, "-m", "ledger_cli", "audit", "--json"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        audit_s = time.perf_counter() - t
        peak_text = f"{int(proc.stderr.split()[-1]) / 1024:.0f} MB" if timer else "n/a"
        assert proc.returncode == 0, proc.stderr
        import sqlite3

        conn = sqlite3.connect(tmp / "home" / "ledger.db")
        t = time.perf_counter()
        for (data,) in conn.execute("SELECT data FROM entries ORDER BY idx"):
            hashlib.sha256(b"\x00" + data).digest()
        raw_s = time.perf_counter() - t
        lines.append(f"## Audit of {n:,} entries\n")
        lines.append("| what | seconds | entries/s | peak RSS |\n|---|---:|---:|---:|")
        lines.append(
            f"| `ledger audit` (every leaf, link, signature, subtree hash, checkpoint, "
            f"blob) | {audit_s:.1f} | {n / audit_s:,.0f} | {peak_text} |"
        )
        lines.append(
            f"| peer: stream entries from SQLite + SHA-256 only | {raw_s:.1f} | "
            f"{n / raw_s:,.0f} | |"
        )
        lines.append(f"\nratio audit/raw stream: {raw_s / audit_s:.2f}\n")

        print("one seal", file=sys.stderr)
        from ledger.keys import load_node_secret
        from ledger_cli import wiring
        from verify.report import Report, passed

        home2 = tmp / "seal"
        log2 = Log.init(home2, "bench.example/seal")
        add_node(log2)
        sk, _ = load_node_secret(log2.keydir, "node")
        times = []
        for i in range(20):
            d = tmp / f"b{i}"
            shutil.copytree(
                REPO / "bundles/vector_add",
                d,
                ignore=shutil.ignore_patterns("ledger-receipt*.json"),
            )
            (d / "salt.txt").write_text(str(i))
            t = time.perf_counter()
            b = Bundle.from_dir(d)
            rep = Report(b.digest.hex(), (passed("integrity.manifest", "bench"),))
            wiring.seal_checked(log2, [(d, b, rep)], sk, write_receipts=True)
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(
            ["b3sum", "--no-names", *(str(p) for p in sorted((tmp / "b0").iterdir()))],
            capture_output=True,
            check=False,
        )
        b3 = time.perf_counter() - t
        lines.append("## One seal of bundles/vector_add (the ledger's own time)\n")
        lines.append(
            f"median {statistics.median(times) * 1000:.1f} ms, max "
            f"{max(times) * 1000:.1f} ms over 20 seals (read + BLAKE3 + manifest + "
            "contract fields + sign + append + checkpoint + receipt; checks excluded). "
            f"Peer: one `b3sum` process over the same files: {b3 * 1000:.1f} ms.\n"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
