"""``lean.scan``/``lean.kernel`` as a check group, and the pieces of the kernel path.

No Lean toolchain exists on the test machines, so the toolchain path is exercised against a fake
``lean``/``lake`` executable placed on PATH in a temporary directory: a stand-in (like a fault
injection) that answers ``--version``, ``--print-prefix``, ``-o`` compiles (checking that each
import's ``.olean`` was built first under ``LEAN_PATH``) and ``#print axioms``, in the output format
of Lean 4. It tests our argv, environment, ordering and parsing; it proves nothing about Lean.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from verify.context import Context
from verify.lean import run
from verify.lean.kernel import (
    AXIOMS_FILE,
    axioms_source,
    compile_argv,
    compile_order,
    lake_src_dirs,
    lean_name,
    named_theorems,
    parse_axioms,
    scan_check,
    theorem_modules,
)
from verify.lean.scan import scan_details, scan_file
from verify.model import Claim, Contract, LeanRef

FAKE = r"""
import os, re, sys
from pathlib import Path

tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
if args == ["--version"]:
    print("Lake version 5.0.0-fake" if tool == "lake" else "Lean (version 4.99.0-fake, test)")
    sys.exit(0)
if args == ["--print-prefix"]:
    print(str(Path(sys.argv[0]).resolve().parent.parent))
    sys.exit(0)
if tool == "lake":
    if not Path("lakefile.toml").is_file():
        print("error: no lakefile", file=sys.stderr)
        sys.exit(1)
    if args == ["build"]:
        print("Build completed successfully.")
        sys.exit(0)
    assert args[:2] == ["env", "lean"], args
    args = args[2:]
    lean_path = None
else:
    lean_path = os.environ.get("LEAN_PATH", "")
    if not lean_path.endswith("/lib/lean"):
        print("error: LEAN_PATH has no toolchain library", file=sys.stderr)
        sys.exit(1)
src_path = args[-1]
text = Path(src_path).read_text()
if lean_path is not None:
    build = Path(lean_path.split(":")[0])
    for mod in re.findall(r"^import (\S+)", text, re.M):
        local = Path(*mod.split(".")).with_suffix(".lean")
        if local.is_file() and not (build / local.with_suffix(".olean")).is_file():
            print(f"{src_path}:1:0: error: unknown module prefix '{mod}'")
            sys.exit(1)
if "-o" in args:
    assert "--root=." in args, args
    if "FAKE_COMPILE_ERROR" in text:
        print(f"{src_path}:2:4: error: unknown identifier 'oops'")
        sys.exit(1)
    if "FAKE_SORRY" in text:
        print(f"{src_path}:1:8: warning: declaration uses 'sorry'")
    out = Path(args[args.index("-o") + 1])
    out.write_text("olean")
    sys.exit(0)
status = 0
for line in text.splitlines():
    m = re.match(r'#print "(.*)"$', line)
    if m:
        print(m.group(1))
        continue
    m = re.match(r"#print axioms (\S+)$", line)
    if not m:
        continue
    name = m.group(1)
    if "missing" in name:
        print(f"{src_path}:9:15: error: unknown constant '{name}'")
        status = 1
    elif "cheat" in name:
        print(f"'{name}' depends on axioms: [propext, sorryAx]")
    elif "pure" in name:
        print(f"'{name}' does not depend on any axioms")
    else:
        print(f"'{name}' depends on axioms: [propext,\n Classical.choice,\n Quot.sound]")
sys.exit(status)
"""

BASE = (
    b"namespace Lib\ntheorem pure_thm (n : Nat) : n < n + 1 := Nat.lt_succ_self n\n"
    b"theorem cheat_thm (n : Nat) : n < n + 1 := Nat.lt_succ_self n\nend Lib\n"
)
MAIN = b"import Lib.Base\ntheorem Main.thm : 1 + 1 = 2 := rfl\ndef helper := 3\n"


def fake_tools(tmp: Path, *names: str) -> Path:
    bindir = tmp / "toolchain" / "bin"
    bindir.mkdir(parents=True)
    for name in names:
        exe = bindir / name
        exe.write_text(f"#!{sys.executable}\n{FAKE}")
        exe.chmod(0o755)
    return bindir


def make_ctx(lean: dict[str, bytes], names: list[str] | None) -> Context:
    files = {"contract.yaml": b"name: k\n", "k.ptx": b".version 8.0\n", "k.fut": b"-- fut\n"}
    files.update(lean)
    contract = None
    if names is not None:
        refs = tuple(LeanRef(n, "proved", "lean_refs") for n in names[:1])
        claims = tuple(Claim("PO8", n, "reference") for n in names[1:])
        contract = Contract("k", "1.0.0", "test", None, claims=claims, lean_refs=refs)
    return Context(Bundle.from_files(files), contract=contract)


def run_checks(ctx: Context) -> tuple[tuple[str, str], tuple[str, str, str]]:
    try:
        scan, kernel = run(ctx)
    finally:
        ctx.close()
    assert (scan.id, kernel.id) == ("lean.scan", "lean.kernel")
    return (scan.status, scan.detail), (kernel.status, kernel.detail, kernel.tool)


@pytest.fixture
def no_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.mark.usefixtures("no_tools")
def test_without_toolchain_kernel_is_skipped() -> None:
    scan, kernel = run_checks(make_ctx({"Lib/Base.lean": BASE, "Main.lean": MAIN}, ["Main.thm"]))
    assert scan[0] == "passed"
    assert "2 .lean file(s)" in scan[1] and "all 1 theorem(s)" in scan[1]
    assert kernel == ("skipped", "no Lean toolchain (lean or lake) on PATH", "")


@pytest.mark.usefixtures("no_tools")
def test_scan_failure_names_path_line_col() -> None:
    bad = b"theorem a : True := trivial\ntheorem b : False := by\n  exact sorry\n"
    scan, kernel = run_checks(make_ctx({"Bad.lean": bad}, ["a"]))
    assert scan == ("failed", "1 problem(s): Bad.lean:3:9: sorry")
    assert kernel[0] == "skipped"


@pytest.mark.usefixtures("no_tools")
def test_without_contract_the_scan_says_no_theorems_were_named() -> None:
    scan, _ = run_checks(make_ctx({"Main.lean": b"theorem t : True := trivial\n"}, None))
    assert scan[0] == "passed" and "no contract, so no theorems were named" in scan[1]


@pytest.mark.usefixtures("no_tools")
@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("Nope.thm", "theorem Nope.thm is not declared in any .lean file"),
        ("helper", "helper is declared, but not as a theorem or lemma"),
        ("Lib.hidden", "theorem Lib.hidden is private"),
    ],
)
def test_named_theorem_must_exist(name: str, detail: str) -> None:
    lean = {
        "Main.lean": MAIN,
        "Lib/Base.lean": BASE
        + b"private theorem Lib.hidden (n : Nat) : n < n + 1 := Nat.lt_succ_self n\n",
    }
    scan, _ = run_checks(make_ctx(lean, ["Main.thm", name]))
    assert scan[0] == "failed" and detail in scan[1]


def test_fake_lean_passes_in_import_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(fake_tools(tmp_path, "lean")))
    names = ["Main.thm", "Lib.pure_thm"]
    scan, kernel = run_checks(make_ctx({"Main.lean": MAIN, "Lib/Base.lean": BASE}, names))
    assert scan[0] == "passed"
    assert kernel[0] == "passed", kernel
    assert kernel[1].startswith("2 file(s) compiled; 2 theorem(s) depend on no axiom beyond")
    assert kernel[2] == "lean"


@pytest.mark.parametrize(
    ("lean", "names", "detail"),
    [
        ({"Lib/Base.lean": BASE}, ["Lib.cheat_thm"], "Lib.cheat_thm depends on sorryAx"),
        (
            {"Lib/Base.lean": BASE + b"-- FAKE_COMPILE_ERROR\n"},
            ["Lib.pure_thm"],
            "Lib/Base.lean does not compile: Lib/Base.lean:2:4: error: unknown identifier 'oops'",
        ),
        ({"Lib/Base.lean": BASE + b"-- FAKE_SORRY\n"}, ["Lib.pure_thm"], "uses 'sorry'"),
        (
            {
                "Lib/Base.lean": BASE
                + b"theorem missing (n : Nat) : n < n + 1 := Nat.lt_succ_self n\n"
            },
            ["missing"],
            "#print axioms failed",
        ),
        (
            {
                "A.lean": b"import B\ntheorem a (n : Nat) : n < n + 1 := Nat.lt_succ_self n\n",
                "B.lean": b"import A\n",
            },
            ["a"],
            "import cycle: A -> B -> A",
        ),
    ],
)
def test_fake_lean_failures(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lean: dict[str, bytes],
    names: list[str],
    detail: str,
) -> None:
    monkeypatch.setenv("PATH", str(fake_tools(tmp_path, "lean")))
    scan, kernel = run_checks(make_ctx(lean, names))
    assert scan[0] == "passed"
    assert kernel[0] == "failed" and detail in kernel[1], kernel


def test_scan_failure_is_never_compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(fake_tools(tmp_path, "lean")))
    scan, kernel = run_checks(
        make_ctx({"E.lean": b"#eval 1\ntheorem t : True := trivial\n"}, ["t"])
    )
    assert scan[0] == "failed" and "E.lean:1:1: #eval" in scan[1]
    assert kernel[:2] == (
        "skipped",
        "not run: lean.scan failed (files are compiled only after a clean scan)",
    )


def test_fake_lake_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(fake_tools(tmp_path, "lake")))
    lean = {"Main.lean": MAIN, "Lib/Base.lean": BASE, "lakefile.toml": b'name = "k"\n'}
    scan, kernel = run_checks(make_ctx(lean, ["Main.thm", "Lib.cheat_thm"]))
    assert scan[0] == "passed"
    assert kernel == ("failed", "Lib.cheat_thm depends on sorryAx", "lake")


def test_only_lake_without_lakefile_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_tools(tmp_path, "lake")))
    _, kernel = run_checks(
        make_ctx({"Main.lean": b"theorem t (n : Nat) : n < n + 1 := Nat.lt_succ_self n\n"}, ["t"])
    )
    assert kernel[:2] == ("skipped", "only lake on PATH and the bundle has no lakefile.toml")


def test_parse_axioms_output_forms() -> None:
    out = (
        "LEDGER-AXIOMS 0\n'A.b' depends on axioms: [propext, Classical.choice, Quot.sound]\n"
        "x.lean:3:0: info: LEDGER-AXIOMS 1\n"
        "x.lean:4:0: info: 'c' depends on axioms: [propext,\n  sorryAx]\n"
        "LEDGER-AXIOMS 2\n'd' does not depend on any axioms\n"
        "LEDGER-AXIOMS 3\nx.lean:8:15: error: unknown constant 'e'\n"
        "LEDGER-AXIOMS 99\n'z' does not depend on any axioms\n"
    )
    assert parse_axioms(out, 5) == [
        ["propext", "Classical.choice", "Quot.sound"],
        ["propext", "sorryAx"],
        [],
        None,
        None,
    ]


def test_generated_axioms_file_and_argv() -> None:
    src = axioms_source(["Lib.Base", "Main"], ["Main.thm", "A.«b c»"])
    assert src == (
        "import Lib.Base\nimport Main\n"
        '#print "LEDGER-AXIOMS 0"\n#print axioms Main.thm\n'
        '#print "LEDGER-AXIOMS 1"\n#print axioms A.«b c»\n'
    )
    assert lean_name("A.b c.end.x'") == "A.«b c».«end».x'"
    assert compile_argv("/opt/lean", "Lib/Base.lean") == [
        "/opt/lean", "--root=.", "-o", ".ledger-build/Lib/Base.olean",
        "-i", ".ledger-build/Lib/Base.ilean", "Lib/Base.lean",
    ]  # fmt: skip
    assert AXIOMS_FILE.endswith(".lean")


def test_compile_order_puts_imports_first() -> None:
    scans = [
        scan_file("C.lean", b"import B\nimport Std\n"),
        scan_file("B.lean", b"import A\n"),
        scan_file("A.lean", b""),
    ]
    order = compile_order(scans)
    assert not isinstance(order, str)
    assert [s.module for s in order] == ["A", "B", "C"]


def test_named_theorems_dedup_and_root() -> None:
    c = Contract(
        "k", "1", "", None,
        claims=(Claim("PO1", "_root_.T.a", "coverage"), Claim("PO2", "T.b", "bounds")),
        lean_refs=(LeanRef("T.a", "proved", "x"), LeanRef(" ", "proved", "y")),
    )  # fmt: skip
    assert named_theorems(c) == ["T.a", "T.b"]
    assert named_theorems(None) == []


def test_scan_check_without_lean_files_fails() -> None:
    scan, scans = scan_details({})
    check = scan_check(scan, scans, [], True)
    assert (check.status, check.detail) == ("failed", "the bundle has no .lean file")


def test_theorem_modules_and_lake_src_dirs(tmp_path: Path) -> None:
    scans = [
        scan_file(
            "src/Lib/Base.lean", b"theorem a : True := trivial\ntheorem b : True := trivial\n"
        ),
        scan_file("src/Main.lean", b"theorem c : True := trivial\n"),
        scan_file("Other.lean", b"theorem d : True := trivial\n"),
    ]
    assert theorem_modules(scans, ["b", "a", "c", "d"]) == ["src.Lib.Base", "src.Main", "Other"]
    assert theorem_modules(scans, ["c", "a"], ["src"]) == ["Main", "Lib.Base"]
    lakefile = tmp_path / "lakefile.toml"
    lakefile.write_text('name = "k"\n[[lean_lib]]\nname = "Lib"\nsrcDir = "./src"\n')
    assert lake_src_dirs(lakefile) == ["src"]
    lakefile.write_text("not = [toml")
    assert lake_src_dirs(lakefile) == []
