"""Seed campaign: the ``falsify.*`` group of every bundled kernel over many fresh seeds (issue 15).

``ledger check`` draws a fresh seed per run, and with it the random sizes and the inputs at every
size the verifier chooses (``verify.sizes``). A contract whose tolerance or size domain does not
match its kernel (or a kernel with a real bug at some sizes) then fails by chance: a false alarm
for one user, a missed bug for another. This campaign runs what ``ledger check`` runs for the
falsification group, ``verify.falsify.run`` on a ``Context`` with ``Options(use_gpu=False,
seed=S)``, in this process, on the PTX interpreter, for many seeds ``S``, and reports every
check that does not pass with its seed and the size it names.

Two kinds of targets:

* ``bundles/*`` (default): every check must pass on every seed; a failure is printed with the
  ``ledger check ... --seed S`` line that reproduces it;
* ``--planted``: the planted-bug fixtures (tests/fixtures/planted/<bug>, the step limit of
  tests/verify/test_falsify_bundles.py) and their "nice sizes" copies (tests/fixtures/sizes/
  nice-<bug>.yaml, first test only, as tests/verify/test_sizes.py runs them): on every seed at least
  one check must fail and none may pass; an escape (a seed on which nothing fails) is printed.
  ``--fixed-sizes`` also runs each first test at the verifier's chosen sizes without its random
  draws and without the author's sizes (the edges, joint edges, primes, maxima: what the
  contract alone decides): it must fail too, or the bug was caught only by a lucky draw.

The seeds are ``first, first + 1, ...`` (``--first``, default a fresh 32-bit one, printed), so a
campaign is reproducible from its first seed. ``--minutes`` stops early (between seeds) and says
how many seeds each target got. Run it at low priority, one process:

    nice -n 10 .venv/bin/python scripts/seed_campaign.py --seeds 200
    nice -n 10 .venv/bin/python scripts/seed_campaign.py --planted --seeds 50
    nice -n 10 .venv/bin/python scripts/seed_campaign.py --only layernorm_rows \
        --first 2501124300 --seeds 1
    ... --json campaign.json   # every failure, every target's seed count and time

What the interpreter cannot reach (sizes above its cost cap, which a GPU run chooses) is checked
by ``--emulate 1``: numpy float32 emulations, in the PTX's order of operations, of
layernorm_rows (with and without its mean correction), gemm_tiled's fma chains, gemm_mma's
per-mma rounding (to nearest as the interpreter, toward zero as a model of tensor cores) and
dot_shfl's partials, against the contracts' tolerances (a few minutes; 0.1 for a quick look).

Exit status: 0 when nothing unexpected happened, 1 when a bundle failed or a planted bug
escaped on some seed, 2 on bad arguments. Not a CI test (it takes minutes to hours); its results
are recorded in docs/falsification.md ("Seed campaign").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.core.bundle import Bundle  # noqa: E402
from verify import falsify  # noqa: E402
from verify.context import Context, Options  # noqa: E402
from verify.contract import load_contract  # noqa: E402
from verify.model import Contract  # noqa: E402
from verify.oracle import oracles_for  # noqa: E402
from verify.report import Check  # noqa: E402
from verify.sizes import choose_sizes  # noqa: E402

BUNDLES = REPO / "bundles"
PLANTED = REPO / "tests" / "fixtures" / "planted"
NICE = REPO / "tests" / "fixtures" / "sizes"
PLANTED_STEPS = 200_000  # as tests/verify/test_falsify_bundles.py and tests/verify/test_sizes.py
# every launch of it runs to the limit (tests/verify/test_sizes.py)
STEPS = {"infinite_loop": 20_000}
SIZES_IN_DETAIL = re.compile(r": ((?:[a-z_]+=[0-9,]+;? ?)+?)(?: \(chosen: ([^)]*\)?)\))?; seed ")


@dataclass(frozen=True)
class Target:
    name: str  # "layernorm_rows", "planted/off_by_one", "nice/off_by_one"
    files: dict[str, bytes]
    expect: str  # "pass": every check passes; "fail": some check fails, none passes
    steps: int
    tests: int | None = None  # only the first ``tests`` tests (the nice copies: 1)


@dataclass
class Tally:
    seeds: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)


def bundle_targets(only: set[str]) -> list[Target]:
    out = []
    for d in sorted(BUNDLES.iterdir()):
        if (d / "contract.yaml").is_file() and (not only or d.name in only):
            files = {f.path: f.data for f in Bundle.from_dir(d).files}
            out.append(Target(d.name, files, "pass", Options().interp_step_limit))
    return out


def planted_targets(only: set[str]) -> list[Target]:
    out = []
    for d in sorted(PLANTED.iterdir()):
        if not (d / "contract.yaml").is_file() or (only and d.name not in only):
            continue
        files = {f.path: f.data for f in Bundle.from_dir(d).files}
        steps = STEPS.get(d.name, PLANTED_STEPS)
        out.append(Target(f"planted/{d.name}", files, "fail", steps))
        nice = NICE / f"nice-{d.name}.yaml"
        if nice.is_file():
            copy = {**files, "contract.yaml": nice.read_bytes()}
            out.append(Target(f"nice/{d.name}", copy, "fail", steps, tests=1))
    return out


def run_target(t: Target, seed: int, fixed_sizes: bool = False) -> list[Check]:
    """What ``ledger check --no-gpu --seed <seed>`` runs for the falsify group of ``t``; with
    ``fixed_sizes``, for a planted target, also its first test at the verifier's chosen sizes
    without the random draws and without the author's (``FIXED`` in the check id): what the
    contract alone makes the verifier run, so that a bug caught only by a lucky draw shows."""
    options = Options(use_gpu=False, seed=seed, interp_step_limit=t.steps)
    ctx = Context(Bundle.from_files(t.files), options)
    contract = load_contract(t.files["contract.yaml"])
    if t.tests is not None:
        contract = dataclasses.replace(contract, falsification=contract.falsification[: t.tests])
    ctx.contract = contract
    try:
        checks = falsify.run(ctx)
    finally:
        ctx.close()
    if fixed_sizes and t.expect == "fail" and contract.kernel is not None:
        checks.append(fixed_sizes_check(t, contract, seed, options))
    return checks


def fixed_sizes_check(t: Target, contract: Contract, seed: int, options: Options) -> Check:
    kernel, test = contract.kernel, contract.falsification[0]
    assert kernel is not None
    rng = falsify._stream(seed, test.id, 1)  # the generator plan_bindings gives choose_sizes
    plan = choose_sizes(kernel, test.sizes, rng, falsify.CPU_COST_CAP)
    only = [falsify.Binding(c.sizes, seed, c.why) for c in plan.chosen if c.why != "random"]
    oracles = oracles_for(kernel, t.files, options)
    try:
        check = falsify.run_test(
            kernel,
            test,
            t.files[kernel.ptx],
            test.seed,
            falsify.InterpreterEngine(step_limit=t.steps),
            run_seed=seed,
            bindings=only,
            oracles=oracles,
        )
    finally:
        oracles.close()
    return dataclasses.replace(check, id=f"{check.id} FIXED")


def where(detail: str) -> str:
    """The sizes (and why they were chosen) that a failed check's detail names."""
    m = SIZES_IN_DETAIL.search(detail)
    if m is None:
        return "?"
    sizes = m.group(1).strip().rstrip(";")
    return f"{sizes} (chosen: {m.group(2)})" if m.group(2) else f"{sizes} (author's)"


def judge(t: Target, seed: int, checks: list[Check]) -> list[dict[str, Any]]:
    """The unexpected outcomes of one run."""
    if t.expect == "pass":
        return [
            {
                "target": t.name,
                "seed": seed,
                "check": c.id,
                "status": c.status,
                "sizes": where(c.detail),
                "detail": c.detail,
                "reproduce": f".venv/bin/python -m ledger_cli check bundles/{t.name} --no-gpu "
                f"--seed {seed}",
            }
            for c in checks
            if c.status != "passed"
        ]
    fixed = [c for c in checks if c.id.endswith(" FIXED")]
    main = [c for c in checks if c not in fixed]
    out: list[dict[str, Any]] = [
        {
            "target": t.name,
            "seed": seed,
            "check": c.id,
            "status": f"escaped the fixed chosen sizes: {c.status}",
            "sizes": "",
            "detail": c.detail,
            "reproduce": "",
        }
        for c in fixed
        if c.status != "failed"
    ]
    if any(c.status == "failed" for c in main) and not any(c.status == "passed" for c in main):
        return out
    return [
        *out,
        {
            "target": t.name,
            "seed": seed,
            "check": ",".join(c.id for c in main),
            "status": "escaped: " + ",".join(c.status for c in main),
            "sizes": "",
            "detail": " | ".join(c.detail for c in main),
            "reproduce": "",
        },
    ]


# --- what the interpreter cannot reach: float32 emulation at the sizes a GPU run chooses --------

F32 = np.float32
Arr = np.ndarray[Any, Any]


def _warp_sum(v: Arr) -> Arr:
    """The xor butterfly of five shfl.sync.bfly steps over the last axis (32 lanes): every lane
    ends with the same f32 sum, in the kernels' order."""
    for off in (16, 8, 4, 2, 1):
        v = (v + v[..., np.arange(32) ^ off]).astype(F32)
    out: Arr = v[..., 0]
    return out


def _lane_sums(vals: Arr, fn: Any) -> Arr:
    """Per lane l, the f32 sum over the columns l, l + 32, ... in order (``fn(acc, v)``)."""
    acc = np.zeros((vals.shape[0], 32), F32)
    for c0 in range(0, vals.shape[1], 32):
        n = min(32, vals.shape[1] - c0)
        acc[:, :n] = fn(acc[:, :n], vals[:, c0 : c0 + n])
    return acc


def layernorm_f32(x: Arr, g: Arr, b: Arr, corrected: bool) -> Arr:
    """kernels/layernorm_rows in f32 (``corrected``) or as it was (the planted
    layernorm_rounded_mean): sums, div.rn, fma, sqrt.rn, rcp.rn in the PTX's order."""
    cols = x.shape[1]

    def add(a: Arr, v: Arr) -> Arr:
        return (a + v).astype(F32)

    def fma_sq(a: Arr, v: Arr) -> Arr:
        return (v.astype(np.float64) * v + a).astype(F32)

    mean = (_warp_sum(_lane_sums(x, add)) / F32(cols)).astype(F32)
    d = (x - mean[:, None]).astype(F32)
    q = _warp_sum(_lane_sums(d, fma_sq))
    if corrected:
        r = _warp_sum(_lane_sums(d, add))
        lo = (r / F32(cols)).astype(F32)
        var = (np.maximum((q - (r * lo).astype(F32)).astype(F32), F32(0)) / F32(cols)).astype(F32)
        d = (d - lo[:, None]).astype(F32)
    else:
        var = (q / F32(cols)).astype(F32)
    rstd = (F32(1) / np.sqrt((var + F32(1e-5)).astype(F32))).astype(F32)
    t = (rstd[:, None] * d).astype(F32)
    return (g.astype(np.float64)[None, :] * t + b[None, :]).astype(F32)


def layernorm_f64(x: Arr, g: Arr, b: Arr) -> Arr:
    x64 = x.astype(np.float64)
    m = x64.mean(1, keepdims=True)
    v = ((x64 - m) ** 2).mean(1, keepdims=True)
    y: Arr = ((x64 - m) / np.sqrt(v + 1e-5) * g + b).astype(F32)
    return y


def _misses(got: Arr, want: Arr, abs_t: float, rel_t: float) -> tuple[float, float]:
    """(largest abs error, fraction of elements outside abs_t or rel_t), as verify.compare."""
    w = want.astype(F32).astype(np.float64)
    d = np.abs(got.astype(np.float64) - w)
    rel = d / np.maximum(np.abs(w), np.finfo(F32).tiny)
    return float(d.max()), float(np.mean(~((d <= abs_t) | (rel <= rel_t))))


def emulate(scale: float) -> None:
    """Print the tolerance margins the docs quote (docs/falsification.md "Seed campaign")."""
    rng = np.random.default_rng(0)
    print("layernorm_rows, abs 1e-5 or rel 1e-4: max abs error, fraction outside")
    cases: list[tuple[int, float, float | None]] = [(c, 4.0, None) for c in (2, 3, 33, 257, 4096)]
    cases += [(c, 4.0, s) for c in (3, 33, 4096) for s in (1e-1, 1e-3)]
    for cols, lim, spread in cases:
        rows = max(100, int(scale * 2_000_000) // cols)
        if spread is None:
            x = rng.uniform(-lim, lim, (rows, cols))
        else:
            x = rng.uniform(-lim, lim, (rows, 1)) + spread * rng.uniform(-1, 1, (rows, cols))
        x = np.clip(x, -lim, lim).astype(F32)
        g, b = (rng.uniform(-lim, lim, cols).astype(F32) for _ in range(2))
        want = layernorm_f64(x, g, b)
        old = _misses(layernorm_f32(x, g, b, False), want, 1e-5, 1e-4)
        new = _misses(layernorm_f32(x, g, b, True), want, 1e-5, 1e-4)
        what = "inputs in ±4" if spread is None else f"rows of spread {spread:g}"
        print(f"  cols={cols:<5} {what:22} rounded mean {old[0]:.2e} {old[1]:.1e}"
              f" | m + m_lo {new[0]:.2e} {new[1]:.1e}")
    n = max(1000, int(scale * 200_000))
    print("gemm_tiled (sequential fma chain), inputs in ±1: max abs error, outside abs 2e-5 /"
          " abs 1e-3 (rel 1e-5)")
    for k in (44, 512, 1024, 2895, 4096):
        acc, exact = np.zeros(n, F32), np.zeros(n)
        for _ in range(k):
            p = rng.uniform(-1, 1, n).astype(F32).astype(np.float64) * rng.uniform(-1, 1, n).astype(
                F32
            )
            acc, exact = (p + acc).astype(F32), exact + p
        m2, f2 = _misses(acc, exact, 2e-5, 1e-5)
        _, f3 = _misses(acc, exact, 1e-3, 1e-5)
        print(f"  k={k:<5} {m2:.2e}  {f2:.1e} / {f3:.1e}")
    print("gemm_mma (one rounding per mma.m16n8k8): nearest (the interpreter) and toward zero"
          " (a model of tensor cores)")
    for lim, abs_t in ((1.0, 2e-4), (2.0, 1e-3)):
        for k in (512, 2560, 4096):
            rn, rz, exact = np.zeros(n, F32), np.zeros(n, F32), np.zeros(n)
            for _ in range(k // 8):
                a = rng.uniform(-lim, lim, (n, 8)).astype(np.float16).astype(np.float64)
                p = (a * rng.uniform(-lim, lim, (n, 8)).astype(np.float16)).sum(1)
                exact += p
                rn = (p + rn).astype(F32)
                s = p + rz
                r = s.astype(F32)
                rz = np.where(np.abs(r) > np.abs(s), np.nextafter(r, F32(0)), r).astype(F32)
            a_rn, a_rz = _misses(rn, exact, abs_t, 1e-4), _misses(rz, exact, abs_t, 1e-4)
            print(f"  ±{lim:g} k={k:<5} abs {abs_t:g}: nearest {a_rn[0]:.2e} {a_rn[1]:.1e}"
                  f" | toward zero {a_rz[0]:.2e} {a_rz[1]:.1e}")
    print("dot_shfl (256-term butterfly partials, any n): max abs error, fraction outside")
    for lim, abs_t in ((1.0, 1e-4), (10.0, 1e-3)):
        a = rng.uniform(-lim, lim, (n, 256)).astype(F32)
        b = rng.uniform(-lim, lim, (n, 256)).astype(F32)
        w = np.zeros((n, 32), F32)
        w[:, :8] = _warp_sum((a * b).astype(F32).reshape(n, 8, 32))
        got = _warp_sum(w)
        m, f = _misses(got, (a.astype(np.float64) * b).sum(1), abs_t, 1e-5)
        print(f"  ±{lim:g} abs {abs_t:g}: {m:.2e} {f:.1e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=200, help="seeds per target (default 200)")
    ap.add_argument("--first", type=int, default=None, help="first seed (default: fresh)")
    ap.add_argument("--minutes", type=float, default=None, help="stop between seeds after this")
    ap.add_argument("--planted", action="store_true", help="the planted-bug fixtures instead")
    ap.add_argument("--only", action="append", default=[], help="a bundle or fixture name")
    ap.add_argument(
        "--fixed-sizes",
        action="store_true",
        help="planted: also the first test at the non-random chosen sizes alone",
    )
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument(
        "--emulate",
        type=float,
        default=None,
        metavar="SCALE",
        help="instead: float32 emulation of the float kernels at GPU sizes (1 = the docs' counts)",
    )
    args = ap.parse_args(argv)
    if args.emulate is not None:
        emulate(args.emulate)
        return 0
    if args.seeds < 1:
        print("seed_campaign: --seeds must be at least 1", file=sys.stderr)
        return 2
    first = args.first if args.first is not None else secrets.randbelow(1 << 32)
    only = set(args.only)
    targets = planted_targets(only) if args.planted else bundle_targets(only)
    if not targets:
        print(f"seed_campaign: no target matches {sorted(only)}", file=sys.stderr)
        return 2
    print(f"seed campaign: {len(targets)} targets, seeds {first}..{first + args.seeds - 1}")
    tallies = {t.name: Tally() for t in targets}
    stop_at = None if args.minutes is None else time.monotonic() + 60 * args.minutes
    t_start = time.monotonic()
    for i in range(args.seeds):  # seed-major: a time-boxed run covers every target evenly
        if stop_at is not None and time.monotonic() > stop_at:
            print(f"stopped after {i} seeds (--minutes {args.minutes:g})")
            break
        seed = (first + i) % (1 << 32)
        for t in targets:
            t0 = time.monotonic()
            bad = judge(t, seed, run_target(t, seed, args.fixed_sizes))
            tally = tallies[t.name]
            tally.seconds += time.monotonic() - t0
            tally.seeds += 1
            tally.failures.extend(bad)
            for b in bad:
                print(f"FAIL {b['target']} seed {seed} {b['check']} {b['status']} at {b['sizes']}")
                print(f"     {b['detail'][:400]}")
                if b["reproduce"]:
                    print(f"     reproduce: {b['reproduce']}")
                sys.stdout.flush()
        if (i + 1) % 10 == 0:
            print(f"... {i + 1} seeds, {time.monotonic() - t_start:.0f} s", flush=True)
    total = sum(len(ty.failures) for ty in tallies.values())
    print(f"\n{'target':34} {'seeds':>5} {'s/seed':>7} {'unexpected':>10}")
    for name, ty in tallies.items():
        per = ty.seconds / ty.seeds if ty.seeds else 0.0
        print(f"{name:34} {ty.seeds:5d} {per:7.2f} {len(ty.failures):10d}")
    print(f"{total} unexpected outcomes in {time.monotonic() - t_start:.0f} s (first seed {first})")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "first_seed": first,
                    "planted": args.planted,
                    "targets": {
                        n: {"seeds": ty.seeds, "seconds": round(ty.seconds, 2),
                            "failures": ty.failures}
                        for n, ty in tallies.items()
                    },
                },
                indent=1,
            )
        )
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
