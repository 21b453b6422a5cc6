"""PTX types, immediates and register access for the interpreter (SPEC 8, issue 4).

Registers hold raw bits, one numpy array per register over all threads of the launch: ``.pred``
as bool, 16/32/64-bit registers as uint16/uint32/uint64. An instruction reads a register through
its own type (a free ``view`` when the widths agree; truncation or sign/zero extension otherwise)
and writes its result back as bits. Getters return a gathered array (or the whole array when all
threads are active: ``idx is None``) or a numpy scalar for immediates and uniform values.
Registers are indexed with ``m.sl``, which the machine sets to the running group's ``idx`` or,
when that is a contiguous run of threads, to the equivalent slice (a view, no gather).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from verify.ptxsim.errors import UnsupportedPtx
from verify.ptxsim.machine import Idx as Idx  # defined with the machine, named here by the ops
from verify.ptxsim.machine import Machine
from verify.ptxsim.parser import Imm, Instr, Reg, type_size

Getter = Callable[[Machine, Idx], Any]
Setter = Callable[[Machine, Idx, Any], None]

DTYPE: dict[str, Any] = {
    ".pred": np.bool_,
    ".b8": np.uint8, ".u8": np.uint8, ".s8": np.int8,
    ".b16": np.uint16, ".u16": np.uint16, ".s16": np.int16, ".f16": np.float16,
    ".bf16": np.uint16,
    ".b32": np.uint32, ".u32": np.uint32, ".s32": np.int32, ".f32": np.float32,
    ".f16x2": np.uint32, ".bf16x2": np.uint32,
    ".b64": np.uint64, ".u64": np.uint64, ".s64": np.int64, ".f64": np.float64,
}
UBITS: dict[int, Any] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
SBITS: dict[int, Any] = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def storage_dtype(ptx_type: str) -> Any:
    if ptx_type == ".pred":
        return np.bool_
    return UBITS[max(2, type_size(ptx_type))]


def is_signed(t: str) -> bool:
    return t.startswith(".s")


def is_float(t: str) -> bool:
    return t in (".f16", ".f32", ".f64")


def unsupported(ins: Instr, why: str = "") -> UnsupportedPtx:
    extra = f" ({why})" if why else ""
    return UnsupportedPtx(f"unsupported PTX instruction '{ins.opcode}' at line {ins.line}{extra}")


def imm_value(text: str, t: str, ins: Instr) -> Any:
    """A literal as a numpy scalar of type ``t``."""
    dt = DTYPE[t]
    s = text.strip()
    neg = s.startswith("-")
    body = s.lstrip("+-")
    if body[:2] in ("0f", "0F"):
        f = struct.unpack(">f", bytes.fromhex(body[2:].rjust(8, "0")))[0]
        val: Any = -f if neg else f
        if t in (".f32", ".b32", ".u32", ".s32") and not neg:
            return np.array(int(body[2:], 16), np.uint32).view(dt)[()]
        return dt(val) if is_float(t) else _int_scalar(int(val), t)
    if body[:2] in ("0d", "0D"):
        d = struct.unpack(">d", bytes.fromhex(body[2:].rjust(16, "0")))[0]
        if t in (".f64", ".b64", ".u64", ".s64") and not neg:
            return np.array(int(body[2:], 16), np.uint64).view(dt)[()]
        return dt(-d if neg else d) if is_float(t) else _int_scalar(int(d), t)
    if "." in body or ("e" in body.lower() and not body.lower().startswith("0x")):
        fv = float(s)
        if not is_float(t):
            raise unsupported(ins, f"float literal {s} for type {t}")
        return dt(fv)
    b = body.rstrip("Uu")
    if b.lower().startswith("0x"):
        v = int(b, 16)
    elif b.lower().startswith("0b"):
        v = int(b[2:], 2)
    elif len(b) > 1 and b.startswith("0"):
        v = int(b, 8)
    else:
        v = int(b)
    v = -v if neg else v
    if is_float(t):
        return dt(v)
    if t == ".pred":
        return np.bool_(v != 0)
    return _int_scalar(v, t)


def _int_scalar(v: int, t: str) -> Any:
    size = type_size(t)
    bits = v & ((1 << (8 * size)) - 1)
    return np.array(bits, UBITS[size]).view(DTYPE[t])[()]


def convert_bits(v: Any, t: str, store: Any) -> Any:
    """Value(s) of type ``t`` as bits of a register whose storage dtype is ``store``."""
    dt = DTYPE[t]
    a = np.asarray(v)
    if t == ".pred" or store == np.bool_:
        return a.astype(np.bool_, copy=False) if store == np.bool_ else a.astype(store)
    if a.dtype != dt:
        a = a.astype(dt)
    size = type_size(t)
    bits = a.view(UBITS[size]) if a.ndim else a.reshape(1).view(UBITS[size]).reshape(())
    ssize = np.dtype(store).itemsize
    if ssize == size:
        return bits
    if ssize > size and is_signed(t):
        return a.astype(SBITS[ssize]).view(store) if a.ndim else \
            a.astype(SBITS[ssize]).reshape(1).view(store).reshape(())
    return bits.astype(store)


def read_bits(a: np.ndarray, t: str) -> np.ndarray:
    """Register bits ``a`` (storage dtype) read as type ``t``."""
    dt = DTYPE[t]
    if a.dtype == np.bool_:
        return a if t == ".pred" else a.astype(dt)
    size = type_size(t)
    if a.dtype.itemsize == size:
        return a.view(dt)
    if a.dtype.itemsize > size:
        return a.astype(UBITS[size]).view(dt)
    out: np.ndarray
    if is_signed(t):
        out = a.view(SBITS[a.dtype.itemsize]).astype(dt)
    else:
        out = a.astype(UBITS[size]).view(dt)
    return out


def reg_getter(reg: Reg, t: str, store: Any) -> Getter:
    name = reg.name
    if store == np.bool_:
        if t != ".pred":
            raise UnsupportedPtx(f"predicate register {name} read as {t}")
        if reg.neg:
            return lambda m, idx: ~(m.R[name] if idx is None else m.R[name][m.sl])
        return lambda m, idx: m.R[name] if idx is None else m.R[name][m.sl]
    same = np.dtype(store).itemsize == type_size(t) and t != ".pred"
    dt = DTYPE[t]
    if same:
        return lambda m, idx: (m.R[name] if idx is None else m.R[name][m.sl]).view(dt)
    return lambda m, idx: read_bits(m.R[name] if idx is None else m.R[name][m.sl], t)


def reg_setter(reg: Reg, t: str, store: Any, copy: bool = False) -> Setter:
    name = reg.name
    if name == "_":
        return lambda m, idx, v: None

    def s(m: Machine, idx: Idx, v: Any) -> None:
        bits = convert_bits(v, t, store)
        if idx is None:
            if bits.ndim == 0:
                m.R[name] = np.full(m.T, bits, store)
            else:
                m.R[name] = bits.copy() if copy else bits
        else:
            m.R[name][m.sl] = bits
    return s


def imm_getter(op: Imm, t: str, ins: Instr) -> Getter:
    val = imm_value(op.text, t, ins)
    return lambda m, idx: val
