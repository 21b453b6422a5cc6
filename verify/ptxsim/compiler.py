"""Compile one parsed ``.entry`` into the ``Program`` the machine runs (SPEC 8, issue 4).

It sits above both ``verify.ptxsim.program`` (the compiled form) and ``verify.ptxsim.ops`` (one
closure per instruction, built by the ``ops_*`` modules), so neither imports the other back.
"""

from __future__ import annotations

import math
import re

import numpy as np

from verify.ptxsim.errors import UnsupportedPtx
from verify.ptxsim.inline import inline_calls
from verify.ptxsim.ops import compile_instr
from verify.ptxsim.parser import Entry, Imm, Instr, Module, Sym, Var, type_size
from verify.ptxsim.program import Ctx, Program
from verify.ptxsim.values import DTYPE, imm_value, storage_dtype, unsupported


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


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
