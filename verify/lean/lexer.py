"""A Lean 4 lexer for the static scan ``lean.scan`` (SPEC 8).

It turns the text of one ``.lean`` file into tokens ``(kind, text, line, col)``, following Lean 4's
own tokenizer (``Lean.Parser.Basic``) closely enough that a word the scan looks for is seen exactly
when Lean would see it as code:

1. whitespace and comments are dropped: line comments ``--`` and block comments ``/- -/``, which
   nest (doc comments ``/-- -/`` and ``/-! -/`` are block comments too);
2. strings ``"..."`` with escapes (``\\"`` ``\\\\`` ``\\n`` ``\\t`` ``\\r`` ``\\'`` ``\\xHH``
   ``\\uHHHH`` ``\\u{H..}``) and gaps (``\\`` newline whitespace); raw strings ``r"..."`` and
   ``r#"..."#`` with any number of ``#``;
3. interpolated strings (after ``s!``, ``f!``, ``m!``, ``throwError`` and the other heads in
   ``INTERP_HEADS``, and after any identifier ending in ``!`` or a closing ``]``): their literal
   parts are ``istring`` tokens and every ``{...}`` part is CODE, lexed as tokens (nested braces,
   strings and further interpolations inside);
4. character literals ``'a'`` ``'\\''`` ``'"'``; a ``'`` inside an identifier (``x'``, ``h'``) is
   part of the identifier, as in Lean;
5. identifiers, dotted (``Foo.bar``) and escaped (``«any text»``); Lean's keywords are lexed as
   identifiers (the scan knows which ones matter); name literals ```foo`` and ````foo``;
6. numbers, ``#`` commands (``#exit``, ``#eval``), symbols.

Malformed input (bad UTF-8, an unterminated comment, string or ``«``, a bad escape or character
literal) and the limits below raise ``LeanLexError`` (a ``BadInput``) with a line and column;
nothing else can escape, whatever the bytes.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from ledger.errors import BadInput

MAX_FILE_BYTES = 4 << 20  # one .lean file
MAX_TOKENS = 2_000_000  # tokens in one file
MAX_COMMENT_DEPTH = 64  # nesting of /- -/
MAX_INTERP_DEPTH = 16  # interpolated strings inside interpolation code inside ...

# Heads after which Lean reads a string literal as an interpolated string.
INTERP_HEADS = frozenset(
    {
        "throwError", "throwErrorAt", "logInfo", "logInfoAt", "logWarning", "logWarningAt",
        "logError", "logErrorAt", "dbg_trace", "trace", "throwNamedError", "throwNamedErrorAt",
        "logNamedError", "logNamedWarning", "toMessageData",
    }
)  # fmt: skip


class Token(NamedTuple):
    kind: str  # ident name string istring char number command symbol
    text: str  # exact source text
    line: int  # 1-based
    col: int  # 1-based, in code points


class LeanLexError(BadInput):
    """The file is not lexable Lean 4, or hits a limit; ``line``/``col`` say where (1-based)."""

    def __init__(self, what: str, line: int, col: int) -> None:
        super().__init__(f"{line}:{col}: {what}")
        self.what = what
        self.line = line
        self.col = col


_LETTERLIKE = (
    "\u03b1-\u03ba\u03bc-\u03c9"  # lower Greek without lambda
    "\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"  # upper Greek without Pi, Sigma
    "\u03ca-\u03fb\u1f00-\u1ffe\u2100-\u214f\U0001d49c-\U0001d59f"
)
_SUBSCRIPT = "\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a"
_ID_FIRST = f"A-Za-z_{_LETTERLIKE}"
_ID_REST = f"A-Za-z0-9_'!?{_LETTERLIKE}{_SUBSCRIPT}"
_PART = f"(?:«[^»]*»|[{_ID_FIRST}][{_ID_REST}]*)"
IDENT_RE = re.compile(f"{_PART}(?:\\.{_PART})*")
_ESC = r"\\(?:[\\\"'nrt{]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|u\{[0-9a-fA-F]{1,6}\}|\r?\n[ \t\r\n]*)"

_MASTER = re.compile(
    "|".join(
        (
            r"(?P<ws>[ \t\r\n]+)",
            r"(?P<lcomment>--[^\n]*)",
            r"(?P<bcomment>/-)",
            r'(?P<string>"(?:[^"\\]|\\[\s\S])*")',
            r'(?P<raw>r#*")',
            f"(?P<ident>{IDENT_RE.pattern})",
            r"(?P<number>0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+"
            r"|[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)",
            f"(?P<char>'(?:[^'\\\\\\n]|{_ESC})')",
            f"(?P<name>``?{_PART}(?:\\.{_PART})*)",
            r"(?P<command>#[A-Za-z_][A-Za-z0-9_']*)",
            r"(?P<symbol>:=|@\[|#\[|=>|->|<-|::|\.\.\.?|<;>|''|[\s\S])",
        )
    )
)
_STRING_BODY = re.compile(r'(?:[^"\\]|\\[\s\S])*')
_STRING_ESC = re.compile(r"\\[\s\S]")
_ESC_FULL = re.compile(_ESC)
_INTERP_BODY = re.compile(r'(?:[^"\\{]|\\[\s\S])*')
_COMMENT_MARK = re.compile(r"/-|-/")
_NEWLINE = re.compile(r"\n")
_BAD_CHAR_START = re.compile(r"'[^']")


class _Pos:
    """Offset -> (line, col) through a sorted list of newline offsets."""

    def __init__(self, text: str) -> None:
        self.nl = [m.start() for m in _NEWLINE.finditer(text)]

    def at(self, off: int) -> tuple[int, int]:
        i = bisect.bisect_left(self.nl, off)
        start = self.nl[i - 1] + 1 if i else 0
        return i + 1, off - start + 1


def decode(data: bytes) -> str:
    """UTF-8 text of a file, or ``LeanLexError`` at the first bad byte (or over the size limit)."""
    if len(data) > MAX_FILE_BYTES:
        raise LeanLexError(f"limit: file is larger than {MAX_FILE_BYTES} bytes", 1, 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        good = data[: e.start].decode("utf-8")
        pos = _Pos(good)
        line, col = pos.at(len(good))
        raise LeanLexError(f"not valid UTF-8 (byte {e.start})", line, col) from e


def _check_escapes(body: str, start: int, pos: _Pos) -> None:
    for m in _STRING_ESC.finditer(body):
        if _ESC_FULL.match(body, m.start()) is None:
            raise LeanLexError("bad escape in string", *pos.at(start + m.start()))


def lex(text: str) -> list[Token]:
    """Tokens of one Lean 4 file (comments and whitespace dropped); see the module docstring."""
    pos = _Pos(text)
    out: list[Token] = []
    append = out.append
    n = len(text)
    i = 0
    frames: list[int] = []  # brace depth of each open interpolation code part
    in_interp = False  # inside the literal part of an interpolated string
    interp_start = 0  # where the current literal part began
    interp_next = False  # the previous token makes the next string interpolated
    master = _MASTER.match
    while i < n:
        if len(out) > MAX_TOKENS:
            raise LeanLexError(f"limit: more than {MAX_TOKENS} tokens", *pos.at(i))
        if in_interp:
            m = _INTERP_BODY.match(text, i)
            assert m is not None  # the pattern matches the empty string
            j = m.end()
            _check_escapes(m.group(), i, pos)
            if j >= n or text[j] not in '"{':  # the end, or a backslash ending the file
                raise LeanLexError("unterminated interpolated string", *pos.at(interp_start))
            append(Token("istring", text[i : j + 1], *pos.at(i)))
            if text[j] == "{":
                if len(frames) >= MAX_INTERP_DEPTH:
                    raise LeanLexError("limit: interpolated strings nest too deep", *pos.at(j))
                frames.append(0)
            in_interp = False
            i = j + 1
            continue
        c = text[i]
        if c == '"' and interp_next:
            interp_next = False
            in_interp = True
            interp_start = i
            append(Token("istring", '"', *pos.at(i)))
            i += 1
            continue
        m = master(text, i)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        j = m.end()
        if kind == "ws" or kind == "lcomment":
            i = j
            continue
        if kind == "bcomment":
            i = _skip_comment(text, i, pos)
            continue
        tok = m.group()
        if kind == "ident":
            if tok == "r" and j < n and text[j] in '#"':
                raw = _RAW_START.match(text, i)
                if raw is not None:
                    j = _raw_end(text, i, raw.end() - i - 2, pos)
                    append(Token("string", text[i:j], *pos.at(i)))
                    interp_next = False
                    i = j
                    continue
            append(Token("ident", tok, *pos.at(i)))
            interp_next = tok in INTERP_HEADS or tok.endswith("!")
            i = j
            continue
        if kind == "raw":
            # ``r"`` inside a longer identifier never reaches here (the ident branch is first)
            j = _raw_end(text, i, len(tok) - 2, pos)
            append(Token("string", text[i:j], *pos.at(i)))
        elif kind == "string":
            _check_escapes(tok[1:-1], i + 1, pos)
            append(Token("string", tok, *pos.at(i)))
        elif kind == "symbol":
            if tok == '"':
                raise LeanLexError("unterminated string", *pos.at(i))
            if tok == "'" and (j >= n or text[j] != "'"):
                raise LeanLexError("bad character literal", *pos.at(i))
            if tok == "«":
                raise LeanLexError("unterminated «identifier»", *pos.at(i))
            if frames and tok == "{":
                frames[-1] += 1
            elif frames and tok == "}":
                if frames[-1] == 0:
                    frames.pop()
                    in_interp = True
                    interp_start = i
                    i = j - 1  # the literal part starts with this brace
                    append(Token("istring", "}", *pos.at(i)))
                    i = j
                    continue
                frames[-1] -= 1
            append(Token("symbol", tok, *pos.at(i)))
            interp_next = tok == "]"
            i = j
            continue
        else:
            append(Token(kind or "symbol", tok, *pos.at(i)))
        interp_next = False
        i = j
    if in_interp or frames:
        raise LeanLexError("unterminated interpolated string", *pos.at(interp_start))
    return out


_RAW_START = re.compile(r'r(#*)"')


def _raw_end(text: str, start: int, hashes: int, pos: _Pos) -> int:
    """End offset of the raw string ``r#..#"`` opened at ``start`` with ``hashes`` hashes."""
    body = start + 2 + hashes
    close = '"' + "#" * hashes
    end = text.find(close, body)
    if end < 0:
        raise LeanLexError("unterminated raw string", *pos.at(start))
    return end + len(close)


def _skip_comment(text: str, start: int, pos: _Pos) -> int:
    """End offset of the (nested) block comment opened at ``start``."""
    depth = 1
    i = start + 2
    search = _COMMENT_MARK.search
    while True:
        m = search(text, i)
        if m is None:
            raise LeanLexError("unterminated comment", *pos.at(start))
        if m.group() == "/-":
            depth += 1
            if depth > MAX_COMMENT_DEPTH:
                raise LeanLexError(
                    f"limit: comments nest deeper than {MAX_COMMENT_DEPTH}", *pos.at(m.start())
                )
        else:
            depth -= 1
            if depth == 0:
                return m.end()
        i = m.end()


def name_parts(ident: str) -> list[str]:
    """The name components of an identifier token: ``Foo.«a b».c`` -> ``["Foo", "a b", "c"]``."""
    parts: list[str] = []
    i = 0
    n = len(ident)
    while i < n:
        if ident[i] == "«":
            j = ident.index("»", i)
            parts.append(ident[i + 1 : j])
            i = j + 1
        else:
            j = ident.find(".", i)
            if j < 0:
                j = n
            parts.append(ident[i:j])
            i = j
        if i < n and ident[i] == ".":
            i += 1
    return parts
