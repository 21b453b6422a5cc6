"""The ``contract.lint`` gates (SPEC 8) and the structural JSON Schema of contracts.

``lint_contract(contract, files)`` runs every gate over a loaded contract and, when ``files`` (the
bundle's path -> bytes) is given, over the bundle it came in. Each gate passes, fails with a
reason, or is skipped (no bundle; a helper module not available). The gates, in order, and the
``pv lint`` gate each matches or strengthens, are documented in contracts/README.md ("Lint").

``schema_errors(doc)`` validates parsed YAML against ``verify/contract_schema.json`` (JSON Schema
draft-04), each error as one ``path: problem`` line, in two steps:

1. fastjsonschema's code for the schema, generated once into ``verify._contract_schema_check``
   (``scripts/contract_schema_check.py``): a document it accepts is valid, and the answer is ``[]``
   (every valid contract, so every ``ledger verify`` of one, stops here);
2. only when it rejects (it stops at the first error), jsonschema's ``Draft4Validator``, imported
   then, lists every error in today's wording. Its answer is the verdict: the fast code is at
   least as strict (its ``$`` is ``\\Z``), never looser.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ledger.core.bundle import check_path
from ledger.core.errors import BundleError, ContractError, LedgerError
from verify.expr import eval_expr, expr_names, relation_names
from verify.idle import idle_warnings
from verify.model import (
    FLOAT_DTYPES,
    OBLIGATIONS,
    PROPERTIES,
    RANDOM,
    Contract,
    FalsificationTest,
    Kernel,
    Tolerance,
    scalar_literal,
)
from verify.report import Check, failed, passed, skipped
from verify.sizes import domain_problems

_TEST_ID = re.compile(r"FALSIFY-[A-Z0-9-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escape(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


_PROVED = ("proved", "claimed")

GateStatus = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Gate:
    name: str
    status: GateStatus
    reason: str = ""


# ---------------------------------------------------------------------------------------------
# Gates. Each returns a list of problems (empty: passed) or raises _Skip.


class _Skip(Exception):
    pass


Files = Mapping[str, bytes] | None


def _metadata(c: Contract, files: Files) -> list[str]:
    out = []
    if not str(c.extra.get("metadata_version", "")).strip():
        out.append("metadata.version is missing")
    if not c.description.strip():
        out.append("metadata.description is missing")
    return out


def _equations(c: Contract, files: Files) -> list[str]:
    formulas = c.extra.get("formulas", {})
    assert isinstance(formulas, dict)
    if not formulas:
        return ["no equations"]
    return [f"equations.{n} has no formula" for n, f in formulas.items() if not str(f).strip()]


def _obligations(c: Contract, files: Files) -> list[str]:
    obligations = c.extra.get("obligations", ())
    assert isinstance(obligations, tuple)
    if not obligations and not c.claims:
        return ["no proof_obligations and no certificate claims"]
    return [f"proof_obligations[{i}] has no property" for i, p in enumerate(obligations) if not p]


def _falsification(c: Contract, files: Files) -> list[str]:
    if not c.falsification:
        return ["no falsification_tests"]
    out, seen = [], set()
    for t in c.falsification:
        if not _TEST_ID.fullmatch(t.id):
            out.append(f"test id {t.id!r} does not match FALSIFY-[A-Z0-9-]+")
        if t.id in seen:
            out.append(f"test id {t.id} is repeated")
        seen.add(t.id)
    return out


def _size_vars(c: Contract) -> set[str]:
    k = c.kernel
    names: set[str] = set()
    if k is None:
        return names
    exprs: list[str] = []
    for p in k.params:
        exprs.extend(p.shape)
        if p.value and p.value != RANDOM and not _float_constant(p.dtype, p.value):
            exprs.append(p.value)
        if p.domain is not None:
            exprs.extend(x for x in (p.domain.index_of, p.domain.total) if x)
    if k.launch is not None:
        exprs.extend(k.launch.grid + k.launch.block + (k.launch.shared_bytes,))
    for e in exprs:
        names |= expr_names(e)
    return names


def _executable(c: Contract, files: Files) -> list[str]:
    out: list[str] = []
    needed = _size_vars(c)
    for t in c.falsification:
        if not t.executable:
            out.append(f"{t.id} is prose only (no sizes, tolerance, properties)")
            continue
        unknown = [p for p in t.properties if p not in PROPERTIES]
        if unknown:
            out.append(f"{t.id} lists unknown properties {', '.join(unknown)}")
        for i, binding in enumerate(t.sizes):
            missing = sorted(needed - set(binding))
            if missing:
                out.append(f"{t.id} sizes[{i}] does not bind {', '.join(missing)}")
    return out


_INT_RANGES = {
    "u8": (0, (1 << 8) - 1),
    "s8": (-(1 << 7), (1 << 7) - 1),
    "u32": (0, (1 << 32) - 1),
    "s32": (-(1 << 31), (1 << 31) - 1),
    "u64": (0, (1 << 64) - 1),
    "s64": (-(1 << 63), (1 << 63) - 1),
}
_GRID_MAX = (2**31 - 1, 65535, 65535)
_BLOCK_MAX = (1024, 1024, 64)


def _launch_problems(c: Contract, sizes: Mapping[str, int]) -> list[str]:
    k = c.kernel
    assert k is not None and k.launch is not None
    out = []
    for p in k.params:
        for i, e in enumerate(p.shape):
            if eval_expr(e, sizes) < 0:
                out.append(f"{p.name}.shape[{i}] is negative")
        if p.kind == "scalar" and p.dtype in _INT_RANGES and p.value not in ("", RANDOM):
            lo, hi = _INT_RANGES[p.dtype]
            if not lo <= eval_expr(p.value, sizes) <= hi:
                out.append(f"{p.name} = {eval_expr(p.value, sizes)} does not fit {p.dtype}")
    grid = [eval_expr(e, sizes) for e in k.launch.grid]
    block = [eval_expr(e, sizes) for e in k.launch.block]
    for i, (g, cap) in enumerate(zip(grid, _GRID_MAX, strict=True)):
        if not 1 <= g <= cap:
            out.append(f"grid[{i}] = {g} (must be 1..{cap})")
    for i, (b, cap) in enumerate(zip(block, _BLOCK_MAX, strict=True)):
        if not 1 <= b <= cap:
            out.append(f"block[{i}] = {b} (must be 1..{cap})")
    if block[0] * block[1] * block[2] > 1024:
        out.append(f"block has {block[0] * block[1] * block[2]} threads (at most 1024)")
    shared = eval_expr(k.launch.shared_bytes, sizes)
    if shared < 0:
        out.append(f"shared_bytes = {shared} is negative")
    elif k.max_shared_bytes is not None and shared > k.max_shared_bytes:
        out.append(f"shared_bytes = {shared} is over max_shared_bytes {k.max_shared_bytes}")
    return out


def _launch(c: Contract, files: Files) -> list[str]:
    if c.kernel is None or c.kernel.launch is None:
        raise _Skip("no kernel.launch")
    needed = _size_vars(c)
    out: list[str] = []
    for t in c.falsification:
        for i, binding in enumerate(t.sizes):
            if needed - set(binding):
                continue  # reported by the "executable" gate
            try:
                problems = _launch_problems(c, binding)
            except ContractError as e:
                problems = [str(e)]
            where = ", ".join(f"{k}={v}" for k, v in binding.items())
            out.extend(f"{t.id} sizes[{i}] ({where}): {p}" for p in problems)
    return out


def _domain_example(names: list[str]) -> str:
    return "{" + ", ".join(f"{n}: {{min: 1, max: 1048576}}" for n in names) + "}"


def _domain(c: Contract, files: Files) -> list[str]:
    """Every size variable has a declared domain; the author's sizes lie inside it; the launch
    is valid at the domain's corners (each variable at its min and its max, the others at min)."""
    k = c.kernel
    if k is None:
        raise _Skip("no kernel extension")
    needed = sorted(_size_vars(c))
    if not k.size_domain:
        if not needed:
            return []
        return [
            f"kernel.size_domain is missing: declare the sizes the claim covers, e.g. "
            f"size_domain: {_domain_example(needed)} (one entry per size variable: "
            f"{', '.join(needed)}; add multiple_of: N for a real restriction and "
            'size_constraints: ["..."] for relations); the verifier chooses its own sizes '
            "inside it"
        ]
    out: list[str] = []
    declared = {r.name for r in k.size_domain}
    missing = [n for n in needed if n not in declared]
    if missing:
        out.append(
            f"kernel.size_domain does not declare {', '.join(missing)} "
            f"(add e.g. {_domain_example(missing)[1:-1]})"
        )
    for r in k.size_domain:
        if r.name not in needed:
            out.append(f"kernel.size_domain.{r.name} names no size variable of params or launch")
    for rel in k.size_constraints:
        unknown = sorted(relation_names(rel) - declared)
        if unknown:
            out.append(f"size_constraints {rel!r} uses undeclared {', '.join(unknown)}")
    if out:
        return out
    for t in c.falsification:
        for i, binding in enumerate(t.sizes):
            where = ", ".join(f"{n}={v}" for n, v in binding.items())
            for p in domain_problems(k, binding):
                out.append(f"{t.id} sizes[{i}] ({where}) is outside the size domain: {p}")
    if k.launch is None or out or _launch(c, files):
        return out  # a launch that fails at the author's sizes is the "launch" gate's report
    low = {r.name: -(-r.min // r.multiple_of) * r.multiple_of for r in k.size_domain}
    corners = [("minimum", low)]
    for r in k.size_domain:
        corners.append(
            (f"maximum of {r.name}", {**low, r.name: r.max // r.multiple_of * r.multiple_of})
        )
    for label, point in corners:
        if domain_problems(k, point):
            continue  # excluded by a relation: not part of the claim
        try:
            problems = _launch_problems(c, point)
        except ContractError as e:
            problems = [str(e)]
        where = ", ".join(f"{n}={v}" for n, v in point.items())
        out.extend(f"at the domain's {label} ({where}): {p}" for p in problems)
    return out


# Tolerances that contradict the claim (issue 15): words that promise an exact result, and the
# bounds above which a tolerance needs a written justification (``tolerance.why``).
_EXACT = re.compile(
    r"\b(?:0|zero) ulps?\b|\bexactly\b(?! once| one\b)|\bbit[- ]for[- ]bit\b|\bbit-exact\b"
    r"|\bround(?:s|ed|ing)?[- ]to[- ]nearest[- ]even\b|\bcorrectly rounded\b",
    re.I,
)
ULP_BOUND = 4.0
REL_BOUND = 1e-4
ABS_BOUND = 1e-3  # times the largest input magnitude (at least 1)


def tolerance_text(tol: Tolerance) -> str:
    """The tolerance as the certificate reports it, e.g. ``rel 1e-05 or abs 0.0001``."""
    pairs = (("ulp", tol.ulp), ("rel", tol.rel), ("abs", tol.abs))
    shown = [f"{k} {v:g}" for k, v in pairs if v is not None]
    return " or ".join(shown) if shown else "ulp 0"


def _is_exact(tol: Tolerance) -> bool:
    return all(v in (None, 0.0) for v in (tol.ulp, tol.rel, tol.abs))


def _tolerance_problems(c: Contract, t: FalsificationTest) -> list[str]:
    tol = t.tolerance
    out = []
    texts = [("prediction", t.prediction), ("rule", t.rule)]
    texts += [
        (f"certificate {cl.obligation} statement", cl.statement)
        for cl in c.claims
        if cl.property in t.properties and cl.property in ("rounding", "reference")
    ]
    if not _is_exact(tol):
        for where, text in texts:
            m = _EXACT.search(text)
            if m:
                out.append(
                    f"{t.id}: the {where} says {m.group(0)!r} but the tolerance allows "
                    f"{tolerance_text(tol)} (make it {{ulp: 0}} or state the real bound)"
                )
                break
    if tol.why.strip():
        return out
    scale = max(1.0, abs(t.input_low), abs(t.input_high))
    loose = []
    if tol.ulp is not None and tol.ulp > ULP_BOUND:
        loose.append(f"ulp {tol.ulp:g} is above {ULP_BOUND:g}")
    if tol.rel is not None and tol.rel > REL_BOUND:
        loose.append(f"rel {tol.rel:g} is above {REL_BOUND:g}")
    if tol.abs is not None and tol.abs > ABS_BOUND * scale:
        loose.append(f"abs {tol.abs:g} is above {ABS_BOUND * scale:g} ({ABS_BOUND:g} x inputs)")
    if loose:
        out.append(
            f"{t.id}: tolerance {', '.join(loose)} with no justification "
            "(add tolerance.why: the error analysis that needs this bound)"
        )
    return out


def _tolerance(c: Contract, files: Files) -> list[str]:
    out: list[str] = []
    for t in c.falsification:
        if t.executable:
            out.extend(_tolerance_problems(c, t))
    return out


def _bundle_path(files: Mapping[str, bytes], field: str, path: str) -> str | None:
    try:
        check_path(path)
    except BundleError as e:
        return f"{field} {e}"
    if path not in files:
        return f"{field} {path!r} is not in the bundle"
    return None


def _flag_values(argv: tuple[str, ...], *names: str) -> list[str]:
    """Values of ``-x V``, ``-x=V`` and ``--long V``, ``--long=V`` options in an argv."""
    out = []
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                out.append(argv[i + 1])
            elif a.startswith(n + "="):
                out.append(a[len(n) + 1 :])
    return out


def _build_problems(k: Kernel) -> list[str]:
    """``kernel.build`` must compile ``source`` to ``ptx`` as PTX for ``target``."""
    argv = k.build
    if argv and argv[0] == "triton":
        return _triton_build_problems(k)
    out = []
    if "-ptx" not in argv and "--ptx" not in argv:
        out.append("kernel.build does not ask nvcc for PTX (-ptx)")
    outputs = _flag_values(argv, "-o", "--output-file")
    if outputs != [k.ptx]:
        out.append(f"kernel.build does not write kernel.ptx (-o {k.ptx})")
    if k.source and k.source not in argv:
        out.append(f"kernel.build does not compile kernel.source {k.source!r}")
    arches = _flag_values(argv, "-arch", "--gpu-architecture")
    want = k.target.removeprefix("sm_")
    if not arches:
        out.append(f"kernel.build sets no -arch (nvcc would not target {k.target})")
    for a in arches:
        if a.split("_", 1)[-1] != want:
            out.append(f"kernel.build -arch {a} does not match kernel.target {k.target}")
    return out


def _triton_build_problems(k: Kernel) -> list[str]:
    """A Triton build (``verify.triton_build``): well-formed, for ``target``, of ``source``."""
    from ledger.core.errors import BadInput
    from verify.triton_build import parse_build

    try:
        tb = parse_build(k.build, k.ptx, k.source or "")
    except BadInput as e:
        return [str(e)]
    if tb.target != k.target:
        return [f"kernel.build --target={tb.target} does not match kernel.target {k.target}"]
    return []


def _kernel(c: Contract, files: Files) -> list[str]:
    if files is None:
        raise _Skip("no bundle")
    k = c.kernel
    if k is None:
        return ["no kernel extension: nothing in this contract can be run"]
    out = []
    if not k.entry:
        out.append("kernel.entry is missing")
    if not k.ptx:
        out.append("kernel.ptx is missing")
    elif not k.ptx.endswith(".ptx"):
        out.append(f"kernel.ptx {k.ptx!r} is not a .ptx file")
    if not k.params:
        out.append("kernel.params is missing")
    elif not any(p.kind == "ptr" and p.intent != "in" for p in k.params):
        out.append("kernel.params has no output (a pointer with intent out or inout)")
    if k.launch is None:
        out.append("kernel.launch is missing")
    if k.build and not k.source:
        out.append("kernel.build is given without kernel.source")
    elif k.build:
        out.extend(_build_problems(k))
    for field, path in (
        ("kernel.ptx", k.ptx),
        ("kernel.source", k.source),
        ("kernel.futhark", k.futhark),
    ):
        if path:
            problem = _bundle_path(files, field, path)
            if problem:
                out.append(problem)
    return out


def _float_constant(dtype: str, value: str) -> bool:
    """A float scalar's ``random`` or literal value (not a size expression)."""
    return dtype in FLOAT_DTYPES and (value == RANDOM or scalar_literal(value) is not None)


def _reference(c: Contract, files: Files) -> list[str]:
    k = c.kernel
    if k is None:
        if files is None:
            raise _Skip("no kernel extension")
        return ["no kernel extension, so no kernel.reference"]
    if k.reference_file:
        if files is None:
            raise _Skip("no bundle (a bundle reference is checked against the bundle's files)")
        return _bundle_reference(k, files) + _oracle_problems(c, files)
    if not k.reference:
        return ["kernel.reference is missing"]
    oracle = _oracle_problems(c, files) if files is not None else []
    if oracle:
        return oracle
    try:
        mod = importlib.import_module("verify.references")
        known = getattr(mod, "REFERENCES", {})
    except ImportError:
        known = {}
    if k.reference not in known:
        return [f"kernel.reference {k.reference!r} is not in the trusted reference registry"]
    return []


MAX_REFERENCE_BYTES = 1 << 20
# What a bundle reference may import: numpy, and the standard modules that compute nothing unsafe.
# The sandbox (verify.sandbox), not this list, is what contains the code; this gate tells an author
# early that a reference must be numpy only (SPEC 3).
REFERENCE_IMPORTS = ("numpy", "math", "__future__", "typing", "collections", "dataclasses")


def _bundle_reference(k: Kernel, files: Mapping[str, bytes]) -> list[str]:
    """``kernel.reference: {file, function}``: a numpy-only Python file of the bundle."""
    field = "kernel.reference.file"
    problem = _bundle_path(files, field, k.reference_file)
    if problem:
        return [problem]
    if not k.reference_file.endswith(".py"):
        return [f"{field} {k.reference_file!r} is not a .py file"]
    data = files[k.reference_file]
    if len(data) > MAX_REFERENCE_BYTES:
        return [f"{field} is {len(data)} bytes, over the {MAX_REFERENCE_BYTES}-byte limit"]
    try:
        tree = ast.parse(data.decode("utf-8"), filename=k.reference_file)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return [f"{field} {k.reference_file!r} is not valid Python: {e}"]
    out = []
    for node in ast.walk(tree):
        mods: list[str] = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = ["." if node.level else (node.module or "")]
        for m in mods:
            if m.split(".")[0] not in REFERENCE_IMPORTS:
                out.append(f"{k.reference_file} imports {m!r} (a reference uses numpy only)")
    fn = k.reference_function
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fn]
    if not defs:
        out.append(f"kernel.reference.function {fn!r} is not a top-level def in {k.reference_file}")
    elif len(defs[0].args.posonlyargs) + len(defs[0].args.args) < 2:
        out.append(f"{k.reference_file}: {fn} must take (inputs, sizes)")
    return out


def _oracle_problems(c: Contract, files: Mapping[str, bytes]) -> list[str]:
    """``kernel.futhark_oracle``: the entry is in the spec, args and results name parameters."""
    k = c.kernel
    if k is None or k.futhark_oracle is None:
        return []
    o = k.futhark_oracle
    where = "kernel.futhark_oracle"
    out = []
    if not k.futhark:
        out.append(f"{where} needs kernel.futhark (the spec whose entry is the oracle)")
    elif k.futhark in files:
        from verify.futhark import parse_futhark

        try:
            entries, _ = parse_futhark(files[k.futhark])
        except LedgerError as e:
            entries = []
            out.append(f"{where}: {k.futhark} could not be read: {e}")
        if entries and o.entry not in {e.name for e in entries}:
            out.append(f"{where}.entry {o.entry!r} is not an entry point of {k.futhark}")
    params = {p.name: p for p in k.params}
    sizes = _size_vars(c)
    for a in o.args:
        if a not in params and a not in sizes:
            out.append(f"{where}.args: {a!r} is neither a parameter nor a size variable")
    for r in o.results:
        p = params.get(r)
        if p is None or p.kind != "ptr" or p.intent == "in":
            out.append(f"{where}.results: {r!r} is not an out/inout pointer parameter")
    return out


UNFINISHED = "LEDGER-NEW: UNFINISHED"  # the marker `ledger new` puts in every stub it writes
# The TODO forms `ledger new` writes into contract.yaml: a YAML comment that begins with the word
# TODO (``# TODO`` / ``# TODO: shape guessed ...``) or a quoted value that is ``"TODO"`` or begins
# ``"TODO:"`` (``description: "TODO: what ..."``). A TODO elsewhere in a line (``"a TODO list"``,
# a comment that only mentions it) is not one: real contracts may use the word.
_SCAFFOLD_TODO = re.compile(r"""(?:^|\s)#\s*TODO\b|:\s*["']TODO(?:["']|:)""")


def _unfinished(c: Contract, files: Files) -> list[str]:
    """No file still carries the ``ledger new`` scaffold marker (an unfinished stub), and
    ``contract.yaml`` keeps none of the TODOs ``ledger new`` wrote (``_SCAFFOLD_TODO``): each
    marks a guess nobody checked yet (a shape, the grid, the size domain, the tolerance), so the
    gate still fails once the marker lines are deleted."""
    if files is None:
        raise _Skip("no bundle")
    marker = UNFINISHED.encode()
    stubs = sorted(p for p, d in files.items() if marker in d)
    todo = _todo_lines(files.get("contract.yaml", b""))
    if stubs:
        return [
            f"{', '.join(stubs)} still marked {UNFINISHED!r} (a `ledger new` stub to fill in)"
            + (f"; {todo}" if todo else "")
        ]
    if todo:
        return [f"{todo} (left by `ledger new`: check each line, then delete its TODO)"]
    return []


def _todo_lines(contract: bytes) -> str:
    """The contract's scaffold TODO lines (``_SCAFFOLD_TODO``) as a to-do list: ``contract.yaml
    TODO at line 5 (description), ...`` (the first 12), or "" when there is none."""
    hits = []
    for i, line in enumerate(contract.decode("utf-8", "replace").splitlines(), start=1):
        if _SCAFFOLD_TODO.search(line) and not line.lstrip().startswith("#"):
            key = re.match(r"\s*-?\s*\{?\s*([A-Za-z_]\w*)\s*:\s*([^,}\s]*)", line)
            what = key.group(1) if key else "see the line"
            what = f"param {key.group(2)}" if key and what == "name" else what
            hits.append(f"line {i} ({what})")
        elif _SCAFFOLD_TODO.search(line):
            hits.append(f"line {i} (comment)")
    if not hits:
        return ""
    more = f", and {len(hits) - 12} more" if len(hits) > 12 else ""
    return f"contract.yaml TODO at {', '.join(hits[:12])}{more}"


def _waivers(c: Contract, files: Files) -> list[str]:
    """Every ``kernel.waivers`` entry covers an instruction of the kernel's entry in the PTX
    (``verify.waivers.resolve``): a waiver that matches nothing is refused (issue 32)."""
    k = c.kernel
    if k is None or not k.waivers:
        return []
    if files is None:
        raise _Skip("no bundle")
    ptx = files.get(k.ptx)
    if ptx is None:
        return [f"the kernel's PTX {k.ptx!r} is not in the bundle, so no waiver can match"]
    from verify.waivers import resolve

    return resolve(k.waivers, ptx, k.entry)[1]


def _inputs(c: Contract, files: Files) -> list[str]:
    """Input domains, preconditions and constants consistent with the parameters and the size
    domain (issue 32; ``verify.contract_inputs``)."""
    from verify.contract_inputs import input_problems

    return [] if c.kernel is None else input_problems(c.kernel, files)


def _certificate(c: Contract, files: Files) -> list[str]:
    out = []
    backed = {p for t in c.falsification if t.executable for p in t.properties}
    for i, cl in enumerate(c.claims):
        where = f"certificate[{i}]"
        if cl.obligation not in OBLIGATIONS:
            out.append(f"{where} obligation {cl.obligation!r} is not one of PO1..PO8")
        if not cl.theorem.strip():
            out.append(f"{where} names no theorem")
        if cl.property not in PROPERTIES:
            out.append(f"{where} property {cl.property!r} is unknown")
        elif cl.property == "resources":
            k = c.kernel
            if k is None or (k.max_registers is None and k.max_shared_bytes is None):
                out.append(f"{where} claims resources but kernel.resources sets no budget")
        elif cl.property not in backed:
            out.append(f"{where} property {cl.property} is listed by no executable test")
    return out


def _lean_status(c: Contract, files: Files) -> list[str]:
    return [
        f"{r.theorem} ({r.where}) has status {r.status!r}"
        for r in c.lean_refs
        if r.status not in _PROVED
    ]


def _lean_exists(c: Contract, files: Files) -> list[str]:
    if files is None:
        raise _Skip("no bundle")
    if not c.lean_refs:
        return []
    try:
        lean = importlib.import_module("verify.lean")
    except ImportError as e:
        raise _Skip(f"verify.lean is not available ({e})") from e
    scan_sources = getattr(lean, "scan_sources", None)
    if scan_sources is None:
        raise _Skip("verify.lean has no scan_sources yet")
    sources = {p: d for p, d in files.items() if p.endswith(".lean")}
    try:
        scan = scan_sources(sources)
    except LedgerError as e:
        return [f"lean.scan could not read the bundle's Lean files: {e}"]
    declared: frozenset[str] = scan.declarations
    key = getattr(importlib.import_module("verify.lean.scan"), "theorem_key", lambda n: n)
    where: dict[str, list[str]] = {}
    for r in c.lean_refs:
        where.setdefault(r.theorem, []).append(r.where)
    claims = importlib.import_module("verify.lean.claims")  # issue 33: statements checked
    vacuous: dict[str, str] = claims.vacuous_reasons(scan, [key(t) for t in where])
    out = []
    for thm, places in where.items():
        named = f"{thm} ({', '.join(places)})"
        k = key(thm)
        if k in scan.rejected:
            out.append(f"{named} is rejected by lean.scan")
        elif k not in scan.theorems:
            out.append(
                f"{named} is not a theorem"
                if k in declared
                else f"{named} is not in the bundle's Lean files"
            )
        elif k in vacuous:
            out.append(f"{named} {vacuous[k]}")
    problems = scan.problems
    if problems and any(key(t) in scan.rejected for t in where):
        out.append(f"first lean.scan problem: {problems[0]}")
    return out


GATES: tuple[tuple[str, str, Callable[[Contract, Files], list[str]]], ...] = (
    ("metadata", "pv validate (PV-VAL-002, metadata)", _metadata),
    ("equations", "pv validate (PV-VAL-004, equations with formulas)", _equations),
    ("obligations", "pv validate (PV-VAL-005) and PV-PRV-001 provability", _obligations),
    ("falsification", "pv PV-PRV-002 and audit (tests exist, ids)", _falsification),
    ("executable", "pv verify (tests exist) - stronger: tests must be runnable", _executable),
    ("tolerance", "new: tolerances match the obligation's words; loose ones justified", _tolerance),
    ("launch", "new: every size binding gives a valid launch", _launch),
    ("domain", "new: a declared size domain holding the author's sizes", _domain),
    ("kernel", "new: the executable-kernel extension and its bundle paths", _kernel),
    ("unfinished", "new: no `ledger new` stub left unfinished", _unfinished),
    ("reference", "new: a trusted reference, or a bundle reference run in a sandbox", _reference),
    ("waivers", "new: every waiver names an instruction of the kernel's PTX", _waivers),
    ("inputs", "new: input domains consistent with the parameters and sizes", _inputs),
    ("certificate", "pv audit (obligation -> test -> proof chain)", _certificate),
    ("lean-status", "pv enforce / proof status (no sorry)", _lean_status),
    ("lean-exists", "pv verify (named proofs exist), against the bundle", _lean_exists),
)


def lint_contract(contract: Contract, files: Files = None) -> list[Gate]:
    """Run every gate; ``files`` is the bundle (path -> bytes) or None for a bare contract."""
    gates = []
    for name, _pv, fn in GATES:
        try:
            problems = fn(contract, files)
        except _Skip as e:
            gates.append(Gate(name, "skipped", str(e)))
            continue
        if problems:
            gates.append(Gate(name, "failed", "; ".join(problems)))
        else:
            gates.append(Gate(name, "passed"))
    return gates


def lint_check(contract: Contract, files: Mapping[str, bytes]) -> Check:
    """The ``contract.lint`` check: failed if any gate failed, skipped if one could not run."""
    gates = lint_contract(contract, files)
    bad = [g for g in gates if g.status == "failed"]
    if bad:
        detail = "; ".join(f"{g.name}: {g.reason}" for g in bad)
        return failed("contract.lint", _CONTROL.sub(_escape, detail))
    ran = ", ".join(g.name for g in gates if g.status == "passed")
    warn = "".join(f"; warning: {w}" for w in idle_warnings(contract)[:3])  # verify.idle
    not_run = [g for g in gates if g.status == "skipped"]
    if not_run:
        why = "; ".join(f"{g.name}: {g.reason}" for g in not_run)
        return skipped("contract.lint", f"gates passed: {ran}; not run: {why}{warn}")
    return passed("contract.lint", f"gates passed: {ran}{warn}")


# ---------------------------------------------------------------------------------------------
# The JSON Schema (draft-04: its "integer" is an int, as YAML reads one; ``1.0`` is a number, not
# an integer, as draft-06 and later would have it). The accept path is the generated fastjsonschema
# code; a rejected document goes to jsonschema's validator, built once, where four keywords are
# given today's one-line wording (the path of the key, then what to fix) through jsonschema's own
# extension API and every other error is worded from its keyword below.

SCHEMA_PATH = Path(__file__).with_name("contract_schema.json")


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def _required(v: Any, required: list[str], instance: Any, schema: Any) -> Iterator[Any]:
    if isinstance(instance, dict):
        for k in required:
            if k not in instance:
                yield _jsonschema().ValidationError(f"missing {k!r}")


def _dependencies(v: Any, deps: dict[str, list[str]], instance: Any,
                  schema: Any) -> Iterator[Any]:
    if isinstance(instance, dict):
        for k, needs in deps.items():
            if k in instance:
                for d in needs:
                    if d not in instance:
                        yield _jsonschema().ValidationError(f"has {k!r} but not {d!r}")


def _additional(v: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    props = schema.get("properties", {})
    for k in instance:
        if k in props:
            continue
        if extra is False:
            yield _jsonschema().ValidationError("unknown key", path=[k])
        elif isinstance(extra, dict):
            yield from v.descend(instance[k], extra, path=k)


def _one_of(v: Any, shapes: list[Any], instance: Any, schema: Any) -> Iterator[Any]:
    matches = sum(v.evolve(schema=s).is_valid(instance) for s in shapes)
    if matches != 1:
        yield _jsonschema().ValidationError(
            f"matches {matches} of the {len(shapes)} allowed shapes"
        )


def _jsonschema() -> Any:
    import jsonschema  # loaded only for a document the fast check rejects

    return jsonschema


@lru_cache(maxsize=1)
def _validator() -> Any:
    """The contract schema's full validator, built once. The schema itself is checked against
    its metaschema by the tests (``check_schema`` loads the metaschema: ~0.1 s)."""
    js = _jsonschema()
    cls = js.validators.extend(
        js.Draft4Validator,
        {"required": _required, "dependencies": _dependencies,
         "additionalProperties": _additional, "oneOf": _one_of},
    )
    return cls(load_schema())


def _accepts(doc: Any) -> bool:
    """The generated fastjsonschema check: True when ``doc`` fits the schema."""
    from fastjsonschema import JsonSchemaValueException

    from verify import _contract_schema_check

    check: Callable[[Any], Any] = _contract_schema_check.validate
    try:
        check(doc)
    except JsonSchemaValueException:
        return False
    return True


def _problem(e: Any) -> str:
    """A jsonschema error as today's ``problem`` text (the part after ``path: ``)."""
    kw, want, got = e.validator, e.validator_value, e.instance
    if kw == "type":
        return f"expected {' or '.join(want if isinstance(want, list) else [want])}"
    if kw == "enum":
        return f"{got!r} is not one of {want}"
    if kw == "const":
        return f"expected {want!r}"
    if kw == "pattern":
        return f"{got[:40]!r} does not match {want}"
    if kw == "minLength":
        return "too short"
    if kw == "minimum":
        return f"below {want}"
    if kw == "maximum":
        return f"above {want}"
    if kw == "minItems":
        return f"needs at least {want} items"
    if kw == "maxItems":
        return f"at most {want} items"
    if kw == "minProperties":
        return f"needs at least {want} keys"
    return str(e.message)  # required, dependencies, additionalProperties, oneOf: ours


def _yaml_path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(document)"


def _doc_order(doc: Any, parts: Iterable[Any]) -> tuple[int, ...]:
    """Where a path lies in the document (key positions, list indexes): errors are listed in
    the order a reader meets them, each node's own before those of what it holds."""
    out = []
    node = doc
    for p in parts:
        if isinstance(node, dict):
            out.append(list(node).index(p) if p in node else -1)
        else:
            out.append(p)
        node = node[p] if isinstance(node, dict | list) else None
    return tuple(out)


def schema_errors(doc: Any, schema: Mapping[str, Any] | None = None) -> list[str]:
    """Every place ``doc`` breaks the contract JSON Schema, as ``path: problem`` lines (another
    ``schema`` than the contract's is checked by jsonschema alone)."""
    if schema is None and _accepts(doc):
        return []
    v = _validator() if schema is None else _validator().evolve(schema=schema)
    found = list(v.iter_errors(doc))
    # a value of the wrong type gets that one line: no "below 0" for -0.5 where an integer belongs
    mistyped = {tuple(e.absolute_path) for e in found if e.validator == "type"}
    found = [e for e in found if e.validator == "type" or tuple(e.absolute_path) not in mistyped]
    errors = sorted(found, key=lambda e: _doc_order(doc, e.absolute_path))
    return [f"{_yaml_path(e.absolute_path)}: {_problem(e)}" for e in errors]
