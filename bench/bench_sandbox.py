"""Sandboxed bundle references: start-up and data-transfer overhead per bundle (issue 8).

For each workload, the same numpy reference computes the same cases (a falsification test's size
bindings, batched as ``verify.falsify`` batches them: one sandbox start per test):

- ``in-process``: the function called directly (what a trusted reference costs);
- ``sandbox``: ``verify.sandbox.run_reference`` (bubblewrap, seccomp, rlimits, inputs written as
  .npy, results read back and validated);
- ``bare start``: bwrap + the Python interpreter with nothing to do (``-c pass``) and with
  ``import numpy``, to show where the overhead goes.

Overhead = sandbox - in-process, per bundle (one start). Ratio = sandbox / in-process. Ranges are
min / median / max over ``--repeat`` runs, interleaved so that load changes hit both sides alike.

    .venv/bin/python bench/bench_sandbox.py [--repeat 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify import sandbox  # noqa: E402
from verify.oracle import OutputSpec  # noqa: E402
from verify.sandbox import Case  # noqa: E402

SAXPY = b"""import numpy as np
def saxpy(inputs, sizes):
    n = sizes["n"]
    return {"y": inputs["a"].astype(np.float64) * inputs["x"][:n] + inputs["y"][:n]}
"""
SOFTMAX = b"""import numpy as np
def softmax(inputs, sizes):
    r, c = sizes["rows"], sizes["cols"]
    x = inputs["x"].astype(np.float64).reshape(r, c)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}
"""


def _saxpy_cases(ns: tuple[int, ...]) -> list[Case]:
    rng = np.random.default_rng(1)
    return [
        Case(
            {
                "a": np.array(rng.uniform(-1, 1), np.float32),
                "x": rng.uniform(-1, 1, n).astype(np.float32),
                "y": rng.uniform(-1, 1, n).astype(np.float32),
                "n": np.array(n, np.int32),
            },
            {"n": n},
            [OutputSpec("y", "f32", (n,))],
        )
        for n in ns
    ]


def _softmax_cases(shapes: tuple[tuple[int, int], ...]) -> list[Case]:
    rng = np.random.default_rng(2)
    return [
        Case(
            {"x": rng.uniform(-5, 5, r * c).astype(np.float32)},
            {"rows": r, "cols": c},
            [OutputSpec("y", "f32", (r * c,))],
        )
        for r, c in shapes
    ]


WORKLOADS: dict[str, tuple[bytes, str, list[Case]]] = {
    "saxpy edge sizes (n=1,255,257,775)": (SAXPY, "saxpy", _saxpy_cases((1, 255, 257, 775))),
    "saxpy 4 x 1M elements (48 MB in, 32 MB out)": (
        SAXPY,
        "saxpy",
        _saxpy_cases((1 << 20,) * 4),
    ),
    "softmax rows (1x1, 33x257, 256x1024)": (
        SOFTMAX,
        "softmax",
        _softmax_cases(((1, 1), (33, 257), (256, 1024))),
    ),
}


def _in_process(src: bytes, fn: str, cases: list[Case]) -> float:
    scope: dict[str, Any] = {}
    exec(compile(src, "reference.py", "exec"), scope)  # the benchmark's own code, not a bundle's
    f: Callable[..., Any] = scope[fn]
    t0 = time.perf_counter()
    for c in cases:
        out = f(dict(c.inputs), dict(c.sizes))
        for o in c.outputs:
            np.asarray(out[o.name], dtype=np.float32)
    return time.perf_counter() - t0


def _sandboxed(src: bytes, fn: str, cases: list[Case]) -> float:
    """Cold: start the sandbox, run the batch, stop it (nothing else to hide the start behind)."""
    t0 = time.perf_counter()
    res = sandbox.run_reference({"reference.py": src}, "reference.py", fn, cases)
    dt = time.perf_counter() - t0
    bad = [c.error for c in res.cases if c.error]
    if bad:
        raise SystemExit(f"sandbox run failed: {bad[0]}")
    return dt


def _prestarted(src: bytes, fn: str, cases: list[Case], head_start: float) -> float:
    """As verify.falsify uses it: the sandbox starts when the bundle's falsify checks start and
    loads numpy and the reference while the kernel runs (``head_start`` seconds here, shorter
    than the interpreter's launches of any bundled test); timed from the batch's submission
    to its validated results, plus the stop."""
    with sandbox.Session({"reference.py": src}, "reference.py", fn) as session:
        time.sleep(head_start)
        t0 = time.perf_counter()
        res = session.run(cases)
    dt = time.perf_counter() - t0
    bad = [c.error for c in res.cases if c.error]
    if bad:
        raise SystemExit(f"sandbox run failed: {bad[0]}")
    return dt


def _bare(code: str) -> float:
    bwrap, _ = sandbox.sandbox_status()
    assert bwrap is not None
    exe = str(Path(sys.executable).resolve())
    with tempfile.TemporaryDirectory() as job:
        (Path(job) / "bundle").mkdir()
        argv = sandbox._bwrap_argv(bwrap, Path(job), None, [exe, "-I", "-S", "-c", code])
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        return time.perf_counter() - t0


def _rng(xs: list[float], scale: float = 1000.0) -> str:
    return f"{min(xs) * scale:.0f} / {statistics.median(xs) * scale:.0f} / {max(xs) * scale:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--head-start", type=float, default=1.0)
    args = ap.parse_args()
    bwrap, version = sandbox.sandbox_status()
    if bwrap is None:
        raise SystemExit(f"no sandbox here: {version}")
    machine = {
        "cpu": next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        ),
        "cores": os.cpu_count(),
        "load_before": os.getloadavg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sandbox": version,
    }
    numpy_site = str(Path(np.__file__).resolve().parent.parent)
    rows: dict[str, dict[str, Any]] = {}
    for name, (src, fn, cases) in WORKLOADS.items():
        inproc: list[float] = []
        boxed: list[float] = []
        warm: list[float] = []
        _sandboxed(src, fn, cases)  # warm the page cache once
        for _ in range(args.repeat):
            inproc.append(_in_process(src, fn, cases))
            boxed.append(_sandboxed(src, fn, cases))
            warm.append(_prestarted(src, fn, cases, args.head_start))
        for label, xs in (("cold", boxed), ("prestarted", warm)):
            over = [b - i for b, i in zip(xs, inproc, strict=True)]
            ratio = [b / i for b, i in zip(xs, inproc, strict=True)]
            rows[f"{name} [{label}]"] = {
                "in_process_ms": _rng(inproc),
                "sandbox_ms": _rng(xs),
                "overhead_ms": _rng(over),
                "ratio": f"{min(ratio):.1f} / {statistics.median(ratio):.1f} / {max(ratio):.1f}",
            }
    starts = {
        "bwrap + python -c pass": [_bare("pass") for _ in range(args.repeat)],
        "bwrap + python -c 'import numpy'": [
            _bare("import sys; sys.path.insert(0, '/site'); import numpy")
            for _ in range(args.repeat)
        ],
        "python -c 'import numpy' (no sandbox)": [],
    }
    exe = str(Path(sys.executable).resolve())
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run(
            [
                exe,
                "-I",
                "-S",
                "-c",
                f"import sys; sys.path.insert(0, {numpy_site!r}); import numpy",
            ],
            check=True,
        )
        starts["python -c 'import numpy' (no sandbox)"].append(time.perf_counter() - t0)
    machine["load_after"] = os.getloadavg()
    out = {
        "machine": machine,
        "repeat": args.repeat,
        "workloads": rows,
        "starts_ms": {k: _rng(v) for k, v in starts.items()},
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"machine: {machine}")
    head = ("workload", "in-process ms", "sandbox ms", "overhead ms", "ratio")
    print(f"{head[0]:60} " + " ".join(f"{h:>18}" for h in head[1:]))
    for name, r in rows.items():
        print(
            f"{name:60} {r['in_process_ms']:>18} {r['sandbox_ms']:>18} {r['overhead_ms']:>18} "
            f"{r['ratio']:>18}"
        )
    for k, v in out["starts_ms"].items():
        print(f"{k:60} {v:>18}")


if __name__ == "__main__":
    main()
