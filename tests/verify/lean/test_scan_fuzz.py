"""Property tests: no input crashes the Lean lexer or scan.

Random bytes and random soups of Lean fragments (quotes, comment marks, braces, escapes, raw string
delimiters, keywords) only ever give a ``LeanLexError`` from ``lex`` and a ``FileScan`` (with or
without problems) from ``scan_file``: never another exception. The example counts below are
recorded in docs/lean-checks.md.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from verify.lean.lexer import LeanLexError, lex
from verify.lean.scan import FileScan, scan_file, scan_sources

BYTES_EXAMPLES = 500
SOUP_EXAMPLES = 1000
PREFIX_EXAMPLES = 1000

FRAGMENTS = [
    '"', "'", "/-", "-/", "/--", "/-!", "--", "\n", " ", "{", "}", "s!", 's!"', "f!", "m!",
    'r"', 'r#"', '"#', "#", "«", "»", "\\", "\\n", "\\x4", "\\u{41}", "\\\n  ", "`", "``",
    "sorry", "admit", "axiom", "theorem", "lemma", "def", "namespace A", "section", "end",
    "end A", "mutual", "@[", "[", "]", "(", ")", "⟨", "⟩", "set_option", "debug.skipKernelTC",
    "#exit", "#eval", "x'", "h'", "'a'", "'\\''", ":=", "_root_.", ".", "import", "private",
    "native", "+", "α", "0x1F", "2.5", "attribute", "simp", "extern", "throwError", "trace",
]  # fmt: skip


@settings(max_examples=BYTES_EXAMPLES, deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_never_crash(data: bytes) -> None:
    fs = scan_file("f.lean", data)
    assert isinstance(fs, FileScan)
    for p in fs.problems:
        assert p.path == "f.lean" and p.line >= 1 and p.col >= 1 and p.what


@settings(max_examples=SOUP_EXAMPLES, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=200))
def test_token_soup_never_crashes(parts: list[str]) -> None:
    text = "".join(parts)
    try:
        toks = lex(text)
    except LeanLexError as e:
        assert e.line >= 1 and e.col >= 1
    else:
        assert all(t.line >= 1 and t.col >= 1 and t.text for t in toks)
    scan = scan_sources({"s.lean": text.encode()})
    assert scan.bytes_scanned == len(text.encode())


@settings(max_examples=PREFIX_EXAMPLES, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60))
def test_a_sorry_after_any_clean_prefix_is_caught(parts: list[str]) -> None:
    prefix = "".join(parts)
    clean = scan_file("p.lean", prefix.encode())
    if clean.problems:
        return
    text = prefix + "\ntheorem zz : False := sorry\n"
    last = text.count("\n")  # the sorry's line (1-based)
    scan = scan_file("p.lean", text.encode())
    # the prefix lexed on its own, so every construct in it is closed and the sorry is code
    assert any(p.what == "sorry" and p.line == last for p in scan.problems), scan.problems
