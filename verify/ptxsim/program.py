"""Compile one parsed ``.entry`` into closures the machine runs (SPEC 8, issue 4).

Steps:
1. lay out the state spaces: kernel parameters in a byte block, static shared variables (module
   and entry level) from shared address 0, dynamic ``.extern .shared`` after them, ``.local``
   variables per thread from local address 0;
2. give every register its storage dtype from its ``.reg`` declaration;
3. turn each instruction into a ``CInstr``: a kind (normal, branch, exit, barrier), a guard
   predicate getter and a closure ``fn(machine, idx)`` built by the ``ops_*`` modules;
   an instruction nobody models raises ``UnsupportedPtx`` naming it and its line at launch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.errors import UnsupportedPtx
from verify.ptxsim.parser import (
    Addr,
    Entry,
    Imm,
    Instr,
    Module,
    Operand,
    Reg,
    Sym,
    Var,
    Vec,
    type_size,
)
from verify.ptxsim.values import (
    DTYPE,
    Getter,
    Idx,
    Setter,
    imm_getter,
    imm_value,
    reg_getter,
    reg_setter,
    storage_dtype,
    unsupported,
)

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

Fn = Callable[["Machine", Idx], None]

SPECIAL = {
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y",
    "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid", "%warpid", "%nwarpid",
    "%warpsize", "%lanemask_eq",
}


@dataclass
class CInstr:
    line: int
    ins: Instr
    kind: int
    fn: Fn
    guard: Getter | None = None
    target: int = -1
    bar_count: int | None = None
    reads: tuple[str, ...] = ()  # registers the active lanes read (definedness checks)
    writes: tuple[str, ...] = ()  # registers the active lanes write (become defined)
    guard_reg: str | None = None  # the guard predicate, read by every lane of the group


@dataclass
class Program:
    entry: Entry
    code: list[CInstr] = field(default_factory=list)
    store_types: dict[str, Any] = field(default_factory=dict)
    symbols: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (space, addr)
    static_shared: int = 0
    local_size: int = 0
    param_size: int = 0
    param_offsets: list[int] = field(default_factory=list)
    shared_granule: int = 1  # gcd of the widths of every access that may reach shared memory
    # module-scope .global / .const variables: (name, intent "var" | "const", address, bytes)
    module_vars: list[tuple[str, str, int, bytes]] = field(default_factory=list)

    def code_at_line(self, line: int) -> str:
        """The opcode at a PTX line (for messages)."""
        for ci in self.code:
            if ci.line == line:
                return ci.ins.opcode
        return "?"


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class Ctx:
    """Operand compilation for one instruction of one program."""

    def __init__(self, prog: Program, ins: Instr) -> None:
        self.prog = prog
        self.ins = ins
        self.reads: list[str] = []  # registers read by the active lanes (filled by get/address)
        self.writes: list[str] = []  # registers written (filled by set)

    def store(self, name: str) -> Any:
        st = self.prog.store_types.get(name)
        if st is None:
            raise UnsupportedPtx(f"undeclared register {name} at PTX line {self.ins.line}")
        return st

    def _reg(self, op: Operand) -> Operand:
        """A bare name that is a declared register (inline asm declares some without '%')."""
        if isinstance(op, Sym) and op.name in self.prog.store_types:
            return Reg(op.name)
        return op

    def get(self, op: Operand, t: str) -> Getter:
        op = self._reg(op)
        if isinstance(op, Reg):
            if op.name in SPECIAL:
                name, dt = op.name, DTYPE[t]

                def sp(m: Machine, idx: Idx) -> Any:
                    v = m.special[name]
                    if isinstance(v, np.ndarray):
                        v = v if idx is None else v[m.sl]
                        return v.astype(dt) if v.dtype != dt else v
                    return dt(v)
                return sp
            if (op.name.startswith("%") and "." in op.name) or op.name in ("%clock", "%clock64"):
                raise unsupported(self.ins, f"special register {op.name}")
            g = reg_getter(op, t, self.store(op.name))
            if op.name not in self.reads:
                self.reads.append(op.name)
            return g
        if isinstance(op, Imm):
            return imm_getter(op, t, self.ins)
        if isinstance(op, Sym):
            space, addr = self.symbol(op.name)
            if space == "param":
                raise unsupported(self.ins, f"address of kernel parameter {op.name}")
            val = np.array(addr, np.uint64).astype(DTYPE[t])[()]
            return lambda m, idx: val
        raise unsupported(self.ins, f"operand {op}")

    def set(self, op: Operand, t: str, copy: bool = False) -> Setter:
        op = self._reg(op)
        if not isinstance(op, Reg) or op.name in SPECIAL:
            raise unsupported(self.ins, f"destination {op}")
        if op.name == "_":
            return lambda m, idx, v: None
        s = reg_setter(op, t, self.store(op.name), copy)
        if op.name not in self.writes:
            self.writes.append(op.name)
        return s

    def symbol(self, name: str) -> tuple[str, int]:
        if name not in self.prog.symbols:
            raise unsupported(self.ins, f"symbol {name} (only kernel parameters, shared and "
                              "local variables are modelled)")
        return self.prog.symbols[name]

    def address(self, op: Operand) -> tuple[str | None, Getter]:
        """The state space named by a symbol base (or None) and a getter of uint64 addresses."""
        if not isinstance(op, Addr):
            raise unsupported(self.ins, f"address operand {op}")
        off = np.uint64(op.offset & (2**64 - 1))
        if op.base is None:
            return None, lambda m, idx: off
        if isinstance(op.base, Sym) and op.base.name in self.prog.store_types:
            op = Addr(Reg(op.base.name), op.offset)
        base = op.base
        if isinstance(base, Sym):
            space, addr = self.symbol(base.name)
            val = np.uint64((addr + op.offset) & (2**64 - 1))
            return space, lambda m, idx: val
        assert base is not None
        st = self.store(base.name)
        if base.name not in self.reads:
            self.reads.append(base.name)
        g = reg_getter(base, ".u64" if np.dtype(st).itemsize == 8 else ".u32", st)
        if np.dtype(st).itemsize == 8:
            return None, lambda m, idx: g(m, idx) + off
        return None, lambda m, idx: g(m, idx).astype(np.uint64) + off

    def vec_items(self, op: Operand) -> tuple[Reg | Imm, ...]:
        op = self._reg(op)
        if isinstance(op, Vec):
            return op.items
        if isinstance(op, Reg | Imm):
            return (op,)
        raise unsupported(self.ins, f"operand {op}")


def _granule(entry: Entry) -> int:
    """Bytes of shared memory that every access covers whole (a power of two up to 16), so race
    and initialisation tracking per granule equals tracking per byte: the gcd of the element
    widths of all loads, stores, atomics and copies that may touch shared memory."""
    g = 0
    for ins in entry.instrs:
        parts = ins.parts
        root = parts[0]
        if root in ("ld", "ldu", "st", "atom", "red"):
            if any(p in ("global", "local", "param", "const") for p in parts):
                continue
            t = next(("." + p for p in reversed(parts) if "." + p in DTYPE), ".b8")
            w = 1 if t == ".pred" else type_size(t)
        elif root == "ldmatrix":
            w = 8
        elif root == "cp" and len(parts) > 2 and parts[2] in ("ca", "cg"):
            size = ins.operands[2] if len(ins.operands) > 2 else None
            w = int(size.text, 0) if isinstance(size, Imm) else 1
        else:
            continue
        g = math.gcd(g, w)
    return min(g, 16) if g else 1


VAR_BASE = 0x8000_0000  # module .global/.const variables, below the launch's buffers


def _init_bytes(v: Var) -> bytes:
    """The initial bytes of a module variable: its initialiser (integers or 0f/0d float
    literals, scalar or brace list), zero-filled; anything else is refused."""
    out = bytearray(v.size)
    if v.init is None:
        return bytes(out)
    text = v.init.strip()
    items = [x.strip() for x in text.strip("{}").split(",")] if text.startswith("{") else [text]
    t = v.ptx_type if v.ptx_type != ".pred" else ".b8"
    w = type_size(t)
    if len(items) * w > v.size:
        raise UnsupportedPtx(f"initialiser of {v.name} is longer than the variable")
    for i, it in enumerate(items):
        if not re.fullmatch(r"[-+]?(0[fFdDxX][0-9a-fA-F]+|\d+(\.\d*)?([eE][-+]?\d+)?)U?", it):
            raise UnsupportedPtx(f"initialiser {it!r} of module variable {v.name} (only numbers "
                                 "are modelled)")
        val = imm_value(it, t, Instr(0, "init", None, ()))
        out[i * w:(i + 1) * w] = np.asarray(val).tobytes()
    return bytes(out)


def build(module: Module, entry: Entry) -> Program:
    from verify.ptxsim.inline import inline_calls

    entry = inline_calls(module, entry)
    prog = Program(entry)
    for prefix, typ, count in entry.reg_ranges:
        st = storage_dtype(typ)
        for i in range(count):
            prog.store_types[f"{prefix}{i}"] = st
    for name, typ in entry.regs.items():
        prog.store_types[name] = storage_dtype(typ)
    off = 0
    for p in entry.params:
        off = _align(off, max(p.align, 1))
        prog.symbols[p.name] = ("param", off)
        prog.param_offsets.append(off)
        off += p.size
    prog.param_size = off
    shared = 0
    extern: list[str] = []
    max_align = 16
    vaddr = VAR_BASE
    param_size: dict[str, Var] = {}  # call-site .param variables: one slot per name, largest
    for v in entry.vars:
        if v.space == "param" and v.size > getattr(param_size.get(v.name), "size", -1):
            param_size[v.name] = v
    for v in module.vars:
        if v.space in ("global", "const"):
            prog.symbols[v.name] = ("global", vaddr)
            prog.module_vars.append((v.name, "var" if v.space == "global" else "const", vaddr,
                                     _init_bytes(v)))
            vaddr += _align(max(v.size, 1), 256) + 4096  # a red zone after each
    for v in list(module.vars) + entry.vars + list(param_size.values()):
        if v.space == "shared":
            if v.extern or v.size == 0:
                extern.append(v.name)
                max_align = max(max_align, v.align)
                continue
            shared = _align(shared, v.align)
            prog.symbols[v.name] = ("shared", shared)
            shared += v.size
        elif v.space in ("local", "param") and (v.space == "local" or param_size.get(v.name) is v):
            # call-site .param variables live in per-thread local memory (see inline.py)
            prog.local_size = _align(prog.local_size, v.align)
            prog.symbols[v.name] = ("local", prog.local_size)
            prog.local_size += v.size
    shared = _align(shared, max_align)
    for name in extern:
        prog.symbols[name] = ("shared", shared)
    prog.static_shared = shared
    from verify.ptxsim.ops import compile_instr

    for ins in entry.instrs:
        prog.code.append(compile_instr(Ctx(prog, ins)))
    prog.shared_granule = _granule(entry)
    for ci in prog.code:
        if ci.target == -2:
            label = ci.ins.operands[-1]
            assert isinstance(label, Sym)
            if label.name not in entry.labels:
                raise unsupported(ci.ins, f"branch to unknown label {label.name}")
            ci.target = entry.labels[label.name]
    return prog
