"""Start-up of the ``ledger`` command (issue 12): ``ledger --help`` against ``python -c pass``, and
the share of ``ledger verify``'s time spent importing modules.

Per round, in the same run and one after the other (so that load hits all of them alike):

1. ``python -c pass``: the interpreter's own start-up, the peer of every other figure;
2. ``python -c "import typer"``: the floor the CLI framework sets (typer 0.29 loads pydantic only
   when a command's parameters are parsed, so this is not all of typer's share);
3. ``ledger --help`` (goal: under 100 ms) and ``ledger --version``;
4. ``ledger verify 1 --no-gpu --seed 1`` on a small ledger made once in a temporary directory
   (``init``, one node key, ``seal`` of ``bundles/vector_add``): wall time, then the same command
   under ``python -X importtime``: the time spent importing (every top-level import record, the
   function-level imports a command makes on its way included) over that run's wall time
   (goal: under 25%);
5. what the imports cost that run: the same ``ledger verify`` in a child that has already
   imported every module a verify run loads (the list is taken once, from a run) and times
   only the command (``main([...])``): the ``work``. The imports' cost is the command's wall
   time less ``python -c pass`` less that work (medians over the rounds), over the command's
   wall time. Unlike the sum of step 4, it leaves out the imports that run while the process
   waits for nvcc (numpy and the PTX interpreter load beside it, since the runner starts nvcc
   first) and counts the interpreter's clean-up of what was loaded.

The project's own bytecode is compiled first (``python -m compileall ledger verify``): the figures
are those of an installed copy, not of a first run that compiles every module (this environment
sets ``PYTHONDONTWRITEBYTECODE=1``, under which an editable install recompiles on every start).
Wall times are medians and ranges (min-max) over ``--repeat`` rounds; the CPU count and the load
average at start and end are printed: on a shared 2-CPU machine the wall time mostly measures the
other jobs, so read the ratios to ``python -c pass`` taken in the same round.

Run: ``.venv/bin/python bench/bench_startup.py [--repeat 10]``
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

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
LEDGER = str(ROOT / ".venv" / "bin" / "ledger")


def wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, env=env, timeout=600, check=False)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):  # verify exits 1 only when the bundle fails: not expected
        raise SystemExit(f"{argv}: exit {p.returncode}: {p.stderr.decode()[-400:]}")
    return dt


def import_share(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(seconds importing, wall seconds) of one run under ``-X importtime``."""
    t0 = time.perf_counter()
    p = subprocess.run(  # from the checkout's root: ``-m ledger_cli`` imports this checkout
        [PY, "-X", "importtime", *argv], capture_output=True, env=env, timeout=600, check=False,
        cwd=ROOT,
    )
    dt = time.perf_counter() - t0
    total_us = 0
    for line in p.stderr.decode("utf-8", "replace").splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith("  "):  # nested: already in its top-level parent's cumulative time
            continue
        try:
            total_us += int(cumulative)
        except ValueError:  # the header line
            continue
    return total_us / 1e6, dt


LOADED = """
import json, sys
from ledger_cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
"""

PRELOADED = """
import importlib, json, sys, time
for name in json.loads(open(sys.argv[1]).read()):
    try:
        importlib.import_module(name)
    except Exception:  # a module that only imports as part of another (never in the timing)
        pass
from ledger_cli import main
t0 = time.perf_counter()
try:
    main(sys.argv[3:])
except SystemExit:
    pass
with open(sys.argv[2], "w") as f:
    f.write(repr(time.perf_counter() - t0))
"""


def work_alone(argv: list[str], env: dict[str, str], root: Path) -> float:
    """Seconds ``ledger argv`` takes in a process that imported beforehand every module such a
    run loads (``LOADED`` lists them once)."""
    mods, took = root / "modules.json", root / "work.txt"
    if not mods.is_file():
        subprocess.run([PY, "-c", LOADED, str(mods), *argv], env=env, cwd=ROOT,
                       capture_output=True, timeout=600, check=True)
    subprocess.run([PY, "-c", PRELOADED, str(mods), str(took), *argv], env=env, cwd=ROOT,
                   capture_output=True, timeout=600, check=True)
    return float(took.read_text())


def make_ledger(root: Path, env: dict[str, str]) -> None:
    bundle = root / "vector_add"
    shutil.copytree(
        ROOT / "bundles" / "vector_add", bundle, ignore=shutil.ignore_patterns("ledger-receipt*")
    )
    for args in (
        ["init", "--origin", "bench.example/startup"],
        ["keys", "new", "alice"],
        ["keys", "register", "alice"],
        ["seal", str(bundle), "--no-gpu", "--seed", "1"],
    ):
        subprocess.run([LEDGER, *args, "--json"], env=env, capture_output=True, check=True)


def fmt(xs: list[float], scale: float = 1000.0, unit: str = "ms") -> str:
    return (
        f"{statistics.median(xs) * scale:.0f} {unit} "
        f"({min(xs) * scale:.0f}-{max(xs) * scale:.0f})"
    )


def ratio(xs: list[float], peers: list[float]) -> str:
    rs = [x / p for x, p in zip(xs, peers, strict=True)]
    return f"{statistics.median(rs):.1f}x ({min(rs):.1f}-{max(rs):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    subprocess.run([PY, "-m", "compileall", "-q", "ledger", "verify"], cwd=ROOT, check=True,
                   capture_output=True)
    print(f"machine: {os.cpu_count()} CPUs; load average at start {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as d:
        env = dict(os.environ, LEDGER_HOME=str(Path(d) / "home"))
        make_ledger(Path(d), env)
        runs: dict[str, list[float]] = {
            k: [] for k in ("pass", "typer", "help", "version", "verify")
        }
        shares: list[float] = []
        imports: list[float] = []
        works: list[float] = []
        for _ in range(args.repeat):
            runs["pass"].append(wall([PY, "-c", "pass"], env))
            runs["typer"].append(wall([PY, "-c", "import typer"], env))
            runs["help"].append(wall([LEDGER, "--help"], env))
            runs["version"].append(wall([LEDGER, "--version"], env))
            verify = ["verify", "1", "--no-gpu", "--seed", "1"]
            runs["verify"].append(wall([LEDGER, *verify], env))
            imp, dt = import_share(["-m", "ledger_cli", *verify], env)
            imports.append(imp)
            shares.append(imp / dt)
            works.append(work_alone(verify, env, Path(d)))
        print(
            f"| command | wall, median (min-max) over {args.repeat} | ratio to `python -c pass` |"
        )
        print("|---|---|---|")
        labels = {
            "pass": "`python -c pass`",
            "typer": '`python -c "import typer"`',
            "help": "`ledger --help`",
            "version": "`ledger --version`",
            "verify": "`ledger verify 1 --no-gpu --seed 1` (1 bundle entry)",
        }
        for key, label in labels.items():
            print(f"| {label} | {fmt(runs[key])} | {ratio(runs[key], runs['pass'])} |")
        print(
            f"| `ledger verify` under `-X importtime`: importing | {fmt(imports)} | share of "
            f"that run's wall time {statistics.median(shares):.0%} "
            f"({min(shares):.0%}-{max(shares):.0%}) |"
        )
        # medians of each part, not a difference per round: one round's difference of three
        # noisy times ranged from -9% to 47% on the shared 2-CPU machine
        med = {k: statistics.median(v) for k, v in runs.items()}
        cost = med["verify"] - med["pass"] - statistics.median(works)
        print(
            "| `ledger verify` in a process with every module it loads already imported (the "
            f"command alone) | {fmt(works)} | |"
        )
        print(
            "| `ledger verify`: what importing costs its wall time (median wall - median "
            "`python -c pass` - median of the command alone) | "
            f"{cost * 1000:.0f} ms | {cost / med['verify']:.0%} of the median wall |"
        )
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
