"""Size expressions of contracts (contracts/README.md): shapes, scalar values, launch geometry.

Grammar: ``INT | NAME | f(a, b) | (e) | -e | e (+ - * // %) e`` with ``f`` one of ``ceil_div``,
``min``, ``max``. A tiny recursive-descent parser, never ``eval``: expressions come from
untrusted contracts. Limits: ``MAX_EXPR_CHARS`` characters, nesting ``MAX_DEPTH``, values within
``MAX_EXPR_VALUE``. Errors are ``ContractError`` naming the expression.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ledger.core.errors import ContractError

MAX_DEPTH = 32
MAX_EXPR_CHARS = 256
MAX_EXPR_VALUE = 1 << 63
_FUNCS = ("ceil_div", "min", "max")

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%(),]))")

Expr = tuple[Any, ...]  # ("int", v) | ("name", n) | (op, a, b) | ("neg", a)


@lru_cache(maxsize=4096)
def parse_expr(expr: str) -> Expr:
    """Parse a size expression; raise ``ContractError`` naming the expression."""
    if len(expr) > MAX_EXPR_CHARS:
        raise ContractError(f"expression longer than {MAX_EXPR_CHARS} characters")
    toks: list[tuple[str, str]] = []
    pos = 0
    stripped = expr.rstrip()
    while pos < len(stripped):
        m = _TOKEN.match(stripped, pos)
        if m is None:
            raise ContractError(f"expression {expr!r}: unexpected {stripped[pos:].strip()[:10]!r}")
        if m.group(1) is not None:
            toks.append(("int", m.group(1)))
        elif m.group(2) is not None:
            toks.append(("name", m.group(2)))
        else:
            toks.append(("op", m.group(3)))
        pos = m.end()
    if not toks:
        raise ContractError("expression is empty")
    p = _Parser(expr, toks)
    tree = p.sum(0)
    if p.i != len(toks):
        raise ContractError(f"expression {expr!r}: unexpected {toks[p.i][1]!r}")
    return tree


class _Parser:
    def __init__(self, src: str, toks: list[tuple[str, str]]) -> None:
        self.src = src
        self.toks = toks
        self.i = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _op(self, *ops: str) -> str | None:
        t = self._peek()
        if t is not None and t[0] == "op" and t[1] in ops:
            self.i += 1
            return t[1]
        return None

    def _need(self, op: str) -> None:
        if self._op(op) is None:
            t = self._peek()
            got = "end of expression" if t is None else repr(t[1])
            raise ContractError(f"expression {self.src!r}: expected {op!r}, got {got}")

    def sum(self, depth: int) -> Expr:
        left = self.product(depth)
        while (op := self._op("+", "-")) is not None:
            left = (op, left, self.product(depth))
        return left

    def product(self, depth: int) -> Expr:
        left = self.unary(depth)
        while (op := self._op("*", "//", "%")) is not None:
            left = (op, left, self.unary(depth))
        return left

    def unary(self, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise ContractError(f"expression {self.src!r}: nested deeper than {MAX_DEPTH}")
        if self._op("-") is not None:
            return ("neg", self.unary(depth + 1))
        if self._op("(") is not None:
            inner = self.sum(depth + 1)
            self._need(")")
            return inner
        t = self._peek()
        if t is None:
            raise ContractError(f"expression {self.src!r}: ends too early")
        self.i += 1
        kind, text = t
        if kind == "int":
            return ("int", int(text))
        if kind == "name":
            if text in _FUNCS:
                self._need("(")
                a = self.sum(depth + 1)
                self._need(",")
                b = self.sum(depth + 1)
                self._need(")")
                return (text, a, b)
            return ("name", text)
        raise ContractError(f"expression {self.src!r}: unexpected {text!r}")


def _eval(tree: Expr, sizes: Mapping[str, int], src: str) -> int:
    kind = tree[0]
    if kind == "int":
        v: int = tree[1]
    elif kind == "name":
        if tree[1] not in sizes:
            raise ContractError(f"expression {src!r}: size {tree[1]!r} is not bound")
        v = int(sizes[tree[1]])
    elif kind == "neg":
        v = -_eval(tree[1], sizes, src)
    else:
        a = _eval(tree[1], sizes, src)
        b = _eval(tree[2], sizes, src)
        if kind == "+":
            v = a + b
        elif kind == "-":
            v = a - b
        elif kind == "*":
            v = a * b
        elif kind == "min":
            v = min(a, b)
        elif kind == "max":
            v = max(a, b)
        else:  # // % ceil_div
            if b == 0:
                raise ContractError(f"expression {src!r}: division by zero")
            if kind == "//":
                v = a // b
            elif kind == "%":
                v = a % b
            else:
                if b < 0:
                    raise ContractError(f"expression {src!r}: ceil_div by a negative number")
                v = -((-a) // b)
    if abs(v) > MAX_EXPR_VALUE:
        raise ContractError(f"expression {src!r}: value out of range (over 2**63)")
    return v


def eval_expr(expr: str, sizes: Mapping[str, int]) -> int:
    """Evaluate a size expression (integers, size names, + - * // %, ( ), ceil_div/min/max)."""
    return _eval(parse_expr(str(expr)), sizes, str(expr))


def eval_tree(tree: Expr, sizes: Mapping[str, int], src: str = "") -> int:
    """Evaluate a parsed expression (part of a ``parse_expr`` tree); ``src`` names it in errors."""
    return _eval(tree, sizes, src or "(part of an expression)")


def expr_names(expr: str) -> frozenset[str]:
    """The size names an expression uses."""
    return tree_names(parse_expr(str(expr)))


def tree_names(tree: Expr) -> frozenset[str]:
    """The size names a parsed expression uses."""
    out: set[str] = set()
    stack = [tree]
    while stack:
        t = stack.pop()
        if t[0] == "name":
            out.add(t[1])
        elif t[0] != "int":
            stack.extend(x for x in t[1:] if isinstance(x, tuple))
    return frozenset(out)


# Relations between size variables (``kernel.size_constraints``): ``expr OP expr`` with OP one of
# <= < >= > == !=, each side an expression of the grammar above.
_RELATION = re.compile(r"^(.*?)(<=|>=|==|!=|<|>)(.*)$", re.S)
_COMPARE = {
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@lru_cache(maxsize=1024)
def parse_relation(text: str) -> tuple[str, str, str]:
    """Split ``"rows * cols <= 1048576"`` into (lhs, op, rhs), both sides parsed; else
    ``ContractError``."""
    if len(text) > MAX_EXPR_CHARS:
        raise ContractError(f"relation longer than {MAX_EXPR_CHARS} characters")
    m = _RELATION.match(text)
    if m is None:
        raise ContractError(f"relation {text!r}: needs one of <= < >= > == !=")
    lhs, op, rhs = m.group(1).strip(), m.group(2), m.group(3).strip()
    if any(c in rhs for c in "<>=!"):
        raise ContractError(f"relation {text!r}: only one comparison is allowed")
    parse_expr(lhs)
    parse_expr(rhs)
    return lhs, op, rhs


def eval_relation(text: str, sizes: Mapping[str, int]) -> bool:
    """Whether the size binding satisfies the relation."""
    lhs, op, rhs = parse_relation(text)
    return bool(_COMPARE[op](eval_expr(lhs, sizes), eval_expr(rhs, sizes)))


def relation_names(text: str) -> frozenset[str]:
    lhs, _, rhs = parse_relation(text)
    return expr_names(lhs) | expr_names(rhs)
