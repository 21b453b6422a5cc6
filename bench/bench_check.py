"""Benchmarks of the verifier's checks (docs/bench/*.md).

PTX part (docs/bench/ptx.md), each figure beside a peer measured in the same run:

1. ``parse_ptx`` on a large PTX (a shipped kernel's entry repeated under new names, several MB)
   in MB/s, against a naive full tokenisation of the same text with the parser's own token
   regex (what a parser that does not skip function bodies would at least pay);
2. ``ptxas -v`` wall time on fixtures (``run_ptxas``), against ``parse_ptx`` on the same file;
3. one ``rebuild.ptx`` nvcc run, against the ptxas run of the same kernel.

Run: ``.venv/bin/python bench/bench_check.py ptx [--mb 6] [--repeat 5]``

Whole check (docs/bench/check.md): ``ledger check bundles/<k> --json`` wall time per bundle, as a
user runs it (a fresh process: imports, every check group, ptxas, nvcc, the interpreter), against
the external tools alone on the same bundle in the same run (one ptxas plus one nvcc -ptx), and
the Python-side time (the same run minus the tools).

Run: ``.venv/bin/python bench/bench_check.py check [--repeat 3]``

Each figure and its peer are timed one after the other in every round (wall time); each is
written min / median / max over the rounds (the ratio per round), never a best run.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from rounds import mmm, per_round, timed_rounds  # noqa: E402

from verify import ptx  # noqa: E402
from verify.tools import find_tool, run_tool  # noqa: E402


def ms(values: list[float]) -> str:
    return mmm([v * 1e3 for v in values], "{:.1f}") + " ms"


def big_ptx(source: Path, target_bytes: int) -> bytes:
    """``source``'s header plus its entry repeated under new names up to ``target_bytes``."""
    text = source.read_text()
    m = re.search(r"^\.visible \.entry (\w+)\(", text, re.M)
    assert m, f"{source} has no .visible .entry"
    head, body, name = text[: m.start()], text[m.start() :], m.group(1)
    parts = [head]
    size, i = len(head), 0
    while size < target_bytes:
        chunk = body.replace(name, f"{name}_{i}")
        parts.append(chunk)
        size += len(chunk)
        i += 1
    return "".join(parts).encode()


def bench_ptx(mb: float, repeat: int) -> None:
    src = ROOT / "bundles" / "gemm_mma" / "gemm_mma.ptx"
    data = big_ptx(src, int(mb * (1 << 20)))
    header = ptx.parse_ptx(data)

    def tokenize_all() -> int:
        text = data.decode()
        return sum(1 for _ in ptx._TOKEN.finditer(text))

    ntok = tokenize_all()
    t = timed_rounds({"parse": lambda: ptx.parse_ptx(data), "tok": tokenize_all}, repeat)
    size_mb = len(data) / (1 << 20)
    print(
        f"parse_ptx: {size_mb:.2f} MiB, {len(header.entries)} entries: {ms(t['parse'])} "
        f"= {mmm([size_mb / x for x in t['parse']], '{:.1f}')} MiB/s"
    )
    print(
        f"peer, full tokenisation ({ntok} tokens): {ms(t['tok'])} "
        f"= {mmm([size_mb / x for x in t['tok']], '{:.1f}')} MiB/s; parse_ptx is "
        f"{mmm(per_round(t['tok'], t['parse']), '{:.1f}')}x faster"
    )

    ptxas = ptx.find_ptxas()
    if ptxas is None:
        print("ptxas: not found, skipped")
        return
    print(f"ptxas: {ptx.tool_release(ptxas)}")
    fixtures = [ROOT / "tests" / "fixtures" / "ptx" / "vector_add.ptx", src]
    with tempfile.TemporaryDirectory() as d:
        for f in fixtures:
            fdata = f.read_bytes()
            t = timed_rounds({
                "as": functools.partial(ptx.run_ptxas, f, "sm_86", Path(d), True, 120),
                "parse": functools.partial(ptx.parse_ptx, fdata),
            }, repeat)
            print(
                f"ptxas -arch=sm_86 -v {f.relative_to(ROOT)} ({len(fdata)} B): "
                f"{ms(t['as'])} wall; parse_ptx {mmm([x * 1e3 for x in t['parse']], '{:.2f}')} "
                f"ms ({mmm(per_round(t['as'], t['parse']), '{:.0f}')}x less)"
            )
        nvcc = find_tool("nvcc", cuda=True)
        if nvcc is None:
            print("nvcc: not found, skipped")
            return
        cu = ROOT / "bundles" / "gemm_mma" / "gemm_mma.cu"
        (Path(d) / "gemm_mma.cu").write_bytes(cu.read_bytes())
        argv = [nvcc, "-arch=sm_86", "-ptx", "-o", "gemm_mma.ptx", "gemm_mma.cu"]
        t = timed_rounds({
            "nv": lambda: run_tool(argv, cwd=Path(d), timeout=120),
            "as": lambda: ptx.run_ptxas(src, "sm_86", Path(d), True, 120),
        }, repeat)
        print(
            f"nvcc -ptx gemm_mma.cu (rebuild.ptx): {ms(t['nv'])} wall; "
            f"ptxas on its PTX {ms(t['as'])} ({mmm(per_round(t['nv'], t['as']), '{:.1f}')}x)"
        )


def bench_check(repeat: int) -> None:
    import shutil
    import subprocess

    ptxas, nvcc = ptx.find_ptxas(), find_tool("nvcc", cuda=True)
    print("| bundle | `ledger check` wall | ptxas + nvcc alone | check minus tools, per round |")
    print("|---|---:|---:|---:|")
    for d in sorted((ROOT / "bundles").iterdir()):
        name = d.name
        argv = [sys.executable, "-m", "ledger_cli", "check", str(d), "--json", "--no-gpu"]

        def check(argv: list[str] = argv) -> None:
            res = subprocess.run(argv, cwd=ROOT, capture_output=True, check=False)
            assert res.returncode == 0, res.stderr

        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for f in d.iterdir():
                if f.suffix in (".cu", ".ptx"):
                    shutil.copy(f, work / f.name)

            def tools(work: Path = work, name: str = name) -> None:
                if ptxas:
                    run_tool([ptxas, "-arch=sm_86", "-v", "-o", "k.cubin", f"{name}.ptx"],
                             cwd=work, timeout=120)
                if nvcc:
                    run_tool([nvcc, "-arch=sm_86", "-ptx", "-o", "r.ptx", f"{name}.cu"],
                             cwd=work, timeout=120)

            t = timed_rounds({"check": check, "tools": tools}, repeat)
        rest = [a - b for a, b in zip(t["check"], t["tools"], strict=True)]
        print(f"| {name} | {mmm(t['check'])} s | {mmm(t['tools'])} s | {mmm(rest)} s |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("ptx", help="parse_ptx, ptxas and nvcc timings")
    p.add_argument("--mb", type=float, default=6.0, help="size of the large PTX, MiB")
    p.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    c = sub.add_parser("check", help="ledger check wall time per bundle")
    c.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f} at start; wall times, min / median / max over "
          f"{args.repeat} rounds")
    if args.what == "check":
        bench_check(args.repeat)
    if args.what == "ptx":
        bench_ptx(args.mb, args.repeat)
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
