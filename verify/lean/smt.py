"""A theorem's statement as SMT-LIB queries (issue 33 item 2): the translation, no solving.

``queries(sig)`` turns a parsed signature (``verify.lean.statement``) into the questions
``verify.lean.claims`` asks the solver:

- ``hyps``: are the hypotheses satisfiable? The binders and the leading ``∀``/``→`` of the type are
  hypotheses and variables (a telescope, as ``intro`` would make them); ``Nat`` variables get
  ``>= 0``, ``Fin n`` ones ``0 <= x < n``. Unsatisfiable: they contradict each other;
- ``logic``: is the conclusion valid by logic alone? Every comparison is an unknown proposition,
  except that one whose sides are the same integer polynomial (``n = n + 0``, ``a + b = b + a``;
  sides that mention a variable) or the same text is decided; constants are decided;
- ``restates``: does the conclusion follow from the hypotheses by logic alone, read the same way?
- ``valid``: is the conclusion true for every value of its variables, hypotheses ignored
  (linear and non-linear integer arithmetic)? Only reported, never refused: facts of arithmetic
  (``(i / 256) * 256 + i % 256 = i``, ``256 ≤ 1024``) are what obligation lemmas often are.

The arithmetic is Lean's on ``Nat`` and ``Int``: ``Nat`` subtraction truncates at 0, ``x / 0 = 0``
and ``x % 0 = x``; ``Int`` division is not translated. A term outside this (a function, a field,
a coercion, ``Float``, a ``UInt32`` whose arithmetic wraps) never gets an arithmetic meaning: the
comparison holding it becomes an unknown proposition (keyed by its text, so the same comparison
is the same unknown), and the statement is marked ``abstracted``. Unknowns only add models, so an
``unsat`` answer stays sound; a ``sat`` one over an abstracted statement proves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verify.lean.statement import (
    App,
    Binder,
    Const,
    Num,
    Op,
    Opaque,
    Quant,
    Signature,
    Term,
    Var,
    text_of,
)

NUMERIC = {"Nat": "Nat", "ℕ": "Nat", "Int": "Int", "ℤ": "Int"}
SORTS = frozenset(
    {"Nat", "ℕ", "Int", "ℤ", "Bool", "Prop", "Float", "Float32", "Float64", "UInt8", "UInt16",
     "UInt32", "UInt64", "USize", "Int8", "Int16", "Int32", "Int64", "Char", "String", "Unit",
     "Fin", "Array", "List", "Vector", "BitVec", "Option", "Prod", "Type", "Sort"}
)  # fmt: skip
COMPARE = {"=": "=", "≠": "distinct", "<": "<", "≤": "<=", ">": ">", "≥": ">=", "==": "=",
           "!=": "distinct"}  # fmt: skip
LOGIC = {"∧": "and", "∨": "or", "→": "=>", "↔": "="}
MAX_POLY = 64  # monomials of a normalised side
MAX_POWER = 8  # x ^ k with a variable x is expanded up to k = 8
MAX_BITS = 4096  # a numeral power n ^ k is computed when it has at most this many bits


class Untranslatable(Exception):
    """This term has no arithmetic meaning here."""


@dataclass
class Queries:
    """SMT-LIB text: declarations and assertions of each question (``claims`` adds check-sat)."""

    hyps: list[str] = field(default_factory=list)
    logic: list[str] = field(default_factory=list)
    restates: list[str] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)  # empty: the conclusion is not translated
    abstracted: list[str] = field(default_factory=list)  # what had no arithmetic meaning


@dataclass
class _Env:
    types: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (type, SMT symbol)
    decls: list[str] = field(default_factory=list)
    domain: list[str] = field(default_factory=list)
    atoms: dict[str, str] = field(default_factory=dict)  # text -> Bool symbol
    abstracted: list[str] = field(default_factory=list)
    count: int = 0
    scoped: int = 0  # inside a nested quantifier, whose binders may shadow

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def bind(self, name: str, ty: str) -> str:
        sym = self.fresh("v")
        if name in self.types and not self.scoped:  # the texts of the atoms would be ambiguous
            raise Untranslatable(f"{name} bound twice")
        self.types[name] = (ty, sym)
        return sym

    def atom(self, key: str) -> str:
        if key not in self.atoms:
            self.atoms[key] = self.fresh("p")
            self.decls.append(f"(declare-const {self.atoms[key]} Bool)")
        return self.atoms[key]


def _sort_of(t: Term) -> str | None:
    """``Nat``/``Int``/``Prop``/``Fin``/``other`` for a binder type that names a sort; None when
    the type is a proposition (the binder is a hypothesis)."""
    if isinstance(t, Var):
        if t.name in NUMERIC:
            return NUMERIC[t.name]
        if t.name == "Prop":
            return "Prop"
        return "other" if t.name in SORTS else None
    if isinstance(t, App):
        if t.fn == "Fin" and len(t.args) == 1:
            return "Fin"
        return "other" if t.fn in SORTS else None
    if isinstance(t, Op) and t.op == "→":
        if all(_sort_of(a) is not None for a in t.args):
            return "other"  # a function
    if isinstance(t, Opaque) and t.text == "?":
        return "?"
    return None


class _Translator:
    def __init__(self) -> None:
        self.env = _Env()
        self.hyps: list[Term] = []
        self.hyp_smt: list[str] = []  # each translated when bound: later binders are not in scope

    # --- the telescope ---------------------------------------------------------------------------

    def binder(self, b: Binder) -> None:
        sort = _sort_of(b.type)
        if b.kind == "instance":
            if isinstance(b.type, App) and b.type.fn == "Fact" and len(b.type.args) == 1:
                self.hypothesis(b.type.args[0])
            else:
                self.env.abstracted.append(f"instance [{text_of(b.type)}]")
            return
        if sort is None:
            if (
                isinstance(b.type, Var)
                and b.type.name not in self.env.types
                and (b.type.name[:1].isupper())
            ):  # ``(h : Bad)``: a definition the reader cannot see into
                self.env.abstracted.append(f"binder type {b.type.name}")
            self.hypothesis(b.type)
            return
        if sort == "Fin":
            assert isinstance(b.type, App)
            sym = self.env.bind(b.name, "Nat")
            self.env.decls.append(f"(declare-const {sym} Int)")
            self.env.domain.append(f"(>= {sym} 0)")
            try:
                bound, _ = self.arith(b.type.args[0])
                self.env.domain.append(f"(< {sym} {bound})")
            except Untranslatable:
                self.env.abstracted.append(f"Fin {text_of(b.type.args[0])}")
            return
        sym = self.env.bind(b.name, sort)
        if sort in ("Nat", "Int"):
            self.env.decls.append(f"(declare-const {sym} Int)")
            if sort == "Nat":
                self.env.domain.append(f"(>= {sym} 0)")
        elif sort == "Prop":
            self.env.decls.append(f"(declare-const {sym} Bool)")

    def hypothesis(self, t: Term) -> None:
        self.hyps.append(t)
        self.hyp_smt.append(self.formula(t))

    def telescope(self, sig: Signature) -> Term:
        for b in sig.binders:
            self.binder(b)
        concl = sig.type
        for _ in range(1000):
            if isinstance(concl, Quant) and concl.kind == "∀":
                for b in self._typed(concl.binders):
                    self.binder(b)
                concl = concl.body
            elif isinstance(concl, Op) and concl.op == "→" and _sort_of(concl.args[0]) is None:
                self.hypothesis(concl.args[0])
                concl = concl.args[1]
            else:
                break
        return concl

    def _typed(self, bs: tuple[Binder, ...]) -> list[Binder]:
        """``∀ i < n``: ``i`` takes the type of ``n`` when it is a variable of known type."""
        out = list(bs)
        for k, b in enumerate(out):
            if _sort_of(b.type) != "?":
                continue
            for g in out:
                if isinstance(g.type, Op) and g.type.args[0] == Var(b.name):
                    other = g.type.args[1]
                    ty = self.env.types.get(other.name) if isinstance(other, Var) else None
                    if ty is not None and ty[0] in ("Nat", "Int"):
                        out[k] = Binder(b.name, Var(ty[0]), b.kind)
                    elif isinstance(other, Num):
                        out[k] = Binder(b.name, Var("Nat"), b.kind)
        return out

    # --- arithmetic ------------------------------------------------------------------------------

    def arith(self, t: Term) -> tuple[str, str]:
        """(SMT term, type) with type ``Nat``, ``Int`` or ``num`` (a numeral: Lean's default is
        ``Nat``); ``Untranslatable`` otherwise."""
        if isinstance(t, Num):
            return str(t.value), "num"
        if isinstance(t, Var):
            known = self.env.types.get(t.name)
            if known is None or known[0] not in ("Nat", "Int"):
                raise Untranslatable(t.name)
            return known[1], known[0]
        if not isinstance(t, Op):
            raise Untranslatable(text_of(t))
        if t.op == "ite":
            c = self.formula(t.args[0], strict=True)
            (a, ta), (b, tb) = self.arith(t.args[1]), self.arith(t.args[2])
            return f"(ite {c} {a} {b})", _join(ta, tb)
        if t.op == "neg":
            a, ta = self.arith(t.args[0])
            if ta != "Int":
                raise Untranslatable("negation outside Int")
            return f"(- {a})", ta
        if t.op not in ("+", "-", "*", "/", "%", "^"):
            raise Untranslatable(t.op)
        (a, ta), (b, tb) = self.arith(t.args[0]), self.arith(t.args[1])
        ty = _join(ta, tb)
        if t.op in ("+", "*"):
            return f"({t.op} {a} {b})", ty
        if t.op == "^":
            return self.power(t, a, ta)
        if ty == "Int":  # Int subtraction is exact; Int division is not translated
            if t.op == "-":
                return f"(- {a} {b})", ty
            raise Untranslatable("Int division")
        if t.op == "-":  # Nat: truncated at 0
            return f"(ite (>= {a} {b}) (- {a} {b}) 0)", ty
        if t.op == "/":
            return f"(ite (= {b} 0) 0 (div {a} {b}))", ty
        return f"(ite (= {b} 0) {a} (mod {a} {b}))", ty

    def power(self, t: Op, a: str, ta: str) -> tuple[str, str]:
        k = t.args[1]
        if not isinstance(k, Num):
            raise Untranslatable("a variable exponent")
        base = t.args[0]
        if isinstance(base, Num) and base.value.bit_length() * k.value <= MAX_BITS:
            return str(base.value**k.value), ta
        if k.value == 0:
            return "1", ta
        if k.value > MAX_POWER:
            raise Untranslatable("a large power")
        return ("(* " + " ".join([a] * k.value) + ")" if k.value > 1 else a), ta

    # --- propositions ----------------------------------------------------------------------------

    def formula(self, t: Term, strict: bool = False) -> str:
        """``t`` as an SMT formula; what has no meaning here becomes an unknown proposition
        (``strict``: raises ``Untranslatable`` instead)."""
        if isinstance(t, Const):
            return "true" if t.value else "false"
        if isinstance(t, Var):
            ty = self.env.types.get(t.name)
            if ty is not None and ty[0] == "Prop":
                return ty[1]
        elif isinstance(t, Op) and t.op == "¬":
            return f"(not {self.formula(t.args[0], strict)})"
        elif isinstance(t, Op) and t.op in LOGIC:
            a, b = (self.formula(x, strict) for x in t.args)
            return f"({LOGIC[t.op]} {a} {b})"
        elif isinstance(t, Op) and t.op in COMPARE:
            try:
                (a, ta), (b, tb) = self.arith(t.args[0]), self.arith(t.args[1])
                _join(ta, tb)
                return f"({COMPARE[t.op]} {a} {b})"
            except Untranslatable:
                if strict:
                    raise
        elif isinstance(t, Op) and t.op == "ite":
            c, a, b = (self.formula(x, strict) for x in t.args)
            return f"(ite {c} {a} {b})"
        elif isinstance(t, Quant):
            q = self.quantified(t)
            if q is not None:
                return q
        if strict:
            raise Untranslatable(text_of(t))
        self.env.abstracted.append(text_of(t))
        return self.env.atom(text_of(t))

    def quantified(self, t: Quant) -> str | None:
        """A nested ``∀``/``∃`` over ``Nat``/``Int`` whose body translates without unknowns."""
        saved = dict(self.env.types)
        self.env.scoped += 1
        try:
            vars_: list[str] = []
            guards: list[str] = []
            for b in self._typed(t.binders):
                sort = _sort_of(b.type)
                if sort in ("Nat", "Int"):
                    sym = self.env.bind(b.name, sort)
                    vars_.append(f"({sym} Int)")
                    if sort == "Nat":
                        guards.append(f"(>= {sym} 0)")
                elif sort is None:
                    guards.append(self.formula(b.type, strict=True))
                else:
                    return None
            body = self.formula(t.body, strict=True)
        except Untranslatable:
            return None
        finally:
            self.env.types = saved
            self.env.scoped -= 1
        g = f"(and {' '.join(guards)})" if len(guards) > 1 else (guards[0] if guards else "true")
        if t.kind == "∀":
            return f"(forall ({' '.join(vars_)}) (=> {g} {body}))"
        return f"(exists ({' '.join(vars_)}) (and {g} {body}))"


def _join(a: str, b: str) -> str:
    if a == "num":
        return b
    if b == "num" or a == b:
        return a
    raise Untranslatable("Nat and Int mixed (a coercion)")


Poly = dict[tuple[str, ...], int]


def _has_var(t: Term) -> bool:
    if isinstance(t, Var):
        return True
    if isinstance(t, Op | App):
        return any(_has_var(a) for a in t.args)
    return False


class _Logic:
    """Propositions over unknowns: comparisons as atoms, decided only when their sides are the
    same integer polynomial (mentioning a variable) or the same text."""

    def __init__(self, tr: _Translator) -> None:
        self.tr = tr
        self.atoms: dict[str, str] = {}

    def atom(self, key: str) -> str:
        if key not in self.atoms:
            self.atoms[key] = f"q{len(self.atoms)}"
        return self.atoms[key]

    def decls(self) -> list[str]:
        return [f"(declare-const {s} Bool)" for s in self.atoms.values()]

    def prop(self, t: Term) -> str:
        if isinstance(t, Const):
            return "true" if t.value else "false"
        if isinstance(t, Op) and t.op == "¬":
            return f"(not {self.prop(t.args[0])})"
        if isinstance(t, Op) and t.op in LOGIC:
            return f"({LOGIC[t.op]} {self.prop(t.args[0])} {self.prop(t.args[1])})"
        if isinstance(t, Op) and t.op == "ite":
            return f"(ite {' '.join(self.prop(a) for a in t.args)})"
        if isinstance(t, Op) and t.op in COMPARE:
            return self.compare(t)
        return self.atom(text_of(t))

    def compare(self, t: Op) -> str:
        a, b = t.args
        op = {"==": "=", "!=": "≠", ">": "<", "≥": "≤"}.get(t.op, t.op)
        if t.op in (">", "≥"):
            a, b = b, a
        diff = self.difference(a, b)
        if diff is not None and not diff:
            return "false" if op in ("<", "≠") else "true"
        if text_of(a) == text_of(b):
            return "false" if op in ("<", "≠") else "true"
        if diff is None:
            return self.atom(text_of(t))
        if op in ("=", "≠"):  # one sign for a = b and b = a
            first = min(diff)
            if diff[first] < 0:
                diff = {m: -c for m, c in diff.items()}
        key = ("=" if op == "≠" else op) + ":" + repr(sorted(diff.items()))
        return f"(not {self.atom(key)})" if op == "≠" else self.atom(key)

    def difference(self, a: Term, b: Term) -> Poly | None:
        """``a - b`` as a polynomial when both sides are integer terms and one has a variable."""
        if not (_has_var(a) or _has_var(b)):
            return None
        try:
            self.tr.arith(a), self.tr.arith(b)
            pa, pb = self.poly(a), self.poly(b)
        except Untranslatable:
            return None
        out = dict(pa)
        for m, c in pb.items():
            out[m] = out.get(m, 0) - c
        return {m: c for m, c in out.items() if c}

    def poly(self, t: Term) -> Poly:
        if isinstance(t, Num):
            return {(): t.value} if t.value else {}
        if isinstance(t, Var):
            return {(t.name,): 1}
        if (isinstance(t, Op) and t.op in ("+", "*")) or _int_sub(self.tr, t):
            assert isinstance(t, Op)
            pa, pb = self.poly(t.args[0]), self.poly(t.args[1])
            if t.op == "*":
                return _mul(pa, pb)
            sign = -1 if t.op == "-" else 1
            out = dict(pa)
            for m, c in pb.items():
                out[m] = out.get(m, 0) + sign * c
            return {m: c for m, c in out.items() if c}
        if isinstance(t, Op) and t.op == "^" and isinstance(t.args[1], Num):
            if t.args[1].value <= MAX_POWER:
                power: Poly = {(): 1}
                for _ in range(t.args[1].value):
                    power = _mul(power, self.poly(t.args[0]))
                return power
        return {(text_of(t),): 1}  # truncated -, /, %, if: one unknown of its own


def _int_sub(tr: _Translator, t: Term) -> bool:
    if not (isinstance(t, Op) and t.op == "-"):
        return False
    try:
        return tr.arith(t)[1] == "Int"
    except Untranslatable:
        return False


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    if len(out) > MAX_POLY:
        raise Untranslatable("a polynomial too large")
    return {m: c for m, c in out.items() if c}


def queries(sig: Signature) -> Queries:
    """The four questions of the module docstring, as SMT-LIB assertions."""
    tr = _Translator()
    concl = tr.telescope(sig)
    hyps = tr.hyp_smt
    env = tr.env
    out = Queries()
    out.hyps = [*env.decls, *(f"(assert {d})" for d in env.domain)]
    out.hyps += [f"(assert {h})" for h in hyps]
    logic = _Logic(tr)
    c = logic.prop(concl)
    hs = [logic.prop(h) for h in tr.hyps]
    out.logic = [*logic.decls(), f"(assert (not {c}))"]
    out.restates = [*logic.decls(), *(f"(assert {h})" for h in hs), f"(assert (not {c}))"]
    before = len(env.abstracted)
    c_arith = tr.formula(concl)
    if len(env.abstracted) == before:  # the conclusion alone, every variable free
        out.valid = [*env.decls, *(f"(assert {d})" for d in env.domain)]
        out.valid.append(f"(assert (not {c_arith}))")
    out.abstracted = list(env.abstracted)
    return out
