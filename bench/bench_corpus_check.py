"""``ledger check`` time per bundle over the corpus of real kernels (corpus/real/, issue 32), as a
distribution (median, p90, max), against a previous release in the same run.

Each round times, for every bundle, one ``ledger check DIR --json --seed S`` of the current tree
and one of the baseline (a ``git worktree`` of ``--baseline REV`` under a temporary directory,
run by the same Python and virtual environment with ``PYTHONPATH`` set to that tree, so only
the code differs), the two in alternating order (current first in even rounds). Wall time of the
subprocess, as a user runs it. The compiled inner loops (``ledger.core._native``) are copied into
the baseline tree when their C source is the same at both revisions, so neither side runs the
pure-Python twins. Per side, the per-bundle median over the rounds is taken, and the
distribution over bundles is written as median / p90 / max, with the ratio of the medians.

Run: ``.venv/bin/python bench/bench_corpus_check.py [--baseline eeade7a] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus" / "real"
LEDGER_MAIN = "import sys; from ledger_cli import main; sys.exit(main())"


def p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


def run_check(tree: Path, bundle: Path, seed: int) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", LEDGER_MAIN, "check", str(bundle), "--json",
                          "--seed", str(seed)], cwd=tree, env=env, capture_output=True, text=True,
                         check=False)
    wall = time.perf_counter() - t0
    verdict = "error"
    if res.returncode in (0, 1):
        import json

        verdict = json.loads(res.stdout).get("verdict", "?")
    return wall, verdict


def prepare_baseline(rev: str, where: Path) -> Path:
    tree = where / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                   check=True, capture_output=True)
    for so in ROOT.glob("ledger/**/*.so"):
        rel = so.relative_to(ROOT)
        src = list(so.parent.glob(so.name.split(".")[0] + ".c"))
        same = all((tree / s.relative_to(ROOT)).exists()
                   and (tree / s.relative_to(ROOT)).read_bytes() == s.read_bytes() for s in src)
        if same and not (tree / rel).exists():
            shutil.copy2(so, tree / rel)
    return tree


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="eeade7a", help="the previous release (a git revision)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    bundles = sorted(p.parent for p in CORPUS.glob("*/contract.yaml"))
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.baseline],
                         check=True, capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()
    load = [Path("/proc/loadavg").read_text().split()[:3]]
    start = datetime.datetime.now(datetime.UTC)
    times: dict[str, dict[str, list[float]]] = {"current": {}, "baseline": {}}
    verdicts: dict[str, dict[str, str]] = {"current": {}, "baseline": {}}
    with tempfile.TemporaryDirectory() as tmp:
        base = prepare_baseline(rev, Path(tmp))
        try:
            trees = {"current": ROOT, "baseline": base}
            for r in range(args.repeat):
                order = ["current", "baseline"] if r % 2 == 0 else ["baseline", "current"]
                for b in bundles:
                    for side in order:
                        wall, verdict = run_check(trees[side], b, args.seed)
                        times[side].setdefault(b.name, []).append(wall)
                        verdicts[side][b.name] = verdict
                load.append(Path("/proc/loadavg").read_text().split()[:3])
                print(f"round {r + 1}/{args.repeat} done", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           check=False, capture_output=True)
    end = datetime.datetime.now(datetime.UTC)
    med = {side: {n: statistics.median(v) for n, v in t.items()} for side, t in times.items()}
    print(f"command: .venv/bin/python bench/bench_corpus_check.py --baseline {args.baseline} "
          f"--repeat {args.repeat} --seed {args.seed}")
    print(f"trees: current {head} (+ working tree), baseline {rev}")
    print(f"machine: nproc {os.cpu_count()}, {platform.machine()}, "
          f"{platform.processor() or platform.platform()}")
    print(f"load (1/5/15 min) before and after each round: {' | '.join(' '.join(x) for x in load)}")
    print(f"date: {start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC")
    print()
    print("| bundle | current s (median of rounds) | baseline s | ratio | verdict now / baseline |")
    print("|---|---:|---:|---:|---|")
    for b in bundles:
        c, p = med["current"][b.name], med["baseline"][b.name]
        print(f"| `{b.name}` | {c:.2f} | {p:.2f} | {c / p:.2f} | {verdicts['current'][b.name]} / "
              f"{verdicts['baseline'][b.name]} |")
    print()
    print("| side | median s | p90 s | max s |")
    print("|---|---:|---:|---:|")
    for side in ("current", "baseline"):
        xs = list(med[side].values())
        print(f"| {side} | {statistics.median(xs):.2f} | {p90(xs):.2f} | {max(xs):.2f} |")
    c_all, p_all = list(med["current"].values()), list(med["baseline"].values())
    ratio = statistics.median(c_all) / statistics.median(p_all)
    print(f"\nratio current / baseline: median {ratio:.2f}, "
          f"p90 {p90(c_all) / p90(p_all):.2f}, max {max(c_all) / max(p_all):.2f}; "
          f"bundles over 10 s (current): {sum(x > 10 for x in c_all)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
