"""Issue 15: size domains in contracts, sizes the verifier chooses, fresh seeds, tolerance lint.

The planted-bug fixtures are run again under contracts that list only "nice" sizes
(tests/fixtures/sizes/nice-*.yaml): each must still fail, and fail through the sizes the verifier
chose alone. The float4 vector add that drops the ``n % 4`` tail is caught at a chosen size; the
same PTX with ``multiple_of: 4`` declared is a correct kernel and passes every chosen size.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import ContractError
from verify import falsify, sizes
from verify.context import Context, Options
from verify.contract import load_contract, parse_yaml
from verify.contract_lint import lint_contract, schema_errors
from verify.expr import eval_relation, parse_relation
from verify.model import Contract, FalsificationTest, SizeRange, domain_text
from verify.oracle import Oracles, oracles_for
from verify.report import Check

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "fixtures" / "planted"
FIX = ROOT / "tests" / "fixtures" / "sizes"
BUNDLES = ROOT / "bundles"
SEED = 424242
CPU = Options(use_gpu=False, seed=SEED, interp_step_limit=200_000)
STEPS = {"infinite_loop": 20_000}  # warp-instructions: its every launch runs to the limit
NICE = sorted(p.name.removeprefix("nice-").removesuffix(".yaml") for p in FIX.glob("nice-*.yaml"))
# Bugs that only show at sizes that are not multiples of the block: the nice sizes pass them, so
# the failure must come from a size the verifier chose.
SIZE_DEPENDENT = {
    "off_by_one",
    "vadd4_tail",
    "saxpy_off_by_one",
    "layernorm_lane_exit",
    "gemm_edge_tiles",
}


def contract_of(name: str) -> Contract:
    return load_contract((BUNDLES / name / "contract.yaml").read_bytes())


def parts(bug: str) -> tuple[falsify.Kernel, FalsificationTest, bytes, Oracles]:
    """The nice-sizes contract of a planted bug: kernel, first test, PTX, and its oracles."""
    data = (FIX / f"nice-{bug}.yaml").read_bytes()
    files = {f.path: f.data for f in Bundle.from_dir(PLANTED / bug).files}
    files["contract.yaml"] = data
    contract = load_contract(data)
    kernel = contract.kernel
    assert kernel is not None
    return kernel, contract.falsification[0], files[kernel.ptx], oracles_for(kernel, files, CPU)


def run_with(
    bundle_dir: Path, contract_yaml: bytes, options: Options = CPU, tests: int | None = None
) -> list[Check]:
    """``falsify.run`` on the bundle with ``contract_yaml`` (only its first ``tests`` tests)."""
    files = {f.path: f.data for f in Bundle.from_dir(bundle_dir).files}
    files["contract.yaml"] = contract_yaml
    ctx = Context(Bundle.from_files(files), options)
    contract = load_contract(contract_yaml)
    ctx.contract = dataclasses.replace(contract, falsification=contract.falsification[:tests])
    return falsify.run(ctx)


# --- the contract format --------------------------------------------------------------------


def test_domains_of_the_bundled_contracts() -> None:
    mma = contract_of("gemm_mma").kernel
    assert mma is not None
    assert mma.size_domain == (
        SizeRange("m", 32, 4096, 32),
        SizeRange("n", 32, 4096, 32),
        SizeRange("k", 16, 4096, 16),
    )
    assert domain_text(mma.size_domain) == (
        "m a multiple of 32, 32 ≤ m ≤ 2^12; n a multiple of 32, 32 ≤ n ≤ 2^12; "
        "k a multiple of 16, 16 ≤ k ≤ 2^12"
    )
    soft = contract_of("softmax_rows").kernel
    assert soft is not None and soft.size_constraints == ("rows * cols <= 16777216",)
    for b in sorted(BUNDLES.iterdir()):
        k = contract_of(b.name).kernel
        assert k is not None and k.size_domain, b.name


VADD = (BUNDLES / "vector_add" / "contract.yaml").read_text()
DOMAIN = "  size_domain:\n    n: {min: 1, max: 16777216}\n"


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        ("  size_domain:\n    n: {min: 1}\n", "kernel.size_domain.n.max: missing"),
        ("  size_domain:\n    n: {min: 9, max: 3}\n", "kernel.size_domain.n: min 9 is above max 3"),
        (
            "  size_domain:\n    n: {min: 1, max: 3, multiple_of: 4}\n",
            "kernel.size_domain.n: no multiple of 4 lies in [1, 3]",
        ),
        (
            "  size_domain:\n    n: {min: 1, max: 3, step: 4}\n",
            "kernel.size_domain.n.step: unknown field (allowed: min, max, multiple_of)",
        ),
        ("  size_domain: {}\n", "kernel.size_domain: must name at least one size variable"),
        (
            DOMAIN + '  size_constraints: ["n = 4"]\n',
            "kernel.size_constraints[0]: expected a relation: relation 'n = 4': needs one of",
        ),
        (
            DOMAIN + '  size_constraints: ["1 < n < 4"]\n',
            "only one comparison is allowed",
        ),
        (
            "  size_domain:\n    n: {min: -1, max: 3}\n",
            "kernel.size_domain.n.min: -1 is out of range",
        ),
    ],
)
def test_bad_domains_are_refused_with_the_field(domain: str, message: str) -> None:
    assert DOMAIN in VADD
    with pytest.raises(ContractError) as e:
        load_contract(VADD.replace(DOMAIN, domain).encode())
    assert message in str(e.value)


def test_schema_accepts_domains_and_justified_tolerances() -> None:
    text = VADD.replace(DOMAIN, DOMAIN + '  size_constraints: ["n % 2 == 1", "n <= 4099"]\n')
    text = text.replace("tolerance: {ulp: 0}", 'tolerance: {ulp: 0, why: "IEEE addition"}', 1)
    c = load_contract(text.encode())
    assert c.falsification[0].tolerance.why == "IEEE addition"
    assert schema_errors(parse_yaml(text.encode())) == []
    bad = VADD.replace("max: 16777216}", "max: 16777216, multiple_of: 0}")
    assert schema_errors(parse_yaml(bad.encode())) == ["kernel.size_domain.n.multiple_of: below 1"]


def test_relations() -> None:
    assert parse_relation("rows * cols <= 1048576") == ("rows * cols", "<=", "1048576")
    assert eval_relation("rows * cols <= 16", {"rows": 4, "cols": 4})
    assert not eval_relation("k % 16 == 0", {"k": 17})
    with pytest.raises(ContractError):
        parse_relation("n ** 2 < 4")


# --- contract.lint: domain and tolerance gates --------------------------------------------------


def gate(contract: Contract, name: str, files: dict[str, bytes] | None = None) -> tuple[str, str]:
    (g,) = [g for g in lint_contract(contract, files) if g.name == name]
    return g.status, g.reason


def test_domain_gate_names_undeclared_variables_and_sizes_outside() -> None:
    c = contract_of("gemm_tiled")
    k = c.kernel
    assert k is not None
    assert gate(c, "domain") == ("passed", "")
    part = dataclasses.replace(k, size_domain=k.size_domain[:2])
    assert gate(dataclasses.replace(c, kernel=part), "domain") == (
        "failed",
        "kernel.size_domain does not declare k (add e.g. k: {min: 1, max: 1048576})",
    )
    mma = contract_of("gemm_mma")
    assert mma.kernel is not None
    t = dataclasses.replace(mma.falsification[0], sizes=({"m": 48, "n": 32, "k": 16},))
    status, reason = gate(dataclasses.replace(mma, falsification=(t,)), "domain")
    assert status == "failed"
    assert reason == (
        "FALSIFY-MMA-001 sizes[0] (m=48, n=32, k=16) is outside the size domain: "
        "m=48 is not a multiple of 32"
    )


def test_domain_gate_checks_the_launch_at_the_domain_corners() -> None:
    """gemm_mma's grid is n // 32: a domain without multiple_of claims n = 1, an empty grid."""
    c = contract_of("gemm_mma")
    assert c.kernel is not None
    loose = tuple(dataclasses.replace(r, min=1, multiple_of=1) for r in c.kernel.size_domain)
    status, reason = gate(
        dataclasses.replace(c, kernel=dataclasses.replace(c.kernel, size_domain=loose)), "domain"
    )
    assert status == "failed"
    assert reason.startswith(
        "at the domain's minimum (m=1, n=1, k=1): grid[0] = 0 (must be 1..2147483647)"
    )


def with_tolerance(c: Contract, **tol: object) -> Contract:
    t = c.falsification[0]
    new = dataclasses.replace(t, tolerance=dataclasses.replace(t.tolerance, **tol))
    return dataclasses.replace(c, falsification=(new, *c.falsification[1:]))


def test_tolerance_gate() -> None:
    vadd = contract_of("vector_add")  # "exactly (0 ulp), every c[i] written once": ulp 0
    assert gate(vadd, "tolerance") == ("passed", "")
    status, reason = gate(with_tolerance(vadd, ulp=1.0), "tolerance")
    assert (status, reason) == (
        "failed",
        "FALSIFY-VADD-001: the prediction says 'exactly' but the tolerance allows ulp 1 (make it "
        "{ulp: 0} or state the real bound)",
    )
    f16 = contract_of("f16_convert")  # PO8 statement: "agrees bit for bit"
    t = dataclasses.replace(f16.falsification[0], prediction="close", rule="close")
    f16 = dataclasses.replace(f16, falsification=(t,))
    assert gate(with_tolerance(f16, ulp=None, rel=1e-6), "tolerance")[1] == (
        "FALSIFY-F16CVT-001: the certificate PO4 statement says 'round-to-nearest-even' but the "
        "tolerance allows rel 1e-06 (make it {ulp: 0} or state the real bound)"
    )
    gemm = contract_of("gemm_tiled")  # rel 1e-5 / abs 1e-3 (justified: k <= 4096), inputs in ±1
    assert gate(gemm, "tolerance") == ("passed", "")
    assert "k = 4096" in gemm.falsification[0].tolerance.why
    loose = with_tolerance(gemm, rel=1e-3, abs=0.5, why="")
    assert gate(loose, "tolerance")[1] == (
        "FALSIFY-GEMM-001: tolerance rel 0.001 is above 0.0001, abs 0.5 is above 0.001 (0.001 x "
        "inputs) with no justification (add tolerance.why: the error analysis that needs this "
        "bound)"
    )
    justified = with_tolerance(gemm, rel=1e-3, why="k-term f32 sums: k * eps with k <= 4096")
    assert gate(justified, "tolerance") == ("passed", "")


# --- choosing sizes -----------------------------------------------------------------------------


def test_tiles_and_blocks_read_from_the_launch() -> None:
    assert sizes.tiles(contract_kernel("vector_add")) == {"n": {256}}
    assert sizes.tiles(contract_kernel("gemm_tiled")) == {"n": {16}, "m": {16}}
    assert sizes.tiles(contract_kernel("gemm_mma")) == {"n": {32}, "m": {32}}
    assert sizes.tiles(contract_kernel("softmax_rows")) == {"rows": {1}}
    assert sizes.block_sizes(contract_kernel("gemm_tiled")) == [16, 256]
    assert sizes.next_prime(512) == 521 and sizes.next_prime(1) == 2
    r = SizeRange("k", 16, 4096, 16)
    assert (
        sizes.snap(r, 17) == [16, 32] and sizes.snap(r, 1) == [16] and sizes.snap(r, 9999) == [4096]
    )


def contract_kernel(name: str) -> falsify.Kernel:
    k = contract_of(name).kernel
    assert k is not None
    return k


def chosen(name: str, seed: int = SEED, test: int = 0) -> sizes.Plan:
    c = contract_of(name)
    t = c.falsification[test]
    assert c.kernel is not None
    rng = falsify._stream(seed, t.id, 1)
    return sizes.choose_sizes(c.kernel, t.sizes, rng, falsify.CPU_COST_CAP)


def test_vector_add_gets_the_edges_a_prime_and_random_draws() -> None:
    plan = chosen("vector_add", test=1)  # author sizes 300, 513
    got = {c.why: c.sizes["n"] for c in plan.chosen}
    assert got["n min"] == 1
    assert got["n tile-1 (256)"] == 255 and got["n tile+1 (256)"] == 257
    assert got["n prime above two tiles"] == 521
    assert got["n largest under the cap"] == 3072
    assert sum(c.why == "random" for c in plan.chosen) == sizes.RANDOM_DRAWS
    assert plan.notes == (
        "max n=16777216 not run (over the cost cap of 16384 for it); largest run n=3072",
    )
    costs = [sizes.cost(contract_kernel("vector_add"), c.sizes) for c in plan.chosen]
    assert costs == sorted(costs) and max(costs) <= falsify.CPU_COST_CAP


def test_chosen_sizes_respect_the_domain_and_are_reproducible() -> None:
    for name in ("gemm_mma", "softmax_rows", "gemm_tiled"):
        k = contract_kernel(name)
        plan = chosen(name)
        assert plan.chosen and len(plan.chosen) <= sizes.MAX_CHOSEN
        for c in plan.chosen:
            assert sizes.domain_problems(k, c.sizes) == [], (name, c)
        assert chosen(name) == plan  # the same seed, the same sizes
    mma = chosen("gemm_mma")
    assert all(c.sizes["m"] % 32 == 0 and c.sizes["k"] % 16 == 0 for c in mma.chosen)
    random_draws = [
        tuple(c.sizes.items()) for s in (1, 2, 3) for c in chosen("gemm_tiled", s).chosen
    ]
    assert len(set(random_draws)) > len(chosen("gemm_tiled").chosen)  # seeds differ in draws


def test_hostile_launch_and_domain_stay_cheap_to_plan() -> None:
    """A tile of 10^15 and a domain at 2^40: no huge prime search, nothing over the cap."""
    k = contract_kernel("vector_add")
    assert k.launch is not None
    wide = dataclasses.replace(
        k,
        launch=dataclasses.replace(k.launch, grid=("ceil_div(n, 1000000000000000)", "1", "1")),
        size_domain=(SizeRange("n", 1, 1 << 40),),
    )
    plan = sizes.choose_sizes(wide, ({"n": 7},), np.random.default_rng(1), 1 << 16)
    assert plan.chosen and all(sizes.cost(wide, c.sizes) <= 1 << 16 for c in plan.chosen)
    far = dataclasses.replace(k, size_domain=(SizeRange("n", 1 << 39, 1 << 40, 1 << 20),))
    plan = sizes.choose_sizes(far, ({"n": 1 << 39},), np.random.default_rng(1), 1 << 16)
    assert plan.chosen == ()
    assert plan.notes[-1] == (
        "sizes not extended: no binding inside the domain and under the cost cap"
    )


def test_without_a_domain_the_test_says_its_sizes_are_the_authors_only() -> None:
    k = dataclasses.replace(contract_kernel("vector_add"), size_domain=())
    plan = sizes.choose_sizes(k, ({"n": 1},), np.random.default_rng(1), 1 << 16)
    assert plan.chosen == ()
    assert plan.notes == ("sizes not extended: the contract declares no kernel.size_domain",)
    c = contract_of("vector_add")
    c = dataclasses.replace(c, kernel=k)
    ctx = Context(Bundle.from_dir(BUNDLES / "vector_add"), CPU)
    ctx.contract = c
    checks = falsify.run(ctx)
    assert all(ch.status == "passed" for ch in checks)
    assert all(f"{falsify.AUTHOR_ONLY}: the contract declares no" in ch.detail for ch in checks)


# --- planted bugs under nice sizes, and no false alarm -----------------------------------------


def test_every_planted_fixture_has_a_nice_sizes_copy() -> None:
    planted = {p.name for p in PLANTED.iterdir() if (p / "contract.yaml").is_file()}
    assert planted <= set(NICE), "add tests/fixtures/sizes/nice-<bug>.yaml"


@pytest.fixture(scope="module")
def nice_results() -> dict[str, list[Check]]:
    return {
        bug: run_with(
            PLANTED / bug,
            (FIX / f"nice-{bug}.yaml").read_bytes(),
            dataclasses.replace(CPU, interp_step_limit=STEPS.get(bug, CPU.interp_step_limit)),
            tests=1,  # the first test suffices; the suite's time is shared
        )
        for bug in NICE
    }


@pytest.mark.parametrize("bug", NICE)
def test_planted_bug_with_nice_sizes_still_fails(
    bug: str, nice_results: dict[str, list[Check]]
) -> None:
    checks = nice_results[bug]
    assert checks and any(c.status == "failed" for c in checks), [c.detail for c in checks]
    assert not any(c.status == "passed" for c in checks), [c.detail for c in checks]
    if bug in SIZE_DEPENDENT:
        detail = next(c.detail for c in checks if c.status == "failed")
        assert re.search(r"\(chosen: [^)]*\)?\); seed 424242: ", detail), detail


@pytest.mark.parametrize("bug", NICE)
def test_planted_bug_fails_through_the_chosen_sizes_alone(bug: str) -> None:
    kernel, t, ptx, oracles = parts(bug)
    engine = falsify.InterpreterEngine(step_limit=STEPS.get(bug, 200_000))
    rng = falsify._stream(SEED, t.id, 1)
    plan = sizes.choose_sizes(kernel, t.sizes, rng, falsify.CPU_COST_CAP)
    only = [falsify.Binding(c.sizes, SEED, c.why) for c in plan.chosen]
    try:
        check = falsify.run_test(
            kernel, t, ptx, t.seed, engine, run_seed=SEED, bindings=only, oracles=oracles
        )
    finally:
        oracles.close()
    assert check.status == "failed", check.detail
    assert " (chosen: " in check.detail


@pytest.mark.parametrize("bug", sorted(SIZE_DEPENDENT))
def test_author_sizes_alone_miss_the_size_dependent_bugs(bug: str) -> None:
    """The point of the fixtures: at the nice sizes the tail and the guard bugs do not show."""
    kernel, t, ptx, oracles = parts(bug)
    author = [falsify.Binding(s, t.seed) for s in t.sizes]
    try:
        check = falsify.run_test(
            kernel, t, ptx, t.seed, falsify.InterpreterEngine(), bindings=author, oracles=oracles
        )
    finally:
        oracles.close()
    assert check.status == "passed", check.detail
    assert f"{falsify.AUTHOR_ONLY}: only the author's sizes were run" in check.detail


def test_vadd4_tail_is_caught_at_a_chosen_size(nice_results: dict[str, list[Check]]) -> None:
    first = nice_results["vadd4_tail"][0]
    assert first.status == "failed"
    assert "unwritten [coverage/PO1]: " in first.detail
    assert "(chosen: n " in first.detail


def test_the_same_float4_kernel_with_multiple_of_4_declared_passes() -> None:
    data = (FIX / "vadd4_multiple_of_4.yaml").read_bytes()
    contract = load_contract(data)
    assert contract.kernel is not None
    assert contract.kernel.size_domain == (SizeRange("n", 4, 16777216, 4),)
    checks = run_with(PLANTED / "vadd4_tail", data)
    assert [c.status for c in checks] == ["passed", "passed"], [c.detail for c in checks]
    for c in checks:
        listed = c.detail.split("; chosen n=", 1)[1].split(" ", 1)[0]
        values = [int(v) for v in listed.split(",")]
        assert values and all(v % 4 == 0 for v in values), values
        assert "n a multiple of 4, 4 ≤ n ≤ 2^24" in c.detail


def test_a_domain_wider_than_the_launch_fails_at_the_chosen_size() -> None:
    """gemm_mma claimed for every m, n, k: the grid n // 32 is empty at a chosen n < 32."""
    c = contract_of("gemm_mma")
    assert c.kernel is not None
    loose = tuple(dataclasses.replace(r, min=1, multiple_of=1) for r in c.kernel.size_domain)
    kernel = dataclasses.replace(c.kernel, size_domain=loose)
    ptx = (BUNDLES / "gemm_mma" / "gemm_mma.ptx").read_bytes()
    t = c.falsification[1]
    check = falsify.run_test(kernel, t, ptx, t.seed, falsify.InterpreterEngine(), run_seed=SEED)
    assert check.status == "failed"
    assert "(chosen: " in check.detail and "launch.grid must be three positive integers" in (
        check.detail
    )


# --- the CLI: a fresh seed by default, --seed reproduces a run exactly ---------------------------


def test_cli_seed_reproduces_a_check_and_a_fresh_one_is_recorded() -> None:
    from tests.helpers.ledgers import assert_one_error_line, cli_json, run_cli

    vadd = str(BUNDLES / "vector_add")

    def falsify_details(*extra: str) -> list[str]:
        report = cli_json("check", vadd, "--no-gpu", *extra)
        return [c["detail"] for c in report["checks"] if c["id"].startswith("falsify.")]

    fresh = falsify_details()
    m = re.search(r"; seed 7; chosen n=[0-9,]+ at seed (\d+) \(domain ", fresh[0])
    assert m, fresh[0]
    assert falsify_details("--seed", m.group(1)) == fresh  # the recorded seed replays the run
    assert f" at seed {m.group(1)} (domain " in fresh[1]
    line = assert_one_error_line(run_cli("check", vadd, "--seed", "-1"), 2)
    assert "--seed" in line
