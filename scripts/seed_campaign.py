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
  tests/test_falsify_bundles.py) and their "nice sizes" copies (tests/fixtures/sizes/
  nice-<bug>.yaml, first test only, as tests/test_sizes.py runs them): on every seed at least
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ledger.bundle import Bundle  # noqa: E402
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
PLANTED_STEPS = 200_000  # as tests/test_falsify_bundles.py and tests/test_sizes.py
STEPS = {"infinite_loop": 20_000}  # every launch of it runs to the limit (tests/test_sizes.py)
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
                "reproduce": f".venv/bin/python -m ledger.cli check bundles/{t.name} --no-gpu "
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
    args = ap.parse_args(argv)
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
