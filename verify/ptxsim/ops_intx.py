"""Integer instructions behind CUDA intrinsics, and the no-effect ones (PTX ISA "Integer
Arithmetic", "Logic and Shift", "SIMD Video", "Miscellaneous" instructions).

* ``shf.l/.r .wrap/.clamp .b32`` (``__funnelshift_l/r/lc/rc``): shift the 64-bit ``[b:a]`` by
  ``n = clamp ? min(c, 32) : c & 31``; ``.l`` keeps the high 32 bits, ``.r`` the low 32.
* ``bfind{.shiftamt} .u32 .s32 .u64 .s64`` (``__ffs``, ``__clz``-style code): the position of
  the most significant non-sign bit (negative signed inputs are inverted first), 0xFFFFFFFF when
  there is none; ``.shiftamt`` gives ``msb - position`` instead.
* ``sad`` (``__sad``, ``__usad``): ``d = c + |a - b|`` in the type, wrapping.
* ``vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4`` (``__vabsdiffu4`` ...) with the default byte
  selectors and mask, ``.sat`` and the ``.add`` accumulate.
* ``dp4a.atype.btype`` and ``dp2a.lo/.hi.atype.btype`` (``__dp4a``, ``__dp2a_lo/hi``, and what
  nvcc makes of a plain C int8 dot product), every signedness form: ``c`` plus the products of
  byte (or 16-bit) fields, each field sign-extended when its operand type is ``.s32``, wrapping.
* ``nanosleep``: no effect on results (its operand is still read, so an undefined one is
  reported). ``assertfail``: the interpreter's form of a call to ``__assertfail`` (see
  ``verify.ptxsim.inline``): an ``assert_failed`` finding naming the assertion, its source
  line and the thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.ops_alu import ptype
from verify.ptxsim.parser import Sym, type_size
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import DTYPE, UBITS, Idx, is_signed, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine

NONE = np.uint32(0xFFFFFFFF)


def shf(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if len(parts) != 4 or parts[1] not in ("l", "r") or parts[2] not in ("wrap", "clamp") or \
            parts[3] != "b32":
        raise unsupported(ins)
    left, clamp = parts[1] == "l", parts[2] == "clamp"
    ops = ins.operands
    d = ctx.set(ops[0], ".b32")
    a, b, c = ctx.get(ops[1], ".b32"), ctx.get(ops[2], ".b32"), ctx.get(ops[3], ".u32")

    def fn(m: Machine, idx: Idx) -> None:
        cv = np.asarray(c(m, idx)).astype(np.uint64)
        n = np.minimum(cv, np.uint64(32)) if clamp else cv & np.uint64(31)
        x = (np.asarray(b(m, idx)).astype(np.uint64) << np.uint64(32)) | np.asarray(
            a(m, idx)).astype(np.uint64)
        r = (x << n) >> np.uint64(32) if left else x >> n
        d(m, idx, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return fn


def bit_length(x: Any) -> Any:
    """Number of significant bits of unsigned 64-bit values (0 for 0), vectorised."""
    x = np.asarray(x).astype(np.uint64)
    n = np.zeros(x.shape, np.uint32)
    for s in (32, 16, 8, 4, 2, 1):
        big = (x >> np.uint64(s)) != 0
        n = n + np.where(big, s, 0).astype(np.uint32)
        x = np.where(big, x >> np.uint64(s), x)
    return n + (x != 0).astype(np.uint32)


def bfind_value(a: Any, t: str, shiftamt: bool) -> Any:
    """``bfind`` of values ``a`` of type ``t`` as the ISA defines it."""
    nb = 8 * type_size(t)
    ut = UBITS[nb // 8]
    u = np.asarray(a).astype(DTYPE[t]).view(ut)
    if is_signed(t):
        u = np.where((u >> ut(nb - 1)) != 0, ~u, u)
    pos = bit_length(u).astype(np.int64) - 1
    if shiftamt:
        pos = np.where(pos >= 0, nb - 1 - pos, -1)
    return np.where(pos >= 0, pos, 0xFFFFFFFF).astype(np.uint32)


def bfind(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    t = ptype(parts)
    if t not in (".u32", ".s32", ".u64", ".s64") or any(
            p not in ("bfind", "shiftamt", t[1:]) for p in parts):
        raise unsupported(ins)
    shiftamt = "shiftamt" in parts
    ops = ins.operands
    d = ctx.set(ops[0], ".u32")
    a = ctx.get(ops[1], t)

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, bfind_value(a(m, idx), t, shiftamt))
    return fn


def sad(ctx: Ctx) -> Fn:
    ins = ctx.ins
    t = ptype(ins.parts)
    if len(ins.parts) != 2 or t not in (".u16", ".u32", ".u64", ".s16", ".s32", ".s64"):
        raise unsupported(ins)
    ut = UBITS[type_size(t)]
    ops = ins.operands
    d = ctx.set(ops[0], t)
    a, b, c = ctx.get(ops[1], t), ctx.get(ops[2], t), ctx.get(ops[3], t)

    def fn(m: Machine, idx: Idx) -> None:
        x, y = np.asarray(a(m, idx)), np.asarray(b(m, idx))
        ux, uy = x.astype(DTYPE[t]).view(ut), y.astype(DTYPE[t]).view(ut)
        diff = np.where(x < y, uy - ux, ux - uy)
        d(m, idx, (np.asarray(c(m, idx)).astype(DTYPE[t]).view(ut) + diff).view(DTYPE[t]))
    return fn


VOP4 = ("vadd4", "vsub4", "vavrg4", "vabsdiff4", "vmin4", "vmax4")


def _bytes4(v: Any, signed: bool) -> Any:
    """The four bytes of 32-bit values, sign- or zero-extended to int64, shape (..., 4)."""
    u = np.asarray(v).astype(np.uint32)[..., None] >> (np.arange(4, dtype=np.uint32) * 8)
    b = (u & np.uint32(0xFF)).astype(np.int64)
    return np.where(b >= 128, b - 256, b) if signed else b


def vop4_value(op: str, dt: str, at: str, bt: str, sat: bool, add: bool, a: Any, b: Any,
               c: Any) -> Any:
    """A four-way SIMD video instruction with the default selectors (bytes 3210 of ``a``
    against bytes 7654 of ``[b:a]``, i.e. the bytes of ``b``) and the default mask."""
    va, vb = _bytes4(a, at == ".s32"), _bytes4(b, bt == ".s32")
    s = va + vb
    r = {"vadd4": s, "vsub4": va - vb, "vavrg4": np.where(s >= 0, (s + 1) >> 1, s >> 1),
         "vabsdiff4": np.abs(va - vb), "vmin4": np.minimum(va, vb),
         "vmax4": np.maximum(va, vb)}[op]
    if sat:
        r = np.clip(r, -128, 127) if dt == ".s32" else np.clip(r, 0, 255)
    cu = np.asarray(c).astype(np.uint32)
    if add:
        return (cu.astype(np.int64) + r.sum(axis=-1)).astype(np.uint64).astype(np.uint32)
    by = (r & 0xFF).astype(np.uint32) << (np.arange(4, dtype=np.uint32) * 8)
    return np.bitwise_or.reduce(by, axis=-1).astype(np.uint32)


def vop4(ctx: Ctx) -> Fn:
    """The ``vop4`` family (registered under each opcode root)."""
    ins = ctx.ins
    parts = ins.parts
    types = ["." + p for p in parts[1:4]]
    flags = parts[4:]
    if parts[0] not in VOP4 or any(x not in (".u32", ".s32") for x in types) or any(
            f not in ("sat", "add") for f in flags) or ("sat" in flags and "add" in flags):
        raise unsupported(ins)
    op, (dt, at, bt) = parts[0], types
    sat, add = "sat" in flags, "add" in flags
    ops = ins.operands
    if len(ops) != 4:
        raise unsupported(ins, "byte selectors and masks are not modelled")
    d = ctx.set(ops[0], ".b32")
    a, b, c = ctx.get(ops[1], ".b32"), ctx.get(ops[2], ".b32"), ctx.get(ops[3], ".b32")

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, vop4_value(op, dt, at, bt, sat, add, a(m, idx), b(m, idx), c(m, idx)))
    return fn


def nanosleep(ctx: Ctx) -> Fn:
    ins = ctx.ins
    if ins.parts != ["nanosleep", "u32"] or len(ins.operands) != 1:
        raise unsupported(ins)
    t = ctx.get(ins.operands[0], ".u32")

    def fn(m: Machine, idx: Idx) -> None:
        t(m, idx)  # read (definedness is checked by the machine); no effect
    return fn


def _c_string(m: Machine, addr: int, limit: int = 200) -> str:
    """The NUL-terminated string at a global address (module ``$str`` variables), or ''."""
    for b in m.g.bufs:
        if b.base <= addr < b.base + b.size:
            raw = bytes(b.u8[addr - b.base: addr - b.base + limit])
            return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return ""


def assertfail(ctx: Ctx) -> Fn:
    """``__assertfail(message, file, line, function, size)``: the arguments are the call's
    ``.param`` variables, which live in per-thread local memory."""
    ins = ctx.ins
    offs: list[int] = []
    for op in ins.operands:
        space, off = ctx.symbol(op.name) if isinstance(op, Sym) else ("", 0)
        if space != "local":
            raise unsupported(ins, "__assertfail arguments")
        offs.append(off)

    def arg(m: Machine, t: int, i: int, w: int) -> int:
        if m.local is None or i >= len(offs):
            return 0
        base = t * m.local_size + offs[i]
        return int.from_bytes(bytes(m.local[base: base + w]), "little")

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        t = int(tids[0])
        msg, where, func = (_c_string(m, arg(m, t, 0, 8)), _c_string(m, arg(m, t, 1, 8)),
                            _c_string(m, arg(m, t, 3, 8)))
        line = arg(m, t, 2, 4)
        src = f"{where.rsplit('/', 1)[-1] or 'source'}:{line}" if line else "the source"
        m.report("assert_failed",
                 f"assertion `{msg or '?'}` failed at {src}" + (f" in {func}" if func else "")
                 + f": thread {{T{t}}} (and {tids.size - 1} other thread(s) here) called "
                 f"__assertfail at PTX line {m.line}; on a GPU the launch stops with "
                 "cudaErrorAssert", t, None)
    return fn


def _lanes(x: Any, width: int, count: int, signed: bool) -> list[np.ndarray]:
    """The ``count`` ``width``-bit fields of 32-bit values, low first, as int64 (sign-extended
    when ``signed``)."""
    u = np.asarray(x).astype(np.uint32).astype(np.int64)
    mask, top = (1 << width) - 1, 1 << (width - 1)
    out = []
    for k in range(count):
        f = (u >> (width * k)) & mask
        out.append(np.where(f >= top, f - (1 << width), f) if signed else f)
    return out


def dot_value(op: str, half: str, a_signed: bool, b_signed: bool, a: Any, b: Any,
              c: Any) -> np.ndarray:
    """``dp4a`` / ``dp2a`` as the PTX ISA defines them: ``c`` plus the sum of the products of
    ``a``'s four bytes (dp4a) or two 16-bit halves (dp2a) with ``b``'s bytes (dp2a: bytes 0-1
    for ``.lo``, 2-3 for ``.hi``), wrapping modulo 2^32."""
    if op == "dp4a":
        av = _lanes(a, 8, 4, a_signed)
        bv = _lanes(b, 8, 4, b_signed)
    else:
        av = _lanes(a, 16, 2, a_signed)
        bv = _lanes(b, 8, 4, b_signed)[2:] if half == "hi" else _lanes(b, 8, 4, b_signed)[:2]
    acc = np.asarray(c).astype(np.uint32).astype(np.int64)
    for x, y in zip(av, bv, strict=True):
        acc = acc + x * y
    return (acc & 0xFFFFFFFF).astype(np.uint32)


def dot(ctx: Ctx) -> Fn:
    """``dp4a.atype.btype d, a, b, c`` and ``dp2a.mode.atype.btype d, a, b, c`` (``__dp4a``,
    ``__dp2a_lo/hi``; nvcc also emits dp4a from a plain C int8 dot product): atype and btype
    ``.u32`` or ``.s32``; ``c`` and ``d`` are ``.u32`` when both are unsigned, else ``.s32``."""
    ins = ctx.ins
    parts = ins.parts
    half = ""
    rest = parts[1:]
    if parts[0] == "dp2a":
        if not rest or rest[0] not in ("lo", "hi"):
            raise unsupported(ins)
        half, rest = rest[0], rest[1:]
    if len(rest) != 2 or any(x not in ("u32", "s32") for x in rest) or len(ins.operands) != 4:
        raise unsupported(ins)
    a_signed, b_signed = rest[0] == "s32", rest[1] == "s32"
    ops = ins.operands
    d = ctx.set(ops[0], ".b32")
    a, b, c = ctx.get(ops[1], ".b32"), ctx.get(ops[2], ".b32"), ctx.get(ops[3], ".b32")
    op = parts[0]

    def fn(m: Machine, idx: Idx) -> None:
        d(m, idx, dot_value(op, half, a_signed, b_signed, a(m, idx), b(m, idx), c(m, idx)))
    return fn
