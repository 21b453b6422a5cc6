"""Parse the PTX text nvcc emits into entries, declarations and instructions (SPEC 8, issue 4).

Steps:
1. strip comments (``//`` and ``/* */``) keeping line numbers;
2. split into statements: ``;``-terminated instructions and directives, block braces ``{ }`` and
   labels ``name:``; braces that follow an opcode are vector operands, not blocks;
3. collect module-level ``.shared`` (static and ``.extern`` dynamic) variables and ``.entry``
   functions with their parameters, ``.reg`` / ``.shared`` / ``.local`` declarations, labels and
   instructions, each instruction with its 1-based PTX line.

Only the syntax; semantics live in the ``ops_*`` modules.

Limits (``check_limits``, after parsing: the PTX comes from an untrusted bundle, and the machine
holds every register, ``.local`` byte and ``.shared`` byte once per thread or block): per entry,
with every ``.func`` it calls expanded as ``verify.ptxsim.inline`` will (the callee's registers
and variables copied at each call site), at most ``MAX_REGS`` declared registers, ``MAX_CALL_SITES``
call sites, ``MAX_LOCAL_BYTES`` of ``.local`` (and call ``.param``) variables per thread and
``MAX_SHARED_BYTES`` of static ``.shared``; module ``.global``/``.const`` variables at most
``MAX_GLOBAL_BYTES`` together; ``.align`` a power of two up to ``MAX_ALIGN``. Past a limit,
``UnsupportedPtx`` says which (the launch is not run; no GPU would run such PTX either).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verify.ptxsim.errors import PtxSyntaxError, UnsupportedPtx

MAX_REGS = 1 << 20  # declared registers of one entry, calls expanded (nvcc: thousands)
MAX_CALL_SITES = 1 << 16  # calls of one entry, nested calls expanded
MAX_LOCAL_BYTES = 512 << 10  # .local per thread: the most any GPU gives a thread
MAX_SHARED_BYTES = 227 << 10  # static .shared per block: the most any current GPU has
MAX_GLOBAL_BYTES = 256 << 20  # module .global and .const variables together
MAX_ALIGN = 1 << 12


@dataclass(frozen=True)
class Reg:
    name: str
    neg: bool = False  # "!%p1" as an operand


@dataclass(frozen=True)
class Imm:
    text: str


@dataclass(frozen=True)
class Sym:
    name: str


@dataclass(frozen=True)
class Addr:
    base: Reg | Sym | None
    offset: int


@dataclass(frozen=True)
class Vec:
    items: tuple[Reg | Imm, ...]


@dataclass(frozen=True)
class Raw:
    """An operand form the parser does not know (only in instructions nobody models)."""

    text: str


@dataclass(frozen=True)
class PredDst:
    """``%r1|%p1``: a destination with a second, predicate destination (shfl.sync)."""

    reg: Reg
    pred: Reg


Operand = Reg | Imm | Sym | Addr | Vec | PredDst | Raw


@dataclass(frozen=True)
class Instr:
    line: int
    opcode: str
    guard: Reg | None
    operands: tuple[Operand, ...]

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")


@dataclass(frozen=True)
class Var:
    name: str
    space: str  # "shared" | "local" | "global" | "const"
    size: int  # bytes; 0 for extern (dynamic) shared
    align: int
    extern: bool = False
    init: str | None = None  # initialiser text after '=' (module .global / .const variables)
    ptx_type: str = ".b8"


@dataclass(frozen=True)
class Param:
    name: str
    ptx_type: str
    size: int
    align: int


@dataclass
class Entry:
    name: str
    params: list[Param] = field(default_factory=list)
    regs: dict[str, str] = field(default_factory=dict)  # name -> ptx type
    reg_ranges: list[tuple[str, str, int]] = field(default_factory=list)  # prefix, type, count
    vars: list[Var] = field(default_factory=list)
    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    line: int = 0
    returns: list[Param] = field(default_factory=list)  # .func return parameters

    def reg_type(self, name: str) -> str | None:
        if name in self.regs:
            return self.regs[name]
        m = re.fullmatch(r"(%[A-Za-z_$][\w$]*?)(\d+)", name)
        if m:
            for prefix, typ, count in self.reg_ranges:
                if prefix == m.group(1) and int(m.group(2)) < count:
                    return typ
        return None


@dataclass
class Module:
    entries: dict[str, Entry]
    vars: list[Var]  # module-level variables
    text: str
    funcs: dict[str, Entry] = field(default_factory=dict)  # .func definitions by name


_TYPES = {
    ".pred", ".b8", ".b16", ".b32", ".b64", ".u8", ".u16", ".u32", ".u64", ".s8", ".s16", ".s32",
    ".s64", ".f16", ".f16x2", ".bf16", ".bf16x2", ".f32", ".f64",
}
_TYPE_SIZE = {"8": 1, "16": 2, "32": 4, "64": 8, "16x2": 4}
_SIZES = {".pred": 1, **{t: _TYPE_SIZE[t.lstrip(".bfsu")] for t in _TYPES if t != ".pred"}}


def type_size(t: str) -> int:
    size = _SIZES.get(t)
    if size is not None:
        return size
    m = re.fullmatch(r"\.(?:b|u|s|f|bf)(8|16|32|64|16x2)", t)
    if not m:
        raise PtxSyntaxError(f"unknown PTX type {t}")
    return _TYPE_SIZE[m.group(1)]


def _strip_comments(text: str) -> str:
    def keep_lines(m: re.Match[str]) -> str:
        return "\n" * m.group(0).count("\n")

    text = re.sub(r"/\*.*?\*/", keep_lines, text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # DWARF sections (nvcc -G): data only, no semicolons inside
    return re.sub(r"^[ \t]*\.section[^{;\n]*\s*\{[^}]*\}", keep_lines, text, flags=re.M)


_LINE_DIRECTIVES = (".version", ".target", ".address_size", ".file", ".loc")


def _statements(text: str) -> list[tuple[int, str]]:
    """Statements with their line: '{', '}', 'label:', or a ';'-terminated statement (no ';')."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    blank = True  # buf holds only whitespace
    start = 1
    line = 1
    vec_depth = 0
    paren = 0
    for m in _TOKENS.finditer(text):
        tok = m.group(0)
        if tok == "\n":
            if not blank:
                cur = "".join(buf).strip()
                if cur.startswith(_LINE_DIRECTIVES):
                    out.append((start, cur))
                    buf, blank = [], True
                else:
                    buf.append(" ")
            line += 1
            continue
        if tok not in _SPECIAL:
            if blank and tok.strip():
                start, blank = line, False
            buf.append(tok)
            continue
        cur = "".join(buf).strip() if not blank else ""
        if blank:
            start = line
        if tok == "{" and vec_depth == 0 and paren == 0 and (
                not cur or (cur.startswith(".") and "=" not in cur)):
            if cur:
                out.append((start, cur))
            buf, blank = [], True
            out.append((line, "{"))
            continue
        if tok == "{":
            vec_depth += 1
        elif tok == "}" and vec_depth > 0:
            vec_depth -= 1
        elif tok == "}":
            if cur:
                raise PtxSyntaxError(f"line {line}: '}}' before ';' after {cur!r}")
            out.append((line, "}"))
            buf, blank = [], True
            continue
        elif tok == "(":
            paren += 1
        elif tok == ")":
            paren -= 1
        elif tok == ":" and paren == 0 and vec_depth == 0 and re.fullmatch(r"[$\w.]+", cur):
            out.append((start, cur + ":"))
            buf, blank = [], True
            continue
        elif tok == ";" and paren == 0 and vec_depth == 0:
            if cur:
                out.append((start, cur))
            buf, blank = [], True
            continue
        buf.append(tok)
        blank = False
    rest = "".join(buf).strip()
    if rest:
        raise PtxSyntaxError(f"line {start}: unterminated statement {rest[:60]!r}")
    return out


_SPECIAL = frozenset(";{}():")
_TOKENS = re.compile(r"[;{}():\n]|[^;{}():\n]+")


def _split_commas(s: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _int(text: str, line: int) -> int:
    t = text.strip().rstrip("Uu")
    try:
        neg = t.startswith("-")
        t = t.lstrip("+-")
        if t.lower().startswith("0x"):
            v = int(t, 16)
        elif t.lower().startswith("0b"):
            v = int(t[2:], 2)
        elif len(t) > 1 and t.startswith("0"):
            v = int(t, 8)
        else:
            v = int(t)
        return -v if neg else v
    except ValueError as e:
        raise PtxSyntaxError(f"line {line}: bad integer {text!r}") from e


_IDENT = r"[A-Za-z_$%][\w$.]*"

_NUMBER = r"[-+]?(0[fFdD][0-9a-fA-F]+|0[xX][0-9a-fA-F]+U?|\d+U?|\d*\.\d+([eE][-+]?\d+)?)"

# opcode roots the interpreter models: a malformed operand in one of these is a syntax error;
# in any other instruction it is kept raw and the instruction is refused as unsupported
KNOWN_ROOTS = {
    "add", "sub", "mul", "mad", "div", "rem", "min", "max", "abs", "neg", "and", "or", "xor",
    "not", "cnot", "shl", "shr", "setp", "set", "selp", "mov", "popc", "clz", "brev", "bfe",
    "bfi", "prmt", "lop3", "cvt", "cvta", "ld", "ldu", "st", "atom", "red", "cp", "shfl", "vote",
    "ldmatrix", "mma", "bra", "ret", "exit", "bar", "barrier", "membar", "fence", "fma", "rcp",
    "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "activemask", "redux", "testp",
    "copysign", "addc", "subc", "madc", "shf", "bfind", "sad", "match", "nanosleep",
    "vadd4", "vsub4", "vavrg4", "vabsdiff4", "vmin4", "vmax4",
}


def _operand(s: str, line: int) -> Operand:
    s = s.strip()
    if s.startswith("["):
        if not s.endswith("]"):
            raise PtxSyntaxError(f"line {line}: bad address {s!r}")
        inner = s[1:-1].replace(" ", "")
        m = re.fullmatch(rf"({_IDENT})?(?:\+?(-?(?:0[xX][0-9a-fA-F]+|\d+)))?", inner)
        if not m or not (m.group(1) or m.group(2)):
            raise PtxSyntaxError(f"line {line}: bad address {s!r}")
        base: Reg | Sym | None = None
        if m.group(1):
            base = Reg(m.group(1)) if m.group(1).startswith("%") else Sym(m.group(1))
        return Addr(base, _int(m.group(2), line) if m.group(2) else 0)
    if s.startswith("{"):
        items = _split_commas(s[1:-1])
        out: list[Reg | Imm] = []
        for it in items:
            op = _operand(it, line)
            if isinstance(op, Sym):  # a register declared without '%' (inline asm blocks)
                op = Reg(op.name)
            if not isinstance(op, Reg | Imm):
                raise PtxSyntaxError(f"line {line}: bad vector element {it!r}")
            out.append(op)
        return Vec(tuple(out))
    if "|" in s:
        a, b = s.split("|", 1)
        ra, rb = _operand(a, line), _operand(b, line)
        if not isinstance(ra, Reg) or not isinstance(rb, Reg):
            raise PtxSyntaxError(f"line {line}: bad operand {s!r}")
        return PredDst(ra, rb)
    if re.fullmatch(r"!%[\w$.]+", s):
        return Reg(s[1:], neg=True)
    if re.fullmatch(r"%[\w$.]+", s):
        return Reg(s)
    if s == "_":
        return Reg("_")
    if re.fullmatch(_NUMBER, s):
        return Imm(s)
    if re.fullmatch(_IDENT, s):
        return Sym(s)
    raise PtxSyntaxError(f"line {line}: cannot parse operand {s!r}")


def _instr(line: int, stmt: str) -> Instr:
    guard: Reg | None = None
    m = re.match(r"@(!?)(%\w+)\s+", stmt)
    if m:
        guard = Reg(m.group(2), neg=bool(m.group(1)))
        stmt = stmt[m.end():]
    parts = stmt.split(None, 1)
    opcode = parts[0]
    ops = _split_commas(parts[1]) if len(parts) > 1 else []
    out: list[Operand] = []
    for o in ops:
        try:
            out.append(_operand(o, line))
        except PtxSyntaxError:
            if opcode.split(".")[0] in KNOWN_ROOTS:
                raise
            out.append(Raw(o))
    return Instr(line, opcode, guard, tuple(out))


def _var(stmt: str, line: int) -> Var | None:
    words = stmt.split("=", 1)[0].split()
    space = next((w[1:] for w in words if w in (".shared", ".local", ".global", ".const",
                                                ".param")), None)
    if space is None:
        return None
    m = re.search(r"(" + _IDENT + r")\s*(\[\s*(\d*)\s*\])?\s*(=.*)?$", stmt, re.S)
    if not m:
        raise PtxSyntaxError(f"line {line}: bad variable declaration {stmt!r}")
    typ = next((w for w in words if w in _TYPES), ".b8")
    align_m = re.search(r"\.align\s+(\d+)", stmt)
    count = int(m.group(3)) if m.group(3) else (0 if m.group(2) else 1)
    init = m.group(4)[1:].strip() if m.group(4) else None
    return Var(m.group(1), space, count * type_size(typ), int(align_m.group(1)) if align_m else
               type_size(typ), extern=".extern" in words, init=init, ptx_type=typ)


def _params(text: str, line: int) -> list[Param]:
    out = []
    for p in _split_commas(text):
        words = p.split()
        typ = next((w for w in words if w in _TYPES), None)
        m = re.search(r"(" + _IDENT + r")\s*(\[\s*(\d+)\s*\])?$", p)
        if typ is None or not m:
            raise PtxSyntaxError(f"line {line}: bad parameter {p!r}")
        align_m = re.search(r"\.align\s+(\d+)", p)
        size = type_size(typ) * (int(m.group(3)) if m.group(3) else 1)
        out.append(Param(m.group(1), typ, size, int(align_m.group(1)) if align_m else
                         type_size(typ)))
    return out


_REG_DECL = re.compile(r"\.reg\s*(\.\w+)\s+(.*)", re.S)


def _declare_regs(cur: Entry, st: str, line: int, scopes: list[dict[str, str]]) -> None:
    """A ``.reg`` declaration: one type, then names and ``%r<N>`` ranges separated by commas
    (``.reg .b16 %a, %b;``, and ``.reg.b32 f, C, nZ;`` as ``cuda_fp16.h``'s inline asm writes
    it). Inside a nested ``{ }`` block a name that is already declared (in the function or an
    enclosing block) starts a new register that shadows it until the block ends, as PTX
    scoping says: it is renamed ``name$sN`` so the outer register keeps its value (nvcc's
    64-bit multiply asm in the f64 sin/cos slow path redeclares ``%r1``..``%r3`` that way)."""
    m = _REG_DECL.fullmatch(st.strip())
    if m is None or m.group(1) not in _TYPES:
        raise PtxSyntaxError(f"line {line}: bad register declaration {st!r}")
    typ = m.group(1)
    for w in m.group(2).replace(",", " ").split():
        rm = re.fullmatch(r"(%[\w$]+)<(\d+)>", w)
        if rm:
            cur.reg_ranges.append((rm.group(1), typ, int(rm.group(2))))
        elif not re.fullmatch(r"%?[A-Za-z_$][\w$]*", w):
            raise PtxSyntaxError(f"line {line}: bad register name {w!r} in {st!r}")
        elif scopes and cur.reg_type(w) is not None:
            new = f"{w}$s{len(cur.regs)}"
            cur.regs[new] = typ
            scopes[-1][w] = new
        else:
            cur.regs[w] = typ
            if scopes:
                scopes[-1][w] = w  # shadows a renamed outer name of the same spelling


def _renamed(ins: Instr, scopes: list[dict[str, str]]) -> Instr:
    """``ins`` with the registers of the enclosing blocks' declarations renamed (innermost
    declaration wins)."""
    names: dict[str, str] = {}
    for sc in scopes:
        names.update(sc)

    def reg(r: Reg) -> Reg:
        return Reg(names.get(r.name, r.name), r.neg)

    def op(o: Operand) -> Operand:
        if isinstance(o, Reg):
            return reg(o)
        if isinstance(o, Sym):
            return Sym(names.get(o.name, o.name))
        if isinstance(o, Addr) and isinstance(o.base, Reg | Sym):
            b = o.base
            return Addr(reg(b) if isinstance(b, Reg) else Sym(names.get(b.name, b.name)),
                        o.offset)
        if isinstance(o, Vec):
            return Vec(tuple(reg(x) if isinstance(x, Reg) else x for x in o.items))
        if isinstance(o, PredDst):
            return PredDst(reg(o.reg), reg(o.pred))
        return o
    guard = reg(ins.guard) if ins.guard is not None else None
    return Instr(ins.line, ins.opcode, guard, tuple(op(o) for o in ins.operands))


def parse(text: str) -> Module:
    stmts = _statements(_strip_comments(text))
    entries: dict[str, Entry] = {}
    funcs: dict[str, Entry] = {}
    mod_vars: list[Var] = []
    cur: Entry | None = None
    depth = 0
    pending: Entry | None = None
    scopes: list[dict[str, str]] = []  # nested { } blocks of the function: name -> renamed
    for line, st in stmts:
        if st == "{":
            if depth == 0:
                if pending is None:
                    raise PtxSyntaxError(f"line {line}: '{{' outside a function")
                cur, pending = pending, None
                scopes = []
            else:
                scopes.append({})
            depth += 1
            continue
        if st == "}":
            if scopes:
                scopes.pop()
            depth -= 1
            if depth < 0:
                raise PtxSyntaxError(f"line {line}: unbalanced '}}'")
            if depth == 0:
                if cur is not None and not cur.name.startswith(" func "):
                    entries[cur.name] = cur
                elif cur is not None:
                    funcs[cur.name[len(" func "):]] = cur
                cur = None
            continue
        if depth == 0:
            m = re.search(r"\.(entry|func)\s+(?:\(([^)]*)\)\s*)?(" + _IDENT +
                          r")\s*(\((.*)\))?", st, re.S)
            if m:
                kind, name = m.group(1), m.group(3)
                e = Entry(name if kind == "entry" else " func " + name, line=line)
                if m.group(5) is not None and m.group(5).strip():
                    e.params = _params(m.group(5), line)
                if kind == "func" and m.group(2) is not None and m.group(2).strip():
                    e.returns = _params(m.group(2), line)
                pending = e
                continue
            if st.startswith((".version", ".target", ".address_size", ".file", ".section")):
                continue
            v = _var(st, line)
            if v is not None:
                mod_vars.append(v)
                continue
            if st.startswith("."):
                continue
            raise PtxSyntaxError(f"line {line}: unexpected statement at module level {st[:60]!r}")
        assert cur is not None
        if st.endswith(":"):
            cur.labels[st[:-1]] = len(cur.instrs)
            continue
        if st.startswith(".reg"):
            _declare_regs(cur, st, line, scopes)
            continue
        if st.startswith((".shared", ".local", ".global", ".const", ".extern", ".param")):
            v = _var(st, line)
            if v is not None:
                cur.vars.append(v)
            continue
        if st.startswith("."):  # .pragma, .loc, .maxntid and other hints
            continue
        ins = _instr(line, st)
        cur.instrs.append(_renamed(ins, scopes) if any(scopes) else ins)
    if depth != 0:
        raise PtxSyntaxError("unbalanced braces at end of PTX")
    module = Module(entries, mod_vars, text, funcs)
    check_limits(module)
    return module


def _callee(ins: Instr) -> str | None:
    """The function a ``call`` names (its first symbol operand), as ``inline`` reads it."""
    return next((o.name for o in ins.operands if isinstance(o, Sym)), None)


def _own(e: Entry) -> list[int]:
    """[registers, call sites, .local bytes, .shared bytes] that ``e`` declares itself."""
    regs = len(e.regs) + sum(count for _, _, count in e.reg_ranges)
    local = sum(v.size for v in e.vars if v.space in ("local", "param"))
    shared = sum(v.size for v in e.vars if v.space == "shared")
    return [regs, 0, local, shared]


def _expanded(module: Module, e: Entry, memo: dict[str, list[int]]) -> list[int]:
    """``_own`` of ``e`` with every call expanded (recursion counted once: ``inline`` refuses
    it); each total saturates just past its limit, so the walk stays linear in the module."""
    caps = (MAX_REGS, MAX_CALL_SITES, MAX_LOCAL_BYTES, MAX_SHARED_BYTES)
    # an explicit stack: a chain of ten thousand .func calls must not exhaust Python's recursion
    stack: list[tuple[str, Entry, int]] = [("", e, 0)]
    totals: dict[str, list[int]] = {"": _own(e)}
    on_path: set[str] = set()
    calls_of: dict[str, list[Instr]] = {}
    while stack:
        key, fn, i = stack.pop()
        if key not in calls_of:
            calls_of[key] = [ins for ins in fn.instrs if ins.parts[0] == "call"]
        calls = calls_of[key]
        if i < len(calls):
            stack.append((key, fn, i + 1))
            name = _callee(calls[i])
            totals[key][1] = min(totals[key][1] + 1, caps[1] + 1)
            callee = module.funcs.get(name or "")
            if callee is None or name in on_path:
                continue
            if name in memo:
                add = memo[name]
                totals[key] = [min(a + b, c + 1) for a, b, c in zip(totals[key], add, caps,
                                                                      strict=True)]
                continue
            assert name is not None
            on_path.add(name)
            totals[name] = _own(callee)
            stack.append((name, callee, 0))
            continue
        if key == "":
            return totals[key]
        memo[key] = totals[key]
        on_path.discard(key)
        parent = stack[-1][0]
        totals[parent] = [min(a + b, c + 1) for a, b, c in zip(totals[parent], totals[key],
                                                                caps, strict=True)]
    return totals[""]


def check_limits(module: Module) -> None:
    """Refuse PTX past the interpreter's limits (module docstring) with ``UnsupportedPtx``."""
    every = [*module.vars]
    for f in [*module.entries.values(), *module.funcs.values()]:
        every += f.vars
    for v in every:
        if not 1 <= v.align <= MAX_ALIGN or v.align & (v.align - 1):
            raise UnsupportedPtx(f".align {v.align} of {v.name} (a power of two up to "
                                 f"{MAX_ALIGN} is modelled)")
    glob = sum(v.size for v in module.vars if v.space in ("global", "const"))
    if glob > MAX_GLOBAL_BYTES:
        raise UnsupportedPtx(f"module .global/.const variables of {glob} bytes (the "
                             f"interpreter holds at most {MAX_GLOBAL_BYTES})")
    mod_shared = sum(v.size for v in module.vars if v.space == "shared")
    memo: dict[str, list[int]] = {}
    names = ("declared registers", "call sites", "bytes of .local per thread",
             "bytes of static .shared")
    caps = (MAX_REGS, MAX_CALL_SITES, MAX_LOCAL_BYTES, MAX_SHARED_BYTES)
    for name, e in module.entries.items():
        got = _expanded(module, e, memo)
        got[3] += mod_shared
        for what, n, cap in zip(names, got, caps, strict=True):
            if n > cap:
                raise UnsupportedPtx(f"entry {name}: more than {cap} {what}, calls expanded "
                                     "(past the interpreter's limit, and any GPU's)")
