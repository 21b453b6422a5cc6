"""A theorem's statement, read from the scan's tokens into a small term tree (issue 33 item 2).

``parse_signature(tokens)`` takes the token texts of a declaration's signature (what follows its
name, up to ``:=``: ``verify.lean.scan._Walker.statement``) and returns its binders and its type.
It reads the part of Lean 4's term syntax that proof-obligation statements use:

- binders ``(a b : T)``, ``{a : T}``, ``⦃a : T⦄``, ``[inst : C]`` / ``[C]``;
- ``∀ x y : T, p``, ``∀ (x : T) (h : q), p``, ``∀ x < n, p`` (and ``≤ > ≥``), ``∃`` likewise;
- ``→``, ``↔``, ``∨``, ``∧``, ``¬``, ``=``, ``≠``, ``<``, ``≤``, ``>``, ``≥``, ``+``, ``-``, ``*``,
  ``/``, ``%``, ``^``, unary ``-``, ``if c then a else b``, parentheses, numerals, ``True``,
  ``False``, identifiers, and application (``f x y``), with Lean's precedences.

Anything else (``fun``, ``⟨..⟩``, ``↑x``, ``x ∈ s``, ``a[i]``, ``match``, type ascriptions ...)
becomes an ``Opaque`` node holding its tokens: the reader never guesses. It is bounded: at most
``MAX_TOKENS`` tokens and ``MAX_DEPTH`` nested terms; beyond, or on tokens it cannot read,
``StatementError``. It never evaluates anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_TOKENS = 4000  # tokens of one signature
MAX_DEPTH = 64  # nested terms
MAX_NODES = 400  # operators and applications of one signature (a chain ``a + a + ...`` is deep)


class StatementError(ValueError):
    """The signature is not in the syntax this reader knows, or is over a limit."""


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Const:
    value: bool  # True / False


@dataclass(frozen=True)
class Op:
    op: str  # "→ ↔ ∨ ∧ = ≠ < ≤ > ≥ + - * / % ^", "¬" and "neg" (one operand), "ite" (three)
    args: tuple[Term, ...]


@dataclass(frozen=True)
class App:
    fn: str
    args: tuple[Term, ...]


@dataclass(frozen=True)
class Binder:
    name: str  # "_" for an anonymous instance binder
    type: Term
    kind: str  # "explicit", "implicit", "instance"


@dataclass(frozen=True)
class Quant:
    kind: str  # "∀" or "∃"
    binders: tuple[Binder, ...]
    body: Term


@dataclass(frozen=True)
class Opaque:
    text: str  # the tokens, joined by blanks


Term = Var | Num | Const | Op | App | Quant | Opaque


@dataclass(frozen=True)
class Signature:
    binders: tuple[Binder, ...]
    type: Term


def text_of(t: Term) -> str:
    """A canonical text of ``t`` (keys opaque atoms; equal texts mean the same term)."""
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Num):
        return str(t.value)
    if isinstance(t, Const):
        return "True" if t.value else "False"
    if isinstance(t, Opaque):
        return f"«{t.text}»"
    if isinstance(t, App):
        return "(" + " ".join([t.fn, *map(text_of, t.args)]) + ")"
    if isinstance(t, Quant):
        bs = " ".join(f"({b.name} : {text_of(b.type)})" for b in t.binders)
        return f"({t.kind} {bs}, {text_of(t.body)})"
    return "(" + " ".join([t.op, *map(text_of, t.args)]) + ")"


# Lean 4's precedences: (left binding power, right binding power) of the infix operators.
_INFIX: dict[str, tuple[int, int]] = {
    "→": (25, 24), "->": (25, 24),  # right associative
    "↔": (20, 21), "<->": (20, 21),
    "∨": (30, 29), "\\/": (30, 29),
    "∧": (35, 34), "/\\": (35, 34),
    "=": (50, 51), "≠": (50, 51), "<": (50, 51), "≤": (50, 51), ">": (50, 51),
    "≥": (50, 51), "<=": (50, 51), ">=": (50, 51), "==": (50, 51), "!=": (50, 51),
    "+": (65, 66), "-": (65, 66),
    "*": (70, 71), "/": (70, 71), "%": (70, 71),
    "^": (75, 75),
}  # fmt: skip
_SPELL = {"->": "→", "<->": "↔", "\\/": "∨", "/\\": "∧", "<=": "≤", ">=": "≥"}
_BRACKETS = {"(": ")", "{": "}", "[": "]", "⦃": "⦄"}
_STOP = frozenset({")", "}", "]", "⦄", ",", ":", "then", "else", ":="})
# brackets read as one opaque term: anonymous constructors, lists and arrays, sets, structures
_OPAQUE_OPEN = {"⟨": "⟩", "#[": "]", "‹": "›", "⟦": "⟧", "[": "]", "{": "}"}


# ASCII spellings the lexer splits in two (``<=`` is ``<`` then ``=``); apart, they are not Lean
_JOIN = {("<", "="): "<=", (">", "="): ">=", ("!", "="): "!=", ("=", "="): "==",
         ("/", "\\"): "/\\", ("\\", "/"): "\\/", ("<-", ">"): "<->"}  # fmt: skip


def _joined(toks: Sequence[str]) -> list[str]:
    out: list[str] = []
    for t in toks:
        pair = (out[-1], t) if out else None
        if pair in _JOIN:
            out[-1] = _JOIN[pair]
        else:
            out.append(t)
    return out


class _Reader:
    def __init__(self, toks: Sequence[str]) -> None:
        if len(toks) > MAX_TOKENS:
            raise StatementError(f"more than {MAX_TOKENS} tokens")
        self.toks = _joined(toks)
        self.i = 0
        self.depth = 0
        self.nodes = 0

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        t = self.peek()
        if t is None or (want is not None and t != want):
            raise StatementError(f"expected {want or 'more'}, found {t or 'the end'}")
        self.i += 1
        return t

    def enter(self) -> None:
        self.depth += 1
        self.nodes += 1
        if self.depth > MAX_DEPTH:
            raise StatementError(f"terms nest deeper than {MAX_DEPTH}")
        if self.nodes > MAX_NODES:
            raise StatementError(f"more than {MAX_NODES} terms")

    # --- binders -------------------------------------------------------------------------------

    def bracket_binders(self) -> list[Binder]:
        """One ``(a b : T)`` / ``{..}`` / ``⦃..⦄`` / ``[..]`` group."""
        open_ = self.take()
        close = _BRACKETS[open_]
        kind = {"(": "explicit", "[": "instance"}.get(open_, "implicit")
        if open_ == "[":
            name = "_"
            if self.peek(1) == ":":
                name = self.take()
                self.take(":")
            ty = self.term(0)
            self.take(close)
            return [Binder(name, ty, kind)]
        names: list[str] = []
        while self.peek() not in (":", close, None):
            names.append(self.ident())
        if not names:
            raise StatementError("a binder without a name")
        if self.peek() == close:  # ``(x y)``: auto-bound, type unknown
            self.take(close)
            return [Binder(n, Opaque("?"), kind) for n in names]
        self.take(":")
        ty = self.term(0)
        if self.peek() == ":=":
            raise StatementError("a binder with a default value")
        self.take(close)
        return [Binder(n, ty, kind) for n in names]

    def ident(self) -> str:
        t = self.take()
        if not _is_ident(t):
            raise StatementError(f"expected a name, found {t}")
        return t

    def quant_binders(self) -> list[Binder]:
        """After ``∀``/``∃``: ``x y : T``, ``(x : T) {y : U}``, ``x < n``, ``x``."""
        out: list[Binder] = []
        while self.peek() in _BRACKETS:
            out += self.bracket_binders()
        if out:
            return out
        names: list[str] = []
        while self.peek() is not None and _is_ident(self.peek() or ""):
            names.append(self.take())
        if not names:
            raise StatementError("a quantifier without a variable")
        nxt = self.peek()
        if nxt == ":":
            self.take()
            ty = self.term(0)
            return [Binder(n, ty, "explicit") for n in names]
        if nxt in ("<", "≤", ">", "≥", "<=", ">="):
            op = _SPELL.get(self.take(), nxt)
            bound = self.term(51)
            bs = [Binder(n, Opaque("?"), "explicit") for n in names]
            guards = [Binder(f"h{n}", Op(op, (Var(n), bound)), "explicit") for n in names]
            return bs + guards
        return [Binder(n, Opaque("?"), "explicit") for n in names]

    # --- terms ---------------------------------------------------------------------------------

    def term(self, min_bp: int) -> Term:
        self.enter()
        try:
            left = self.prefix()
            while True:
                op = self.peek()
                if op is None or op not in _INFIX:
                    break
                lbp, rbp = _INFIX[op]
                if lbp < min_bp:
                    break
                self.take()
                right = self.term(rbp)  # counts one node per operator (``enter``)
                left = Op(_SPELL.get(op, op), (left, right))
            return left
        finally:
            self.depth -= 1

    def prefix(self) -> Term:
        t = self.peek()
        if t is None:
            raise StatementError("a term is missing")
        if t in ("∀", "∃"):
            self.take()
            bs = self.quant_binders()
            self.take(",")
            return Quant(t, tuple(bs), self.term(0))
        if t == "¬":
            self.take()
            return Op("¬", (self.term(40),))
        if t == "-":
            self.take()
            return Op("neg", (self.term(75),))
        if t == "if":
            self.take()
            if self.peek(1) == ":":  # ``if h : c then``: a dependent if
                raise StatementError("a dependent if")
            c = self.term(0)
            self.take("then")
            a = self.term(0)
            self.take("else")
            return Op("ite", (c, a, self.term(0)))
        return self.application()

    def application(self) -> Term:
        head = self.atom()
        args: list[Term] = []
        while self.peek() is not None and self._starts_atom(self.peek() or ""):
            args.append(self.atom())
        if not args:
            return head
        if isinstance(head, Var):
            return App(head.name, tuple(args))
        return Opaque(" ".join([text_of(head), *map(text_of, args)]))

    @staticmethod
    def _starts_atom(t: str) -> bool:
        if t in _STOP or t in _INFIX or t in ("∀", "∃", "¬", "if", "fun", "λ"):
            return False
        return t in ("(", "True", "False") or t in _OPAQUE_OPEN or _is_ident(t) or _is_num(t)

    def atom(self) -> Term:
        t = self.take()
        if t == "(":
            if self.peek() == ")":
                self.take()
                return Opaque("()")
            inner = self.term(0)
            if self.peek() != ")":  # ``(a, b)``, ``(x : T)``: not read
                return self._opaque_rest("(", ")", inner)
            self.take(")")
            return inner
        if t in _OPAQUE_OPEN:
            return self._opaque_rest(t, _OPAQUE_OPEN[t], None)
        if t == "True":
            return Const(True)
        if t == "False":
            return Const(False)
        if _is_num(t):
            return Num(_num(t))
        if _is_ident(t):
            return Var(t)
        raise StatementError(f"cannot read {t!r}")

    def _opaque_rest(self, open_: str, close: str, inner: Term | None) -> Opaque:
        """The rest of a bracket this reader does not interpret, as one opaque term."""
        parts = [open_] + ([text_of(inner)] if inner is not None else [])
        depth = 1
        while depth:
            t = self.take()
            if t in ("(", "[", "{", "⦃", *_OPAQUE_OPEN):
                depth += 1
            elif t in (")", "]", "}", "⦄", "⟩", "›", "⟧"):
                depth -= 1
            parts.append(t)
        if parts[-1] != close:
            raise StatementError(f"{open_} closed by {parts[-1]}")
        return Opaque(" ".join(parts))


_NOT_IDENT = frozenset(
    {"fun", "λ", "then", "else", "if", "by", "do", "let", "have", "show", "from", "at", "with",
     "match", "∀", "∃", "¬", "Type", "Sort", "True", "False"}
)  # fmt: skip


def _is_ident(t: str) -> bool:
    if not t or t in _NOT_IDENT or t in _INFIX:
        return False
    c = t[0]
    return (c.isalpha() or c in "_«") and c not in "λΠΣ"


def _is_num(t: str) -> bool:
    return bool(t) and t[0].isdigit()


def _num(t: str) -> int:
    """A decimal, ``0x``, ``0b`` or ``0o`` numeral of at most 40 characters (no scientific)."""
    try:
        if len(t) <= 40 and t.isdigit():
            return int(t)
        if len(t) <= 40 and t[:2].lower() in ("0x", "0b", "0o"):
            return int(t, 0)
    except ValueError:
        pass
    raise StatementError(f"numeral {t[:20]} not read")


def parse_signature(toks: Sequence[str]) -> Signature:
    """Binders and type of a declaration's signature; ``StatementError`` when it cannot."""
    r = _Reader(toks)
    binders: list[Binder] = []
    while r.peek() in _BRACKETS:
        binders += r.bracket_binders()
    r.take(":")
    ty = r.term(0)
    if r.peek() is not None:
        raise StatementError(f"unread tokens from {r.peek()!r}")
    return Signature(tuple(binders), ty)
