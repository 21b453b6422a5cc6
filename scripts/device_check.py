"""Cross-check the PTX interpreter against a CUDA device (and both against the trusted references).

Implements the device run of docs/device-run.md (SPEC 8 ``falsify.*``: "on a CUDA device through
CuPy or on the CPU through the project's PTX interpreter"):

1. for every bundle under ``--bundles`` (default ``bundles/``), read the contract and the PTX;
2. for each executable falsification test, build its first size binding (``--sizes largest`` or
   ``all`` for more) with the test's seed, exactly as ``verify.falsify`` does;
3. run the same inputs through the interpreter and, unless ``--interpreter-only``, on the GPU
   through CuPy; time both, and time the numpy reference on the same inputs (the peer);
4. print, per test, the largest difference (ulp and abs) interpreter vs reference, GPU vs
   reference and GPU vs interpreter, the interpreter's findings and its throughput, and write the
   same as a markdown table to ``--out``.

Exit status: 0 every run agreed within the test's tolerance with no finding; 1 something did not;
3 ``--gpu`` was given and no CUDA device (or no CuPy) is available. Usage:

    .venv/bin/python scripts/device_check.py --interpreter-only --out docs/bench/falsify-run.md
    .venv/bin/python scripts/device_check.py --gpu --out device-run.md   # on a CUDA machine
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ledger.core.bundle import Bundle  # noqa: E402
from ledger.core.errors import LedgerError  # noqa: E402
from verify import falsify  # noqa: E402
from verify.context import Context, Options  # noqa: E402
from verify.contract import load_contract  # noqa: E402
from verify.model import FalsificationTest, Kernel  # noqa: E402
from verify.oracle import oracles_for  # noqa: E402
from verify.references import REFERENCES  # noqa: E402
from verify.report import Check  # noqa: E402


def cupy_advice() -> str:
    """How to get the CuPy wheel for this machine's CUDA (``scripts/cuda_extra.py`` picks it)."""
    from scripts.cuda_extra import NoCuda, gpu_extra

    try:
        extra = gpu_extra()
    except NoCuda as e:
        return f"no CuPy extra fits this machine: {e}"
    return f"install CuPy for this CUDA with scripts/setup.sh --gpu (pip install -e '.[{extra}]')"


@dataclass
class Row:
    kernel: str
    test: str
    sizes: str
    interp_vs_ref: str = "-"
    gpu_vs_ref: str = "-"
    gpu_vs_interp: str = "-"
    findings: str = "-"
    interp_s: float | None = None
    thread_instr: int = 0
    ref_s: float | None = None
    gpu_s: float | None = None
    ok: bool = True
    notes: list[str] = field(default_factory=list)

    def cells(self) -> list[str]:
        rate = (
            f"{self.thread_instr / self.interp_s:.3g}"
            if self.interp_s and self.thread_instr
            else "-"
        )
        ratio = "-"
        if self.interp_s and self.ref_s:  # a sandboxed reference can be the slower one
            r = self.interp_s / self.ref_s
            ratio = f"{r:.0f}x" if r >= 10 else f"{r:.2g}x"
        return [
            self.kernel,
            self.test,
            self.sizes,
            self.interp_vs_ref,
            self.gpu_vs_ref,
            self.gpu_vs_interp,
            self.findings,
            _secs(self.interp_s),
            f"{self.thread_instr:,}" if self.thread_instr else "-",
            rate,
            _secs(self.ref_s),
            ratio,
            _secs(self.gpu_s),
            "ok" if self.ok else "FAIL: " + "; ".join(self.notes),
        ]


HEADER = [
    "kernel",
    "test",
    "sizes",
    "interp vs ref",
    "GPU vs ref",
    "GPU vs interp",
    "interp findings",
    "interp ms (median)",
    "thread-instr",
    "thread-instr/s",
    "numpy ref ms (median)",
    "interp/ref",
    "GPU ms",
    "verdict",
]


def _secs(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.3f}"


def _diff(
    kernel: Kernel, got: falsify.Case, want: dict[str, Any], tol: Any
) -> tuple[str, bool, str]:
    """Largest ulp/abs difference over the outputs of ``got`` against ``want``; within ``tol``?"""
    dtypes = {p.name: p.dtype for p in kernel.params}
    ulps: list[float] = []
    abss: list[float] = []
    ok = True
    first = ""
    for a in got.args:
        if not isinstance(a, falsify.BufferArg) or a.intent == "in":
            continue
        c = falsify.compare_output(a.name, a.data, want[a.name], dtypes[a.name], tol)
        if c.max_ulp is not None:
            ulps.append(c.max_ulp)
        abss.append(c.max_abs)
        if c.bad:
            ok = False
            first = first or c.first
    ulp = f"{max(ulps):g} ulp, " if ulps else ""
    return f"{ulp}abs {max(abss) if abss else 0:.3g}", ok, first


def _outputs(case: falsify.Case) -> dict[str, Any]:
    return {
        a.name: a.data for a in case.args if isinstance(a, falsify.BufferArg) and a.intent != "in"
    }


def _expected(kernel: Kernel, files: dict[str, bytes], case: falsify.Case) -> dict[str, Any]:
    """The reference outputs for ``case``, scalars included in its inputs: a trusted reference
    in this process; a bundle's own ``reference.py`` only through ``verify.oracle`` (its sandbox,
    so the timing includes the sandbox), never in this process."""
    oc = falsify.oracle_case(kernel, case)
    if not kernel.reference_file:
        return dict(REFERENCES[kernel.reference](dict(oc.inputs), dict(oc.sizes)))
    oracles = oracles_for(kernel, files, Options(use_gpu=False))
    try:
        if oracles.primary is None:
            raise LedgerError(oracles.problem or "no oracle")
        [res] = oracles.primary.compute([oc])
    finally:
        oracles.close()
    if isinstance(res, str):
        raise LedgerError(f"{kernel.reference_file}#{kernel.reference_function}: {res}")
    return dict(res)


def check_test(
    kernel: Kernel,
    test: FalsificationTest,
    sizes: dict[str, int],
    ptx: bytes,
    interp: falsify.InterpreterEngine,
    gpu: Any,
    repeat: int = 1,
    files: dict[str, bytes] | None = None,
) -> Row:
    row = Row(kernel.name, test.id, ",".join(f"{k}={v}" for k, v in sizes.items()))
    case = falsify.make_case(kernel, test, sizes, np.random.default_rng(test.seed))
    ref_times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        want = _expected(kernel, files or {}, case)
        ref_times.append(time.perf_counter() - t0)
    row.ref_s = statistics.median(ref_times)

    out = None
    times = []
    for _ in range(repeat):  # the median of ``repeat`` (the first launch also compiles the entry)
        mine = falsify.copy_case(case)
        try:
            out = interp.launch(
                ptx, kernel.entry, mine.grid, mine.block, mine.args, mine.dynamic_shared
            )
        except LedgerError as e:
            row.ok = False
            row.notes.append(f"interpreter could not run it: {e}")
            out = None
            break
        times.append(out.seconds)
    if out is not None:
        row.interp_s = statistics.median(times)
        row.thread_instr = out.thread_instructions
        row.findings = ", ".join(f.kind for f in out.findings) or "none"
        if out.findings:
            row.ok = False
            row.notes.append(out.findings[0].message)
        row.interp_vs_ref, ok, first = _diff(kernel, mine, want, test.tolerance)
        if not ok:
            row.ok = False
            row.notes.append(f"interpreter: {first}")
    if gpu is not None:
        theirs = falsify.copy_case(case)
        g = gpu.launch(
            ptx, kernel.entry, theirs.grid, theirs.block, theirs.args, theirs.dynamic_shared
        )
        row.gpu_s = g.seconds
        if g.findings:
            row.ok = False
            row.notes.append(g.findings[0].message)
        row.gpu_vs_ref, ok, first = _diff(kernel, theirs, want, test.tolerance)
        if not ok:
            row.ok = False
            row.notes.append(f"GPU: {first}")
        if out is not None:
            row.gpu_vs_interp, _, _ = _diff(kernel, theirs, _outputs(mine), test.tolerance)
    return row


def time_checks(bundles: list[Path], only: list[str] | None, repeat: int) -> list[str]:
    """Markdown rows: each bundle's ``falsify.run`` on the interpreter, min / median / max of
    ``repeat`` runs (ms)."""
    rows: list[str] = []
    for bdir in bundles:
        if only and bdir.name not in only:
            continue
        bundle = Bundle.from_dir(bdir)
        ctx = Context(bundle, Options(use_gpu=False))
        ctx.contract = load_contract(bundle.file("contract.yaml"))
        took: list[float] = []
        checks: list[Check] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            checks = falsify.run(ctx)
            took.append((time.perf_counter() - t0) * 1e3)
        ms = " / ".join(f"{v:.1f}" for v in (min(took), statistics.median(took), max(took)))
        tests = ctx.contract.falsification
        bindings = sum(len(t.sizes) for t in tests)
        statuses = ", ".join(sorted({c.status for c in checks})) or "-"
        rows.append(f"| {bdir.name} | {len(tests)} | {bindings} | {statuses} | {ms} |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundles", type=Path, default=ROOT / "bundles")
    ap.add_argument("--out", type=Path, help="write the markdown table here")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--interpreter-only", action="store_true", help="no GPU: what CI runs")
    mode.add_argument("--gpu", action="store_true", help="require a CUDA device (exit 3 if none)")
    ap.add_argument("--sizes", choices=("first", "largest", "all"), default="first")
    ap.add_argument("--kernel", action="append", help="only these bundles (repeatable)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time N runs of each; the tables give the median (and the range)")
    ap.add_argument(
        "--checks",
        action="store_true",
        help="also time every falsify.<ID> check per bundle as `ledger check` runs it (CPU)",
    )
    args = ap.parse_args(argv)

    gpu = None
    device = "none (--interpreter-only)"
    if not args.interpreter_only:
        from verify.gpu import probe

        gpu, why = probe()
        if gpu is None:
            if args.gpu:
                print(f"device_check: --gpu given but no GPU engine: {why}", file=sys.stderr)
                if "CuPy" in why:
                    print(f"device_check: {cupy_advice()}", file=sys.stderr)
                return 3
            device = f"none ({why}); interpreter only"
            print(f"device_check: {device}", file=sys.stderr)
        else:
            device = gpu.description
    interp = falsify.InterpreterEngine()
    rows: list[Row] = []
    bundles = sorted(p for p in args.bundles.iterdir() if (p / "contract.yaml").is_file())
    for bdir in bundles:
        if args.kernel and bdir.name not in args.kernel:
            continue
        bundle = Bundle.from_dir(bdir)
        contract = load_contract(bundle.file("contract.yaml"))
        kernel = contract.kernel
        if kernel is None:
            continue
        ptx = bundle.file(kernel.ptx)
        files = {f.path: f.data for f in bundle.files}
        for test in contract.falsification:
            if not test.executable or not test.sizes:
                continue
            chosen = {
                "first": [test.sizes[0]],
                "largest": [max(test.sizes, key=lambda b: sum(b.values()))],
                "all": list(test.sizes),
            }[args.sizes]
            for sizes in chosen:
                row = check_test(
                    kernel, test, dict(sizes), ptx, interp, gpu, max(1, args.repeat), files
                )
                rows.append(row)
                print(" | ".join(row.cells()), flush=True)
    check_rows = time_checks(bundles, args.kernel, max(1, args.repeat)) if args.checks else []
    command = " ".join(shlex.quote(a) for a in ["scripts/device_check.py", *sys.argv[1:]])
    table = [
        f"Command: `.venv/bin/python {command}`",
        "",
        f"Interpreter: {interp.description}; GPU: {device}",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *("| " + " | ".join(r.cells()) + " |" for r in rows),
        "",
    ]
    if check_rows:
        table += [
            "Full `falsify.*` checks per bundle (interpreter, every test and size binding, "
            f"{max(1, args.repeat)} runs):",
            "",
            "| bundle | tests | size bindings | statuses | ms, min / median / max |",
            "|---|---|---|---|---|",
            *check_rows,
            "",
        ]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(table), encoding="utf-8")
    bad = [r for r in rows if not r.ok]
    print(f"device_check: {len(rows)} runs, {len(bad)} disagreed or had findings", file=sys.stderr)
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
