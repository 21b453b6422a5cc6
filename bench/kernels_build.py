"""Benchmark: cost of the reproducible kernel build against plain nvcc (issue 4).

For each bundled kernel, one after the other in each of REPEAT rounds (same process, same
machine):
  peer:  nvcc -arch=sm_86 -ptx run directly in a temporary directory;
  build: kernels/build.py's compile path (temp dir, argv from the contract, read back the PTX).
Then the whole `kernels/build.py --check` (every bundle) against the sum of the peer times.
Every figure is min / median / max over the rounds, the ratio per round (never a best run).
Writes a Markdown table to stdout (and to docs/bench/kernels.md with --write).

    .venv/bin/python bench/kernels_build.py [--repeat 3] [--write]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from rounds import machine, mmm, per_round, timed_rounds  # noqa: E402


def load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kbuild", ROOT / "kernels" / "build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kbuild"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    build = load_build()
    nvcc = build.find_nvcc()
    if nvcc is None:
        print("nvcc not found: nothing to measure", file=sys.stderr)
        return 3
    release = build.nvcc_release(nvcc)
    load = os.getloadavg()[0]
    rows = []
    peers: list[list[float]] = []
    for spec in build.bundle_specs():
        src = ROOT / "kernels" / spec.name / f"{spec.name}.cu"

        def peer(src: Path = src, name: str = spec.name) -> None:
            with tempfile.TemporaryDirectory() as tmp:
                shutil.copy(src, tmp)
                argv = [nvcc, "-arch=sm_86", "-ptx", "-o", f"{name}.ptx", f"{name}.cu"]
                subprocess.run(argv, cwd=tmp, check=True, capture_output=True)

        def ours(spec: object = spec) -> None:
            build.compile_ptx(spec, nvcc)

        t = timed_rounds({"peer": peer, "ours": ours}, args.repeat)
        peers.append(t["peer"])
        size = len((ROOT / "bundles" / spec.name / f"{spec.name}.ptx").read_bytes())
        rows.append((spec.name, t["peer"], t["ours"], size))

    def check() -> None:
        subprocess.run(
            [sys.executable, "kernels/build.py", "--check"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )

    t_check = timed_rounds({"check": check}, args.repeat)["check"]
    total_peer = sum(statistics.median(p) for p in peers)
    cmd = f".venv/bin/python bench/kernels_build.py --repeat {args.repeat}"
    lines = [
        "# Kernel build benchmark",
        "",
        f"Command: `{cmd}` ({release}; {machine()}; load average {load:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end). Each kernel's peer and build path one after the "
        f"other in each of {args.repeat} rounds: min / median / max over the rounds, the ratio "
        "per round.",
        "Peer: plain nvcc in a temporary directory. Ratio = build path / peer.",
        "",
        "| kernel | nvcc alone (s) | build.compile_ptx (s) | ratio per round | PTX bytes |",
        "|---|---|---|---|---|",
    ]
    for name, tp, to, size in rows:
        lines.append(f"| {name} | {mmm(tp, '{:.3f}')} | {mmm(to, '{:.3f}')} | "
                     f"{mmm(per_round(to, tp))} | {size} |")
    lines += [
        "",
        f"`kernels/build.py --check` (all {len(rows)} bundles, fresh interpreter): "
        f"{mmm(t_check)} s; sum of the plain nvcc runs' medians: {total_peer:.2f} s; ratio of "
        f"the medians {statistics.median(t_check) / total_peer:.2f}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        (ROOT / "docs" / "bench" / "kernels.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
