"""The Lean 4 lexer of ``lean.scan``: token kinds and positions, and its errors and limits."""

from __future__ import annotations

import pytest

from verify.lean import lexer
from verify.lean.lexer import LeanLexError, Token, decode, lex, name_parts


def kinds(src: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in lex(src)]


def test_positions_are_one_based_code_points() -> None:
    toks = lex("def α := 1\n  «x y» -- c\nfoo")
    assert toks[0] == Token("ident", "def", 1, 1)
    assert toks[1] == Token("ident", "α", 1, 5)
    assert toks[4] == Token("ident", "«x y»", 2, 3)
    assert toks[5] == Token("ident", "foo", 3, 1)


def test_comments_nest_and_vanish() -> None:
    assert kinds("a /- x /- y -/ z -/ b /-- doc -/ c /-! mod -/ d -- e\nf") == [
        ("ident", "a"), ("ident", "b"), ("ident", "c"), ("ident", "d"), ("ident", "f"),
    ]  # fmt: skip


def test_strings_escapes_and_gaps() -> None:
    src = 'x "a\\"b\\\\" "\\x41\\u0041\\u{1F600}\\n\\t" "gap \\\n   more" y'
    assert [k for k, _ in kinds(src)] == ["ident", "string", "string", "string", "ident"]


def test_raw_strings_any_number_of_hashes() -> None:
    toks = kinds('a r"x\\" b r#"he said "hi""# r##"r#"in"#"## c')
    assert toks == [
        ("ident", "a"),
        ("string", 'r"x\\"'),
        ("ident", "b"),
        ("string", 'r#"he said "hi""#'),
        ("string", 'r##"r#"in"#"##'),
        ("ident", "c"),
    ]


def test_char_literals_and_primes() -> None:
    assert kinds("x' '\"' h'' '\\'' 'a'") == [
        ("ident", "x'"), ("char", "'\"'"), ("ident", "h''"), ("char", "'\\''"), ("char", "'a'"),
    ]  # fmt: skip


def test_identifiers_names_numbers_commands() -> None:
    assert kinds("Foo.bar.«b z» `n ``A.b h.1 0x1F 2.5e3 #exit #[1] exact? s!") == [
        ("ident", "Foo.bar.«b z»"),
        ("name", "`n"),
        ("name", "``A.b"),
        ("ident", "h"),
        ("symbol", "."),
        ("number", "1"),
        ("number", "0x1F"),
        ("number", "2.5e3"),
        ("command", "#exit"),
        ("symbol", "#["),
        ("number", "1"),
        ("symbol", "]"),
        ("ident", "exact?"),
        ("ident", "s!"),
    ]
    assert name_parts("Foo.«a.b c».d") == ["Foo", "a.b c", "d"]


def test_interpolation_parts_are_code() -> None:
    toks = kinds('s!"a {x + {y}} b {"}"} c" z')
    assert toks == [
        ("ident", "s!"),
        ("istring", '"'),
        ("istring", "a {"),
        ("ident", "x"),
        ("symbol", "+"),
        ("symbol", "{"),
        ("ident", "y"),
        ("symbol", "}"),
        ("istring", "}"),
        ("istring", " b {"),
        ("string", '"}"'),
        ("istring", "}"),
        ("istring", ' c"'),
        ("ident", "z"),
    ]


def test_plain_string_braces_are_text() -> None:
    assert kinds('def x := "{sorry}"')[-1] == ("string", '"{sorry}"')


def test_throw_error_strings_interpolate() -> None:
    assert ("ident", "sorry") in kinds('throwError "bad {sorry}"')


@pytest.mark.parametrize(
    ("src", "what", "line", "col"),
    [
        ('x\n  "abc', "unterminated string", 2, 3),
        ("a /- /- -/", "unterminated comment", 1, 3),
        ('r#"abc"', "unterminated raw string", 1, 1),
        ("«abc", "unterminated «identifier»", 1, 1),
        ("'ab'", "bad character literal", 1, 1),
        ('"\\q"', "bad escape in string", 1, 2),
        ('s!"a {b', "unterminated interpolated string", 1, 3),
        ('s!"a\\', "unterminated interpolated string", 1, 3),
    ],
)
def test_errors_say_where(src: str, what: str, line: int, col: int) -> None:
    with pytest.raises(LeanLexError) as e:
        lex(src)
    assert (e.value.what, e.value.line, e.value.col) == (what, line, col)


def test_bad_utf8_is_an_error_with_position() -> None:
    with pytest.raises(LeanLexError) as e:
        decode(b"ok\nab\xffcd")
    assert (e.value.line, e.value.col) == (2, 3)
    assert "UTF-8" in e.value.what


def test_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LeanLexError, match="comments nest deeper"):
        lex("/-" * (lexer.MAX_COMMENT_DEPTH + 1))
    with pytest.raises(LeanLexError, match="interpolated strings nest"):
        lex('s!"{' * (lexer.MAX_INTERP_DEPTH + 1))
    with pytest.raises(LeanLexError, match="larger than"):
        decode(b" " * (lexer.MAX_FILE_BYTES + 1))
    monkeypatch.setattr(lexer, "MAX_TOKENS", 10)
    with pytest.raises(LeanLexError, match="more than 10 tokens"):
        lex("a " * 20)


def test_at_heads_interpolate_the_next_string_on_the_line() -> None:
    toks = kinds('throwErrorAt (stx.getArg 0) "bad {sorry}"\ndef x := "{plain}"')
    assert ("ident", "sorry") in toks
    assert toks[-1] == ("string", '"{plain}"')
    assert ("ident", "sorry") in kinds('trace[Meta.debug] "x {sorry}"')
