"""The ``futhark.spec`` and ``futhark.run`` checks (SPEC 8 check ids; docs/external-tools.md).

``futhark.spec`` reads the contract's ``kernel.futhark`` file (or, without one, every ``.fut``)
without the compiler:

1. refuse a file over ``MAX_FUT_BYTES``, with a NUL byte, or not UTF-8;
2. collect entry points: ``entry name`` declarations (after optional ``#[attr]``), and a
   top-level ``let main`` / ``def main``, which Futhark treats as an entry point;
3. collect test blocks as ``futhark test`` defines them: a run of ``--`` comment lines starting
   in column 0 that contains a line of just ``==``; after it, cases of the form
   ``[tags {..}] [entry: names] ["name"] [compiled|nobench|random|script ...] input {..} | @ file``
   followed by ``output {..}``, ``auto output``, ``error: regex`` or nothing; a standalone
   ``error: regex`` (an expected compile error) and ``property: names`` also count as cases.
   ``entry:`` applies to the cases after it in the same block; without it the entry is ``main``;
4. fail if a file has no entry point, a block names an unknown entry, or a block has no cases.

``futhark.run`` runs ``futhark test --interpreted --no-terminal FILE`` (the interpreter needs no
C compiler) in a scratch copy with a timeout; its exit code decides. Without ``futhark`` on PATH
it is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core.errors import BadInput
from verify.context import Context
from verify.report import Check, failed, passed, skipped
from verify.tools import find_tool, run_tool

MAX_FUT_BYTES = 1 << 20

_ENTRY = re.compile(r"^\s*(?:#\[[^\]\n]*\]\s*)*entry\s+([A-Za-z_][\w']*)")
_MAIN = re.compile(r"^(?:#\[[^\]\n]*\]\s*)*(?:let|def)\s+main\b")
_NAME = re.compile(r"[A-Za-z_][\w']*")
_WORD = re.compile(r"[A-Za-z_][\w'\-]*:?")
_WS = re.compile(r"\s*")
_TEST_KEYWORDS = ("output", "auto", "error:", "input", "entry:", "property:", "tags")


@dataclass(frozen=True)
class FutEntry:
    name: str
    line: int


@dataclass(frozen=True)
class FutTestBlock:
    entry: str  # one block per entry named by ``entry:`` (default ``main``)
    line: int
    cases: int


@dataclass
class _Group:
    entries: list[str]
    line: int
    explicit: bool
    cases: int = 0
    interpreted: int = 0  # cases ``futhark test -i`` runs (not marked ``compiled``)


@dataclass
class _Spec:
    entries: list[FutEntry] = field(default_factory=list)
    groups: list[_Group] = field(default_factory=list)


def _decode(data: bytes) -> str:
    if len(data) > MAX_FUT_BYTES:
        raise BadInput(f"Futhark file is {len(data)} bytes, over the {MAX_FUT_BYTES}-byte limit")
    if b"\x00" in data:
        raise BadInput("Futhark file has a NUL byte (not a text file)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BadInput(f"Futhark line {line}: not UTF-8") from e


def parse_futhark(text: bytes) -> tuple[list[FutEntry], list[FutTestBlock]]:
    """Entry points and test blocks of a ``.fut`` file; ``BadInput`` with a line number."""
    spec = _parse(text)
    blocks = [
        FutTestBlock(name, g.line, g.cases)
        for g in spec.groups
        if g.explicit or g.cases
        for name in g.entries
    ]
    return spec.entries, blocks


def _parse(data: bytes) -> _Spec:
    lines = _decode(data).split("\n")
    spec = _Spec()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--"):
            code = lines[i].split("--", 1)[0]
            if m := _ENTRY.match(code):
                spec.entries.append(FutEntry(m.group(1), i + 1))
            elif _MAIN.match(code) and not any(e.name == "main" for e in spec.entries):
                spec.entries.append(FutEntry("main", i + 1))
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].startswith("--"):
            i += 1
        body = [ln[2:] for ln in lines[start:i]]
        sep = next((j for j, ln in enumerate(body) if ln.strip() == "=="), None)
        if sep is not None:
            _parse_block(body[sep + 1 :], start + sep + 2, spec)
    return spec


class _Block:
    def __init__(self, text: str, first_line: int) -> None:
        self.text, self.first, self.pos = text, first_line, 0

    def line(self, pos: int | None = None) -> int:
        return self.first + self.text.count("\n", 0, self.pos if pos is None else pos)

    def bad(self, msg: str, pos: int | None = None) -> BadInput:
        return BadInput(f"Futhark line {self.line(pos)}: {msg}")

    def skip_ws(self) -> bool:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
        return self.pos < len(self.text)

    def word(self) -> str:
        m = _WORD.match(self.text, self.pos)
        return m.group() if m else ""

    def rest_of_line(self) -> str:
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        out, self.pos = self.text[self.pos : end], end
        return out.strip()

    def braces(self, what: str) -> None:
        """Skip a balanced ``{ ... }`` starting at the current position."""
        if not self.skip_ws() or self.text[self.pos] != "{":
            raise self.bad(f"expected '{{' after {what}")
        start, depth = self.pos, 0
        for j in range(self.pos, len(self.text)):
            c = self.text[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    self.pos = j + 1
                    return
        raise self.bad(f"unclosed '{{' after {what}", start)


def _parse_block(body: list[str], first_line: int, spec: _Spec) -> None:
    b = _Block("\n".join(body), first_line)
    group = default = _Group(["main"], first_line - 1, explicit=False)
    spec.groups.append(group)
    modifiers: list[str] = []
    while b.skip_ws():
        at = b.pos
        if b.text[b.pos] == '"':
            end = b.text.find('"', b.pos + 1)
            if end < 0 or "\n" in b.text[b.pos : end]:
                raise b.bad("unterminated dataset name")
            b.pos = end + 1
            continue
        w = b.word()
        if not w:
            raise b.bad(f"unexpected {b.text[b.pos : b.pos + 20]!r} in a test block")
        b.pos += len(w)
        if modifiers and w != "input":
            if w in _TEST_KEYWORDS:
                raise b.bad(f"expected 'input' after {' '.join(modifiers)!r}", at)
            modifiers.append(w)
            continue
        if w == "tags":
            b.braces("tags")
        elif w in ("entry:", "property:"):
            names = b.rest_of_line().split()
            if not names or not all(_NAME.fullmatch(n) for n in names):
                raise b.bad(f"'{w}' needs entry point names", at)
            group = _Group(names, b.line(at), explicit=True)
            spec.groups.append(group)
            if w == "property:":
                group.cases = group.interpreted = 1
        elif w == "error:":
            b.rest_of_line()  # an expected compile-time error of the whole program
            group.cases += 1
            group.interpreted += 1
        elif w == "input":
            _parse_case(b, group, modifiers, at)
            modifiers = []
        elif w in _TEST_KEYWORDS:
            raise b.bad(f"'{w}' without a preceding input", at)
        else:
            modifiers.append(w)  # compiled, nobench, random, script, or tags of the case
    if modifiers:
        raise b.bad(f"expected 'input' after {' '.join(modifiers)!r}")
    if spec.groups[-1] is default:
        default.explicit = True  # a block with no ``entry:`` tests main, even with no cases


def _parse_case(b: _Block, group: _Group, modifiers: list[str], at: int) -> None:
    if not b.skip_ws():
        raise b.bad("'input' without values", at)
    if b.text[b.pos] == "@":
        b.pos += 1
        if not b.skip_ws() or not b.text[b.pos :].split(None, 1)[0]:
            raise b.bad("'input @' without a file name", at)
        b.pos += len(b.text[b.pos :].split(None, 1)[0])
    else:
        b.braces("input")
    group.cases += 1
    if "compiled" not in modifiers:
        group.interpreted += 1
    if not b.skip_ws():
        return
    w = b.word()
    if w == "output":
        b.pos += len(w)
        b.braces("output")
    elif w == "auto":
        b.pos += len(w)
        b.skip_ws()
        if b.word() != "output":
            raise b.bad("expected 'output' after 'auto'")
        b.pos += len("output")
    elif w == "error:":
        b.pos += len(w)
        b.rest_of_line()


# --- the checks ------------------------------------------------------------------------------


def _spec_files(ctx: Context) -> tuple[list[str], str]:
    k = ctx.contract.kernel if ctx.contract is not None else None
    if k is not None and k.futhark:
        return [k.futhark], ""
    note = "contract not loaded" if ctx.contract is None else "the contract names no spec"
    return [f.path for f in ctx.bundle.with_suffix(".fut")], f"{note}: every .fut read"


def _read_specs(ctx: Context) -> tuple[dict[str, _Spec], list[str], list[str]]:
    files, note = _spec_files(ctx)
    specs: dict[str, _Spec] = {}
    problems: list[str] = []
    lines = [note] if note else []
    present = {f.path for f in ctx.bundle.files}
    for path in files:
        if path not in present:
            problems.append(f"the contract's kernel.futhark {path!r} is not in the bundle")
            continue
        try:
            specs[path] = _parse(ctx.bundle.file(path))
        except BadInput as e:
            problems.append(f"{path}: {e}")
    if not files:
        problems.append("the bundle has no .fut file")
    return specs, problems, lines


def spec_check(ctx: Context) -> Check:
    specs, problems, lines = _read_specs(ctx)
    for path, spec in specs.items():
        names = {e.name for e in spec.entries}
        if not names:
            problems.append(f"{path}: no entry point (entry NAME ... or a top-level main)")
        blocks = [g for g in spec.groups if g.explicit or g.cases]
        for g in blocks:
            for n in g.entries:
                if names and n not in names:
                    problems.append(f"{path}:{g.line}: test block names unknown entry {n!r}")
            if not g.cases:
                problems.append(
                    f"{path}:{g.line}: test block for {' '.join(g.entries)} has no cases"
                )
        ents = ", ".join(f"{e.name} [line {e.line}]" for e in spec.entries) or "none"
        tests = (
            ", ".join(f"{' '.join(g.entries)}: {g.cases} case(s) [line {g.line}]" for g in blocks)
            or "none"
        )
        lines.append(f"{path}: entries {ents}; test blocks {tests}")
    detail = "; ".join(lines)
    if problems:
        return failed("futhark.spec", "; ".join(problems) + f" | {detail}")
    return passed("futhark.spec", detail)


def _version(futhark: str) -> str:
    res = run_tool([futhark, "--version"], cwd=Path("/"), timeout=30)
    lines = [ln.strip() for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    return next((ln for ln in lines if "futhark" in ln.lower()), lines[0] if lines else "")[:200]


def run_check(ctx: Context) -> Check:
    futhark = find_tool("futhark")
    if futhark is None:
        return skipped("futhark.run", "no futhark compiler on PATH", tool="futhark")
    version = _version(futhark)
    specs, problems, _ = _read_specs(ctx)
    runnable = [p for p, s in specs.items() if sum(g.interpreted for g in s.groups)]
    if not runnable:
        why = "; ".join(problems) or "no test case the interpreter runs"
        return skipped("futhark.run", f"nothing to run: {why}", "futhark", version)
    scratch = ctx.scratch()
    results: list[str] = []
    ok = True
    for path in runnable:
        argv = [futhark, "test", "--interpreted", "--no-terminal", f"./{path}"]  # never an option
        res = run_tool(argv, cwd=scratch, timeout=ctx.options.timeout)
        tail = (res.stdout + res.stderr).strip()[-400:]
        if res.timed_out:
            ok = False
            results.append(f"{path}: futhark test timed out after {ctx.options.timeout:g} s")
        elif not res.ok:
            ok = False
            results.append(f"{path}: futhark test -i exit {res.returncode}: {tail}")
        else:
            cases = sum(g.interpreted for g in specs[path].groups)
            results.append(f"{path}: futhark test -i passed ({cases} interpreted case(s))")
    detail = "; ".join(results)
    return (passed if ok else failed)("futhark.run", detail, "futhark", version)


def run(ctx: Context) -> list[Check]:
    """``[futhark.spec, futhark.run]``."""
    return [spec_check(ctx), run_check(ctx)]
