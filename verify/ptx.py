"""The ``ptx.parse`` and ``ptx.assemble`` checks (SPEC 8, check ids table; docs/external-tools.md).

``ptx.parse`` reads every ``.ptx`` file of the bundle without any tool:

1. refuse a file over ``MAX_PTX_BYTES``, with a NUL byte, not UTF-8, or with a line over
   ``MAX_LINE_CHARS`` (each a ``BadInput`` naming the line);
2. read the header: ``.version`` first, then ``.target`` (one ``sm_NN``/``compute_NN`` plus
   options such as ``texmode_independent`` or ``debug``), then an optional ``.address_size``;
3. walk the module's top-level statements: ``.entry`` declarations give their name and
   parameter list (attributes ``.ptr``, state space, ``.align N``, byte arrays ``x[16]``);
   ``.func`` bodies, data declarations, ``.section`` blocks and ``.file`` lines are skipped by
   brace matching that knows comments and strings; at most ``MAX_TOKENS`` tokens are read;
4. with a contract: the contract's target must equal the PTX's (a lower ``sm`` that would
   JIT-compile is refused: resources and the rebuild are recorded for exactly one target), its
   entry must exist, and its parameters must match the contract's in count and kind.

``ptx.assemble`` runs ``ptxas -arch=<target> -v`` on the kernel's PTX in a scratch copy (with
``--warn-on-spills`` when the contract forbids spills), parses the per-entry statistics and
compares the contract entry's with the contract's resource budget; with spills forbidden every
other ptxas warning fails it too, but a spill of another entry of the file
(``judge_warnings``).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from ledger.core.errors import BadInput, CannotCheck
from verify.context import Context, Started, done
from verify.model import Kernel, Param
from verify.report import Check, failed, passed, skipped
from verify.tools import RunningTool, ToolResult, find_tool, run_tool, start_release, tool_release

MAX_PTX_BYTES = 8 << 20  # the bundle's per-file limit
MAX_LINE_CHARS = 256 << 10  # nvcc writes big data initialisers on one line
MAX_TOKENS = 1_000_000  # tokens read outside function bodies (header, declarations, params)
MAX_ENTRIES = 4096
MAX_PARAMS = 4096
DEFAULT_TARGET = "sm_86"

_SKIP_WS = re.compile(r"(?:[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/)*", re.S)
_TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"'
    r"|[.%$A-Za-z_][\w$.%]*"
    r"|0[xX][0-9A-Fa-f]+U?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?U?"
    r"|[{}()\[\],;:=<>+\-*/@!|&^~?]"
)


# What brace matching must see: braces, semicolons (statements only), strings and comments.
# Everything else, including one-line brace groups such as vector operands ``{%f1, %f2}``, is
# consumed by the first (possessive) alternative in as few matches as possible.
def _scanner(stops: str) -> re.Pattern[str]:
    return re.compile(
        rf'(?:[^{{}}"/{stops}]++|\{{[^{{}}"/\n{stops}]*+\}}|/(?![/*]))++'
        r'|"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|/\*|"|[{};]',
        re.S,
    )


_SCAN = _scanner(";")
_OPEN = re.compile(r'[^{};"/]++|"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|/\*|"|/|[{};]', re.S)
_SCAN_BODY = _scanner("")
_IDENT = re.compile(r"[A-Za-z][\w$]*|[_$%][\w$]+")
_VERSION = re.compile(r"\d+\.\d+")
_ARCH = re.compile(r"(?:sm|compute)_\d+[a-z]?")
_TARGET_OPTS = ("texmode_unified", "texmode_independent", "debug", "map_f64_to_f32")
_LINKAGE = (".visible", ".weak", ".extern", ".common")
_DECLS = (
    ".global",
    ".const",
    ".shared",
    ".local",
    ".tex",
    ".texref",
    ".samplerref",
    ".surfref",
    ".alias",
    ".pragma",
)
_TYPES = frozenset(
    f".{k}{w}" for k in "bsuf" for w in (8, 16, 32, 64) if not (k == "f" and w == 8)
) | {".f16x2", ".bf16", ".bf16x2", ".texref", ".samplerref", ".surfref"}
_SPACES = (".global", ".const", ".shared", ".local")


@dataclass(frozen=True)
class PtxParam:
    name: str
    type: str  # ".u64", ".u32", ".f32", ".b8", ...
    align: int | None = None
    array: int | None = None  # element count of ``name[N]``
    ptr: bool = False
    space: str = ""  # state space after ``.ptr`` (".global", ...)

    def describe(self) -> str:
        s = self.type + (f"[{self.array}]" if self.array is not None else "")
        if self.ptr:
            s += " .ptr" + (f" {self.space}" if self.space else "")
        if self.align is not None:
            s += f" .align {self.align}"
        return s


@dataclass(frozen=True)
class PtxEntry:
    name: str
    params: tuple[PtxParam, ...]
    line: int


@dataclass(frozen=True)
class PtxHeader:
    version: str
    target: tuple[str, ...]
    address_size: int
    entries: tuple[PtxEntry, ...]

    @property
    def arch(self) -> str:
        """The ``sm_NN`` / ``compute_NN`` item of ``.target``."""
        return next((t for t in self.target if _ARCH.fullmatch(t)), "")

    def entry(self, name: str) -> PtxEntry | None:
        return next((e for e in self.entries if e.name == name), None)


class _Scanner:
    """Tokens of a comment-free view, with line numbers counted lazily."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.tokens = 0
        self._lpos = 0
        self._line = 1

    def line_at(self, pos: int) -> int:
        if pos < self._lpos:
            self._lpos, self._line = 0, 1
        self._line += self.text.count("\n", self._lpos, pos)
        self._lpos = pos
        return self._line

    def bad(self, msg: str, pos: int | None = None) -> BadInput:
        return BadInput(f"PTX line {self.line_at(self.pos if pos is None else pos)}: {msg}")

    def peek(self) -> str | None:
        self.pos = _SKIP_WS.match(self.text, self.pos).end()  # type: ignore[union-attr]
        if self.pos >= len(self.text):
            return None
        if self.text.startswith("/*", self.pos):
            raise self.bad("unterminated /* comment")
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            raise self.bad(f"unexpected character {self.text[self.pos]!r}")
        return m.group()

    def next(self, what: str = "a token") -> str:
        tok = self.peek()
        if tok is None:
            raise self.bad(f"unexpected end of file, expected {what}")
        self.pos += len(tok)
        self.tokens += 1
        if self.tokens > MAX_TOKENS:
            raise self.bad(f"more than {MAX_TOKENS} tokens outside function bodies")
        return tok

    def expect(self, want: str) -> None:
        tok = self.next(repr(want))
        if tok != want:
            raise self.bad(f"expected {want!r}, found {tok!r}")

    def number(self, what: str) -> int:
        tok = self.next(what)
        if not tok.isdigit():
            raise self.bad(f"expected {what}, found {tok!r}")
        return int(tok)

    def skip_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self.pos = len(self.text) if end < 0 else end

    def skip(self, body: bool) -> None:
        """Skip to the ``;`` that ends a statement, or (``body``) past the block's ``}``.

        With ``body``, a ``;`` before the first ``{`` ends a prototype instead.
        """
        start, depth, pos, scan = self.pos, 0, self.pos, _SCAN
        if body:
            for m in _OPEN.finditer(self.text, pos):
                g = m.group()
                if g == ";":
                    self.pos = m.end()
                    return
                if g == "{":
                    depth, pos, scan = 1, m.end(), _SCAN_BODY
                    break
                self._stray(g, m.start())
            else:
                raise self.bad("unexpected end of file before a '{' or ';'", start)
        for m in scan.finditer(self.text, pos):
            g = m.group()
            if g == "{":
                depth += 1
            elif g == "}":
                depth -= 1
                if depth < 0:
                    raise self.bad("unbalanced '}'", m.start())
                if depth == 0 and body:
                    self.pos = m.end()
                    return
            elif g == ";" and depth == 0:
                self.pos = m.end()
                return
            else:
                self._stray(g, m.start())
        raise self.bad("unexpected end of file inside a block or statement", start)

    def _stray(self, g: str, at: int) -> None:
        if g == "}":
            raise self.bad("unbalanced '}'", at)
        if g == "/*":
            raise self.bad("unterminated /* comment", at)
        if g == '"':
            raise self.bad("unterminated string", at)


def _decode(data: bytes) -> str:
    if len(data) > MAX_PTX_BYTES:
        raise BadInput(f"PTX is {len(data)} bytes, over the {MAX_PTX_BYTES}-byte limit")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise BadInput(f"PTX line {line}: NUL byte (not a text file)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BadInput(f"PTX line {line}: not UTF-8 text") from e
    if len(text) > MAX_LINE_CHARS:
        lengths = [len(ln) for ln in text.split("\n")]
        if max(lengths) > MAX_LINE_CHARS:
            i = next(i for i, n in enumerate(lengths) if n > MAX_LINE_CHARS)
            raise BadInput(f"PTX line {i + 1}: longer than {MAX_LINE_CHARS} characters")
    return text


def parse_ptx(text: bytes) -> PtxHeader:
    """The header and entry points of a PTX module; ``BadInput`` with a line number if garbage."""
    sc = _Scanner(_decode(text))
    try:
        first = sc.peek()
    except BadInput as e:
        raise BadInput(f"PTX line 1: not PTX: {str(e).split(': ', 1)[-1]}") from e
    if first != ".version":
        shown = "end of file" if first is None else repr(first[:40])
        raise sc.bad(f"not PTX: expected .version first, found {shown}")
    sc.next()
    version = sc.next("a version number")
    if not _VERSION.fullmatch(version):
        raise sc.bad(f"bad .version {version!r} (expected MAJOR.MINOR)")
    if sc.peek() != ".target":
        raise sc.bad(".target must follow .version")
    sc.next()
    target = [sc.next("a target")]
    while True:
        if not (_ARCH.fullmatch(target[-1]) or target[-1] in _TARGET_OPTS):
            raise sc.bad(f"unknown .target item {target[-1][:40]!r}")
        if sc.peek() != ",":
            break
        sc.next()
        target.append(sc.next("a target"))
    if sum(1 for t in target if _ARCH.fullmatch(t)) != 1:
        raise sc.bad(".target must name exactly one sm_NN or compute_NN architecture")
    address_size = 32
    if sc.peek() == ".address_size":
        sc.next()
        address_size = sc.number("an address size")
        if address_size not in (32, 64):
            raise sc.bad(f".address_size must be 32 or 64, not {address_size}")
    entries: list[PtxEntry] = []
    while (tok := sc.peek()) is not None:
        start = sc.pos
        if tok in _LINKAGE:
            sc.next()
            tok = sc.peek()
            if tok is None:
                raise sc.bad("unexpected end of file after a linkage directive")
        if tok == ".entry":
            sc.next()
            entry = _parse_entry(sc, sc.line_at(start))
            if entry is not None:
                if any(e.name == entry.name for e in entries):
                    raise sc.bad(f"entry {entry.name!r} defined twice", start)
                entries.append(entry)
                if len(entries) > MAX_ENTRIES:
                    raise sc.bad(f"more than {MAX_ENTRIES} entries")
        elif tok == ".func":
            sc.next()
            sc.skip(body=True)
        elif tok == ".file":  # .file N "name" [, timestamp, size]
            sc.next()
            sc.number("a file number")
            if not sc.next("a file name").startswith('"'):
                raise sc.bad(".file needs a quoted file name")
            sc.skip_line()
        elif tok == ".loc":
            sc.skip_line()
        elif tok == ".section":
            sc.skip(body=True)
        elif tok in _DECLS:
            sc.skip(body=False)
        elif tok in (".version", ".target", ".address_size"):
            raise sc.bad(f"{tok} repeated or out of place")
        else:
            raise sc.bad(f"unexpected {tok[:40]!r} at module level")
    return PtxHeader(version, tuple(target), address_size, tuple(entries))


def _parse_entry(sc: _Scanner, line: int) -> PtxEntry | None:
    name = sc.next("an entry name")
    if not _IDENT.fullmatch(name):
        raise sc.bad(f"bad entry name {name[:40]!r}")
    params: list[PtxParam] = []
    if sc.peek() == "(":
        sc.next()
        if sc.peek() == ")":
            sc.next()
        else:
            while True:
                params.append(_parse_param(sc))
                if len(params) > MAX_PARAMS:
                    raise sc.bad(f"entry {name!r} has more than {MAX_PARAMS} parameters")
                sep = sc.next("',' or ')'")
                if sep == ")":
                    break
                if sep != ",":
                    raise sc.bad(f"expected ',' or ')' after a parameter of {name!r}, not {sep!r}")
    while True:  # performance directives (.maxntid 256,1,1 ...) up to the body
        tok = sc.peek()
        if tok == "{":
            sc.skip(body=True)
            return PtxEntry(name, tuple(params), line)
        if tok == ";":
            sc.next()
            return None  # a prototype: declares, does not define
        if tok is None or tok in (".entry", ".func", ".visible", ".weak", ".extern"):
            raise sc.bad(f"entry {name!r} has no body")
        if not (tok.startswith(".") or tok.isdigit() or tok == ","):
            raise sc.bad(f"unexpected {tok[:40]!r} after the parameters of {name!r}")
        sc.next()


def _parse_param(sc: _Scanner) -> PtxParam:
    tok = sc.next("'.param'")
    if tok != ".param":
        raise sc.bad(f"entry parameters must be declared with .param, found {tok[:40]!r}")
    ptype, align, ptr, space = "", None, False, ""
    while (attr := sc.peek()) is not None and attr.startswith("."):
        tok = sc.next()
        if tok == ".align":
            align = sc.number("an alignment")
            if align == 0 or align & (align - 1):
                raise sc.bad(f".align {align} is not a power of two")
        elif tok == ".ptr":
            ptr = True
        elif tok in _SPACES and ptr:
            space = tok
        elif tok in _TYPES and not ptype:
            ptype = tok
        else:
            raise sc.bad(f"unexpected parameter attribute {tok[:40]!r}")
    if not ptype:
        raise sc.bad("parameter without a type")
    name = sc.next("a parameter name")
    if not _IDENT.fullmatch(name):
        raise sc.bad(f"bad parameter name {name[:40]!r}")
    array = None
    if sc.peek() == "[":
        sc.next()
        array = sc.number("an array size")
        sc.expect("]")
    return PtxParam(name, ptype, align, array, ptr, space)


# --- ptxas -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PtxasStats:
    entry: str
    registers: int
    shared_bytes: int
    spill_stores: int
    spill_loads: int
    stack_frame: int


_P_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_P_PROPS = re.compile(r"Function properties for (\S+)")
_P_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_P_USED = re.compile(r"Used (\d+) registers")
_P_SMEM = re.compile(r"(\d+) bytes smem")


def find_ptxas() -> str | None:
    return find_tool("ptxas", cuda=True)


def parse_ptxas_output(out: str) -> list[PtxasStats]:
    """Per-entry statistics from ``ptxas -v`` output."""
    order: list[str] = []
    stats: dict[str, dict[str, int]] = {}
    current, props_for = "", ""
    for line in out.splitlines():
        if m := _P_ENTRY.search(line):
            current = m.group(1)
            if current not in stats:
                order.append(current)
                stats[current] = {}
        elif m := _P_PROPS.search(line):
            props_for = m.group(1)
        elif (m := _P_FRAME.search(line)) and props_for in stats:
            st = stats[props_for]
            st["stack"], st["stores"], st["loads"] = (int(g) for g in m.groups())
        elif (m := _P_USED.search(line)) and current in stats:
            stats[current]["regs"] = int(m.group(1))
            sm = _P_SMEM.search(line)
            stats[current]["smem"] = int(sm.group(1)) if sm else 0
    return [
        PtxasStats(
            e, s["regs"], s.get("smem", 0), s.get("stores", 0), s.get("loads", 0), s.get("stack", 0)
        )
        for e in order
        if "regs" in (s := stats[e])
    ]


def ptxas_argv(ptxas: str, ptx_path: Path, arch: str, cwd: Path, warn_spills: bool
               ) -> list[str]:
    """The argv assembling ``ptx_path`` for ``arch`` into ``cwd``; ``BadInput`` for a target that
    is not ``sm_NN``. ``warn_spills``: ptxas warns of each function that spills; which warnings
    fail the check is ``judge_warnings``' decision, per entry (``--warning-as-error`` would fail
    the whole file for a spill in another kernel of it)."""
    if not _ARCH.fullmatch(arch) or not arch.startswith("sm_"):
        raise BadInput(f"target {arch!r} is not an sm_NN architecture")
    out = cwd / f"{ptx_path.name}.{arch}.cubin"
    argv = [ptxas, f"-arch={arch}", "-v"]
    if warn_spills:
        argv.append("--warn-on-spills")
    return [*argv, "-o", str(out), str(ptx_path.resolve())]


_SPILL_WARNING = re.compile(r"Registers are spilled to local memory in function '([^']*)'")


def judge_warnings(output: str, entry: str, other_entries: set[str]) -> list[str]:
    """With spills forbidden, every ``ptxas warning`` line fails the check, but for one that
    says another entry of the file spills: its budget is not the contract's. (A spill of the
    contract's entry fails twice over: this line, and its per-entry statistics.)"""
    out: list[str] = []
    for line in output.splitlines():
        if not line.startswith("ptxas warning"):
            continue
        m = _SPILL_WARNING.search(line)
        if m is not None and m.group(1) in other_entries:
            continue
        text = line.split(":", 1)[-1].strip()
        out.append(f"ptxas warning (every warning fails when spills are forbidden): {text[:200]}")
    return out


def run_ptxas(
    ptx_path: Path, arch: str, cwd: Path, warn_spills: bool, timeout: float
) -> tuple[ToolResult, list[PtxasStats]]:
    """Assemble ``ptx_path`` for ``arch`` in ``cwd``; ``CannotCheck`` when there is no ptxas."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise CannotCheck("no ptxas found on PATH or in the CUDA locations")
    argv = ptxas_argv(ptxas, ptx_path, arch, cwd, warn_spills)
    res = run_tool(argv, cwd=cwd, timeout=timeout)
    return res, parse_ptxas_output(res.stdout + "\n" + res.stderr)


# --- the checks ------------------------------------------------------------------------------

_SCALAR_TYPES: dict[str, tuple[str, ...]] = {
    "f16": (".f16", ".b16", ".u16"),
    "bf16": (".bf16", ".b16", ".u16"),
    "f32": (".f32", ".b32"),
    "f64": (".f64", ".b64"),
    "u8": (".u8", ".s8", ".b8"),
    "s8": (".u8", ".s8", ".b8"),
    "u32": (".u32", ".s32", ".b32"),
    "s32": (".u32", ".s32", ".b32"),
    "u64": (".u64", ".s64", ".b64"),
    "s64": (".u64", ".s64", ".b64"),
}
_DTYPE_BYTES = {
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
    "u8": 1,
    "s8": 1,
    "u32": 4,
    "s32": 4,
    "u64": 8,
    "s64": 8,
}


def param_mismatch(pp: PtxParam, cp: Param, address_size: int) -> str:
    """'' when the PTX parameter can carry the contract's parameter, else what it needs."""
    if cp.kind == "ptr":
        want: tuple[str, ...] = (
            (".u64", ".b64", ".s64") if address_size == 64 else (".u32", ".b32", ".s32")
        )
        if pp.array is None and pp.type in want:
            return ""
        return f"a pointer needs one of {', '.join(want)} (address_size {address_size})"
    want = _SCALAR_TYPES.get(cp.dtype, ())
    if pp.array is None and pp.type in want:
        return ""
    if pp.array is not None and pp.type == ".b8" and pp.array == _DTYPE_BYTES.get(cp.dtype):
        return ""  # a scalar passed as bytes, as nvcc does for __half
    return f"a {cp.dtype} scalar needs one of {', '.join(want)}"


def _fmt_entry(e: PtxEntry) -> str:
    return f"{e.name}({', '.join(p.describe() for p in e.params)}) [line {e.line}]"


def _compare(k: Kernel, h: PtxHeader, problems: list[str]) -> str:
    want_target = k.target or DEFAULT_TARGET
    if h.arch != want_target:
        problems.append(f"{k.ptx}: .target {h.arch}, the contract's target is {want_target}")
    entry = h.entry(k.entry)
    if entry is None:
        names = ", ".join(e.name for e in h.entries) or "none"
        problems.append(f"{k.ptx}: no .entry {k.entry!r} (entries: {names})")
        return ""
    if len(entry.params) != len(k.params):
        problems.append(
            f"entry {k.entry}: {len(entry.params)} PTX parameters, the contract lists "
            f"{len(k.params)} ({', '.join(p.name for p in k.params)})"
        )
    for i, (pp, cp) in enumerate(zip(entry.params, k.params, strict=False)):
        why = param_mismatch(pp, cp, h.address_size)
        if why:
            problems.append(
                f"entry {k.entry} parameter {i} ({cp.name}): PTX {pp.describe()}; {why}"
            )
    return f"contract entry {k.entry} on {want_target} with {len(k.params)} parameters"


def parse_check(ctx: Context) -> Check:
    problems: list[str] = []
    lines: list[str] = []
    headers: dict[str, PtxHeader] = {}
    for f in ctx.bundle.with_suffix(".ptx"):
        try:
            h = parse_ptx(f.data)
        except BadInput as e:
            problems.append(f"{f.path}: {e}")
            continue
        headers[f.path] = h
        ents = "; ".join(_fmt_entry(e) for e in h.entries) or "none"
        lines.append(
            f"{f.path}: PTX {h.version}, .target {', '.join(h.target)}, "
            f".address_size {h.address_size}; entries: {ents}"
        )
        if not h.entries:
            problems.append(f"{f.path}: no .entry (only functions or data)")
    if not headers and not problems:
        problems.append("the bundle has no .ptx file")
    k = ctx.contract.kernel if ctx.contract is not None else None
    if ctx.contract is None:
        lines.append("contract not loaded: no entry, target or parameter comparison")
    elif k is None:
        lines.append("contract has no kernel section: no entry, target or parameter comparison")
    elif not any(f.path == k.ptx for f in ctx.bundle.files):
        problems.append(f"the contract's kernel.ptx {k.ptx!r} is not in the bundle")
    elif k.ptx in headers:
        lines.append(_compare(k, headers[k.ptx], problems))
    detail = "; ".join(x for x in lines if x)
    if problems:
        return failed("ptx.parse", "; ".join(problems) + (f" | {detail}" if detail else ""))
    return passed("ptx.parse", detail)


def _errors(res: ToolResult) -> str:
    text = res.stderr + "\n" + res.stdout
    bad = [ln.strip() for ln in text.splitlines() if re.search(r"\b(error|fatal)\b", ln)]
    return " / ".join(bad)[:600] or text.strip()[-600:]


def assemble_check(ctx: Context) -> Check:
    (check,) = start_assemble(ctx).finish()
    return check


@dataclass(frozen=True)
class _Budget:
    """What ``ptx.assemble`` holds each entry to: the kernel contract's budget, or none."""

    entry: str | None  # the contract's entry; None without a kernel contract
    max_regs: int | None
    max_smem: int | None
    allow_spills: bool


def start_assemble(ctx: Context) -> Started:
    """``ptx.assemble`` with ptxas started now and judged in ``finish()`` (the runner lets it
    run beside the falsification tests). The first file's ptxas runs in the background; any
    further ``.ptx`` files (a bundle without a kernel contract) are assembled in ``finish()``."""
    ptxas = find_ptxas()
    if ptxas is None:
        return done([skipped(
            "ptx.assemble",
            "no ptxas on PATH or in the CUDA locations "
            "(install the CUDA toolkit or kernel-ledger[cuda])",
            tool="ptxas",
        )])
    planned = _assemble_jobs(ctx, ptxas)
    if isinstance(planned, Check):
        return done([planned])
    jobs, budget, notes = planned
    allow = budget.allow_spills
    scratch = ctx.scratch()
    timeout = ctx.options.timeout
    first: RunningTool | None = None
    if jobs:
        with contextlib.suppress(BadInput):  # reported in finish()
            argv = ptxas_argv(ptxas, scratch / jobs[0][0], jobs[0][1], scratch, not allow)
            first = RunningTool(argv, cwd=scratch, timeout=timeout)
    release = start_release(ptxas)  # beside the first ptxas

    def finish() -> list[Check]:
        version = release()
        problems: list[str] = []
        lines: list[str] = []
        others: list[str] = []
        for i, (path, arch) in enumerate(jobs):
            try:
                argv = ptxas_argv(ptxas, scratch / path, arch, scratch, not allow)
            except BadInput as e:
                problems.append(f"{path}: {e}")
                continue
            if i == 0 and first is not None:
                res = first.result()
            else:
                res = run_tool(argv, cwd=scratch, timeout=timeout)
            _judge_assembly(path, arch, res, budget, timeout, problems, lines, others)
        if others:
            notes.append(f"budget not applied to the other entries ({', '.join(others)})")
        detail = "; ".join(lines + notes)
        if problems:
            return [failed("ptx.assemble", "; ".join(problems) + f" | {detail}", "ptxas", version)]
        return [passed("ptx.assemble", detail, "ptxas", version)]

    return Started(finish, [first] if first is not None else [])


def _assemble_jobs(
    ctx: Context, ptxas: str
) -> tuple[list[tuple[str, str]], _Budget, list[str]] | Check:
    """The (bundle path, target) pairs to assemble, the budget and its note; or the failed
    check when the contract's kernel.ptx is not in the bundle."""
    k = ctx.contract.kernel if ctx.contract is not None else None
    notes: list[str] = []
    if k is not None:
        if not any(f.path == k.ptx for f in ctx.bundle.files):
            return failed(
                "ptx.assemble",
                f"the contract's kernel.ptx {k.ptx!r} is not in the bundle",
                "ptxas",
                tool_release(ptxas),
            )
        jobs = [(k.ptx, k.target or DEFAULT_TARGET)]
        budget = _Budget(k.entry, k.max_registers, k.max_shared_bytes, k.allow_spills)
        notes.append(
            f"budget: max_registers {budget.max_regs}, max_shared_bytes {budget.max_smem}, "
            f"spills {'allowed' if budget.allow_spills else 'forbidden'}"
        )
    else:
        jobs = [(f.path, DEFAULT_TARGET) for f in ctx.bundle.with_suffix(".ptx")]
        budget = _Budget(None, None, None, True)
        notes.append(f"no kernel contract: every .ptx assembled for {DEFAULT_TARGET}, no budget")
    return jobs, budget, notes


def _judge_assembly(
    path: str,
    arch: str,
    res: ToolResult,
    budget: _Budget,
    timeout: float,
    problems: list[str],
    lines: list[str],
    others: list[str],
) -> None:
    """Judge one ptxas run: its problems, its per-entry statistics lines and the other entries
    (outside the budget) are appended to the lists given."""
    stats = parse_ptxas_output(res.stdout + "\n" + res.stderr)
    if res.timed_out:
        problems.append(f"{path}: ptxas timed out after {timeout:g} s")
        return
    if not res.ok:
        problems.append(f"{path}: ptxas -arch={arch} exit {res.returncode}: {_errors(res)}")
    entry = budget.entry
    for s in stats:
        lines.append(
            f"{path}:{s.entry} on {arch}: {s.registers} registers, "
            f"{s.shared_bytes} bytes smem, {s.spill_stores} bytes spill stores, "
            f"{s.spill_loads} bytes spill loads, {s.stack_frame} bytes stack frame"
        )
        if entry is not None and s.entry != entry:
            others.append(s.entry)
            continue  # another kernel of the source: the budget is the contract entry's
        problems += _over_budget(s, budget)
    if res.ok and not budget.allow_spills and entry is not None:
        problems += judge_warnings(
            res.stdout + "\n" + res.stderr, entry,
            {s.entry for s in stats if s.entry != entry},
        )
    if res.ok and entry is not None and not any(s.entry == entry for s in stats):
        problems.append(f"ptxas printed no statistics for entry {entry!r}")
    elif res.ok and not stats:
        problems.append(f"{path}: ptxas printed no entry statistics")


def _over_budget(s: PtxasStats, budget: _Budget) -> list[str]:
    """How one entry's statistics break the budget (none: an empty list)."""
    problems: list[str] = []
    if not budget.allow_spills and (s.spill_stores or s.spill_loads):
        problems.append(
            f"{s.entry}: spills registers ({s.spill_stores} bytes stores, "
            f"{s.spill_loads} bytes loads) and the contract forbids spills"
        )
    if budget.max_regs is not None and s.registers > budget.max_regs:
        problems.append(
            f"{s.entry}: {s.registers} registers > max_registers {budget.max_regs}"
        )
    if budget.max_smem is not None and s.shared_bytes > budget.max_smem:
        problems.append(
            f"{s.entry}: {s.shared_bytes} bytes smem > max_shared_bytes {budget.max_smem}"
        )
    return problems


def start(ctx: Context) -> Started:
    """``ptx.parse`` now; ``ptx.assemble`` with its ptxas running in the background."""
    asm = start_assemble(ctx)  # ptxas first: it runs while the PTX is parsed here
    parse = parse_check(ctx)
    return Started(lambda: [parse, *asm.finish()], asm.tools)


def run(ctx: Context) -> list[Check]:
    """``[ptx.parse, ptx.assemble]``."""
    return start(ctx).finish()
