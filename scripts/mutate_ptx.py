"""The PTX mutation campaign of issue 10: every single-site mutant of every bundled kernel's PTX
(verify/ptxsim/mutate.py: drop a barrier, drop a cp.async wait, flip a bound compare, halve a
shuffle offset, add -> sub, drop a store) that ptxas accepts is judged by the kernel's
falsification tests on the PTX interpreter; the kill rate and every survivor are written to
``--out`` (markdown) and ``--json``.

Usage (about 5 to 15 minutes on one core; the CI suite runs a bounded slice,
tests/campaigns/test_ptx_mutations.py):

    .venv/bin/python scripts/mutate_ptx.py --out docs/bench/ptx-mutation.md \\
        --json docs/bench/ptx-mutation.json

Exit status: 0 kill rate >= --min-rate (default 0.95); 1 below it; 2 bad arguments; 3 ptxas not
found (the campaign counts only mutants ptxas accepts, so it does not run without it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify.ptxsim.mutate import OPERATORS, campaign, kill_rate  # noqa: E402


def find_ptxas() -> str | None:
    cand = shutil.which("ptxas") or "/usr/local/cuda-13.0/bin/ptxas"
    return cand if Path(cand).is_file() else None


def killer(detail: str) -> str:
    """The finding kind in a failed check's detail (``race [race_free/PO7]: ...``), or the
    value comparison."""
    m = re.search(r"(\w+) \[\w+/PO\d\]", detail)
    if m:
        return m.group(1)
    if "outside" in detail:
        return "values outside the tolerance"
    return "other: " + detail.split(": ")[-1][:60]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundles", type=Path, default=ROOT / "bundles")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--only", action="append", default=[], help="bundle name (repeatable)")
    ap.add_argument("--select", type=int, default=None,
                    help="keep every N-th mutant of each operator (barrier/wait drops: all)")
    ap.add_argument("--min-rate", type=float, default=0.95)
    args = ap.parse_args(argv)
    ptxas = find_ptxas()
    if ptxas is None:
        print("mutate_ptx: ptxas not found (needed to count only mutants it accepts)",
              file=sys.stderr)
        return 3
    if not args.bundles.is_dir():
        print(f"mutate_ptx: {args.bundles} is not a directory", file=sys.stderr)
        return 2
    dirs = sorted(p for p in args.bundles.iterdir() if (p / "contract.yaml").is_file()
                  and (not args.only or p.name in args.only))
    t0 = time.perf_counter()
    verdicts = campaign(dirs, ptxas, select=args.select, progress=True)
    wall = time.perf_counter() - t0
    killed, counted, rate = kill_rate(verdicts)
    table = Counter((v.bundle, v.mutant.operator, v.status) for v in verdicts)
    lines = [
        "# PTX mutation campaign (issue 10)",
        "",
        f"Command: `.venv/bin/python scripts/mutate_ptx.py --out {args.out or '...'}`"
        + (f" `--select {args.select}`" if args.select else ""),
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; {wall:.0f} s wall.",
        f"ptxas: {ptxas}. Mutants ptxas rejects do not count.",
        "",
        f"**Kill rate: {killed} of {counted} = {100 * rate:.1f}%** "
        f"({sum(v.status == 'rejected' for v in verdicts)} rejected by ptxas)",
        "",
        "| bundle | operator | killed | survived | not run | rejected |",
        "|---|---|---|---|---|---|",
    ]
    for b in sorted({v.bundle for v in verdicts}):
        for op in OPERATORS:
            row = [table[(b, op, s)] for s in ("killed", "survived", "not_run", "rejected")]
            if sum(row):
                lines.append(f"| {b} | {op} | " + " | ".join(map(str, row)) + " |")
    lines += ["", "## Survivors and mutants not run", ""]
    for v in verdicts:
        if v.status in ("survived", "not_run"):
            lines.append(f"- {v.bundle} line {v.mutant.line} {v.mutant.operator} "
                         f"`{v.mutant.before}` -> `{v.mutant.after or '(dropped)'}`: "
                         f"{v.status} ({v.detail[:200]})")
    kinds = Counter(killer(v.detail) for v in verdicts if v.status == "killed")
    lines += ["", "## What killed them (first failing check's finding kind or value check)", ""]
    lines += [f"- {k}: {n}" for k, n in kinds.most_common()]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({
            "kill_rate": rate, "killed": killed, "counted": counted, "wall_s": round(wall, 1),
            "mutants": [{"bundle": v.bundle, "operator": v.mutant.operator,
                         "line": v.mutant.line, "before": v.mutant.before,
                         "after": v.mutant.after, "status": v.status,
                         "detail": v.detail[:300], "seconds": round(v.seconds, 3)}
                        for v in verdicts]}, indent=1) + "\n")
    return 0 if rate >= args.min_rate else 1


if __name__ == "__main__":
    sys.exit(main())
