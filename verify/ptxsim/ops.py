"""Instruction dispatch: opcode root to the module that models it (SPEC 8, issue 4).

Control flow (bra, ret, exit, bar.sync / barrier.sync) becomes a ``CInstr`` kind the machine
handles; ``membar`` / ``fence`` change no value because the interpreter runs one sequentially
consistent memory, but gpu- and sys-scope ones feed the race detector's hand-off between blocks
(``handoff.fence_op``; docs/ptx-interpreter.md). Anything else not listed stops the launch
with ``UnsupportedPtx``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from verify.ptxsim import (
    ops_alu,
    ops_carry,
    ops_cvt,
    ops_float,
    ops_intx,
    ops_match,
    ops_mem,
    ops_warp,
)
from verify.ptxsim.handoff import fence_op
from verify.ptxsim.ops_alu import ptype
from verify.ptxsim.parser import Imm, Sym
from verify.ptxsim.program import CInstr, Ctx, Fn, Kind
from verify.ptxsim.values import Idx, is_float, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

FLOAT_ROOTS = {"rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "fma"}
ARITH_ROOTS = {"add", "sub", "mul", "mad", "div", "rem", "min", "max", "abs", "neg", "and", "or",
               "xor", "not", "cnot", "shl", "shr", "mul24"}


def _noop(m: Machine, idx: Idx) -> None:
    return None


def _arith(ctx: Ctx) -> Fn:
    t = ptype(ctx.ins.parts)
    if is_float(t) or t in (".f16x2", ".bf16", ".bf16x2"):
        return ops_float.float_op(ctx)
    if "cc" in ctx.ins.parts:
        return ops_carry.carry(ctx)
    return ops_alu.int_arith(ctx)


BUILDERS: dict[str, Callable[[Ctx], Fn]] = {
    **{r: _arith for r in ARITH_ROOTS},
    **{r: ops_float.float_op for r in FLOAT_ROOTS},
    "setp": ops_alu.setp, "set": ops_alu.set_, "selp": ops_alu.selp, "mov": ops_alu.mov,
    "popc": ops_alu.bits_ops, "clz": ops_alu.bits_ops, "brev": ops_alu.bits_ops,
    "bfe": ops_alu.bits_ops, "bfi": ops_alu.bits_ops, "prmt": ops_alu.bits_ops,
    "lop3": ops_alu.bits_ops,
    "cvt": ops_cvt.cvt,
    "ld": ops_mem.ld, "ldu": ops_mem.ld, "st": ops_mem.st, "cvta": ops_mem.cvta,
    "atom": ops_mem.atom, "red": ops_mem.atom, "cp": ops_mem.cp_async,
    "shfl": ops_warp.shfl, "vote": ops_warp.vote, "ldmatrix": ops_warp.ldmatrix,
    "mma": ops_warp.mma, "activemask": ops_warp.activemask, "redux": ops_warp.redux,
    "testp": ops_float.testp, "copysign": ops_float.copysign,
    "addc": ops_carry.carry, "subc": ops_carry.carry, "madc": ops_carry.carry,
    "shf": ops_intx.shf, "bfind": ops_intx.bfind, "sad": ops_intx.sad,
    **{r: ops_intx.vop4 for r in ops_intx.VOP4}, "nanosleep": ops_intx.nanosleep,
    "match": ops_match.match, "assertfail": ops_intx.assertfail,
    "dp4a": ops_intx.dot, "dp2a": ops_intx.dot,
}


def compile_instr(ctx: Ctx) -> CInstr:
    """The compiled instruction with the registers its active lanes read and write (the
    machine's per-lane definedness tracking uses them; the guard is read by every lane)."""
    ci = _compile(ctx)
    if ctx.ins.guard is not None and ctx.ins.guard.name != "_":
        ci.guard_reg = ctx.ins.guard.name
    ci.reads = tuple(ctx.reads)
    ci.writes = tuple(ctx.writes)
    return ci


def _compile(ctx: Ctx) -> CInstr:
    ins = ctx.ins
    parts = ins.parts
    root = parts[0]
    guard = ctx.get(ins.guard, ".pred") if ins.guard is not None else None
    ctx.reads.clear()  # the guard is checked separately, over every lane of the group
    if root == "bra":
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Sym):
            raise unsupported(ins, "indirect branch")
        return CInstr(ins.line, ins, Kind.BRANCH, _noop, guard, target=-2)
    if root in ("ret", "exit"):
        return CInstr(ins.line, ins, Kind.EXIT, _noop, guard)
    if root in ("bar", "barrier") and (len(parts) == 1 or parts[1] in ("sync", "aligned")
                                       or parts[1:] == ["cta", "sync"]):
        if any(p in ("arrive", "red") for p in parts):
            raise unsupported(ins)
        ops = ins.operands
        count = None
        if ops and not isinstance(ops[0], Imm):
            raise unsupported(ins, "barrier id in a register")
        if len(ops) > 1:
            if not isinstance(ops[1], Imm):
                raise unsupported(ins, "barrier thread count in a register")
            count = int(ops[1].text, 0)
        return CInstr(ins.line, ins, Kind.BARRIER, _noop, guard, bar_count=count)
    if root in ("bar", "barrier") and len(parts) > 1 and parts[1] == "warp":
        return CInstr(ins.line, ins, Kind.NORMAL, ops_warp.warp_sync(ctx), guard)
    if root in ("membar", "fence"):
        if any(p.startswith("proxy") for p in parts):
            raise unsupported(ins)
        return CInstr(ins.line, ins, Kind.NORMAL, fence_op(parts), guard)
    if root == "cp" and (len(parts) < 2 or parts[1] != "async" or len(parts) < 3):
        raise unsupported(ins)
    b = BUILDERS.get(root)
    if b is None:
        raise unsupported(ins)
    return CInstr(ins.line, ins, Kind.NORMAL, b(ctx), guard)
