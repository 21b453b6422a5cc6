"""The compiled form of one ``.entry`` (SPEC 8, issue 4): ``Program``, its instructions
(``CInstr``, each of one ``Kind``) and ``Ctx``, which the ``ops_*`` modules use to compile operands.
``verify.ptxsim.compiler.build`` fills a ``Program``:
1. lay out the state spaces: kernel parameters in a byte block, static shared variables (module
   and entry level) from shared address 0, dynamic ``.extern .shared`` after them, ``.local``
   variables per thread from local address 0;
2. give every register its storage dtype from its ``.reg`` declaration;
3. turn each instruction into a ``CInstr``: a kind (normal, branch, exit, barrier), a guard
   predicate getter and a closure ``fn(machine, idx)`` built by the ``ops_*`` modules;
   an instruction nobody models raises ``UnsupportedPtx`` naming it and its line at launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verify.ptxsim.errors import UnsupportedPtx
from verify.ptxsim.machine import Kind as Kind  # the machine's enum, named here by the ops
from verify.ptxsim.machine import Machine
from verify.ptxsim.parser import (
    Addr,
    Entry,
    Imm,
    Instr,
    Operand,
    Reg,
    Sym,
    Vec,
)
from verify.ptxsim.values import (
    DTYPE,
    Getter,
    Idx,
    Setter,
    imm_getter,
    reg_getter,
    reg_setter,
    unsupported,
)

Fn = Callable[[Machine, Idx], None]

SPECIAL = {
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x", "%ctaid.y",
    "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid", "%warpid", "%nwarpid",
    "%warpsize", "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge",
}

# the PTX ISA's predefined constants ("Predefined identifiers"): ``WARP_SZ`` is ``warpSize``
CONSTANTS = {"WARP_SZ": 32}

# timers: the launch's count of warp-instructions so far (``Machine.warp_instr``), so two reads
# by one thread are strictly increasing and a run is deterministic; %clock is its low 32 bits
CLOCKS = {"%clock": 0xFFFF_FFFF, "%clock64": 2**64 - 1, "%globaltimer": 2**64 - 1}


def _clock(name: str, t: str) -> Getter:
    """Getter of a timer register: not real time, a counter that only moves forward."""
    mask, dt = CLOCKS[name], DTYPE[t]
    return lambda m, idx: np.uint64(m.warp_instr & mask).astype(dt)


@dataclass
class CInstr:
    line: int
    ins: Instr
    kind: Kind
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
            if op.name in CLOCKS:
                return _clock(op.name, t)
            if op.name.startswith("%") and "." in op.name:
                raise unsupported(self.ins, f"special register {op.name}")
            g = reg_getter(op, t, self.store(op.name))
            if op.name not in self.reads:
                self.reads.append(op.name)
            return g
        if isinstance(op, Imm):
            return imm_getter(op, t, self.ins)
        if isinstance(op, Sym) and op.name in CONSTANTS:
            val = np.array(CONSTANTS[op.name], np.uint64).astype(DTYPE[t])[()]
            return lambda m, idx: val
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
