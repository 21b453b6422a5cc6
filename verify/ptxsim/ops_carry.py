"""Extended-precision integer arithmetic: the carry chain (PTX ISA "Extended-Precision Integer
Arithmetic Instructions": ``add.cc``, ``addc``, ``sub.cc``, ``subc``, ``mad.cc``, ``madc``).

Each thread has one carry flag, the condition code's ``CC.CF``. It is modelled as a hidden
predicate register named ``CC.CF``, so it is per thread, predicated and divergent writes only
touch the lanes that run them, and register definedness tracking reports an ``addc`` whose
carry no earlier ``.cc`` instruction set on that lane. The ISA's definitions, for ``.u32 .s32
.u64 .s64`` (signed and unsigned behave the same: the flag is the unsigned carry of the bits):

* ``add.cc``: ``d = a + b``, carry-out to CF; ``addc{.cc}``: ``d = a + b + CF``.
* ``sub.cc``: ``d = a - b``, borrow-out to CF; ``subc{.cc}``: ``d = a - (b + CF)``; the
  borrow is 1 when the exact difference is negative.
* ``mad{.lo,.hi}.cc``: ``d = (a * b)<lo or hi half> + c``, carry-out of that addition;
  ``madc{.lo,.hi}{.cc}``: ``d = (a * b)<half> + c + CF``.

nvcc emits these for the f64 ``sin``/``cos``/``tan`` argument reduction (a 64 x 64-bit product
built from 32-bit ``mad.lo.cc``/``madc.hi.cc``) and for 128-bit arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.ops_alu import _mulhi, ptype
from verify.ptxsim.parser import Reg, type_size
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, UBITS, Getter, Idx, reg_getter, reg_setter, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

CF = "CC.CF"  # the hidden per-thread carry flag register
TYPES = (".u32", ".s32", ".u64", ".s64")


def _flag(ctx: Ctx, read: bool, write: bool) -> tuple[Getter | None, Any]:
    """Getter and setter of the carry flag, registered as a register the instruction reads or
    writes (so definedness tracking sees it)."""
    ctx.prog.store_types.setdefault(CF, np.bool_)
    get = set_ = None
    if read:
        get = reg_getter(Reg(CF), ".pred", np.bool_)
        if CF not in ctx.reads:
            ctx.reads.append(CF)
    if write:
        set_ = reg_setter(Reg(CF), ".pred", np.bool_)
        if CF not in ctx.writes:
            ctx.writes.append(CF)
    return get, set_


def add_carry(a: Any, b: Any, cin: Any, bits: int) -> tuple[Any, Any]:
    """``a + b + cin`` on unsigned ``bits``-bit values: (sum modulo 2^bits, carry-out)."""
    ut = UBITS[bits // 8]
    a, b = np.asarray(a).astype(ut), np.asarray(b).astype(ut)
    c = np.asarray(cin).astype(ut)
    s1 = a + b
    s2 = s1 + c
    return s2, (s1 < a) | (s2 < s1)


def sub_borrow(a: Any, b: Any, bin_: Any, bits: int) -> tuple[Any, Any]:
    """``a - (b + bin)`` on unsigned ``bits``-bit values: (difference modulo 2^bits,
    borrow-out: the exact difference is negative)."""
    ut = UBITS[bits // 8]
    a, b = np.asarray(a).astype(ut), np.asarray(b).astype(ut)
    c = np.asarray(bin_).astype(bool)
    return a - b - c.astype(ut), (a < b) | ((a == b) & c)


def _product(parts: list[str], t: str) -> Callable[[Any, Any], Any]:
    """The half of ``a * b`` a ``mad``/``madc`` adds: ``.hi`` or ``.lo`` (the default)."""
    if "hi" in parts:
        return lambda x, y: _mulhi(x, y, t)
    return lambda x, y: x * y


def carry(ctx: Ctx) -> Fn:
    """``add.cc``, ``addc``, ``sub.cc``, ``subc``, ``mad.cc``, ``madc`` (any ``.cc``)."""
    ins = ctx.ins
    parts = ins.parts
    root, t = parts[0], ptype(parts)
    known = {root, "cc", "lo", "hi", t[1:]}
    if t not in TYPES or any(p not in known for p in parts) or (
            root in ("add", "sub", "addc", "subc") and ("lo" in parts or "hi" in parts)):
        raise unsupported(ins)
    bits = 8 * type_size(t)
    cin, cout = _flag(ctx, root in ("addc", "subc", "madc"), "cc" in parts)
    ops = ins.operands
    d = ctx.set(ops[0], t)
    ut = DTYPE[".u" + t[2:]]
    first: Getter
    if root in ("mad", "madc"):
        x, y, second = ctx.get(ops[1], t), ctx.get(ops[2], t), ctx.get(ops[3], t)
        prod = _product(parts, t)

        def first(m: Machine, idx: Idx) -> Any:
            return prod(x(m, idx), y(m, idx))
    else:
        first, second = ctx.get(ops[1], t), ctx.get(ops[2], t)
    op = sub_borrow if root in ("sub", "subc") else add_carry

    def fn(m: Machine, idx: Idx) -> None:
        a = np.asarray(first(m, idx)).astype(DTYPE[t]).view(ut)
        b = np.asarray(second(m, idx)).astype(DTYPE[t]).view(ut)
        c = cin(m, idx) if cin is not None else np.bool_(False)
        r, flag = op(a, b, c, bits)
        d(m, idx, np.asarray(r).view(DTYPE[t]))
        if cout is not None:
            cout(m, idx, flag)
    return fn
