"""What the verifier-chosen sizes and fresh seeds (issue 15) add to ``ledger check``.

Per example bundle, in the same run and alternating so that load hits both alike:

1. the ``falsify.*`` group in process (``verify.falsify.run``, interpreter) with
   ``Options.extend_sizes=False`` (the peer: the author's sizes at the contract's seeds only, as
   before issue 15) and with the chosen sizes (the default), at a fixed run seed and at fresh
   seeds; the difference is the added time;
2. ``ledger check bundles/<k> --json --no-gpu`` as a user runs it (a fresh process, every
   check group, ptxas, nvcc), with the chosen sizes: the issue's target is < 2 s per bundle.
   Wall time, and the CPU time of the process and its children (on a 2-CPU machine shared with
   other jobs the wall time mostly measures them).

Ranges (min-max) over ``--repeat`` rounds; the machine's CPU count and load average are printed.
The project's bytecode is compiled first (``python -m compileall ledger verify``), so that the
``ledger check`` figure is an installed copy's, not a first run's that compiles every module (this
environment sets ``PYTHONDONTWRITEBYTECODE=1``; an editable install then recompiles on each start).

Run: ``.venv/bin/python bench/bench_sizes.py [--repeat 5] [--no-cli]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger.core.bundle import Bundle  # noqa: E402
from verify import falsify  # noqa: E402
from verify.context import Context, Options  # noqa: E402
from verify.contract import load_contract  # noqa: E402


def falsify_time(bundle: Bundle, options: Options) -> tuple[float, int, list[str]]:
    """CPU seconds of the falsify group (wall time on a shared machine mostly measures the
    other jobs; one process, one thread: CPU time is what a quiet machine's wall time would be)."""
    ctx = Context(bundle, options)
    ctx.contract = load_contract(bundle.file("contract.yaml"))
    t0 = time.process_time()
    checks = falsify.run(ctx)
    dt = time.process_time() - t0
    launches = 0
    for c in checks:
        if "; chosen " in c.detail:
            listed = c.detail.split("; chosen ", 1)[1].split(" at seed", 1)[0]
            launches += listed.count(",") + 1 if "=(" not in listed else listed.count("(") - 1
    return dt, launches, [c.status for c in checks]


def cli_time(bundle_dir: Path) -> tuple[float, float, str]:
    """Wall seconds of ``ledger check`` and its children's CPU seconds (user + system)."""
    before = os.times()
    t0 = time.perf_counter()
    p = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ledger"), "check", str(bundle_dir), "--json", "--no-gpu"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    dt = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    verdict = f"exit {p.returncode}, no report"
    if '"verdict": "' in p.stdout:
        verdict = p.stdout.split('"verdict": "', 1)[1].split('"', 1)[0]
    return dt, cpu, verdict


def rng(xs: list[float]) -> str:
    return f"{min(xs):.2f}-{max(xs):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-cli", action="store_true", help="skip the ledger check subprocess runs")
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "ledger", "verify"], cwd=ROOT,
                   check=True, capture_output=True)
    print(f"machine: {os.cpu_count()} CPUs; load average at start {os.getloadavg()}")
    dirs = sorted(p for p in (ROOT / "bundles").iterdir() if (p / "contract.yaml").is_file())
    print(
        "| bundle | falsify CPU s, author sizes only | with chosen sizes, seed 1 | fresh seeds | "
        "added | chosen launches | `ledger check` wall s | its CPU s | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for d in dirs:
        bundle = Bundle.from_dir(d)
        off: list[float] = []
        on: list[float] = []
        fresh: list[float] = []
        cli: list[float] = []
        cli_cpu: list[float] = []
        launches = 0
        verdicts: set[str] = set()
        statuses: set[str] = set()
        for _ in range(args.repeat):
            t, _, st = falsify_time(bundle, Options(use_gpu=False, seed=1, extend_sizes=False))
            off.append(t)
            statuses |= set(st)
            t, launches, st = falsify_time(bundle, Options(use_gpu=False, seed=1))
            on.append(t)
            statuses |= set(st)
            t, _, st = falsify_time(bundle, Options(use_gpu=False))
            fresh.append(t)
            statuses |= set(st)
            if not args.no_cli:
                t, cpu, verdict = cli_time(d)
                verdicts.add(verdict)
                cli.append(t)
                cli_cpu.append(cpu)
        added = [b - a for a, b in zip(off, on, strict=True)]
        print(
            f"| {d.name} | {rng(off)} | {rng(on)} | {rng(fresh)} | {rng(added)} | {launches} | "
            f"{rng(cli) if cli else 'not run'} | {rng(cli_cpu) if cli else 'not run'} | "
            f"{'/'.join(sorted(verdicts)) or 'not run'} |"
            + ("" if statuses <= {"passed"} else f" falsify statuses {sorted(statuses)}")
        )
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
