"""Seal throughput on PostgreSQL against SQLite, measured in the same run (issue 13).

For each backend and each writer count (1 and 4 processes) a fresh ledger is built with one
registered node key; each writer process prepares its bundles first (outside the timing), waits
for a common start, then seals them one transaction each, exactly as ``ledger seal`` appends each
bundle (``Log.seal``: size and right edge read inside the transaction, chain, sign, entry, blobs,
tree hashes, a signed checkpoint, COMMIT). Throughput is entries committed per second of wall time
from the start to the last writer's end. The backends run interleaved, ``--repeat`` times, and
the ratio PostgreSQL/SQLite is taken within each round.

* SQLite: the ledger's file in one LEDGER_HOME (WAL, ``synchronous=FULL``); its writers queue on
  the home's ``write.lock`` and SQLite's write lock.
* PostgreSQL: a real server (Debian's binaries) started for the run on a temporary data directory
  and loopback port (``tests.helpers.postgres.PgServer``, the server's durable defaults:
  ``fsync`` on, ``synchronous_commit`` on). Each writer has its own LEDGER_HOME naming the same
  database, as processes on different hosts would; the database's advisory lock orders them.

The PostgreSQL server runs on the same machine and cores as the writers: the figures compare the
two backends on one host, not a dedicated database server.

usage: python bench/bench_postgres.py [--per-writer 150] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
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
from ledger.keys import load_node_secret  # noqa: E402
from ledger.log import Log  # noqa: E402
from tests.helpers.ledgers import add_node, fake_fields  # noqa: E402
from tests.helpers.postgres import PgServer  # noqa: E402


def worker(home: Path, prefix: str, count: int) -> None:
    """One writer: prepare ``count`` bundles, print ``ready``, wait for a line on stdin, seal them
    one transaction each, print ``done <seconds>``."""
    log = Log.open(home)
    sk, _ = load_node_secret(log.keydir, "node")
    items = [
        (
            Bundle.from_files(
                {
                    "contract.yaml": f"metadata: {{version: '1.0.0', description: {prefix}{i}}}\n"
                    .encode(),
                    "k.ptx": f"// {prefix}{i}\n".encode() * 40,
                    "p.lean": b"theorem t : 1 = 1 := rfl\n",
                    "s.fut": b"entry main (x: i32) = x\n",
                }
            ),
            fake_fields(f"{prefix}{i}"),
        )
        for i in range(count)
    ]
    print("ready", flush=True)
    sys.stdin.readline()
    t = time.perf_counter()
    for bundle, fields in items:
        log.seal(bundle, fields, sk)
    print(f"done {time.perf_counter() - t:.6f}", flush=True)
    log.close()


def one_round(homes: list[Path], per_writer: int, tag: str) -> float:
    """Run one writer per home; entries per second over the whole wall time."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(h), f"{tag}w{i}-", str(per_writer)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        )
        for i, h in enumerate(homes)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, _ = p.communicate(timeout=3600)
        if p.returncode != 0 or "done" not in out:
            raise SystemExit(f"writer failed ({p.returncode}): {out}")
    wall = time.perf_counter() - t
    return len(homes) * per_writer / wall


def fresh(kind: str, root: Path, writers: int, pg: PgServer | None) -> list[Path]:
    home = root / f"{kind}-home"
    url = pg.new_database() if (kind == "postgresql" and pg is not None) else None
    log = Log.init(home, "bench.example/log", url)
    add_node(log, "node")
    log.close()
    if kind == "sqlite":
        return [home] * writers
    homes = [home]
    for i in range(1, writers):
        other = root / f"{kind}-home-{i}"
        shutil.copytree(home, other, symlinks=True)
        homes.append(other)
    return homes


def check(homes: list[Path], expect: int) -> None:
    from ledger.audit import audit

    log = Log.open(homes[0])
    res = audit(log.store, log.verifier)
    log.close()
    if not res.ok or res.size != expect:
        raise SystemExit(f"audit after the run: ok={res.ok} size={res.size} want {expect}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-writer", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    load_before = os.getloadavg()
    rates: dict[tuple[str, int], list[float]] = {}
    ratios: dict[int, list[float]] = {1: [], 4: []}
    with PgServer(fsync=True) as pg:
        for r in range(args.repeat):
            for writers in (1, 4):
                got = {}
                order = ("sqlite", "postgresql") if r % 2 == 0 else ("postgresql", "sqlite")
                for kind in order:
                    root = Path(tempfile.mkdtemp(prefix=f"bench-pg-{kind}-"))
                    try:
                        homes = fresh(kind, root, writers, pg)
                        rate = one_round(homes, args.per_writer, f"r{r}")
                        check(homes, 1 + writers * args.per_writer)
                    finally:
                        shutil.rmtree(root, ignore_errors=True)
                    got[kind] = rate
                    rates.setdefault((kind, writers), []).append(rate)
                    print(f"round {r} writers {writers} {kind}: {rate:.0f} seals/s",
                          file=sys.stderr)
                ratios[writers].append(got["postgresql"] / got["sqlite"])
    load_after = os.getloadavg()

    def rng(xs: list[float], fmt: str = "{:.0f}") -> str:
        return (f"{fmt.format(statistics.median(xs))} "
                f"({fmt.format(min(xs))}-{fmt.format(max(xs))})")

    print(f"\nCommand: `.venv/bin/python bench/bench_postgres.py --per-writer {args.per_writer} "
          f"--repeat {args.repeat}`  ")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, PostgreSQL from {pg.bindir}; load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| writers | SQLite seals/s | PostgreSQL seals/s | PostgreSQL / SQLite |")
    print("|---|---|---|---|")
    for w in (1, 4):
        print(f"| {w} | {rng(rates[('sqlite', w)])} | {rng(rates[('postgresql', w)])} | "
              f"{rng(ratios[w], '{:.2f}')} |")
    print(f"\nmedian (min-max) over {args.repeat} rounds of {args.per_writer} seals per writer")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    else:
        main()
