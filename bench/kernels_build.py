"""Benchmark: cost of the reproducible kernel build against plain nvcc (issue 4).

For each bundled kernel, time (median of REPEAT runs, same process, same machine):
  peer:  nvcc -arch=sm_86 -ptx run directly in a temporary directory;
  build: kernels/build.py's compile path (temp dir, argv from the contract, read back the PTX).
Then the whole `kernels/build.py --check` (all six bundles) against the sum of the peer times.
Writes a Markdown table to stdout (and to docs/bench/kernels.md with --write).

    .venv/bin/python bench/kernels_build.py [--repeat 3] [--write]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kbuild", ROOT / "kernels" / "build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kbuild"] = mod
    spec.loader.exec_module(mod)
    return mod


def timed(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    rows = []
    total_peer = 0.0
    for spec in build.bundle_specs():
        src = ROOT / "kernels" / spec.name / f"{spec.name}.cu"

        def peer(src: Path = src, name: str = spec.name) -> None:
            with tempfile.TemporaryDirectory() as tmp:
                shutil.copy(src, tmp)
                argv = [nvcc, "-arch=sm_86", "-ptx", "-o", f"{name}.ptx", f"{name}.cu"]
                subprocess.run(argv, cwd=tmp, check=True, capture_output=True)

        def ours(spec: object = spec) -> None:
            build.compile_ptx(spec, nvcc)

        t_peer = timed(peer, args.repeat)
        t_ours = timed(ours, args.repeat)
        total_peer += t_peer
        size = len((ROOT / "bundles" / spec.name / f"{spec.name}.ptx").read_bytes())
        rows.append((spec.name, t_peer, t_ours, size))

    def check() -> None:
        subprocess.run(
            [sys.executable, "kernels/build.py", "--check"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )

    t_check = timed(check, args.repeat)
    cmd = f".venv/bin/python bench/kernels_build.py --repeat {args.repeat}"
    lines = [
        "# Kernel build benchmark",
        "",
        f"Command: `{cmd}` (median of {args.repeat} runs each; {release}).",
        "Peer: plain nvcc in a temporary directory. Ratio = build path / peer.",
        "",
        "| kernel | nvcc alone (s) | build.compile_ptx (s) | ratio | PTX bytes |",
        "|---|---|---|---|---|",
    ]
    for name, tp, to, size in rows:
        lines.append(f"| {name} | {tp:.3f} | {to:.3f} | {to / tp:.2f} | {size} |")
    lines += [
        "",
        f"`kernels/build.py --check` (all {len(rows)} bundles, fresh interpreter): {t_check:.2f} s;"
        f" sum of plain nvcc runs: {total_peer:.2f} s; ratio {t_check / total_peer:.2f}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        (ROOT / "docs" / "bench" / "kernels.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
