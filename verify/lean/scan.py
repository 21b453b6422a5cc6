"""The static scan behind ``lean.scan`` (SPEC 8): escapes, declarations, fully qualified names.

For each ``.lean`` file of a bundle:

1. decode and lex it (``verify.lean.lexer``); a lexing error or a limit is a ``Problem``;
2. walk the tokens: ``import`` only at the start of the file (recorded); then every code token is
   checked against the rules below, so a word inside a comment, a string, a character literal, a
   name literal (```sorry``) or an escaped identifier («sorry») never counts, and neither does an
   identifier that merely contains one (``sorry_free``);
3. record the fully qualified name of every declaration, following ``namespace``/``section``/
   ``end`` (one scope per name component, so ``end A.B`` closes ``namespace A.B``), ``mutual``
   blocks, ``_root_.`` and ``private``;
4. a file with any problem taints every declaration in it, and in every bundle file that imports
   it (directly or not): those names are ``rejected``.

The rules form an allow-list where the syntax allows one:

- commands: a line that starts (column 1, outside brackets) with a word must start with an allowed
  command, modifier or continuation word (``COL0_WORDS``); ``#`` commands other than ``#check``
  and ``#print`` are refused (``#eval`` runs code, ``#exit`` hides the rest of the file);
- attributes (``@[...]`` and ``attribute [...]``): only the names in ``ALLOWED_ATTRS``;
- ``set_option`` (also ``set_option ... in`` inside proofs): only ``ALLOWED_OPTIONS`` and the
  ``linter.``, ``trace.``, ``pp.`` families;

and everywhere in code, the words of ``REJECT_WORDS`` (Lean keywords: ``sorry``, ``admit``,
``axiom`` after whatever modifiers, ``macro``, ``elab``, ``run_cmd`` ...) and any identifier naming
one of ``REJECT_CONSTANTS`` (``sorryAx``, ``Lean.ofReduceBool`` ..., also escaped or qualified),
plus ``decide +native`` / ``native := true``.

Private declarations are recorded under their plain qualified name (Lean mangles them, and they
cannot be named from another file, so ``lean.kernel`` cannot print their axioms; ``run`` refuses a
contract that names one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from verify.lean.lexer import (
    IDENT_RE,
    LeanLexError,
    RawToken,
    _Pos,
    decode,
    lex_raw,
    name_parts,
)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    col: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.what}"


@dataclass(frozen=True)
class LeanScan:
    theorems: frozenset[str]  # theorem and lemma names
    declarations: frozenset[str]  # every declared name (theorems too, defs, instances, types)
    problems: tuple[Problem, ...]
    rejected: frozenset[str]  # names declared in a file with a problem, or importing one
    bytes_scanned: int
    vacuous: frozenset[str] = frozenset()  # theorems whose statement is ``True`` or ``x = x``
    # (theorem, the ``variable`` binders before it, its signature's token texts), for
    # ``verify.lean.claims``; theorems share their ``variable`` tuple
    statements: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    # where the bundle may change what a statement's symbols mean: instances (``<`` on ``Nat``
    # redefined), declarations named like what the statement check reads (``Nat``, ``True``)
    meaning: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileScan:
    """What the scan learnt about one file (used by ``lean.kernel`` and the tests)."""

    path: str
    module: str  # ``A/B.lean`` -> ``A.B``
    imports: tuple[str, ...]
    theorems: tuple[str, ...]
    declarations: tuple[str, ...]
    private: frozenset[str]
    problems: tuple[Problem, ...]
    tokens: int
    vacuous: frozenset[str] = frozenset()
    statements: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
    meaning: tuple[str, ...] = ()


_RUNS = "(runs code)"
_SYNTAX = "(defines syntax, macros or elaborators)"
_SEARCH = "(proof search placeholder)"
_NATIVE = "(trusts native evaluation)"
REJECT_WORDS: dict[str, str] = {
    "sorry": "sorry",
    "admit": "admit",
    "stop": "stop (admits the rest of the proof)",
    "axiom": "axiom declaration",
    "opaque": "opaque declaration",
    "unsafe": "unsafe",
    "partial": "partial",
    "prelude": "prelude",
    "native_decide": "native_decide",
    "bv_decide": "bv_decide (trusts native evaluation)",
    "implemented_by": "implemented_by",
    "extern": "extern",
    "export": "export",
    "apply?": "apply? (proof search placeholder)",
    "exact?": "exact? (proof search placeholder)",
    "rw?": f"rw? {_SEARCH}",
    "rw??": f"rw?? {_SEARCH}",
    "try?": f"try? {_SEARCH}",
    "library_search": f"library_search {_SEARCH}",
    "plausible": "plausible (admits the goal when it finds no counterexample)",
    "slim_check": "slim_check (admits the goal when it finds no counterexample)",
    "bv_decide?": f"bv_decide? {_NATIVE}",
    "bv_check": f"bv_check {_NATIVE}",
    "run_tac": f"run_tac {_RUNS}",
    "by_elab": f"by_elab {_RUNS}",
    "init_quot": "init_quot (adds the quotient axioms)",
    "run_cmd": f"run_cmd {_RUNS}",
    "run_elab": f"run_elab {_RUNS}",
    "run_meta": f"run_meta {_RUNS}",
    "initialize": f"initialize {_RUNS}",
    "builtin_initialize": f"builtin_initialize {_RUNS}",
    "register_option": f"register_option {_RUNS}",
    "register_builtin_option": f"register_builtin_option {_RUNS}",
    "elab": f"elab {_SYNTAX}",
    "elab_rules": f"elab_rules {_SYNTAX}",
    "macro": f"macro {_SYNTAX}",
    "macro_rules": f"macro_rules {_SYNTAX}",
    "syntax": f"syntax {_SYNTAX}",
    "notation": f"notation {_SYNTAX}",
    "infix": f"infix {_SYNTAX}",
    "infixl": f"infixl {_SYNTAX}",
    "infixr": f"infixr {_SYNTAX}",
    "prefix": f"prefix {_SYNTAX}",
    "postfix": f"postfix {_SYNTAX}",
    "declare_syntax_cat": f"declare_syntax_cat {_SYNTAX}",
    "binder_predicate": f"binder_predicate {_SYNTAX}",
    "simproc": f"simproc {_SYNTAX}",
    "dsimproc": f"dsimproc {_SYNTAX}",
    "simproc_decl": f"simproc_decl {_SYNTAX}",
    "dsimproc_decl": f"dsimproc_decl {_SYNTAX}",
    "builtin_simproc": f"builtin_simproc {_SYNTAX}",
    "builtin_dsimproc": f"builtin_dsimproc {_SYNTAX}",
    "builtin_simproc_decl": f"builtin_simproc_decl {_SYNTAX}",
    "builtin_dsimproc_decl": f"builtin_dsimproc_decl {_SYNTAX}",
    "declare_config_elab": f"declare_config_elab {_SYNTAX}",
    "unif_hint": f"unif_hint {_SYNTAX}",
    # elaborators that read a file of the verifying machine (``include_str "../.ledger/log.key"``)
    # into the term, where an error message quotes it (core Lean and Mathlib.Util.IncludeStr)
    "include_str": "include_str (reads a file of the verifying machine at compile time)",
    "include_bytes": "include_bytes (reads a file of the verifying machine at compile time)",
}
# Constants whose use is an escape, by last name component (``Lean.ofReduceBool``, «sorryAx»).
REJECT_CONSTANTS = frozenset(
    {"sorryAx", "ofReduceBool", "ofReduceNat", "reduceBool", "reduceNat", "trustCompiler",
     "admitGoal", "mkSorry", "mkLabeledSorry", "mkSyntheticSorry"}
)  # fmt: skip
ALLOWED_HASH = frozenset({"#check", "#print"})
ALLOWED_ATTRS = frozenset(
    {
        "simp", "inline", "noinline", "always_inline", "macro_inline", "reducible",
        "irreducible", "semireducible", "instance", "specialize", "ext", "refl", "symm",
        "trans", "congr", "norm_cast", "push_cast", "elab_as_elim", "match_pattern",
        "inherit_doc", "deprecated", "default_instance", "induction_eliminator",
        "cases_eliminator", "grind", "simps", "nolint", "local", "scoped",
    }
)  # fmt: skip
ALLOWED_OPTIONS = frozenset(
    {
        "maxHeartbeats", "maxRecDepth", "autoImplicit", "relaxedAutoImplicit",
        "synthInstance.maxHeartbeats", "synthInstance.maxSize", "maxSynthPendingDepth",
        "diagnostics", "diagnostics.threshold", "exponentiation.threshold", "profiler",
        "profiler.threshold",
    }
)  # fmt: skip
ALLOWED_OPTION_PREFIXES = ("linter.", "trace.", "pp.")
DECL_HEADS = frozenset(
    {"theorem", "lemma", "def", "abbrev", "instance", "structure", "inductive", "class"}
)
MODIFIERS = frozenset({"private", "protected", "noncomputable", "nonrec", "scoped", "local"})
COMMANDS = DECL_HEADS | {
    "import", "namespace", "section", "end", "open", "variable", "universe", "example",
    "mutual", "set_option", "attribute", "deriving", "omit", "include",
}  # fmt: skip
# Words that may begin a line at column 1: commands, modifiers, and continuations of a command.
COL0_WORDS = COMMANDS | MODIFIERS | {
    "where", "termination_by", "decreasing_by", "with", "in", "by", "at", "_", "then", "else",
    "do", "from", "using", "calc", "show", "fun", "have", "let", "match", "if", "extends",
}  # fmt: skip
_OPEN = frozenset({"(", "[", "{", "⟨", "⦃", "⟦", "@[", "#[", "‹"})
_CLOSE = frozenset({")", "]", "}", "⟩", "⦄", "⟧", "›"})


def module_name(path: str) -> str:
    return path[: -len(".lean")].replace("/", ".") if path.endswith(".lean") else path


def _parts(text: str) -> list[str]:
    return name_parts(text) if "«" in text else text.split(".")


def canonical(parts: Sequence[str]) -> str:
    """A name as one string, components joined by dots; a component that holds a dot (or is
    empty) stays «escaped», so ``«A.b»`` (one component) and ``A.b`` (two) differ."""
    return ".".join(f"«{p}»" if "." in p or not p else p for p in parts)


def plain_name(key: str) -> bool:
    """Every component of ``key`` (as ``canonical`` writes it) is a plain identifier."""
    return "«" not in key and all(IDENT_RE.fullmatch(c) for c in key.split("."))


def theorem_key(name: str) -> str:
    """A theorem named by a contract, as the scan records names: blanks and a leading
    ``_root_.`` dropped, components canonical (``canonical``); unreadable names unchanged."""
    name = name.strip().removeprefix("_root_.")
    try:
        parts = name_parts(name)
    except ValueError:  # an unclosed «
        return name
    return canonical(parts) if parts and all(parts) else name


class _Walker:
    """One pass over the (raw, offset-based) tokens of one file."""

    def __init__(self, path: str, text: str, toks: list[RawToken]) -> None:
        self.path = path
        self.text = text
        self.toks = toks
        self.pos = _Pos(text)
        self.problems: list[Problem] = []
        self.imports: list[str] = []
        self.theorems: list[str] = []
        self.decls: list[str] = []
        self.private: set[str] = set()
        self.vacuous: set[str] = set()
        # theorem -> (the ``variable`` binders before it, its signature's tokens)
        self.statements: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self.variables: tuple[str, ...] = ()  # the binders of every ``variable`` command so far
        self.meaning: list[str] = []  # see ``LeanScan.meaning``
        self.scopes: list[tuple[str, str | None]] = []  # (namespace|section|mutual, component)

    def problem(self, t: RawToken, what: str) -> None:
        if len(what) > 120:
            what = what[:100] + "..." + what[-17:]
        if len(self.problems) > MAX_PROBLEMS:
            return
        line, col = self.pos.at(t[2])
        if len(self.problems) == MAX_PROBLEMS:
            what = f"limit: more than {MAX_PROBLEMS} problems in this file (the rest not listed)"
        last = self.problems[-1] if self.problems else None
        if last is not None and (last.line, last.col) == (line, col):
            return  # one problem per place: the first rule that saw it
        self.problems.append(Problem(self.path, line, col, what))

    def tok(self, k: int) -> RawToken | None:
        return self.toks[k] if 0 <= k < len(self.toks) else None

    def header(self) -> int:
        """1. The header: imports only. Returns the index of the first token after it."""
        toks = self.toks
        k = 0
        while k < len(toks) and toks[k][0] == "ident" and toks[k][1] == "import":
            nxt = self.tok(k + 1)
            if nxt is None or nxt[0] != "ident":
                self.problem(toks[k], "import without a module name")
                k += 1
                continue
            if nxt[1] in REJECT_WORDS:
                self.problem(nxt, REJECT_WORDS[nxt[1]])
            if len(self.imports) >= MAX_IMPORTS:
                self.problem(toks[k], f"limit: more than {MAX_IMPORTS} imports")
                break
            self.imports.append(".".join(_parts(nxt[1])))
            k += 2
        return k

    def walk(self) -> None:
        toks = self.toks
        src = self.text
        # 2. after the header, the commands; the common tokens take the short paths
        first = self.header()
        depth = 0
        private = False
        special = _SPECIAL_IDENTS
        col0_ok = COL0_WORDS
        suffixes = _CONST_SUFFIXES
        opens, closes = _OPEN, _CLOSE
        attr_level: list[
            int
        ] = []  # depth inside each open attribute list (@[...], attribute [...])
        attr_start = False  # the next token directly in the innermost list names an attribute
        for k in range(first, len(toks)):
            t = toks[k]
            kind, text, off = t
            if attr_level and depth == attr_level[-1] and text not in closes:
                if text == ",":
                    attr_start = True
                    continue
                if attr_start and text not in ("local", "scoped", "-"):
                    attr_start = False
                    if kind != "ident" or text not in ALLOWED_ATTRS:
                        self.problem(t, f"attribute {text} (not in the allow-list)")
                    elif text == "instance":
                        self.changes_meaning(t, "an instance")
            if kind == "ident":
                if text in special:
                    if text in REJECT_WORDS:
                        self.problem(t, REJECT_WORDS[text])
                    elif text == "native":
                        self.native(k)
                    elif text == "decide":
                        self.decide_config(k)
                    elif text == "import":
                        self.problem(t, "import after the start of the file")
                    elif text == "set_option":
                        self.option(k)
                    if depth and text in _RESYNC:
                        # a command keyword cannot stand inside brackets: they were left open
                        # (Lean reports an error and resumes here); the walk resumes here too
                        depth = 0
                        attr_level.clear()
                    if depth == 0:
                        if text == "private":
                            private = True
                        elif text in DECL_HEADS:
                            self.declaration(k, private)
                            private = False
                        elif text in _SCOPE_WORDS:
                            self.scope(k)
                        elif text == "variable":
                            self.variable(k)
                elif "«" in text or text.endswith(suffixes):
                    parts = _parts(text)
                    if parts[-1] in REJECT_CONSTANTS:
                        self.problem(t, f"use of {text}")
                    elif parts == ["native"]:  # «native» is the field name native
                        self.native(k)
                if depth == 0 and (off == 0 or src[off - 1] == "\n") and text not in col0_ok:
                    self.problem(t, f"unknown command `{text}` (not in the allow-list)")
            elif kind == "symbol":
                if text in opens:
                    depth += 1
                    if text == "@[" or (text == "[" and k and toks[k - 1][1] == "attribute"):
                        attr_level.append(depth)
                        attr_start = True
                elif text in closes and depth:
                    if attr_level and depth == attr_level[-1]:
                        attr_level.pop()
                        attr_start = False
                    depth -= 1
            elif kind == "command" and text not in ALLOWED_HASH:
                self.problem(t, f"{text} (command not allowed)" if text != "#exit" else text)

    def native(self, k: int) -> None:
        prev, nxt = self.tok(k - 1), self.tok(k + 1)
        if (prev is not None and prev[1] == "+") or (nxt is not None and nxt[1] == ":="):
            self.problem(self.toks[k], "native evaluation (decide +native)")

    def decide_config(self, k: int) -> None:
        """``decide (config := V)``: Lean evaluates V, so ``⟨false, true, ..⟩`` or a constant
        can switch native evaluation on unseen; only ``{ field := value, ... }`` is accepted."""
        if [t[1] for t in self.toks[k + 1 : k + 4]] != ["(", "config", ":="]:
            return
        v = self.tok(k + 4)
        if v is None or v[1] != "{":
            self.problem(self.toks[k], "decide (config := ...) not written as { field := value }")
            return
        end = self._skip_group(k + 4)
        for t in self.toks[k + 5 : end]:
            if t[1] in ("with", "..", "...") or t[1] in _OPEN:
                self.problem(t, "decide (config := ...) not written as { field := value }")
                return

    def option(self, k: int) -> None:
        nxt = self.tok(k + 1)
        if nxt is None or nxt[0] != "ident":
            self.problem(self.toks[k], "set_option without an option name")
            return
        name = nxt[1]
        if name not in ALLOWED_OPTIONS and not name.startswith(ALLOWED_OPTION_PREFIXES):
            self.problem(nxt, f"set_option {name} (option not allowed)")

    def qualify(self, text: str) -> str:
        parts = _parts(text)
        if parts[0] == "_root_":
            return canonical(parts[1:])
        ns = [c for kind, c in self.scopes if kind == "namespace" and c]
        return canonical(ns + parts)

    def declaration(self, k: int, private: bool) -> None:
        head = self.toks[k][1]
        prev = self.tok(k - 1)
        if head == "instance" and prev is not None and prev[1] == "deriving":
            return
        j = k + 1
        nxt = self.tok(j)
        if head == "class" and nxt is not None and nxt[1] in ("inductive", "abbrev"):
            return
        if head == "instance" and nxt is not None and nxt[1] == "(":
            after = self.tok(j + 1)
            if after is not None and after[1] == "priority":
                j = self._skip_group(j)
                nxt = self.tok(j)
        if nxt is None or nxt[0] != "ident" or nxt[1] in COMMANDS:
            if head == "instance":
                self.changes_meaning(self.toks[k], "an instance")
            return  # anonymous instance, or not Lean; compilation reports the latter
        name = self.qualify(nxt[1])
        if not name:
            return
        self.decls.append(name)
        if head == "instance":
            self.changes_meaning(self.toks[k], "an instance")
        elif _parts(nxt[1])[-1] in SHADOWS:
            self.changes_meaning(nxt, f"a declaration named {_parts(nxt[1])[-1]}")
        if head in ("theorem", "lemma"):
            self.theorems.append(name)
            signature = self.statement(j + 1)
            if _vacuous(signature):
                self.vacuous.add(name)
            # ``variable`` binders count as the theorem's own (more than Lean may include: a
            # hypothesis of a ``variable`` is one of every theorem after it in the file)
            self.statements[name] = (self.variables, tuple(signature))
        if private:
            self.private.add(name)

    def changes_meaning(self, t: RawToken, what: str) -> None:
        if len(self.meaning) < 10:
            line, col = self.pos.at(t[2])
            self.meaning.append(f"{what} at {self.path}:{line}:{col}")

    def variable(self, k: int) -> None:
        """Record the bracketed binders of the ``variable`` command at ``k``."""
        j = k + 1
        while (t := self.tok(j)) is not None and t[1] in ("(", "{", "[", "⦃"):
            end = self._skip_group(j)
            if len(self.variables) + end - j > MAX_GROUP_TOKENS:
                return
            self.variables = (*self.variables, *(x[1] for x in self.toks[j:end]))
            j = end

    def statement(self, j: int) -> list[str]:
        """The texts of the tokens of a declaration's signature, from ``j`` to ``:=``, ``|``
        or ``where`` outside brackets (at most ``MAX_GROUP_TOKENS``)."""
        out: list[str] = []
        d = 0
        for kind, text, _ in islice(self.toks, j, j + MAX_GROUP_TOKENS):
            if kind == "ident" and text in _RESYNC:
                break
            if kind == "symbol" and text in _OPEN:
                d += 1
            elif kind == "symbol" and text in _CLOSE:
                d -= 1
            elif d == 0 and text in (":=", "|", "where"):
                break
            out.append(text)
        return out

    def _skip_group(self, j: int) -> int:
        d = 0
        end = min(len(self.toks), j + MAX_GROUP_TOKENS)
        while j < end:
            kind, text, _ = self.toks[j]
            if kind == "symbol" and text in _OPEN:
                d += 1
            elif kind == "symbol" and text in _CLOSE:
                d -= 1
                if d == 0:
                    return j + 1
            j += 1
        return j

    def scope(self, k: int) -> None:
        t = self.toks[k]
        if len(self.scopes) >= MAX_SCOPES and t[1] != "end":
            self.problem(t, f"limit: namespaces and sections nest deeper than {MAX_SCOPES}")
            return
        nxt = self.tok(k + 1)
        named = (
            nxt is not None
            and nxt[0] == "ident"
            and "\n" not in self.text[t[2] : nxt[2]]
            and nxt[1] not in COMMANDS
            and nxt[1] not in MODIFIERS
        )
        parts = _parts(nxt[1]) if named and nxt is not None else []
        if t[1] == "mutual":
            self.scopes.append(("mutual", None))
        elif t[1] == "namespace":
            if not parts:
                self.problem(t, "namespace without a name")
            self.scopes.extend(("namespace", p) for p in parts)
        elif t[1] == "section":
            if parts:
                self.scopes.extend(("section", p) for p in parts)
            else:
                self.scopes.append(("section", None))
        else:  # end
            want: list[str | None] = list(parts) if parts else [None]
            for p in reversed(want):
                top = self.scopes.pop() if self.scopes else None
                if top is None or top[1] != p:
                    label = ".".join(parts) if parts else "(no name)"
                    self.problem(t, f"`end {label}` does not close the open namespace/section")
                    return


MAX_PROBLEMS = 1000  # problems listed per file
MAX_IMPORTS = 1000  # imports per file
MAX_GROUP_TOKENS = 10_000  # tokens in an instance priority
MAX_SCOPES = 256  # open namespace/section components
_SCOPE_WORDS = frozenset({"namespace", "section", "end", "mutual"})
# Keywords that only ever start a command (``instance``, ``class``, ``open``, ``set_option`` also
# occur inside brackets or terms)
_RESYNC = frozenset(
    {"theorem", "lemma", "def", "abbrev", "structure", "inductive", "example", "universe",
     "variable"}
) | _SCOPE_WORDS  # fmt: skip
_SPECIAL_IDENTS = (
    frozenset(REJECT_WORDS)
    | DECL_HEADS
    | _SCOPE_WORDS
    | {"native", "decide", "import", "set_option", "private", "example", "universe", "variable"}
)
_CONST_SUFFIXES = tuple(REJECT_CONSTANTS)
# Names a bundle must not declare for ``verify.lean.claims`` to read statements as Lean's core does
SHADOWS = frozenset(
    {"Nat", "ℕ", "Int", "ℤ", "Fin", "Fact", "True", "False", "Prop", "Not", "And", "Or", "Iff",
     "Eq", "Ne", "LT", "LE", "HAdd", "Add", "HSub", "Sub", "HMul", "Mul", "HDiv", "Div", "HMod",
     "Mod", "HPow", "Pow", "Neg", "OfNat", "ite", "dite", "Decidable"}
)  # fmt: skip
_ARROWS = frozenset({"→", "->", ","})


def _top_split(toks: list[str], seps: frozenset[str]) -> list[list[str]]:
    """``toks`` split at the separators that stand outside brackets."""
    parts: list[list[str]] = [[]]
    d = 0
    for t in toks:
        if t in _OPEN:
            d += 1
        elif t in _CLOSE:
            d -= 1
        elif d == 0 and t in seps:
            parts.append([])
            continue
        parts[-1].append(t)
    return parts


def _unparen(toks: list[str]) -> list[str]:
    """``toks`` without the brackets that enclose all of it (a few levels at most)."""
    for _ in range(8):
        if len(toks) < 2 or toks[0] != "(" or toks[-1] != ")":
            break
        d = 0
        for i, t in enumerate(toks):
            if t in _OPEN:
                d += 1
            elif t in _CLOSE:
                d -= 1
                if d == 0 and i != len(toks) - 1:
                    return toks  # ``(a) = (b)``: the first bracket closes early
        toks = toks[1:-1]
    return toks


def _vacuous(signature: list[str]) -> bool:
    """The conclusion of a theorem's signature (after its last top-level ``:``, ``→`` and ``,``)
    is ``True`` (or a conjunction of ``True``), or ``x = x`` / ``x ↔ x`` with the same tokens."""
    parts = _top_split(signature, frozenset({":"}))
    if len(parts) < 2:
        return False
    concl = _unparen(_top_split(parts[-1], _ARROWS)[-1])
    conj = [_unparen(c) for c in _top_split(concl, frozenset({"∧", "/\\"}))]
    if all(c == ["True"] for c in conj):
        return True
    for rel in ("=", "↔", "<->", "==", "≤"):
        sides = _top_split(concl, frozenset({rel}))
        if len(sides) == 2 and sides[0] and _unparen(sides[0]) == _unparen(sides[1]):
            return True
    return False


def scan_file(path: str, data: bytes) -> FileScan:
    """Scan one ``.lean`` file; never raises for the content of the file."""
    module = module_name(path)
    try:
        text = decode(data)
        toks = lex_raw(text)
    except LeanLexError as e:
        prob = Problem(path, e.line, e.col, e.what)
        return FileScan(path, module, (), (), (), frozenset(), (prob,), 0)
    w = _Walker(path, text, toks)
    w.walk()
    return FileScan(
        path,
        module,
        tuple(w.imports),
        tuple(w.theorems),
        tuple(w.decls),
        frozenset(w.private),
        tuple(w.problems),
        len(toks),
        frozenset(w.vacuous),
        tuple((n, v, sig) for n, (v, sig) in w.statements.items()),
        tuple(w.meaning),
    )


def _importers_closure(scans: list[FileScan], bad: set[str]) -> set[str]:
    """Paths of the files in ``bad`` and of every file importing one of them, transitively."""
    by_module = {s.module: s.path for s in scans}

    def resolve(mod: str) -> str | None:
        if mod in by_module:
            return by_module[mod]
        for m, p in by_module.items():
            if m.endswith("." + mod):
                return p
        return None

    deps = {s.path: {r for r in map(resolve, s.imports) if r is not None} for s in scans}
    tainted = set(bad)
    changed = True
    while changed:
        changed = False
        for p, ds in deps.items():
            if p not in tainted and ds & tainted:
                tainted.add(p)
                changed = True
    return tainted


def scan_details(files: Mapping[str, bytes]) -> tuple[LeanScan, list[FileScan]]:
    """``scan_sources`` and the per-file scans, in path order."""
    scans = [scan_file(p, files[p]) for p in sorted(files) if p.endswith(".lean")]
    bad = _importers_closure(scans, {s.path for s in scans if s.problems})
    problems = sorted((p for s in scans for p in s.problems), key=lambda p: (p.path, p.line, p.col))
    theorems = frozenset(n for s in scans for n in s.theorems)
    decls = frozenset(n for s in scans for n in s.declarations)
    rejected = frozenset(n for s in scans if s.path in bad for n in s.declarations)
    total = sum(len(files[s.path]) for s in scans)
    vacuous = frozenset(n for s in scans for n in s.vacuous)
    statements = tuple(kv for s in scans for kv in s.statements)
    meaning = tuple(m for s in scans for m in s.meaning)
    scan = LeanScan(theorems, decls, tuple(problems), rejected, total, vacuous, statements, meaning)
    return scan, scans


def scan_sources(files: Mapping[str, bytes]) -> LeanScan:
    """Scan every ``.lean`` file of a bundle (path -> bytes); other paths are ignored."""
    return scan_details(files)[0]
