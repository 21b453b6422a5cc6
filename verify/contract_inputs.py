"""Lint gate ``inputs`` (issue 32; contracts/README.md "Input domains"): each parameter's own
input domain, the preconditions and the host-set ``__constant__`` arrays agree with the
parameters, the size domain and the bundle's PTX. One message per problem, naming its YAML
path."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from verify.compare import np_dtype
from verify.expr import expr_names
from verify.inputs import parse_precondition
from verify.model import FLOAT_DTYPES, RANDOM, Kernel, Param


def input_problems(k: Kernel, files: Mapping[str, bytes] | None) -> list[str]:
    """Every problem of ``k``'s input domains, preconditions and constants."""
    sizes = {r.name for r in k.size_domain}
    out: list[str] = []
    for i, p in enumerate(k.params):
        out += _param_problems(k, p, f"kernel.params[{i}]", sizes)
    out += _precondition_problems(k, sizes)
    out += _constant_problems(k, files)
    return out


def _names_known(expr: str, sizes: set[str], path: str) -> list[str]:
    if not sizes:
        return []  # no size domain: the domain gate says what to add
    unknown = sorted(expr_names(expr) - sizes)
    if unknown:
        return [f"{path}: {unknown[0]!r} is not a size variable of kernel.size_domain "
                f"({', '.join(sorted(sizes))})"]
    return []


def _param_problems(k: Kernel, p: Param, path: str, sizes: set[str]) -> list[str]:
    d = p.domain
    out: list[str] = []
    if p.kind == "scalar" and p.value == RANDOM and p.dtype not in FLOAT_DTYPES and d is None:
        out.append(f"{path}.value: an integer scalar drawn at random needs its own range")
    if d is None:
        return out
    if d.low is not None and d.high is not None and p.dtype not in FLOAT_DTYPES:
        info = np.iinfo(np_dtype(p.dtype))
        if math.ceil(d.low) < int(info.min) or math.floor(d.high) > int(info.max):
            out.append(f"{path}.range: {d.low:g} .. {d.high:g} does not fit {p.dtype} "
                       f"({int(info.min)} .. {int(info.max)})")
        if math.floor(d.high) < math.ceil(d.low):
            out.append(f"{path}.range: no integer lies in {d.low:g} .. {d.high:g}")
    if d.index_of:
        out += _names_known(d.index_of, sizes, f"{path}.index_of")
    if d.offsets_of:
        target = next((q for q in k.params if q.name == d.offsets_of), None)
        if target is None or target.kind != "ptr":
            out.append(f"{path}.offsets_of: {d.offsets_of!r} is not a pointer parameter")
        out += _names_known(d.total, sizes, f"{path}.total")
    if (d.index_of or d.offsets_of) and p.intent == "out":
        out.append(f"{path}: an out pointer is written by the kernel: index_of and offsets_of "
                   "describe inputs")
    if d.low is not None and p.intent == "out":
        out.append(f"{path}.range: an out pointer is written by the kernel, not drawn")
    return out


def _precondition_problems(k: Kernel, sizes: set[str]) -> list[str]:
    inputs = {p.name: p for p in k.params if p.kind == "ptr" and p.intent != "out"}
    out: list[str] = []
    for i, text in enumerate(k.preconditions):
        path = f"kernel.preconditions[{i}]"
        array, _op, rhs, elementwise = parse_precondition(text)
        if array not in inputs:
            out.append(f"{path}: {array!r} is not an in or inout pointer parameter")
            continue
        if elementwise and rhs not in inputs:
            out.append(f"{path}: {rhs!r} is not an in or inout pointer parameter")
        elif not elementwise:
            out += _names_known(rhs, sizes, path)
        p = inputs[array]
        if p.domain is not None and (p.domain.index_of or p.domain.offsets_of):
            out.append(f"{path}: {array!r} is an index or offsets array: its domain already "
                       "says its values")
    return out


_CONST = re.compile(rb"^\s*\.const\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([A-Za-z_$][\w$]*)"
                    rb"(?:\[(\d+)\])?", re.M)
_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4, "u32": 4,
          "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}


def ptx_constants(ptx: bytes) -> dict[str, int]:
    """Module-scope ``.const`` arrays of a PTX file: name -> bytes."""
    out: dict[str, int] = {}
    for m in _CONST.finditer(ptx):
        size = _BYTES.get(m.group(1).decode(), 0) * int(m.group(3) or 1)
        out[m.group(2).decode()] = size
    return out


def _constant_problems(k: Kernel, files: Mapping[str, bytes] | None) -> list[str]:
    if not k.constants:
        return []
    ptx = None if files is None else files.get(k.ptx)
    if ptx is None:
        return []  # a bare contract, or no PTX: the kernel gate says so
    have = ptx_constants(ptx)
    out: list[str] = []
    for i, c in enumerate(k.constants):
        path = f"kernel.constants[{i}]"
        if c.name not in have:
            out.append(f"{path}.name: {c.name!r} is not a .const array of {k.ptx} "
                       f"(.const: {', '.join(have) or 'none'})")
            continue
        need = c.count * np_dtype(c.dtype).itemsize
        if need > have[c.name]:
            out.append(f"{path}: {c.count} {c.dtype} values are {need} bytes; {c.name} holds "
                       f"{have[c.name]}")
    return out
