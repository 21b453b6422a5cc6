"""``ledger new DIR --cu FILE [--entry NAME] [--nvcc-flag F ...] [--size NAME ...]``: start a
bundle for any kernel (SPEC 7; guide: docs/seal-your-own-kernel.md).

1. refuse bad input (exit 2): DIR exists and is not an empty directory; FILE is missing, not a
   regular ``.cu`` file, over ``MAX_CU_BYTES``, or not UTF-8;
2. build the PTX with ``nvcc -arch=sm_86 -ptx`` in a scratch directory, bound inside the
   sandbox at ``verify.confine.BUILD_DIR`` where ``rebuild.ptx`` builds too (nvcc's module id is
   hashed from the source's absolute path), when a sandbox runs here (no nvcc: exit 3; the
   source does not compile: exit 2 with nvcc's first error);
3. read the entries and their parameters from the PTX (``verify.ptx.parse_ptx``); pick the
   ``--entry`` (the PTX name or the ``__global__`` function's name in the source) or the only one;
4. name and type each parameter from the kernel's signature in the source (``const T*`` -> an
   ``in`` pointer; a written pointer -> ``out``, or ``inout`` when it is also read; integer
   scalars become size variables, every one declared in the size domain and bound in the test
   sizes, the first sizing the guessed shapes and the grid, the others with TODOs), checked
   against the PTX parameter types; a parameter the source does not explain gets a PTX-derived
   name and a guess;
5. assemble with ``ptxas -v`` for the registers and shared memory (the resource budget);
6. write ``contract.yaml``, the PTX, the source, ``reference.py``, ``<name>.lean`` and
   ``<name>.fut``. Every stub carries the ``LEDGER-NEW: UNFINISHED`` marker, which fails the
   ``contract.lint`` gate ``unfinished``; the Lean stub holds ``sorry`` (``lean.scan`` fails) and
   its obligations are claimed with ``status: sorry`` (gate ``lean-status``), so an unfinished
   scaffold can never pass as proven.

The falsification test runs at the edge sizes of the launch shape: 1, block - 1, block + 1 and
a non-multiple of the block (3 * block + 7), counted in elements (block * the elements each
thread handles).

Issue 34, the author's loop: ``--nvcc-flag`` flags go into ``kernel.build`` after ``-ptx``,
checked first against ``rebuild.ptx``'s allow-list (``verify.rebuild.check_build``), so what is
recorded always rebuilds; ``max_registers`` is the measured count with headroom
(``register_budget``: +25 %, a multiple of 8, at most 255), said in a comment and the summary;
``--size NAME`` declares a size variable that is no parameter (``nnz``, ``cols``) in the size
domain and the test sizes, with TODOs; the grid divides by the elements each thread handles when
the source scales its thread index (``per_thread``), so it does not launch 4x the threads.
"""

import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core.errors import BadInput, CannotCheck

if TYPE_CHECKING:  # types only: verify.ptx loads when ``ledger new`` runs
    from verify.ptx import PtxEntry

MAX_CU_BYTES = 1 << 20
TARGET = "sm_86"
MARKER = "LEDGER-NEW: UNFINISHED"  # = verify.contract_lint.UNFINISHED

# C/C++ scalar types -> contract dtypes.
_CTYPES = {
    "float": "f32",
    "double": "f64",
    "__half": "f16",
    "half": "f16",
    "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16",
    "__bf16": "bf16",
    "int": "s32",
    "signed": "s32",
    "signed int": "s32",
    "int32_t": "s32",
    "unsigned": "u32",
    "unsigned int": "u32",
    "uint32_t": "u32",
    "uint": "u32",
    "long long": "s64",
    "long long int": "s64",
    "int64_t": "s64",
    "long": "s64",
    "unsigned long long": "u64",
    "unsigned long long int": "u64",
    "unsigned long": "u64",
    "uint64_t": "u64",
    "size_t": "u64",
    "char": "s8",
    "signed char": "s8",
    "int8_t": "s8",
    "unsigned char": "u8",
    "uint8_t": "u8",
}
# PTX scalar parameter types -> dtypes, when the source says nothing.
_PTX_SCALAR = {
    ".f32": "f32",
    ".f64": "f64",
    ".u32": "u32",
    ".s32": "s32",
    ".b32": "u32",
    ".u64": "u64",
    ".s64": "s64",
    ".b64": "u64",
    ".u8": "u8",
    ".s8": "s8",
    ".b8": "u8",
    ".f16": "f16",
    ".b16": "f16",
}
_INTEGER = ("s32", "u32", "s64", "u64", "u8", "s8")


def register_budget(measured: int) -> int:
    """``max_registers`` for a kernel ptxas measured at ``measured`` registers: 25 % headroom
    rounded up to a multiple of 8, at most 255 (the sm_86 limit), never below the measurement,
    so a one-line edit of the source does not fail the budget (issue 34)."""
    want = measured + max(1, -(-measured * 25 // 100))
    return max(measured, min(255, -(-want // 8) * 8))


@dataclass
class NewParam:
    name: str
    kind: str  # "ptr" | "scalar"
    dtype: str
    intent: str = "in"
    guessed: str = ""  # what the author must check, "" when the source says it plainly
    lanes: int = 1  # elements of ``dtype`` per element of the source's type (float4: 4)


@dataclass
class Scaffold:
    directory: Path
    entry: str  # the PTX entry name
    function: str  # the source's __global__ name
    params: list[NewParam]
    block: int
    registers: int | None
    shared_bytes: int | None
    files: list[str]
    todo: list[str]
    nvcc_flags: list[str] = field(default_factory=list)
    extra_sizes: list[str] = field(default_factory=list)  # size variables that are no param
    per_thread: int = 1  # elements each thread handles (``per_thread``)

    @property
    def max_registers(self) -> int | None:
        """The budget: the measured count plus headroom (``register_budget``)."""
        return register_budget(self.registers) if self.registers else None

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "entry": self.entry,
            "function": self.function,
            "params": [p.__dict__ for p in self.params],
            "launch": {"block": [self.block, 1, 1], "per_thread": self.per_thread},
            "resources": {"registers": self.registers, "max_registers": self.max_registers,
                          "shared_bytes": self.shared_bytes},
            "nvcc_flags": self.nvcc_flags,
            "extra_sizes": self.extra_sizes,
            "files": self.files,
            "todo": self.todo,
        }


# --- reading the source ----------------------------------------------------------------------

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_GLOBAL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\(([^)]*)\)\s*)?(?:void)\s+"
    r"(?:__launch_bounds__\s*\(([^)]*)\)\s*)?([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{",
)
_TEMPLATE = re.compile(r"template\s*<([^<>]*)>\s*$")
# CUDA vector types: (element dtype, lanes); a pointer to one is `lanes` elements of the dtype
_VECTORS = {
    f"{base}{k}": (dtype, k)
    for base, dtype in (("float", "f32"), ("double", "f64"), ("int", "s32"), ("uint", "u32"),
                        ("char", "s8"), ("uchar", "u8"), ("longlong", "s64"),
                        ("ulonglong", "u64"))
    for k in (1, 2, 3, 4)
} | {"__half2": ("f16", 2), "half2": ("f16", 2), "__nv_bfloat162": ("bf16", 2),
     "nv_bfloat162": ("bf16", 2)}
_HALF_BY_VALUE = ("", "half", "__half", "__nv_bfloat16", "nv_bfloat16", "__bf16")
_TYPEDEF = re.compile(
    r"\btypedef\s+(?:const\s+)?([A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*?)\s+([A-Za-z_]\w*)\s*;"
    r"|\busing\s+([A-Za-z_]\w*)\s*=\s*(?:const\s+)?([A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*?)\s*;"
)
# Itanium codes of builtin types, for a template instantiation's arguments (``I f E``)
_MANGLED = {
    "f": "float", "d": "double", "i": "int", "j": "unsigned int", "l": "long",
    "m": "unsigned long", "x": "long long", "y": "unsigned long long", "c": "char",
    "a": "signed char", "h": "unsigned char", "s": "short", "t": "unsigned short",
    "b": "bool", "v": "void",
}


@dataclass
class _SourceKernel:
    name: str
    params: list[tuple[str, str, bool, bool]]  # (name, base C type, pointer, const)
    body: str
    launch_bounds: int | None
    template: list[str]  # the template's type parameter names, in order ([] when none)


def _source_kernels(src: str) -> dict[str, _SourceKernel]:
    text = _COMMENTS.sub(" ", src)
    out: dict[str, _SourceKernel] = {}
    for m in _GLOBAL.finditer(text):
        bounds = (m.group(1) or m.group(2) or "").split(",")[0].strip()
        before = _TEMPLATE.search(text[max(0, m.start() - 400) : m.start()])
        template = [
            w.split()[-1]
            for w in (before.group(1).split(",") if before else [])
            if w.split() and w.split()[0] in ("typename", "class")
        ]
        params = []
        for raw in (p.strip() for p in m.group(4).split(",")):
            if not raw or raw == "void":
                continue
            pointer = "*" in raw or "[" in raw
            words = re.sub(r"[*&\[\]]", " ", raw).split()
            words = [w for w in words if w not in ("__restrict__", "__restrict", "restrict")]
            const = "const" in words
            words = [w for w in words if w not in ("const", "volatile", "struct")]
            if len(words) < 2:
                params.append(("", " ".join(words), pointer, const))
                continue
            params.append((words[-1], " ".join(words[:-1]), pointer, const))
        # the body: from the opening brace to its match
        depth, end = 0, len(text)
        for i in range(m.end() - 1, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        out[m.group(3)] = _SourceKernel(
            m.group(3),
            params,
            text[m.end() : end],
            int(bounds) if bounds.isdigit() else None,
            template,
        )
    return out


def _intent(name: str, body: str) -> tuple[str, str]:
    """``out`` / ``inout`` for a non-const pointer, from how the body uses it (a guess)."""
    uses = list(re.finditer(rf"\b{re.escape(name)}\s*\[", body))
    written = read = False
    for u in uses:
        depth, j = 1, u.end()
        while j < len(body) and depth:
            depth += {"[": 1, "]": -1}.get(body[j], 0)
            j += 1
        after = body[j:].lstrip()
        if re.match(r"(=(?!=)|\+=|-=|\*=|/=|\|=|&=|\^=)", after):
            written = True
            if not after.startswith("="):
                read = True  # a compound assignment reads too
        else:
            read = True
    if written and read:
        return "inout", "read and written in the kernel: inout (check)"
    if written:
        return "out", "written by the kernel: out (check it is never read first)"
    return "inout", "not const and not plainly written: inout (check: in, out or inout)"


def _demangle(name: str) -> str:
    """The function name of an Itanium-mangled PTX entry (``_Z5saxpyfPKfPfi`` -> ``saxpy``; in
    a namespace, ``_ZN5mylib5twiceEPKfPfi`` -> ``twice``)."""
    parts, _ = _mangled_name(name)
    return parts[-1] if parts else name


def _mangled_name(name: str) -> tuple[list[str], int]:
    """The name's components and the offset after them (([], 0) when not mangled)."""
    nested = name.startswith("_ZN")
    i = 3 if nested else 2
    parts: list[str] = []
    if not name.startswith("_Z"):
        return [], 0
    while True:
        m = re.compile(r"\d+").match(name, i)
        if m is None:
            break
        n = int(m.group(0))
        parts.append(name[m.end() : m.end() + n])
        i = m.end() + n
        if not nested:
            break
    if nested and name.startswith("E", i):
        i += 1
    return parts, i


def _template_types(name: str, template: list[str]) -> dict[str, str]:
    """The C types of a template instantiation's type parameters, from the mangled entry
    (``_Z4axpyIdEvT_PKS0_PS0_i`` with ``[T]`` -> ``{T: double}``); only builtin arguments are
    read (a non-type argument ``Li256E`` is skipped), anything else gives ``{}``."""
    parts, i = _mangled_name(name)
    if not parts or not template or not name.startswith("I", i):
        return {}
    i += 1
    types: list[str] = []
    while i < len(name) and name[i] != "E":
        lit = re.compile(r"L[a-z]n?\d+E").match(name, i)
        if lit:
            i = lit.end()
            continue
        if name[i] not in _MANGLED:
            return {}
        types.append(_MANGLED[name[i]])
        i += 1
    return dict(zip(template, types, strict=False)) if len(types) == len(template) else {}


def _typedefs(src: str) -> dict[str, str]:
    """``typedef __nv_bfloat16 floatX;`` and ``using floatX = __nv_bfloat16;`` in the source:
    alias -> the type it names (``std::``/``::`` prefixes dropped)."""
    out: dict[str, str] = {}
    for m in _TYPEDEF.finditer(_COMMENTS.sub(" ", src)):
        alias, target = (m.group(2), m.group(1)) if m.group(2) else (m.group(3), m.group(4))
        out[alias] = target.split("::")[-1].strip()
    return out


def _resolve(ctype: str, typedefs: dict[str, str]) -> str:
    """``ctype`` through the source's typedefs (a chain of at most 8)."""
    for _ in range(8):
        if ctype not in typedefs or typedefs[ctype] == ctype:
            break
        ctype = typedefs[ctype]
    return ctype


def _mangled_type(name: str, i: int, subs: list[tuple[str, int]],
                  targs: list[tuple[str, int]]) -> tuple[tuple[str, int], int]:
    """One Itanium ``<type>`` at ``name[i]``: ((base C type, pointer depth), next offset);
    raises ValueError on anything it does not read. ``subs`` collects substitution candidates."""
    c = name[i] if i < len(name) else ""
    if c == "P":
        (base, depth), j = _mangled_type(name, i + 1, subs, targs)
        subs.append((base, depth + 1))
        return (base, depth + 1), j
    if c in ("K", "V", "r"):
        t, j = _mangled_type(name, i + 1, subs, targs)
        subs.append(t)
        return t, j
    if c.isdigit():
        m = re.compile(r"\d+").match(name, i)
        assert m is not None
        n = int(m.group(0))
        t = (name[m.end() : m.end() + n], 0)
        subs.append(t)
        return t, m.end() + n
    if c in ("S", "T"):
        m = re.compile(r"[ST]([0-9A-Z]*)_").match(name, i)
        if m is None:
            raise ValueError(name[i:])
        k = int(m.group(1), 36) + 1 if m.group(1) else 0
        table = subs if c == "S" else targs
        if k >= len(table):
            raise ValueError(name[i:])
        if c == "T":
            subs.append(table[k])
        return table[k], m.end()
    if c in _MANGLED:
        return (_MANGLED[c], 0), i + 1
    raise ValueError(name[i:])


def _mangled_params(name: str) -> list[tuple[str, int]]:
    """The parameter types of a mangled entry as (base C type, pointer depth)
    (``_Z2k1PK13__nv_bfloat16PS_fi`` -> ``[(__nv_bfloat16, 1), (__nv_bfloat16, 1), (float, 0),
    (int, 0)]``); [] when not mangled or not understood."""
    parts, i = _mangled_name(name)
    if not parts:
        return []
    subs: list[tuple[str, int]] = [(p, 0) for p in parts[:-1]]  # a nested name's prefixes
    targs: list[tuple[str, int]] = []
    out: list[tuple[str, int]] = []
    try:
        if name.startswith("I", i):  # a template: its name, its arguments, its return type
            subs.append((parts[-1], 0))
            i += 1
            while i < len(name) and name[i] != "E":
                lit = re.compile(r"L[a-z]n?\d+E").match(name, i)
                if lit:
                    i = lit.end()
                    continue
                t, i = _mangled_type(name, i, subs, targs)
                targs.append(t)
            _, i = _mangled_type(name, i + 1, subs, targs)
        while i < len(name):
            t, i = _mangled_type(name, i, subs, targs)
            out.append(t)
    except (ValueError, IndexError):
        return []
    return [] if out == [("void", 0)] else out


# --- building --------------------------------------------------------------------------------


def _read_cu(cu: Path) -> str:
    if not cu.exists():
        raise BadInput(f"--cu {cu}: no such file")
    if not cu.is_file() or cu.is_symlink():
        raise BadInput(f"--cu {cu}: not a regular file")
    if cu.suffix != ".cu":
        raise BadInput(f"--cu {cu}: expected a CUDA source file (.cu)")
    size = cu.stat().st_size
    if size > MAX_CU_BYTES:
        raise BadInput(f"--cu {cu}: {size} bytes is over the {MAX_CU_BYTES}-byte limit")
    try:
        return cu.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"--cu {cu}: not UTF-8 (bad byte at offset {e.start})") from e


def _check_dir(directory: Path) -> None:
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise BadInput(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()):
        raise BadInput(f"{directory} exists and is not empty (ledger new writes a fresh bundle)")


def _stem(cu: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]", "_", cu.stem) or "kernel"
    return stem if stem[0].isalpha() else f"k_{stem}"


def new_bundle(
    directory: Path,
    cu: Path,
    entry: str | None = None,
    nvcc_flags: Sequence[str] = (),
    sizes: Sequence[str] = (),
) -> Scaffold:
    """Write the scaffold (module docstring); raises ``BadInput`` / ``CannotCheck``."""
    from verify.confine import BUILD_DIR, confined_argv, sandbox_status
    from verify.ptx import parse_ptx, run_ptxas
    from verify.rebuild import check_build
    from verify.tools import find_tool, run_tool

    _check_dir(directory)
    source = _read_cu(cu)
    stem = _stem(cu)
    build = ["nvcc", f"-arch={TARGET}", "-ptx", *nvcc_flags, "-o", f"{stem}.ptx", f"{stem}.cu"]
    try:  # the rebuild.ptx allow-list: what ledger new records, rebuild.ptx must accept
        check_build(build, f"{stem}.ptx", f"{stem}.cu")
    except BadInput as e:
        raise BadInput(f"--nvcc-flag: {e}") from e
    nvcc = find_tool("nvcc", cuda=True)
    if nvcc is None:
        raise CannotCheck("no nvcc on PATH or in the CUDA locations: cannot build the PTX")
    with tempfile.TemporaryDirectory(prefix="ledger-new-") as tmp:
        work = Path(tmp)
        (work / f"{stem}.cu").write_text(source, encoding="utf-8")
        argv = [nvcc, *build[1:]]
        bwrap, _ = sandbox_status()
        if bwrap is not None:  # at rebuild.ptx's fixed path: the same module id (verify.confine)
            argv = confined_argv(bwrap, nvcc, work, argv, at=BUILD_DIR)
        res = run_tool(argv, cwd=work)
        if not res.ok:
            lines = [ln for ln in (res.stderr + res.stdout).splitlines() if "error" in ln]
            first = (lines or (res.stderr + res.stdout).strip().splitlines() or ["?"])[0]
            why = "timed out" if res.timed_out else first.strip()[:300]
            raise BadInput(f"--cu {cu}: {' '.join(build)} failed: {why}")
        ptx = (work / f"{stem}.ptx").read_bytes()
        header = parse_ptx(ptx)
        chosen = _choose_entry(header.entries, entry, cu)
        registers = shared = None
        try:
            asm, stats = run_ptxas(work / f"{stem}.ptx", TARGET, work, False, 120)
            st = next((s for s in stats if s.entry == chosen.name), None)
            if asm.ok and st is not None:
                registers, shared = st.registers, st.shared_bytes
        except (CannotCheck, BadInput):
            pass
    kernels = _source_kernels(source)
    function = _demangle(chosen.name)
    sk = kernels.get(function)
    params, todo = _params(chosen, sk, cu, _typedefs(source))
    text = ptx.decode("utf-8", "replace")
    block = (sk.launch_bounds if sk is not None else None) or _maxntid(text, chosen.name) or 256
    todo += _module_notes(text, chosen.name)
    extra = _extra_sizes(sizes, params)
    sc = Scaffold(directory, chosen.name, function, params, block, registers, shared, [], todo,
                  list(nvcc_flags), extra, per_thread(sk.body) if sk is not None else 1)
    _write(sc, stem, source, ptx)
    return sc


def _extra_sizes(sizes: Sequence[str], params: list[NewParam]) -> list[str]:
    """``--size`` names: identifiers, not a parameter, not repeated (``BadInput`` otherwise)."""
    out: list[str] = []
    taken = {p.name for p in params}
    for name in sizes:
        if not re.fullmatch(r"[A-Za-z_]\w{0,63}", name):
            raise BadInput(f"--size {name[:60]!r}: not an identifier")
        if name in taken or name in out:
            raise BadInput(f"--size {name}: already a kernel parameter or given twice")
        out.append(name)
    return out


def _choose_entry(entries: "Sequence[PtxEntry]", entry: str | None, cu: Path) -> "PtxEntry":
    names = [e.name for e in entries]
    if not names:
        raise BadInput(f"--cu {cu}: the PTX has no kernel entry (no __global__ function)")
    if entry is None:
        if len(names) > 1:
            raise BadInput(f"--cu {cu} has {len(names)} kernels: give --entry ({', '.join(names)})")
        return entries[0]
    hits = [e for e in entries if entry in (e.name, _demangle(e.name))]
    if len(hits) != 1:
        what = "no kernel" if not hits else f"{len(hits)} kernels"
        raise BadInput(f"--entry {entry}: {what} of that name (entries: {', '.join(names)})")
    return hits[0]


def _maxntid(ptx: str, entry: str) -> int | None:
    """Threads per block the entry's ``.maxntid`` allows (``__launch_bounds__``), or None."""
    at = ptx.find(f".entry {entry}(")
    brace = ptx.find("{", at)
    m = re.search(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", ptx[at:brace])
    if at < 0 or m is None:
        return None
    return int(m.group(1)) * int(m.group(2) or 1) * int(m.group(3) or 1)


def _module_notes(ptx: str, entry: str) -> list[str]:
    """What the entry needs that a contract cannot give it, or must be told (to do items): an
    uninitialised ``__constant__`` it reads, the dynamic shared memory it uses."""
    at = ptx.find(f".entry {entry}(")
    nxt = ptx.find(".entry ", at + 1)
    body = ptx[at : nxt if nxt > 0 else len(ptx)] if at >= 0 else ""
    notes = []
    const = r"^\s*\.const\b[^;=]*?([A-Za-z_$][\w$]*)(?:\[\d*\])*\s*;"
    for m in re.finditer(const, ptx, re.M):
        if re.search(rf"\b{re.escape(m.group(1))}\b", body):
            notes.append(
                f"__constant__ {_demangle(m.group(1))} has no initializer: only a host can set "
                "it and the verifier launches from the contract alone, so it reads zeros; give "
                "it an initializer in the source or pass its values as a pointer parameter"
            )
    for m in re.finditer(r"^\s*\.extern\s+\.shared\b[^;]*?([A-Za-z_$][\w$]*)\[\]", ptx, re.M):
        if re.search(rf"\b{re.escape(m.group(1))}\b", body):
            notes.append(
                f"dynamic shared memory (extern __shared__ {_demangle(m.group(1))}): set "
                "launch.shared_bytes to the bytes a launch passes (an expression of the sizes) "
                "and resources.max_shared_bytes to cover it"
            )
    return notes


def _params(
    entry: "PtxEntry", sk: _SourceKernel | None, cu: Path, typedefs: dict[str, str]
) -> tuple[list[NewParam], list[str]]:
    """Each PTX parameter named and typed from the source's signature (through its typedefs),
    else from the entry's mangled name, else from the PTX type (a clear TODO, never a guess
    presented as a fact)."""
    todo: list[str] = []
    out: list[NewParam] = []
    src = sk.params if sk is not None and len(sk.params) == len(entry.params) else None
    if src is None:
        todo.append("the kernel's signature was not found in the source: name and type every param")
    tmpl = _template_types(entry.name, sk.template) if sk is not None else {}
    mangled = _mangled_params(entry.name)
    mangled = mangled if len(mangled) == len(entry.params) else []
    for i, pp in enumerate(entry.params):
        name, ctype, pointer, const = src[i] if src else ("", "", pp.type in (".u64",), False)
        name = name if re.fullmatch(r"[A-Za-z_]\w*", name or "") else f"p{i}"
        ctype = _resolve(tmpl.get(ctype, ctype), typedefs)
        if mangled and ctype not in _CTYPES and ctype not in _VECTORS:
            ctype = mangled[i][0]  # the C++ name says it (template, typedef from a header)
        aggregate = pp.array is not None and pp.type == ".b8"
        if aggregate and not pointer and not (pp.array == 2 and ctype in _HALF_BY_VALUE):
            raise BadInput(
                f"--cu {cu}: {entry.name} takes parameter {i} ({ctype or '?'} {name}) by value "
                f"as a {pp.array}-byte aggregate; a contract's parameters are pointers and "
                "number scalars: pass its fields as separate scalars, or a pointer to it"
            )
        if pointer:
            out.append(_pointer_param(name, ctype, const, sk))
        else:
            dtype = _CTYPES.get(ctype, "") or _PTX_SCALAR.get(pp.type, "u32")
            if pp.array is not None and pp.type == ".b8" and pp.array == 2:
                dtype = _CTYPES.get(ctype, "f16")
            out.append(NewParam(name, "scalar", dtype, guessed="" if ctype else "type from PTX"))
    sizes = [p.name for p in out if p.kind == "scalar" and p.dtype in _INTEGER]
    if not sizes:
        todo.append("no integer scalar parameter: the element count is the size variable n")
    for p in out:
        if p.guessed:
            todo.append(f"kernel.params {p.name}: {p.guessed}")
    return out, todo


def _pointer_param(name: str, ctype: str, const: bool, sk: _SourceKernel | None) -> NewParam:
    """A pointer parameter: its element dtype (a vector type: its lanes), and its intent."""
    dtype = _CTYPES.get(ctype, "")
    guess = ""
    lanes = 1
    if not dtype and ctype in _VECTORS:
        dtype, lanes = _VECTORS[ctype]
        guess = f"{ctype} elements: {lanes} {dtype} each (shape {lanes} * n)"
    if not dtype:
        dtype = "u8"
        guess = (
            f"element type {ctype or '?'} is unknown here: set ptr: to its element dtype "
            "and shape: to its element count (u8 is only a placeholder, not a guess)"
        )
    if const:
        intent = "in"
    else:
        intent, why = _intent(name, sk.body) if sk is not None else ("inout", "check")
        guess = f"{guess}; {why}" if guess else why
    return NewParam(name, "ptr", dtype, intent, guess, lanes)


_THREAD = (
    r"(?:blockIdx\.x\s*\*\s*blockDim\.x|blockDim\.x\s*\*\s*blockIdx\.x)\s*\+\s*threadIdx\.x"
    r"|threadIdx\.x\s*\+\s*(?:blockIdx\.x\s*\*\s*blockDim\.x|blockDim\.x\s*\*\s*blockIdx\.x)"
)


def per_thread(body: str) -> int:
    """Elements each thread handles, read from how the body scales its global thread index:
    ``(blockIdx.x * blockDim.x + threadIdx.x) * 4`` or ``int t = ...; int i = t * 4`` (also
    ``4 * ...`` and ``<< 2``); 1 when it does not (a guess the launch TODO names)."""
    idx = rf"\(\s*(?:{_THREAD})\s*\)"
    names = [m.group(1) for m in re.finditer(rf"\b([A-Za-z_]\w*)\s*=\s*(?:{_THREAD})\s*;", body)]
    for term in [idx, *(rf"\b{re.escape(n)}\b" for n in names)]:
        m = re.search(rf"(?:{term})\s*\*\s*(\d+)\b|\b(\d+)\s*\*\s*(?:{term})", body)
        if m:
            k = int(m.group(1) or m.group(2))
            return k if 1 < k <= 64 else 1
        m = re.search(rf"(?:{term})\s*<<\s*(\d)\b", body)
        if m and 0 < int(m.group(1)) <= 6:
            return 1 << int(m.group(1))
    return 1


def _size_var(params: list[NewParam]) -> str:
    """The main size variable: the first integer scalar parameter (shapes and grid use it), or
    ``n`` when the kernel takes none."""
    return next(iter(_param_sizes(params)), "n")


def _param_sizes(params: list[NewParam]) -> list[str]:
    """Every integer scalar parameter, in order: each is a size variable (``value: NAME``), so
    each is declared in the size domain and bound in the test sizes (the first is the main one,
    the others carry a TODO: a size of their own, a size expression, or a number)."""
    return [p.name for p in params if p.kind == "scalar" and p.dtype in _INTEGER]


def _more_sizes(sc: Scaffold) -> list[str]:
    """The size variables besides the main one: the other integer scalar parameters, then the
    ``--size`` names."""
    return [*_param_sizes(sc.params)[1:], *sc.extra_sizes]


def _yq(word: str) -> str:
    """``word`` as a YAML scalar that reads back as that string: YAML 1.1 reads ``off``, ``on``,
    ``yes``, ``no``, ``null``, ... as booleans or null, so those are quoted."""
    import yaml

    try:
        plain = yaml.safe_load(word) == word
    except yaml.YAMLError:
        plain = False
    return word if plain else f"'{word}'"


def _param_lines(sc: Scaffold, n: str) -> list[str]:
    """The ``kernel.params`` lines of the contract, each guess marked TODO."""
    plines = []
    for p in sc.params:
        name = _yq(p.name)
        if p.kind == "ptr":
            extent = _yq(n) if p.lanes == 1 else f'"{p.lanes} * {n}"'
            line = f"    - {{name: {name}, ptr: {p.dtype}, intent: {p.intent}, shape: [{extent}]}}"
            note = p.guessed or "shape guessed: one element per thread"
            plines.append(f"{line}  # TODO: {note}")
        elif p.dtype in _INTEGER and p.name != n:
            plines.append(
                f"    - {{name: {name}, scalar: {p.dtype}, value: {name}}}  # TODO: a second "
                "size: name it in the shapes it sizes; if it is not a size of its own, give a "
                'size expression (value: "rows * cols") or a number and drop it from size_domain'
            )
        elif p.dtype in _INTEGER:
            plines.append(f"    - {{name: {name}, scalar: {p.dtype}, value: {name}}}")
        elif p.dtype in ("f16", "bf16", "f32", "f64"):
            plines.append(f"    - {{name: {name}, scalar: {p.dtype}, value: random}}")
        else:
            plines.append(f"    - {{name: {name}, scalar: {p.dtype}, value: 0}}  # TODO")
    return plines


def _contract(sc: Scaffold, stem: str, has_domain: bool) -> str:
    n = _size_var(sc.params)
    return (
        _contract_head(sc, stem, n)
        + _contract_kernel(sc, stem, n)
        + (_contract_domain(sc, n) if has_domain else "")
        + _contract_tests(sc, n)
        + _contract_certificate(sc)
    )


def _contract_head(sc: Scaffold, stem: str, n: str) -> str:
    """The marker lines, metadata, equations and proof obligations of the contract."""
    ns = sc.function.capitalize()
    b = sc.block
    return f"""# {MARKER}: written by `ledger new` from {stem}.cu. Fill in every TODO, then
# delete these two lines (contract.lint fails while any file of the bundle carries the marker).
metadata:
  version: "0.1.0"
  description: "TODO: what {sc.function} computes"
  references: ["{stem}.cu"]
equations:
  {sc.function}:
    formula: "TODO: the kernel's result, e.g. y_i = a * x_i + y_i"
proof_obligations:
  - type: bound
    property: "Every access is in bounds"
    formal: "b < ceil_div({n}, {b}) and t < {b} -> b*{b} + t < {n} + {b} (guard i < {n})"
    lean: {{theorem: {ns}.guard_in_bounds, module: {ns}, status: sorry}}
"""


def _contract_kernel(sc: Scaffold, stem: str, n: str) -> str:
    """The contract's ``kernel:`` section: build, parameters, launch and resources."""
    b = sc.block
    regs = f"max_registers: {sc.max_registers}, " if sc.max_registers else ""
    regs_note = (
        f"  # ptxas measured {sc.registers} registers; the budget leaves headroom (+25 %, "
        "a multiple of 8)"
        if sc.max_registers
        else ""
    )
    shared = sc.shared_bytes if sc.shared_bytes is not None else 0
    build = ", ".join(
        [f"-arch={TARGET}", "-ptx", *(_yq(f) for f in sc.nvcc_flags), "-o", f"{stem}.ptx",
         f"{stem}.cu"]
    )
    params = "\n".join(_param_lines(sc, n))
    return f"""kernel:
  name: {sc.function}
  version: "0.1.0"
  entry: {sc.entry}
  target: {TARGET}
  ptx: {stem}.ptx
  source: {stem}.cu
  build: [nvcc, {build}]
  futhark: {stem}.fut
  reference: {{file: reference.py, function: {sc.function}}}
  params:
{params}
  launch:
    grid: ["ceil_div({n}, {b * sc.per_thread})", 1, 1]  # TODO: {_launch_note(sc.per_thread)}
    block: [{b}, 1, 1]
    shared_bytes: 0
  resources: {{{regs}max_shared_bytes: {shared}, spills: forbid}}{regs_note}
"""


def _contract_domain(sc: Scaffold, n: str) -> str:
    """The ``kernel.size_domain`` lines: the main size, each other integer scalar parameter and
    each extra size, all TODO."""
    return (
        f"  size_domain:\n    {_yq(n)}: {{min: 1, max: 1048576}}  # TODO: the sizes it supports\n"
        + "".join(
            f"    {_yq(x)}: {{min: 1, max: 1048576}}  # TODO: its domain (a size parameter of "
            "the kernel)\n"
            for x in _param_sizes(sc.params)[1:]
        )
        + "".join(
            f"    {_yq(x)}: {{min: 1, max: 1048576}}  # TODO: its domain; name it in the "
            "shape of the parameters it sizes (it is no kernel parameter)\n"
            for x in sc.extra_sizes
        )
    )


def _contract_tests(sc: Scaffold, n: str) -> str:
    """The one falsification test, its sizes at the edges of one block's elements."""
    u = sc.block * sc.per_thread  # elements one block covers
    extra = "".join(f", {_yq(x)}: {{v}}" for x in _more_sizes(sc))
    sizes = ", ".join(
        f"{{{_yq(n)}: {v}{extra.format(v=v)}}}"
        for v in (1, u - 1 if u > 1 else 2, u + 1, 3 * u + 7)
    )
    sizes_note = "  # TODO: bind each size to a value that fits the test" if _more_sizes(sc) else ""
    return f"""falsification_tests:
  - id: FALSIFY-{sc.function.upper().replace("_", "-")}-001
    rule: "matches the reference at the edges of the launch shape"
    prediction: "outputs equal the reference; each element written once; no access out of bounds"
    test: "GPU (CuPy) or PTX interpreter over seeded random inputs"
    if_fails: "indexing bug, missing guard, or wrong operation"
    sizes: [{sizes}]{sizes_note}
    seed: 1
    inputs: {{low: -1.0, high: 1.0}}
    tolerance: {{ulp: 0}}  # TODO: the rounding the kernel promises
    properties: [reference, coverage, bounds]
"""


def _contract_certificate(sc: Scaffold) -> str:
    """The certificate: each property tied to the scaffold's one (sorry) theorem."""
    ns = sc.function.capitalize()
    return f"""certificate:
  - obligation: PO1
    theorem: {ns}.guard_in_bounds
    property: coverage
    statement: "TODO"
  - obligation: PO2
    theorem: {ns}.guard_in_bounds
    property: bounds
    statement: "TODO"
  - obligation: PO8
    theorem: {ns}.guard_in_bounds
    property: reference
    statement: "TODO"
"""


def _launch_note(k: int) -> str:
    if k == 1:
        return "one thread per element assumed (no scaling of the thread index seen)"
    return f"{k} elements per thread, read from the source's thread index * {k}"


def _reference(sc: Scaffold) -> str:
    ins = [p.name for p in sc.params if p.kind == "scalar" or p.intent != "out"]
    outs = [p.name for p in sc.params if p.kind == "ptr" and p.intent != "in"]
    return f'''"""{MARKER}: the reference of {sc.function}, written by `ledger new`.

Numpy only. It runs in the verifier's sandbox (no network, no files but the bundle): it gets
``inputs`` (every in/inout pointer parameter as a flat array, every scalar as a 0-d array:
{", ".join(ins) or "none"}) and ``sizes`` (the test's size bindings), and returns every out/inout
pointer parameter by name ({", ".join(outs) or "none"}). Compute in float64 and let the verifier
cast to the parameter's dtype (bf16 buffers arrive as float32 values and are rounded back).
Delete the marker line when it is done.
"""

import numpy as np


def {sc.function}(inputs, sizes):
    raise NotImplementedError("TODO: compute {", ".join(outs) or "the outputs"} with numpy")
    return {{{", ".join(f"{o!r}: np.zeros(0)" for o in outs)}}}
'''


def _lean(sc: Scaffold) -> str:
    ns = sc.function.capitalize()
    n = _size_var(sc.params)
    b = sc.block
    return f"""/- {MARKER}: proofs of {sc.function}'s obligations, written by `ledger new`.
  Replace every `sorry` with a proof and delete this marker. -/
namespace {ns}

/-- PO2 (bounds): a thread of the grid computes an index below {n} + {b}; a guard cuts the rest. -/
theorem guard_in_bounds ({n} b t : Nat) (hb : b < ({n} + {b - 1}) / {b}) (ht : t < {b}) :
    b * {b} + t < {n} + {b} := by
  sorry

end {ns}
"""


def _futhark(sc: Scaffold) -> str:
    """The Futhark stub: the entry takes every size the arrays are shaped by as a size parameter
    (``[total]``), every other integer scalar as an argument, each array with its contract
    shape (one element per thread: ``[total]``; a vector type's ``k * n`` elements: ``[]`` and a
    TODO, which Futhark cannot take as a size parameter), and says what the scaffold cannot know."""
    n = _size_var(sc.params)
    outs = [p for p in sc.params if p.kind == "ptr" and p.intent != "in"]
    arrays = [p for p in sc.params if p.kind == "ptr" and p.intent != "out"]
    shaped = any(p.lanes == 1 for p in [*arrays, *outs[:1]])

    def typ(p: NewParam) -> str:
        return f"{f'[{n}]' if p.lanes == 1 else '[]'}{_FUT.get(p.dtype, 'f32')}"

    args = " ".join(
        f"({p.name}: {typ(p) if p.kind == 'ptr' else _FUT.get(p.dtype, 'f32')})"
        for p in sc.params
        if p in arrays or (p.kind == "scalar" and p.name != n)
    )
    notes = [
        f"--   {p.name}: {p.lanes} * {n} {p.dtype} elements (a {p.lanes}-lane vector type)"
        for p in [*arrays, *outs] if p.lanes != 1
    ]  # fmt: skip
    notes += [
        f"--   {x}: a size no array here is shaped by yet; where the contract's shape names "
        f"it, make it a size parameter [{x}] and drop the ({x}: ...) argument"
        for x in _param_sizes(sc.params)[1:]
    ]
    notes += [
        f"--   {x}: a size that is no kernel parameter; name it in the array types it sizes"
        for x in sc.extra_sizes
    ]
    todo = (
        f"-- TODO: each array's size is its contract shape (guessed: [{n}], one element per "
        "thread)\n" + "".join(f"{line}\n" for line in notes)
    )
    ret = typ(outs[0]) if outs else "f32"
    size = f" [{n}]" if shaped else ""
    return f"""-- {MARKER}: the specification of {sc.function}, written by `ledger new`.
-- Write the entry's body and test cases, then delete this marker line.
{todo}-- ==
-- entry: {sc.function}

entry {sc.function}{size} {args} : {ret} =
  ???
"""


_FUT = {
    "f16": "f16",
    "f32": "f32",
    "f64": "f64",
    "s32": "i32",
    "u32": "u32",
    "s64": "i64",
    "u64": "u64",
    "u8": "u8",
    "s8": "i8",
}


def _write(
    sc: Scaffold,
    stem: str,
    source: str,
    ptx: bytes,
    make_contract: "Callable[[bool], str] | None" = None,
    source_name: str = "",
) -> None:
    """Write the bundle; ``make_contract(has_domain)`` and ``source_name`` default to the CUDA
    path's (``ledger_cli.scaffold_triton`` gives its own)."""
    from ledger.core.errors import ContractError
    from verify.contract import load_contract

    if make_contract is None:
        make_contract = lambda has_domain: _contract(sc, stem, has_domain)  # noqa: E731
    contract = make_contract(True)
    try:
        load_contract(contract.encode())
    except ContractError as e:
        if "size_domain" not in str(e):
            raise CannotCheck(f"ledger new wrote a contract the reader refuses: {e}") from e
        contract = make_contract(False)  # a verifier without size domains (issue 15)
        load_contract(contract.encode())
    files = {
        "contract.yaml": contract,
        source_name or f"{stem}.cu": source,
        "reference.py": _reference(sc),
        f"{stem}.lean": _lean(sc),
        f"{stem}.fut": _futhark(sc),
    }
    tmp = Path(tempfile.mkdtemp(prefix=".ledger-new-", dir=sc.directory.parent))
    try:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        (tmp / f"{stem}.ptx").write_bytes(ptx)
        if sc.directory.is_dir():
            sc.directory.rmdir()  # empty (checked), replaced by the finished scaffold
        tmp.rename(sc.directory)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadInput(f"{sc.directory}: could not write the bundle: {e}") from e
    sc.files = sorted([*files, f"{stem}.ptx"])
    sc.todo += [
        *(f"size {x}: name it in the shapes it sizes, narrow its size_domain, bind it in the "
          "falsification sizes" for x in _more_sizes(sc)),
        "contract.yaml: every TODO (description, formula, shapes, launch, tolerance, statements)",
        "reference.py: the numpy reference",
        f"{stem}.lean: the proofs (no sorry), with status: proved in the contract",
        f"{stem}.fut: the specification and its test cases",
        f"remove the {MARKER!r} line from every file",
    ]
