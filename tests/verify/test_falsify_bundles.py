"""falsify.<TEST-ID> through the real PTX interpreter on the bundled kernels and planted bugs.

Every bundled kernel (bundles/, built by kernels/build.py with nvcc) must pass every falsification
test of its contract; every planted-bug fixture (tests/fixtures/planted/, same build) must fail
with the finding its bug causes, named precisely (kind, property tag, thread and location).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from verify import falsify
from verify.context import Context, Options
from verify.contract import load_contract
from verify.model import FalsificationTest
from verify.report import Check

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = sorted(p for p in (ROOT / "bundles").iterdir() if (p / "contract.yaml").is_file())
PLANTED_DIR = ROOT / "tests" / "fixtures" / "planted"
PLANTED = sorted(p for p in PLANTED_DIR.iterdir() if (p / "contract.yaml").is_file())
RUN_SEED = 20261201  # the run's seed, fixed so the suite is reproducible (default: fresh)
CPU = Options(use_gpu=False, seed=RUN_SEED)

# planted fixture -> (the finding kind with its property/obligation tag, what its message names)
EXPECTED = {
    "missing_barrier": ("race [race_free/PO7]: ", ["shared byte", "read by thread", "PTX line"]),
    "off_by_one": ("out_of_bounds [bounds/PO2]: ", ["past its end", "by thread", "PTX line"]),
    "off_by_one_unwritten": ("unwritten [coverage/PO1]: ", ["buffer 'c' were never written"]),
    "divergent_barrier": ("divergent_barrier [convergence/PO3]: ", ["thread", "line"]),
    "double_write": ("double_write [coverage/PO1]: ", ["buffer 'c' written by thread", "again"]),
    "infinite_loop": ("step_limit [reference/PO8]: ", ["stopped after 200000", "PTX line"]),
    # the fixtures of the kernels with bundle references (tests/ledger_cli/test_scaffold.py)
    "saxpy_off_by_one": ("out_of_bounds [bounds/PO2]: ", ["buffer 'x'", "past its end"]),
    "bias_gelu_row_bias": ("elements of y outside abs 1e-06 or rel 2e-05", ["oracle bundle:"]),
    "transpose_missing_barrier": ("race [race_free/PO7]: ", ["shared byte", "PTX line"]),
    "layernorm_shfl_down": ("elements of y outside abs 1e-05 or rel 0.0001", ["oracle bundle:"]),
    "layernorm_lane_exit": ("shuffle_undefined_lane [initialised/PO6]: ", ["has exited"]),
    "layernorm_rounded_mean": ("elements of y outside abs 1e-05 or rel 0.0001", ["oracle bundle:"]),
    "histogram_nonatomic": ("race [race_free/PO7]: ", ["shared byte", "PTX line"]),
    "scan_up_unguarded": ("elements of out outside ", ["oracle bundle:reference.py#scan_blocks"]),
    "vadd4_tail": ("unwritten [coverage/PO1]: ", ["buffer 'c' were never written"]),
    "gemm_edge_tiles": ("out_of_bounds [bounds/PO2]: ", ["past its end", "by thread", "PTX line"]),
}


def checks_for(bundle_dir: Path, options: Options = CPU) -> list[Check]:
    bundle = Bundle.from_dir(bundle_dir)
    ctx = Context(bundle, options)
    ctx.contract = load_contract(bundle.file("contract.yaml"))
    return falsify.run(ctx)


@pytest.mark.parametrize("bundle_dir", BUNDLES, ids=[p.name for p in BUNDLES])
def test_bundled_kernel_passes_every_falsification_test(bundle_dir: Path) -> None:
    contract = load_contract(Bundle.from_dir(bundle_dir).file("contract.yaml"))
    checks = checks_for(bundle_dir)
    assert [c.id for c in checks] == [f"falsify.{t.id}" for t in contract.falsification]
    for c, t in zip(checks, contract.falsification, strict=True):
        assert c.status == "passed", f"{c.id}: {c.detail}"
        assert c.detail.startswith("interpreter ptxsim ")
        assert f"; seed {t.seed}; chosen " in c.detail
        assert f" at seed {RUN_SEED} (domain " in c.detail
        k = contract.kernel
        oracle = (
            f"oracle bundle:{k.reference_file}#{k.reference_function} ("  # + the sandbox used
            if k.reference_file
            else f"oracle trusted:{k.reference}"
        )
        assert (
            "no race/bounds/barrier/coverage/initialisation/step-limit findings; " + oracle
        ) in c.detail
        assert c.tool == "interpreter" and c.version.startswith("ptxsim ")


def test_every_planted_fixture_has_an_expected_finding() -> None:
    assert {p.name for p in PLANTED} <= set(EXPECTED), "add the new fixture to EXPECTED"
    assert len(PLANTED) >= 5


@pytest.mark.parametrize("planted", PLANTED, ids=[p.name for p in PLANTED])
def test_planted_bug_fails_with_the_right_finding(planted: Path) -> None:
    options = Options(use_gpu=False, interp_step_limit=200_000)
    checks = checks_for(planted, options)
    assert checks, "the planted contract has falsification tests"
    bad = [c for c in checks if c.status == "failed"]
    assert bad, [c.detail for c in checks]
    want, names = EXPECTED[planted.name]
    hits = [c for c in bad if want in c.detail]
    assert hits, f"expected {want!r} in one of {[c.detail for c in bad]}"
    detail = hits[0].detail
    assert detail.startswith("interpreter ptxsim ") and "; seed " in detail
    message = detail.split(want, 1)[1]
    for name in names:
        assert name in message, (name, message)
    assert not any(c.status == "passed" for c in checks)


def vadd_parts() -> tuple[Context, FalsificationTest]:
    bundle = Bundle.from_dir(ROOT / "bundles" / "vector_add")
    ctx = Context(bundle, CPU)
    ctx.contract = load_contract(bundle.file("contract.yaml"))
    return ctx, ctx.contract.falsification[0]


def test_no_contract_or_no_kernel_gives_no_checks() -> None:
    ctx, _ = vadd_parts()
    assert ctx.contract is not None
    ctx.contract = dataclasses.replace(ctx.contract, kernel=None)
    assert falsify.run(ctx) == []
    ctx.contract = None
    assert falsify.run(ctx) == []


def test_seed_option_seeds_the_chosen_sizes_and_reproduces_the_run() -> None:
    ctx, _ = vadd_parts()
    ctx.options = Options(use_gpu=False, seed=12345)
    checks = falsify.run(ctx)
    assert all(c.status == "passed" and " at seed 12345 (domain " in c.detail for c in checks)
    assert [c.detail for c in falsify.run(ctx)] == [c.detail for c in checks]  # exactly again
    assert "; seed 7; chosen n=" in checks[0].detail  # the contract's seed as well


def test_a_fresh_seed_by_default_recorded_in_the_detail() -> None:
    ctx, _ = vadd_parts()
    ctx.options = Options(use_gpu=False)
    seeds = set()
    for _ in range(2):
        [first, _second] = falsify.run(ctx)
        assert first.status == "passed", first.detail
        seeds.add(first.detail.split(" at seed ", 1)[1].split(" ", 1)[0])
    assert len(seeds) == 2 and all(s.isdigit() for s in seeds)


def test_step_limit_is_a_failure_not_a_pass() -> None:
    ctx, _ = vadd_parts()
    ctx.options = Options(use_gpu=False, interp_step_limit=3)
    [first, *_] = falsify.run(ctx)
    assert first.status == "failed"
    assert "step_limit [reference/PO8]: " in first.detail


def test_missing_ptx_and_unknown_reference_fail() -> None:
    ctx, test = vadd_parts()
    assert ctx.contract is not None and ctx.contract.kernel is not None
    kernel = ctx.contract.kernel
    ctx.contract = dataclasses.replace(
        ctx.contract, kernel=dataclasses.replace(kernel, ptx="nope.ptx")
    )
    checks = falsify.run(ctx)
    assert checks[0].status == "failed"
    assert checks[0].detail == "the kernel's PTX 'nope.ptx' is not in the bundle"
    engine = falsify.InterpreterEngine()
    odd = dataclasses.replace(kernel, reference="vector_add_from_the_bundle")
    c = falsify.run_test(odd, test, b"", 7, engine)
    assert c.status == "failed"
    assert c.detail == (
        "kernel.reference 'vector_add_from_the_bundle' is not in the trusted reference registry"
    )


def test_not_executable_is_skipped() -> None:
    _, test = vadd_parts()
    ctx, _ = vadd_parts()
    assert ctx.contract is not None and ctx.contract.kernel is not None
    prose = dataclasses.replace(test, sizes=(), properties=(), executable=False)
    c = falsify.run_test(ctx.contract.kernel, prose, b"", 7, falsify.InterpreterEngine())
    assert (c.status, c.detail) == ("skipped", "not executable: no sizes/properties")


def test_wrong_result_fails_with_the_first_bad_element() -> None:
    ctx, test = vadd_parts()
    assert ctx.contract is not None and ctx.contract.kernel is not None
    kernel = ctx.contract.kernel
    ptx = ctx.bundle.file(kernel.ptx)
    assert b"add.f32" in ptx
    wrong = ptx.replace(b"add.f32", b"sub.f32")  # the kernel now computes a - b
    c = falsify.run_test(kernel, test, wrong, 7, falsify.InterpreterEngine())
    assert c.status == "failed"
    assert ": n=1; seed 7: c[0]: got " in c.detail
    assert c.detail.endswith("1 of 1 elements of c outside 0 ulp (oracle trusted:vector_add_f32)")


def test_unsupported_instruction_is_skipped_never_passed() -> None:
    ctx, test = vadd_parts()
    assert ctx.contract is not None and ctx.contract.kernel is not None
    kernel = ctx.contract.kernel
    ptx = ctx.bundle.file(kernel.ptx)
    odd = ptx.replace(b"\tret;", b"\tbar.arrive 0, 32;\n\tret;", 1)
    assert odd != ptx
    c = falsify.run_test(kernel, test, odd, 7, falsify.InterpreterEngine())
    assert c.status == "skipped"
    assert "could not run it: " in c.detail and "bar.arrive" in c.detail


def test_entry_missing_from_the_ptx_fails() -> None:
    ctx, test = vadd_parts()
    assert ctx.contract is not None and ctx.contract.kernel is not None
    kernel = dataclasses.replace(ctx.contract.kernel, entry="vector_ad")
    ptx = ctx.bundle.file(kernel.ptx)
    assert falsify.has_entry(ptx, "vector_add") and not falsify.has_entry(ptx, "vector_ad")
    c = falsify.run_test(kernel, test, ptx, 7, falsify.InterpreterEngine())
    assert (c.status, c.detail) == (
        "failed",
        "kernel.entry 'vector_ad' is not an .entry of the PTX",
    )


def test_time_budget_spent_skips_the_remaining_tests() -> None:
    ctx, _ = vadd_parts()
    ctx.options = Options(use_gpu=False, timeout=0.0)
    checks = falsify.run(ctx)
    assert [c.status for c in checks] == ["skipped", "skipped"]
    assert checks[0].detail.endswith(
        ": n=1; seed 7: " + falsify.BUDGET_SPENT + " (oracle trusted:vector_add_f32)"
    )
