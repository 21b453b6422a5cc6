"""A Lean 4 lexer for the static scan ``lean.scan`` (SPEC 8).

It turns the text of one ``.lean`` file into tokens ``(kind, text, line, col)``, following Lean 4's
own tokenizer (``Lean.Parser.Basic``) closely enough that a word the scan looks for is seen exactly
when Lean would see it as code:

1. whitespace and comments are dropped: line comments ``--`` and block comments ``/- -/``, which
   nest (doc comments ``/-- -/`` and ``/-! -/`` are block comments too);
2. strings ``"..."`` with escapes (``\\"`` ``\\\\`` ``\\n`` ``\\t`` ``\\r`` ``\\'`` ``\\xHH``
   ``\\uHHHH`` ``\\u{H..}``) and gaps (``\\`` newline whitespace); raw strings ``r"..."`` and
   ``r#"..."#`` with any number of ``#``;
3. interpolated strings (after ``s!`` and ``f!``): their literal parts are ``istring`` tokens and
   every ``{...}`` part is CODE, lexed as tokens (nested braces, strings and further
   interpolations inside). After the heads whose reading depends on the imports (``m!``,
   ``throwError`` and the others in ``INTERP_HEADS``, any identifier ending in ``!``, a closing
   ``]`` (``trace[c]``), the line of a ``throwErrorAt``-like head) the string is read both ways:
   if both end at the same quote its ``{...}`` parts are code, else it is an error (one reading
   would hide code from the other); a comment between head and string changes nothing;
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

from ledger.core.errors import BadInput

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
# Heads that take a term first (``throwErrorAt ref "..."``): the next string on the same line.
INTERP_AT_HEADS = frozenset(h for h in INTERP_HEADS if h.endswith("At"))
# Heads that are keywords of ``Init`` (``Init/Data/ToString/Macro.lean``,
# ``Init/Data/Format/Macro.lean``; ``Init`` is always imported, since ``prelude`` is refused): the
# string after them IS interpolated. After every other head (``m!``, ``throwError``, ``x!``, ``]``
# ...) Lean's reading depends on the imports (without ``import Lean``, ``throwError`` is a plain
# identifier and the string is plain), so the lexer reads the string both ways (``_maybe_interp``).
INTERP_DEFINITE = frozenset({"s!", "f!"})


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

# Whitespace, line comments and non-nested block comments before a token, skipped in one match
# (possessive: no backtracking). A nested comment stops this prefix at its ``/-``, and the
# ``bcomment`` alternative hands it to ``_skip_comment``.
_SKIP = r"(?:[ \t\r\n]++|--[^\n]*+|/-(?:[^/-]++|/(?!-)|-(?!/))*+-/)*+"
_MASTER = re.compile(
    _SKIP
    + "(?:"
    + "|".join(
        (
            r"(?P<eof>\Z)",
            r"(?P<bcomment>/-)",
            r'(?P<string>"(?:[^"\\]++|\\[\s\S])*+")',
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
    + ")"
)
_STRING_ESC = re.compile(r"\\[\s\S]")
_ESC_FULL = re.compile(_ESC)
_INTERP_BODY = re.compile(r'(?:[^"\\{]++|\\[\s\S])*+')
_COMMENT_MARK = re.compile(r"/-|-/")
_NEWLINE = re.compile(r"\n")
_new = tuple.__new__


class _Pos:
    """Offset -> (line, col) through the sorted offsets where lines start."""

    def __init__(self, text: str) -> None:
        self.starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]

    def at(self, off: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, off) - 1
        return i + 1, off - self.starts[i] + 1


def decode(data: bytes) -> str:
    """UTF-8 text of a file, or ``LeanLexError`` at the first bad byte (or over the size limit)."""
    if len(data) > MAX_FILE_BYTES:
        raise LeanLexError(f"limit: file is larger than {MAX_FILE_BYTES} bytes", 1, 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        good = data[: e.start].decode("utf-8")
        line, col = _Pos(good).at(len(good))
        raise LeanLexError(f"not valid UTF-8 (byte {e.start})", line, col) from e


def _check_escapes(body: str, start: int, pos: _Pos) -> None:
    if "\\" not in body:
        return
    for m in _STRING_ESC.finditer(body):
        if _ESC_FULL.match(body, m.start()) is None:
            raise LeanLexError("bad escape in string", *pos.at(start + m.start()))


RawToken = tuple[str, str, int]  # kind, text, offset in code points

# group numbers of the token alternatives of _MASTER
_EOF, _BCOMMENT, _STRING, _RAW, _IDENT, _NUMBER, _CHAR, _NAME, _COMMAND, _SYMBOL = range(1, 11)
_KINDS = ("", "eof", "bcomment", "string", "raw", "ident", "number", "char", "name", "command")


def lex(text: str) -> list[Token]:
    """Tokens of one Lean 4 file (comments and whitespace dropped); see the module docstring."""
    starts = _Pos(text).starts
    out: list[Token] = []
    li = 0
    last = len(starts) - 1
    for kind, tok, off in lex_raw(text):
        while li < last and starts[li + 1] <= off:
            li += 1
        out.append(_new(Token, (kind, tok, li + 1, off - starts[li] + 1)))
    return out


def lex_raw(text: str) -> list[RawToken]:
    """``lex`` with code-point offsets instead of lines and columns (the scan's fast path)."""
    return _lex(text, _Pos(text), False)


def _lex(text: str, pos: _Pos, sub: bool) -> list[RawToken]:
    """The lexer. ``sub``: ``text`` is one string literal, to be read as an interpolated string
    that must close exactly at its end (``_maybe_interp``)."""
    out: list[RawToken] = []
    append = out.append
    n = len(text)
    i = 0
    frames: list[int] = []  # brace depth of each open interpolation code part
    in_interp = False  # inside the literal part of an interpolated string
    interp_start = 0  # where the current literal part began
    head = ""  # the previous token, when it may make the next string interpolated
    if sub:
        append(("istring", '"', 0))
        in_interp = True
        i = 1
    finditer = _MASTER.finditer
    limit = MAX_TOKENS
    heads = INTERP_HEADS
    at_heads = INTERP_AT_HEADS
    at_until = -1  # after an ``...At`` head: the first string before this offset interpolates
    line_end = -1  # end of the line of the last ``...At`` head
    big = n > limit  # fewer characters than the limit: fewer tokens too, no need to count
    while True:
        if len(out) > limit:
            raise LeanLexError(f"limit: more than {limit} tokens", *pos.at(i))
        if in_interp:
            m = _INTERP_BODY.match(text, i)
            assert m is not None  # the pattern matches the empty string
            j = m.end()
            _check_escapes(m.group(), i, pos)
            if j >= n or text[j] not in '"{':  # the end, or a backslash ending the file
                raise LeanLexError("unterminated interpolated string", *pos.at(interp_start))
            append(("istring", text[i : j + 1], i))
            if text[j] == "{":
                if len(frames) >= MAX_INTERP_DEPTH:
                    raise LeanLexError("limit: interpolated strings nest too deep", *pos.at(j))
                frames.append(0)
            elif sub and not frames:  # the string read as interpolated closes here
                if j + 1 != n:
                    raise LeanLexError("interpolated reading closes early", *pos.at(j))
                return out
            in_interp = False
            i = j + 1
            continue
        jump = -1  # where to restart after a construct handled outside the regex
        for m in finditer(text, i):
            g = m.lastindex or 0
            if g == _IDENT:
                tok = m.group(g)
                append(("ident", tok, m.start(g)))
                head = tok if tok in heads or tok[-1] == "!" else ""
                if tok in at_heads:  # ``throwErrorAt ref "..."``: a string later on this line
                    if m.end() > line_end:  # find each line's end once (no quadratic rescans)
                        line_end = text.find("\n", m.end())
                        line_end = n if line_end < 0 else line_end
                    at_until = line_end
                if big and len(out) > limit:
                    jump = m.end()
                    break
                continue
            if g == _EOF:
                break
            tok = m.group(g)
            t0 = m.start(g)
            if tok[0] == '"' and (head or t0 < at_until):  # interpolated, or maybe
                maybe = head not in INTERP_DEFINITE
                head = ""
                at_until = -1
                if maybe and g == _STRING:
                    if "\\" in tok:
                        _check_escapes(tok[1:-1], t0 + 1, pos)
                    if "{" not in tok:  # both readings agree
                        append(("string", tok, t0))
                        continue
                    out.extend(_maybe_interp(text, t0, m.end(g), pos, sub))
                    continue
                in_interp = True
                interp_start = t0
                append(("istring", '"', t0))
                jump = t0 + 1
                break
            if g == _SYMBOL:
                if tok in _SYMBOL_SPECIAL:
                    if tok == '"':
                        raise LeanLexError("unterminated string", *pos.at(t0))
                    if tok == "'":
                        if t0 + 1 >= n or text[t0 + 1] != "'":
                            raise LeanLexError("bad character literal", *pos.at(t0))
                    elif tok == "«":
                        raise LeanLexError("unterminated «identifier»", *pos.at(t0))
                    elif frames and tok == "{":
                        frames[-1] += 1
                    elif frames and tok == "}":
                        if frames[-1] == 0:
                            frames.pop()
                            in_interp = True
                            interp_start = t0
                            append(("istring", "}", t0))
                            jump = t0 + 1
                            break
                        frames[-1] -= 1
                append(("symbol", tok, t0))
                head = tok if tok == "]" else ""
                if big and len(out) > limit:
                    jump = m.end()
                    break
                continue
            if g == _BCOMMENT:  # a comment is whitespace: the head still applies after it
                jump = _skip_comment(text, t0, pos)
                break
            head = ""
            if g == _STRING:
                if "\\" in tok:
                    _check_escapes(tok[1:-1], t0 + 1, pos)
                append(("string", tok, t0))
            elif g == _RAW:
                jump = _raw_end(text, t0, len(tok) - 2, pos)
                append(("string", text[t0:jump], t0))
                break
            else:
                append((_KINDS[g], tok, t0))
            if big and len(out) > limit:
                jump = m.end()
                break
        if jump < 0:
            break
        i = jump
    if in_interp or frames:
        raise LeanLexError("unterminated interpolated string", *pos.at(interp_start))
    return out


def _maybe_interp(text: str, start: int, end: int, pos: _Pos, sub: bool) -> list[RawToken]:
    """Tokens of the string literal ``text[start:end]`` that Lean may read as plain or as
    interpolated, depending on syntax the scan cannot see (the imports). When both readings end
    at the same quote, the interpolated one is kept: its ``{...}`` parts are scanned as code, the
    plain reading has no code. When they end at different quotes, the rest of the file would be
    code in one reading and string in the other, and no single reading is safe: a problem."""
    try:
        if sub:  # no second-level readings: linear time whatever the input
            raise LeanLexError("nested", 1, 1)
        body = text[start:end]
        toks = _lex(body, _Pos(body), True)
    except LeanLexError:
        raise LeanLexError(
            "string literal reads differently as plain and as interpolated (it has `{` and "
            "follows a word that may make it interpolated); write it so both readings agree",
            *pos.at(start),
        ) from None
    return [(k, t, o + start) for k, t, o in toks]


_SYMBOL_SPECIAL = frozenset({'"', "'", "«", "{", "}"})
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
