"""Benchmark of the PTX interpreter (docs/bench/ptxsim.md), each figure beside a peer measured
in the same run:

1. vector add of 1,000,000 f32 (bundles/vector_add) against numpy ``a + b`` and against a
   scalar pure-Python loop over the same lists (the naive interpreter floor: one add per
   element, no decoding at all);
2. the tensor-core GEMM 256 x 256 x 256 (bundles/gemm_mma: mma.sync m16n8k8, ldmatrix,
   cp.async) against numpy's float64 matmul of the same f16 inputs;
3. the tiled f32 GEMM 256 x 256 x 256 (bundles/gemm_tiled) and the row softmax 256 x 1024
   (bundles/softmax_rows) against numpy.

Each launch reports thread-instructions per second. The launch and its peer are timed one
after the other in each of ``--repeat`` rounds (wall time, one core: the interpreter is
single-threaded numpy), after one untimed launch that also compiles the entry; every figure is
min / median / max over the rounds, the ratio taken per round, never a best run. Results are
checked before timing counts.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/bench_ptxsim.py [--repeat 5]
[--write docs/bench/ptxsim.md]``

``--tracking-cost`` (issue 10) measures instead what register definedness and global race
tracking cost: vector add 10^6 and the mma GEMM 256^3, each run ``--rounds`` times in turn with
tracking on, with tracking off (``launch(..., tracking=False)``) and, in a child process, with the
interpreter as it was at git revision ``--baseline-rev`` (before issue 10), interleaved so that
machine load hits all three alike; it prints the range of each and of the ratios:

``OMP_NUM_THREADS=1 .venv/bin/python bench/bench_ptxsim.py --tracking-cost --rounds 5
--write docs/bench/ptxsim.md``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify import ptxsim  # noqa: E402
from verify.ptxsim import Buffer, Scalar, SimResult  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from rounds import mmm, per_round, timed_rounds  # noqa: E402


class Timed:
    """A launch and its peer, timed one after the other in each round; ``result`` is the
    launch's last result (checked by the caller)."""

    def __init__(self, sim: Callable[[], SimResult], peer: Callable[[], object],
                 repeat: int) -> None:
        box: list[SimResult] = [sim()]  # untimed: the first launch also compiles the entry
        t = timed_rounds({"sim": lambda: box.append(sim()), "peer": peer}, repeat)
        self.sim, self.peer, self.result = t["sim"], t["peer"], box[-1]


def mod(name: str) -> ptxsim.Module:
    return ptxsim.load_module((ROOT / "bundles" / name / f"{name}.ptx").read_bytes())


def row(name: str, sim_s: list[float], r: SimResult, peer: str, peer_s: list[float]) -> list[str]:
    """One table row: min / median / max of the launch's seconds, of its thread-instructions per
    second, of the peer's seconds and of the per-round ratio."""
    return [name, mmm(sim_s, "{:.3f}"), f"{r.thread_instructions:,}",
            mmm([r.thread_instructions / s / 1e6 for s in sim_s], "{:.1f}"), peer,
            mmm(peer_s, "{:.4f}"), mmm(per_round(sim_s, peer_s), "{:,.0f}x")]


def bench_vadd(repeat: int) -> list[list[str]]:
    n = 1_000_000
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    m = mod("vector_add")

    def sim() -> SimResult:
        return ptxsim.launch(m, "vector_add", ((n + 255) // 256, 1, 1), (256, 1, 1),
                             [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                              Scalar(n, ".u32")])

    t = Timed(sim, lambda: a + b, repeat)
    assert t.result.findings == () and np.array_equal(c, a + b)
    al, bl = a.tolist(), b.tolist()

    def py_loop() -> list[float]:
        out = [0.0] * n
        for i in range(n):
            out[i] = al[i] + bl[i]
        return out

    # the loop takes seconds: one per round, beside that round's launch
    t2 = Timed(sim, py_loop, max(1, repeat // 2))
    return [row("vector_add n=1,000,000", t.sim, t.result, "numpy a + b", t.peer),
            row("vector_add n=1,000,000", t2.sim, t2.result, "pure-Python loop", t2.peer)]


def bench_mma(repeat: int) -> list[list[str]]:
    M = N = K = 256
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, M * K).astype(np.float16)
    b = rng.uniform(-1, 1, K * N).astype(np.float16)
    c = np.zeros(M * N, np.float32)
    m = mod("gemm_mma")

    def sim() -> SimResult:
        return ptxsim.launch(m, "gemm_mma", (N // 32, M // 32, 1), (128, 1, 1),
                             [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                              Scalar(M, ".u32"), Scalar(N, ".u32"), Scalar(K, ".u32")])

    t = Timed(sim, lambda: a.reshape(M, K).astype(np.float64) @ b.reshape(K, N).astype(np.float64),
              repeat)
    A, B = a.reshape(M, K).astype(np.float64), b.reshape(K, N).astype(np.float64)
    assert t.result.findings == ()
    assert np.allclose(c.reshape(M, N), A @ B, rtol=1e-4, atol=2e-4)
    return [row("gemm_mma 256x256x256 (mma.sync)", t.sim, t.result, "numpy f64 matmul", t.peer)]


def bench_tiled(repeat: int) -> list[list[str]]:
    M = N = K = 256
    rng = np.random.default_rng(2)
    a = rng.standard_normal(M * K).astype(np.float32)
    b = rng.standard_normal(K * N).astype(np.float32)
    c = np.zeros(M * N, np.float32)
    m = mod("gemm_tiled")

    def sim() -> SimResult:
        return ptxsim.launch(m, "gemm_tiled", (N // 16, M // 16, 1), (16, 16, 1),
                             [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                              Scalar(M, ".u32"), Scalar(N, ".u32"), Scalar(K, ".u32")])

    t = Timed(sim, lambda: a.reshape(M, K) @ b.reshape(K, N), repeat)
    ref = a.reshape(M, K).astype(np.float64) @ b.reshape(K, N)
    assert t.result.findings == ()
    assert np.allclose(c.reshape(M, N), ref, rtol=1e-4, atol=1e-4)
    return [row("gemm_tiled 256x256x256 (f32)", t.sim, t.result, "numpy f32 matmul", t.peer)]


def bench_softmax(repeat: int) -> list[list[str]]:
    rows, cols = 256, 1024
    rng = np.random.default_rng(3)
    x = rng.standard_normal(rows * cols).astype(np.float32)
    y = np.zeros_like(x)
    m = mod("softmax_rows")

    def sim() -> SimResult:
        return ptxsim.launch(m, "softmax_rows", (rows, 1, 1), (256, 1, 1),
                             [Buffer(x, "in", "x"), Buffer(y, "out", "y"), Scalar(rows, ".u32"),
                              Scalar(cols, ".u32")])

    def peer() -> np.ndarray:
        X = x.reshape(rows, cols)
        e = np.exp(X - X.max(axis=1, keepdims=True))
        out: np.ndarray = e / e.sum(axis=1, keepdims=True)
        return out

    t = Timed(sim, peer, repeat)
    assert t.result.findings == ()
    assert np.allclose(y.reshape(rows, cols), peer(), rtol=1e-5, atol=1e-7)
    return [row("softmax_rows 256x1024", t.sim, t.result, "numpy softmax", t.peer)]


BASELINE_REV = "7763267"  # main before the issue-10 interpreter changes


def tracked_launches() -> dict[str, Callable[[bool], float]]:
    """The two launches of the issue-10 speed target; each call returns the CPU time of one
    launch (``time.process_time``: single-threaded numpy, so the time it would take on one
    dedicated core; wall time on a machine shared by other jobs says more about them)."""
    n = 1_000_000
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    vm = mod("vector_add")
    M = N = K = 256
    ha = rng.uniform(-1, 1, M * K).astype(np.float16)
    hb = rng.uniform(-1, 1, K * N).astype(np.float16)
    hc = np.zeros(M * N, np.float32)
    gm = mod("gemm_mma")
    kw: Callable[[bool], dict[str, bool]] = (lambda t: {"tracking": t}) if (
        "tracking" in ptxsim.launch.__code__.co_varnames) else (lambda t: {})

    def vadd(track: bool) -> float:
        c[:] = 0
        t0 = time.process_time()
        r = ptxsim.launch(vm, "vector_add", ((n + 255) // 256, 1, 1), (256, 1, 1),
                          [Buffer(a, "in", "a"), Buffer(b, "in", "b"), Buffer(c, "out", "c"),
                           Scalar(n, ".u32")], **kw(track))
        dt = time.process_time() - t0
        assert r.findings == () and np.array_equal(c, a + b)
        return dt

    def gemm(track: bool) -> float:
        hc[:] = 0
        t0 = time.process_time()
        r = ptxsim.launch(gm, "gemm_mma", (N // 32, M // 32, 1), (128, 1, 1),
                          [Buffer(ha, "in", "a"), Buffer(hb, "in", "b"), Buffer(hc, "out", "c"),
                           Scalar(M, ".u32"), Scalar(N, ".u32"), Scalar(K, ".u32")], **kw(track))
        dt = time.process_time() - t0
        A, B = ha.reshape(M, K).astype(np.float64), hb.reshape(K, N).astype(np.float64)
        assert r.findings == () and np.allclose(hc.reshape(M, N), A @ B, rtol=1e-4, atol=2e-4)
        return dt
    return {"vector_add 10^6": vadd, "gemm_mma 256^3": gemm}


def child() -> None:
    """--child: time each launch once after a warm-up run (the baseline interpreter has no
    tracking switch)."""
    runs = tracked_launches()
    for f in runs.values():  # warm up as the parent does
        f(False)
    print(json.dumps({k: f(False) for k, f in runs.items()}))


def baseline_tree(rev: str, dest: Path) -> Path:
    """The verify package of ``rev`` (git archive) in ``dest``; ledger comes from ROOT."""
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "verify"], check=True,
                          capture_output=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch, check=True, timeout=120)
    return dest


def tracking_cost(rounds: int, rev: str) -> tuple[str, dict[str, list[float]]]:
    runs = tracked_launches()
    for f in runs.values():  # warm up: compile the programs, touch the memory
        f(True)
    res: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        base = baseline_tree(rev, Path(d))
        env = dict(os.environ, PYTHONPATH=f"{base}{os.pathsep}{ROOT}")
        for i in range(rounds):
            for name, f in runs.items():
                for track in ((True, False) if i % 2 == 0 else (False, True)):  # alternate
                    key = f"{name} tracking {'on' if track else 'off'}"
                    res.setdefault(key, []).append(f(track))
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"],
                                 env=env, cwd=d, capture_output=True, text=True, timeout=600,
                                 check=True).stdout
            for name, sec in json.loads(out.strip().splitlines()[-1]).items():
                res.setdefault(f"{name} baseline {rev}", []).append(sec)
    lines = ["| launch (CPU s, one core) | tracking on | tracking off | baseline (git " + rev
             + ") | on / off: best-of, median round (range) | on / baseline: best-of, median "
             "round (range) |", "|---|---|---|---|---|---|"]
    for name in runs:
        on, off = res[f"{name} tracking on"], res[f"{name} tracking off"]
        bl = res[f"{name} baseline {rev}"]
        r1 = sorted(x / y for x, y in zip(on, off, strict=True))
        r2 = sorted(x / y for x, y in zip(on, bl, strict=True))
        lines.append(f"| {name} | {min(on):.3f}-{max(on):.3f} | {min(off):.3f}-{max(off):.3f} "
                     f"| {min(bl):.3f}-{max(bl):.3f} | {min(on) / min(off):.2f}x, "
                     f"{r1[len(r1) // 2]:.2f}x ({r1[0]:.2f}-{r1[-1]:.2f}x) "
                     f"| {min(on) / min(bl):.2f}x, {r2[len(r2) // 2]:.2f}x "
                     f"({r2[0]:.2f}-{r2[-1]:.2f}x) |")
    return "\n".join(lines), res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", type=Path, default=None)
    ap.add_argument("--tracking-cost", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline-rev", default=BASELINE_REV)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child()
        return
    if args.tracking_cost:
        table, _ = tracking_cost(args.rounds, args.baseline_rev)
        cmd = "OMP_NUM_THREADS=1 .venv/bin/python bench/bench_ptxsim.py " + " ".join(sys.argv[1:])
        env = (f"Python {platform.python_version()}, numpy {np.__version__}, "
               f"{platform.machine()}, {os.cpu_count()} CPUs visible, load average "
               f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; {ptxsim.ENGINE}")
        print(table)
        print(f"\ncommand: {cmd}\n{env}")
        if args.write is not None:
            text = args.write.read_text() if args.write.exists() else ""
            marker, end = "<!-- tracking-results -->", "<!-- /tracking-results -->"
            block = (f"{marker}\n\nCommand: `{cmd.strip()}`  \n{env}; ranges over "
                     f"{args.rounds} interleaved rounds\n\n{table}\n{end}\n")
            if marker in text and end in text:
                text = text[: text.index(marker)] + block + text[text.index(end) + len(end) + 1:]
            else:
                bench = "<!-- bench-results -->"
                i = text.index(bench) if bench in text else len(text)
                text = text[:i] + block + "\n" + text[i:]
            args.write.write_text(text)
        return
    load = os.getloadavg()[0]
    rows = (bench_vadd(args.repeat) + bench_mma(args.repeat) + bench_tiled(args.repeat)
            + bench_softmax(args.repeat))
    head = ["launch", "ptxsim s", "thread-instr", "M thread-instr/s", "peer", "peer s",
            "ratio per round"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    cmd = "OMP_NUM_THREADS=1 .venv/bin/python bench/bench_ptxsim.py " + " ".join(sys.argv[1:])
    env = (f"Python {platform.python_version()}, numpy {np.__version__}, "
           f"{platform.machine()}, {os.cpu_count()} CPUs visible; {ptxsim.ENGINE}; "
           f"load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end; min / median / "
           f"max over {args.repeat} rounds")
    table = "\n".join(lines)
    print(table)
    print(f"\ncommand: {cmd}\n{env}")
    if args.write is not None:
        text = args.write.read_text() if args.write.exists() else ""
        marker = "<!-- bench-results -->"
        block = f"{marker}\n\nCommand: `{cmd.strip()}`  \n{env}\n\n{table}\n"
        if marker in text:
            text = text[: text.index(marker)] + block
        else:
            text = text + "\n" + block
        args.write.write_text(text)


if __name__ == "__main__":
    main()
