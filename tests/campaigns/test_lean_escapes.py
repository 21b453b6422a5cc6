"""Red-team regressions for ``lean.scan`` and ``certificate`` (SPEC 8): escapes a dishonest
kernel author slipped past the static scan, each fixed for its class (docs/lean-checks.md).

1. strings read differently by Lean and by the scan: a plain string taken as interpolated (after
   ``trace``, ``]``, ``x!``, a local named ``throwError``) hid the code after it; a nested comment
   between ``s!`` and its string hid the code inside it;
2. tactics and terms that admit goals, run code or trust native evaluation without a rejected
   word: ``run_tac``, ``by_elab``, ``bv_decide?``, ``bv_check``, ``rw?``, ``plausible``,
   ``decide (config := ⟨..⟩)``, ``decide +«native»``;
3. bundle files Lean trusts without a scan: shipped ``.olean`` files and build folders,
   ``lakefile.toml`` options, modules shadowing the toolchain's;
4. names: ``«A.b»`` taken for ``A.b``, a named theorem declared twice, a name that spoofs the
   ``#print axioms`` answer; contract names with blanks or ``_root_.`` judged differently by
   ``lean.scan``, ``contract.lint`` and ``certificate``;
5. certificate: a claim backed by ``theorem x : True := trivial`` passed.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from verify import certificate
from verify.context import Context
from verify.contract import load_contract
from verify.contract_lint import lint_check
from verify.lean import run as lean_run
from verify.lean import scan_sources
from verify.lean.bundle import bundle_problems, lakefile_problems
from verify.lean.kernel import parse_axioms
from verify.lean.scan import theorem_key
from verify.report import Check, passed

ROOT = Path(__file__).resolve().parents[2]
VADD = ROOT / "bundles" / "vector_add"
LEAN = (VADD / "vector_add.lean").read_text("utf-8")
WORK = "theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := by\n  split <;> omega\n"
HEAD = "theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := "


def with_proof(proof: str) -> bytes:
    """vector_add.lean with the proof of ``VectorAdd.work_bounded`` replaced."""
    assert WORK in LEAN
    return LEAN.replace(WORK, HEAD + proof).encode()


def appended(extra: str) -> bytes:
    return LEAN.replace("end VectorAdd", extra + "\nend VectorAdd").encode()


def problems(src: bytes | str) -> list[tuple[int, str]]:
    data = src.encode() if isinstance(src, str) else src
    return [(p.line, p.what) for p in scan_sources({"a.lean": data}).problems]


def bundle_ctx(files: dict[str, bytes], contract_text: str | None = None) -> Context:
    base = {f.path: f.data for f in Bundle.from_dir(VADD).files}
    base.update(files)
    if contract_text is not None:
        base["contract.yaml"] = contract_text.encode()
    bundle = Bundle.from_files(base)
    ctx = Context(bundle)
    ctx.contract = load_contract(bundle.file("contract.yaml"))
    return ctx


def scan_status(files: dict[str, bytes], contract_text: str | None = None) -> Check:
    ctx = bundle_ctx(files, contract_text)
    first, _kernel = lean_run(ctx)
    assert first.id == "lean.scan"
    return first


# 1. strings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "proof",
    [
        'by\n  trace "{"\n  sorry\n  trace "}"\n',  # tactic trace takes a plain string
        '(fun (_ : List Nat) (_ : String) h (_ : String) => h) [1] "{" (sorry) "}"\n',
        '(fun (g! : String → _ → String → _) => g! "{" sorry "}") (fun _ h _ => h)\n',
        '(fun (throwError : String → _ → String → _) => throwError "{" sorry "}")'
        " (fun _ h _ => h)\n",
        '(fun (m! : String → _ → String → _) => m! "{" sorry "}") (fun _ h _ => h)\n',
    ],
    ids=["trace", "bracket", "bang_ident", "throwError_local", "m_bang_local"],
)
def test_plain_string_after_an_interpolation_head_cannot_hide_code(proof: str) -> None:
    got = problems(with_proof(proof))
    assert got, "the sorry after the string must not pass"
    assert any("reads differently as plain and as interpolated" in w for _, w in got), got


def test_both_readings_agree_then_the_braces_are_code() -> None:
    src = 'def m (throwError : String → Nat) : Nat := throwError "{(sorry : Nat)}"\n'
    assert problems(src) == [(1, "sorry")]


def test_nested_comment_between_head_and_string_keeps_it_interpolated() -> None:
    src = 'def d : String := s! /- /- -/ -/ "{let rec cheat : (1:Nat) = 2 := sorry; 0}"\n'
    assert problems(src) == [(1, "sorry")]


@pytest.mark.parametrize(
    "src",
    [
        'def a (x : Nat) : String := s!"{String.join ["a", "b"]} {x}"\n',
        'def b (x : Nat) : String := "{" ++ toString x ++ "}"\n',
        'def c (x : Nat) : String := toString x ++ s!"{x} and {x + 1}"\n',
        'def d (throwError : String → Nat) : Nat := throwError "no braces \\" here"\n',
    ],
)
def test_honest_strings_stay_clean(src: str) -> None:
    assert problems(src) == []


def test_many_ambiguous_strings_scan_in_linear_time() -> None:
    line = 'def q (throwError : String → Nat) : Nat := throwError "{0}"\n'
    src = line * 20_000 + 'def z (throwError : String → Nat) : Nat := throwError "{' + "(" * 200_000
    start = time.process_time()
    got = problems(src + '"\n')
    assert time.process_time() - start < 10
    assert got and "reads differently" in got[0][1] and got[0][0] == 20_001


# 2. admitting, code-running and native tactics ---------------------------------------------


@pytest.mark.parametrize(
    ("proof", "what"),
    [
        ("by\n  run_tac do Lean.Elab.admitGoal (← Lean.Elab.Tactic.getMainGoal)\n", "run_tac"),
        ("by_elab do Lean.Meta.mkSorry (Lean.mkConst ``True) false\n", "by_elab"),
        ("by\n  bv_decide?\n", "bv_decide?"),
        ('by\n  bv_check "proof.lrat"\n', "bv_check"),
        ("by\n  rw?\n", "rw?"),
        ("by\n  plausible\n", "plausible"),
        ("by\n  slim_check\n", "slim_check"),
        ("by\n  decide (config := ⟨false, true, true, false⟩)\n", "decide (config"),
        ("by\n  decide (config := myConfig)\n", "decide (config"),
        ("by\n  decide (config := { myConfig with kernel := false })\n", "decide (config"),
        ("by\n  decide +«native»\n", "native"),
        ("by\n  decide (config := { «native» := true })\n", "native"),
        ("by\n  decide (native := true)\n", "native"),
        ("Lean.Elab.admitGoal\n", "admitGoal"),
    ],
)
def test_escape_tactics_are_problems(proof: str, what: str) -> None:
    got = problems(with_proof(proof))
    assert any(what in w for _, w in got), got


def test_escape_commands_are_problems_even_indented() -> None:
    for word in ("simproc_decl", "dsimproc_decl", "init_quot", "declare_config_elab"):
        got = problems(f"theorem q : 1 = 1 := rfl\r{word} x\n")
        assert any(word in w for _, w in got), (word, got)


def test_honest_decide_config_stays_clean() -> None:
    assert problems(with_proof("by\n  split <;> decide (config := { kernel := true })\n")) == []


# 3. bundle files that Lean trusts ----------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "what"),
    [
        ({".ledger-build/Evil.olean": b"\0"}, "compiled Lean output"),
        ({".lake/build/lib/lean/Evil.olean": b"\0"}, "compiled Lean output"),
        ({"sub/Evil.ilean": b"{}"}, "compiled Lean output"),
        ({"Init/Core.lean": b"theorem q : 1 = 1 := rfl\n"}, "Lean toolchain's libraries"),
        ({"Evil.LEAN": b"theorem e : False := sorry\n"}, "suffix other than .lean"),
    ],
)
def test_bundle_files_lean_would_trust_fail_the_scan(files: dict[str, bytes], what: str) -> None:
    [p] = bundle_problems(files)
    assert what in p.what
    check = scan_status(files)
    assert check.status == "failed" and what in check.detail, check.detail


@pytest.mark.parametrize(
    ("toml", "what"),
    [
        ('name = "x"\nmoreLeanArgs = ["--load-dynlib=./e.so"]\n', "moreLeanArgs"),
        ('name = "x"\nleanOptions = { debug.skipKernelTC = true }\n', "debug.skipKernelTC"),
        ('name = "x"\n[[lean_lib]]\nname = "L"\nsrcDir = "../.."\n', "leaves the bundle"),
        ('name = "x"\n[[lean_lib]]\nname = "L"\nmoreLeanArgs = ["-Dx=1"]\n', "moreLeanArgs"),
        ('name = "x"\n[[lean_exe]]\nname = "e"\n', "lean_exe"),
        ('name = "x"\nbuildDir = "prebuilt"\n', "buildDir"),
        ('name = "x"\n[[require]]\nname = "e"\npath = "/opt/e"\n', "https"),
        ("name = \n", "cannot be read"),
    ],
)
def test_lakefile_beyond_a_plain_library_is_a_problem(toml: str, what: str) -> None:
    got = lakefile_problems(toml.encode())
    assert any(what in w for w in got), got


def test_honest_lakefile_is_clean() -> None:
    toml = (
        'name = "vector_add"\ndefaultTargets = ["VectorAdd"]\n[[lean_lib]]\nname = "VectorAdd"\n'
        'roots = ["vector_add"]\nleanOptions = { autoImplicit = false }\n'
    )
    assert lakefile_problems(toml.encode()) == []
    assert scan_status({"lakefile.toml": toml.encode()}).status == "passed"


# 4. names ----------------------------------------------------------------------------------


def test_escaped_dotted_component_is_not_the_dotted_name() -> None:
    lean = LEAN.replace(WORK, "") + "theorem «VectorAdd.work_bounded» : 1 = 1 := rfl\n"
    check = scan_status({"vector_add.lean": lean.encode()})
    assert check.status == "failed"
    assert "VectorAdd.work_bounded is not declared" in check.detail
    assert "«VectorAdd.work_bounded»" in scan_sources({"a.lean": lean.encode()}).theorems


def test_named_theorem_declared_twice_fails() -> None:
    dup = b"namespace VectorAdd\ntheorem work_bounded : 1 = 1 := rfl\nend VectorAdd\n"
    check = scan_status({"Dup.lean": dup})
    assert check.status == "failed"
    assert "VectorAdd.work_bounded is declared 2 times (Dup.lean, vector_add.lean)" in check.detail


def test_named_theorem_must_have_a_plain_name() -> None:
    contract = (VADD / "contract.yaml").read_text("utf-8")
    contract = contract.replace(
        "theorem: VectorAdd.work_bounded", 'theorem: "VectorAdd.«depends on axioms: []»"'
    )
    lean = appended("theorem «depends on axioms: []» : 1 = 1 := rfl")
    check = scan_status({"vector_add.lean": lean}, contract)
    assert check.status == "failed"
    assert "name components must be plain identifiers" in check.detail


def test_axioms_answer_is_read_after_the_name() -> None:
    out = "LEDGER-AXIOMS 0\n'X.«depends on axioms: []»' depends on axioms: [sorryAx]\n"
    assert parse_axioms(out, 1) == [["sorryAx"]]


def test_contract_names_are_normalised_the_same_everywhere() -> None:
    assert theorem_key("  _root_.VectorAdd.work_bounded ") == "VectorAdd.work_bounded"
    assert theorem_key("A.«b»") == "A.b"
    assert theorem_key("A.«b.c»") == "A.«b.c»"
    assert theorem_key("A.«open") == "A.«open"  # unreadable: left as is, matches nothing
    contract = (VADD / "contract.yaml").read_text("utf-8")
    contract = contract.replace(
        "theorem: VectorAdd.work_bounded", "theorem: _root_.VectorAdd.work_bounded"
    )
    ctx = bundle_ctx({}, contract)
    scan, _kernel = lean_run(ctx)
    assert scan.status == "passed"
    assert ctx.contract is not None
    assert lint_check(ctx.contract, {f.path: f.data for f in ctx.bundle.files}).status != "failed"
    ctx.results = [scan, *_all_evidence()]
    [cert] = certificate.run(ctx)
    assert cert.status == "passed", cert.detail


# 5. certificate: vacuous statements --------------------------------------------------------


def _all_evidence() -> list[Check]:
    ids = ["lean.kernel", "ptx.assemble", "falsify.FALSIFY-VADD-001", "falsify.FALSIFY-VADD-002"]
    return [passed(i, f"{i} passed") for i in ids]


@pytest.mark.parametrize(
    "statement",
    [
        "theorem work_bounded : True := trivial\n",
        "theorem work_bounded (n i : Nat) (h : i < n) : True ∧ True := ⟨trivial, trivial⟩\n",
        "theorem work_bounded (n : Nat) : ∀ i : Nat, i < n → True := fun _ _ => trivial\n",
        "theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) = (if i < n then 3 else 0)"
        " := rfl\n",
    ],
)
def test_theorem_that_states_nothing_backs_no_obligation(statement: str) -> None:
    ctx = bundle_ctx({"vector_add.lean": LEAN.replace(WORK, statement).encode()})
    scan, _kernel = lean_run(ctx)
    # no escape: the statement is the problem, and lean.scan fails on it (issue 33)
    assert scan.status == "failed", scan.detail
    assert "VectorAdd.work_bounded" in scan.detail and "proves nothing" in scan.detail
    ctx.results = [scan, *_all_evidence()]  # even with lean.kernel passed
    [cert] = certificate.run(ctx)
    assert cert.status == "failed" and "proves nothing" in cert.detail
    # with the scan's verdict set aside, the certificate finds it on its own, for PO8 only
    ctx.results = [passed("lean.scan", "forged"), *_all_evidence()]
    [cert] = certificate.run(ctx)
    assert cert.status == "failed"
    assert cert.detail.startswith("PO8 not backed"), cert.detail
    assert "proves nothing" in cert.detail
    assert ctx.contract is not None
    lint = lint_check(ctx.contract, {f.path: f.data for f in ctx.bundle.files})
    assert lint.status == "failed" and "proves nothing" in lint.detail


def test_bundled_kernels_scan_clean_with_no_vacuous_named_theorem() -> None:
    for bundle in sorted((ROOT / "bundles").iterdir()):
        if not (bundle / "contract.yaml").is_file():
            continue
        ctx = Context(Bundle.from_dir(bundle))
        ctx.contract = load_contract(ctx.bundle.file("contract.yaml"))
        scan, _kernel = lean_run(ctx)
        assert scan.status == "passed", (bundle.name, scan.detail)
        ctx.results = [scan]
        [cert] = certificate.run(ctx)
        assert "states only True" not in cert.detail, bundle.name


def test_dataclass_defaults_keep_old_constructors() -> None:
    scan = scan_sources({"a.lean": b"theorem t : True := trivial\n"})
    assert scan.vacuous == frozenset({"t"})
    assert dataclasses.replace(scan, vacuous=frozenset()).vacuous == frozenset()


def test_a_lean_toolchain_file_is_no_problem_of_the_bundle() -> None:
    """Real Lean projects carry ``lean-toolchain``: the kernel check deletes it from its scratch
    copy (the verifier's Lean decides the version), so the scan does not refuse the bundle."""
    assert bundle_problems({"lean-toolchain": b"leanprover/lean4:v4.0.0\n"}) == []


# 6. reading the verifying machine's files ---------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        'theorem leak : include_str "../../../root/.ledger/log.key" = "" := rfl',
        'def k : String := include_str "/home/u/.ledger/keys/node.key"',
        'example : (include_bytes "log.key").size = 0 := by decide',
    ],
    ids=["theorem", "absolute", "bytes"],
)
def test_a_file_of_the_verifying_machine_cannot_be_read_into_a_term(extra: str) -> None:
    """``include_str`` reads a file when the proof compiles, and the error that compares it
    with anything quotes its content into ``lean.kernel``'s detail, which a seal signs into the
    log (a keyword: it has no qualified form)."""
    got = problems(appended(extra))
    assert any("reads a file of the verifying machine" in w for _, w in got), got
