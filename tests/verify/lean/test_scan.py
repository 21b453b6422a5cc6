"""``lean.scan``'s static scan over the fixture files in ``tests/fixtures/lean``.

Clean files use every rejected word only where it is not code and must scan clean; each dirty
file hides one escape in a tricky place, marked ``-- EXPECT: <what>`` on its line, and the scan
must report exactly that line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verify.lean import LeanScan, Problem, scan_sources
from verify.lean.lexer import lex
from verify.lean.scan import scan_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lean"
DIRTY = sorted((FIXTURES / "dirty").glob("*.lean"))
_EXPECT = re.compile(r"-- EXPECT: (.+)$")


def test_clean_fixtures_scan_clean() -> None:
    files = {p.name: p.read_bytes() for p in sorted((FIXTURES / "clean").glob("*.lean"))}
    scan = scan_sources(files)
    assert isinstance(scan, LeanScan)
    assert scan.problems == ()
    assert scan.rejected == frozenset()
    assert scan.bytes_scanned == sum(len(b) for b in files.values())
    assert {"Clean.sorry_free", "Clean.my.sorry_lemma", "Clean.big"} <= scan.theorems
    assert {"Clean.sorry", "Clean.axiom with spaces", "Clean.h'"} <= scan.declarations


def test_every_dirty_fixture_is_marked() -> None:
    assert len(DIRTY) >= 30
    for path in DIRTY:
        lines = path.read_text("utf-8").splitlines()
        assert any(_EXPECT.search(line) for line in lines), path.name


@pytest.mark.parametrize("path", DIRTY, ids=[p.stem for p in DIRTY])
def test_dirty_fixture_caught_on_its_line(path: Path) -> None:
    want = {
        i: m.group(1).strip()
        for i, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if (m := _EXPECT.search(line))
    }
    scan = scan_sources({f"dirty/{path.name}": path.read_bytes()})
    got: dict[int, list[str]] = {}
    for p in scan.problems:
        assert p.path == f"dirty/{path.name}"
        got.setdefault(p.line, []).append(p.what)
    assert set(got) == set(want), (got, want)
    for line, what in want.items():
        assert any(what in w for w in got[line]), (line, got[line], what)


def test_problem_columns_point_at_the_word() -> None:
    src = b'theorem t : True := by\n  let s := "--"; sorry\n'
    (p,) = scan_sources({"a.lean": src}).problems
    assert p == Problem("a.lean", 2, 18, "sorry")


def test_namespace_qualification() -> None:
    scan = scan_sources({"N.lean": (FIXTURES / "clean" / "namespaces.lean").read_bytes()})
    assert scan.problems == ()
    theorems = {
        "top", "A.B.inner", "A.B.Foo.bar", "rooted", "A.B.hidden", "A.B.prot", "A.inA",
        "A.inSection", "C.anon", "C.afterMutual", "D.E.F.deep",
    }  # fmt: skip
    assert scan.theorems == theorems
    others = {
        "A.nc", "C.instFoo", "C.instPrio", "C.Point", "C.Color", "C.Decision", "C.N", "C.even",
        "C.odd",
    }  # fmt: skip
    assert scan.declarations == theorems | others
    fs = scan_file("N.lean", (FIXTURES / "clean" / "namespaces.lean").read_bytes())
    assert fs.private == frozenset({"A.B.hidden"})
    assert fs.module == "N"


@pytest.mark.parametrize(
    ("src", "what"),
    [
        (b"namespace A\nend B\n", "`end B` does not close"),
        (b"section\nend A\n", "`end A` does not close"),
        (b"namespace A\nend\n", "`end (no name)` does not close"),
        (b"end\n", "`end (no name)` does not close"),
    ],
)
def test_bad_end(src: bytes, what: str) -> None:
    (p,) = scan_sources({"e.lean": src}).problems
    assert what in p.what


def test_end_closes_dotted_namespace_in_steps() -> None:
    src = b"namespace A.B\nend B\ntheorem t : True := trivial\nend A\ntheorem u : True := trivial\n"
    scan = scan_sources({"e.lean": src})
    assert scan.problems == ()
    assert scan.theorems == {"A.t", "u"}


def test_a_problem_taints_its_file_and_importers() -> None:
    files = {
        "Lib/Bad.lean": b"theorem cheat : False := sorry\n",
        "Lib/Uses.lean": b"import Lib.Bad\ntheorem fine : True := trivial\n",
        "Other.lean": b"theorem other : True := trivial\ndef d := 1\n",
        "README.md": b"sorry",  # not Lean: ignored
    }
    scan = scan_sources(files)
    assert [(p.path, p.line, p.what) for p in scan.problems] == [("Lib/Bad.lean", 1, "sorry")]
    assert scan.rejected == {"cheat", "fine"}
    assert scan.theorems == {"cheat", "fine", "other"}
    assert scan.declarations == {"cheat", "fine", "other", "d"}
    assert scan.bytes_scanned == sum(len(v) for k, v in files.items() if k.endswith(".lean"))


def test_imports_are_recorded_only_at_the_start() -> None:
    fs = scan_file(
        "a.lean", b"/- hi -/\nimport Init\nimport Mathlib.Tactic\ntheorem t : True := trivial\n"
    )
    assert fs.imports == ("Init", "Mathlib.Tactic")
    assert fs.problems == ()


def test_set_option_allow_list() -> None:
    ok = (
        b"set_option maxRecDepth 2000\nset_option trace.Meta.synthInstance true\n"
        b"set_option pp.all true\n"
    )
    assert scan_sources({"a.lean": ok}).problems == ()
    bad = b"set_option compiler.extract_closed false\n"
    (p,) = scan_sources({"a.lean": bad}).problems
    assert "compiler.extract_closed" in p.what


def test_attribute_allow_list() -> None:
    ok = b'@[simp, local simp, -simp, deprecated "x" (since := "2024")] def f := 1\n'
    assert scan_sources({"a.lean": ok}).problems == ()
    (p,) = scan_sources({"a.lean": b"@[simp, export my_sym] def f := 1\n"}).problems
    assert (p.line, p.col, p.what) == (1, 9, "attribute export (not in the allow-list)")


def test_lex_error_is_a_problem_not_an_exception() -> None:
    scan = scan_sources({"a.lean": b'def x := "open\n', "b.lean": b"\xff"})
    assert [(p.path, p.what) for p in scan.problems] == [
        ("a.lean", "unterminated string"),
        ("b.lean", "not valid UTF-8 (byte 0)"),
    ]


def test_sorry_inserted_after_any_code_token_is_caught() -> None:
    """Exhaustive over the clean fixture: a ``sorry`` after any code token is reported there."""
    text = (FIXTURES / "clean" / "words.lean").read_text("utf-8")
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    toks = lex(text)
    assert len(toks) > 200
    for t in toks:
        if t.kind == "istring":
            continue  # after these, the next text may be a string's literal part
        off = starts[t.line - 1] + t.col - 1 + len(t.text) + 1
        mutated = text[: off - 1] + " sorry " + text[off - 1 :]
        row = mutated.count("\n", 0, off) + 1
        col = off - (mutated.rfind("\n", 0, off) + 1) + 1
        scan = scan_sources({"w.lean": mutated.encode()})
        assert (row, col) in {(p.line, p.col) for p in scan.problems}, (t, scan.problems)


def test_scan_limits_are_problems() -> None:
    from verify.lean import scan as scan_mod

    deep = scan_file("d.lean", b"namespace A\n" * (scan_mod.MAX_SCOPES + 1))
    assert [p.what for p in deep.problems] == [
        f"limit: namespaces and sections nest deeper than {scan_mod.MAX_SCOPES}"
    ]
    many = scan_file("m.lean", b"sorry " * (scan_mod.MAX_PROBLEMS + 50))
    assert len(many.problems) == scan_mod.MAX_PROBLEMS + 1
    assert many.problems[-1].what.startswith("limit: more than")
    imports = scan_file("i.lean", b"import A\n" * (scan_mod.MAX_IMPORTS + 1))
    assert imports.problems[0].what == f"limit: more than {scan_mod.MAX_IMPORTS} imports"
    long_name = scan_file("l.lean", b"a" * 5000 + b" x\n")
    (p,) = long_name.problems
    assert p.what.startswith("unknown command `aaa") and len(p.what) <= 120


def test_unclosed_attribute_lists_stay_linear() -> None:
    fs = scan_file("a.lean", b"@[" * 20000)
    assert fs.problems[0].what == "attribute @[ (not in the allow-list)"


def test_walk_resyncs_after_an_unclosed_bracket() -> None:
    src = b"def x := (1\ntheorem t : True := trivial\nfoo_cmd y\n"
    fs = scan_file("r.lean", src)
    assert fs.theorems == ("t",)
    assert [(p.line, p.what) for p in fs.problems] == [
        (3, "unknown command `foo_cmd` (not in the allow-list)")
    ]
