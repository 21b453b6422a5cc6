"""Resource exhaustion from hostile bundles (red team): each input is refused or bounded before
the verifier allocates what it asks for, and reported as a check with its reason, never as an
internal error or a traceback.

- an input range wider than the largest double (``low: -1e308, high: 1e308``) crashed numpy's
  uniform draw (``OverflowError``, exit 3 "internal error");
- every binding of a test was built (its buffers allocated) before the first launch: sixty
  bindings of 2^22 elements took the process past 4 GB (``MemoryError``); they now run in batches
  of ``MAX_HELD_BYTES``, and the interpreter's state of a large launch is collected right after it;
- PTX declaring ``%r<1000000000>``, a 1 GiB ``.local`` or ``.shared`` array or a 2^40-byte
  ``.global`` made the interpreter allocate it (``MemoryError`` after 45 s and 3.8 GB for the
  registers): ``verify.ptxsim.parser.check_limits`` refuses them, calls expanded, and
  ``falsify.interpreter_bytes`` refuses a launch whose state would pass ``MAX_INTERP_BYTES``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.helpers.ledgers import REPO, run_cli
from verify import falsify, ptxsim
from verify.contract import load_contract
from verify.engine import BufferArg, ScalarArg
from verify.ptxsim import parser as ptx_parser
from verify.ptxsim.errors import UnsupportedPtx

GOOD = REPO / "bundles" / "vector_add"
PTX = (GOOD / "vector_add.ptx").read_text()
TAIL = "$L__BB0_2:\n\tret;"


def _bundle(tmp: Path, contract: dict[str, object] | None = None, ptx: str | None = None) -> Path:
    d = tmp / "bundle"
    shutil.copytree(GOOD, d, ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    if contract is not None:
        (d / "contract.yaml").write_text(yaml.safe_dump(contract, sort_keys=False))
    if ptx is not None:
        (d / "vector_add.ptx").write_text(ptx)
    return d


def _contract() -> dict[str, object]:
    doc = yaml.safe_load((GOOD / "contract.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def _check(d: Path) -> dict[str, str]:
    """``ledger check --json``: exit 1 (a failed check), no traceback; status and detail by id."""
    res = run_cli("check", str(d), "--json", "--seed", "1")
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    report = json.loads(res.stdout)
    return {c["id"]: f"{c['status']}: {c['detail']}" for c in report["checks"]}


# --- input ranges -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f16", "f32", "f64"])
def test_input_range_wider_than_a_double_is_drawn(dtype: str) -> None:
    rng = np.random.default_rng(3)
    vals = falsify.random_values(rng, dtype, 1000, -1e308, 1e308)
    assert vals.size == 1000 and not np.isnan(vals).any()
    if dtype == "f64":
        assert np.isfinite(vals).all() and vals.min() < 0 < vals.max()
    # an ordinary range draws exactly what numpy's uniform draws (seeded results unchanged)
    a = falsify.random_values(np.random.default_rng(5), dtype, 64, -2.0, 3.0)
    b = np.random.default_rng(5).uniform(-2.0, 3.0, 64).astype(a.dtype)
    assert a.tobytes() == b.tobytes()


def test_f16_inputs_at_plus_minus_1e308_are_a_check_not_a_crash(tmp_path: Path) -> None:
    doc = _contract()
    kernel = doc["kernel"]
    assert isinstance(kernel, dict)
    for p in kernel["params"][:3]:
        p["ptr"] = "f16"
    tests = doc["falsification_tests"]
    assert isinstance(tests, list)
    tests[0]["inputs"] = {"low": -1e308, "high": 1e308}
    checks = _check(_bundle(tmp_path, doc))
    assert checks["falsify.FALSIFY-VADD-001"].startswith("failed: ")


# --- many large bindings ------------------------------------------------------------------------


def test_dry_case_allocates_no_buffer() -> None:
    c = load_contract((GOOD / "contract.yaml").read_bytes())
    assert c.kernel is not None
    test = c.falsification[0]
    case = falsify.make_case(c.kernel, test, {"n": 1 << 22}, np.random.default_rng(0), dry=True)
    assert case.grid == ((1 << 22) // 256, 1, 1)
    assert all(a.data.size == 0 for a in case.args if isinstance(a, BufferArg))
    with pytest.raises(falsify.TooLarge):  # the caps still apply, before any allocation
        falsify.make_case(c.kernel, test, {"n": 1 << 28}, np.random.default_rng(0), dry=True)


def test_bindings_run_in_batches_with_the_same_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    c = load_contract((GOOD / "contract.yaml").read_bytes())
    assert c.kernel is not None
    ptx = (GOOD / "vector_add.ptx").read_bytes()
    test = c.falsification[0]
    engine = falsify.InterpreterEngine(step_limit=2_000_000)
    whole = falsify.run_test(c.kernel, test, ptx, test.seed, engine, run_seed=9)
    batches: list[int] = []
    real = falsify._expected

    def spy(kernel: object, oracles: object, cases: list[object]) -> object:
        batches.append(len(cases))
        return real(kernel, oracles, cases)  # type: ignore[arg-type]

    monkeypatch.setattr(falsify, "_expected", spy)
    monkeypatch.setattr(falsify, "MAX_HELD_BYTES", 1)  # every binding its own batch
    batched = falsify.run_test(c.kernel, test, ptx, test.seed, engine, run_seed=9)
    assert batched.status == whole.status == "passed"
    assert batched.detail == whole.detail  # same inputs, same sizes, same worst error
    assert len(batches) > len(test.sizes) and set(batches) == {1}


# --- PTX that asks the interpreter for too much ---------------------------------------------------


def _decl(extra: str, body: str = "") -> str:
    return PTX.replace("\t.reg .pred", f"{extra}\n\t.reg .pred").replace(TAIL, body + TAIL)


@pytest.mark.parametrize(
    ("ptx", "message"),
    [
        (PTX.replace(".reg .b32 \t%r<6>;", ".reg .b32 \t%r<1000000000>;"), "declared registers"),
        (_decl(".local .align 4 .b8 buf[1073741824];"), "bytes of .local per thread"),
        (_decl(".shared .align 4 .b8 sbuf[1073741824];"), "bytes of static .shared"),
        (
            PTX.replace("\t// .globl", ".global .align 4 .b8 g[1099511627776];\n\t// .globl"),
            ".global/.const variables",
        ),
        (_decl(".shared .align 0 .b8 s[16];"), ".align 0"),
        (_decl(".local .align 1099511627776 .b8 s[16];"), ".align 1099511627776"),
    ],
)
def test_ptx_declarations_past_the_limits_are_refused(ptx: str, message: str) -> None:
    with pytest.raises(UnsupportedPtx, match=message.replace(".", r"\.")):
        ptxsim.load_module(ptx)


def _funcs(n: int, calls: int, regs: int = 0) -> str:
    """Device functions f0 .. f(n-1), each calling the next ``calls`` times, called from the
    kernel; each declares ``regs`` registers."""
    out = []
    for i in range(n):
        call = f"\tcall.uni f{i + 1}, ();\n" * calls if i + 1 < n else ""
        decl = f"\t.reg .b32 %q<{regs}>;\n" if regs else ""
        out.append(f".func f{i}()\n{{\n{decl}{call}\tret;\n}}\n")
    mod = PTX.replace("\t// .globl\tvector_add", "".join(out))
    return mod.replace(TAIL, "$L__BB0_2:\n\tcall.uni f0, ();\n\tret;")


def test_call_fan_out_and_register_copies_are_counted_expanded() -> None:
    with pytest.raises(UnsupportedPtx, match="call sites"):
        ptxsim.load_module(_funcs(17, 4))  # 4^16 call sites, in a few hundred bytes
    with pytest.raises(UnsupportedPtx, match="declared registers"):
        ptxsim.load_module(_funcs(2, 3, regs=500_000))  # each call copies the callee's registers


def test_a_call_chain_of_ten_thousand_is_read_and_refused_at_launch() -> None:
    ptx = _funcs(10_000, 1).encode()
    ptxsim.load_module(ptx)  # no RecursionError while counting
    c = load_contract((GOOD / "contract.yaml").read_bytes())
    assert c.kernel is not None
    case = falsify.make_case(c.kernel, c.falsification[0], {"n": 1}, np.random.default_rng(0))
    engine = falsify.InterpreterEngine(step_limit=100_000)
    with pytest.raises(UnsupportedPtx):  # the inliner's depth limit
        engine.launch(ptx, "vector_add", case.grid, case.block, case.args, 0)


def test_launch_whose_interpreter_state_is_too_large_is_refused_first() -> None:
    ptx = _decl(".local .align 4 .b8 buf[4096];", "\tst.local.u32 \t[buf], %r5;\n")
    engine = falsify.InterpreterEngine(step_limit=100_000)
    prog = engine.module(ptx.encode()).program("vector_add")
    grid, block = (1 << 20, 1, 1), (256, 1, 1)
    need = falsify.interpreter_bytes(prog, grid, block, 0)
    assert need > falsify.MAX_INTERP_BYTES  # 2^28 threads' 4 KiB of .local: 2 TiB
    args = [
        BufferArg("a", "in", np.zeros(0, np.float32)),
        BufferArg("b", "in", np.zeros(0, np.float32)),
        BufferArg("c", "out", np.zeros(0, np.float32)),
        ScalarArg("n", 0, "u32"),
    ]
    with pytest.raises(falsify.TooLarge, match="interpreter's state"):
        engine.launch(ptx.encode(), "vector_add", grid, block, args, 0)
    # the bundled kernel at its largest launch stays well under the budget
    small = engine.module(PTX.encode()).program("vector_add")
    big = falsify.interpreter_bytes(small, (1 << 14, 1, 1), (256, 1, 1), 0)
    assert big < falsify.MAX_INTERP_BYTES // 2 and math.prod((1 << 14, 256)) == falsify.MAX_THREADS


def test_a_register_bomb_is_a_skipped_falsify_check() -> None:
    ptx = PTX.replace(".reg .b32 \t%r<6>;", ".reg .b32 \t%r<1000000000>;").encode()
    c = load_contract((GOOD / "contract.yaml").read_bytes())
    assert c.kernel is not None
    engine = falsify.InterpreterEngine(step_limit=100_000)
    for test in c.falsification:
        check = falsify.run_test(c.kernel, test, ptx, test.seed, engine, run_seed=1)
        assert check.status == "skipped" and "declared registers" in check.detail, check.detail


def test_limits_are_documented() -> None:
    text = (REPO / "docs" / "falsification.md").read_text()
    for name in ("MAX_HELD_BYTES", "MAX_INTERP_BYTES", "MAX_REGS", "MAX_CALL_SITES"):
        assert name in text, name
    assert ptx_parser.MAX_REGS == 1 << 20
