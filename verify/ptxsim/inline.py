"""Calls to non-inlined device functions (``.func``), expanded at compile time (issue 10).

Every ``call`` is replaced by a copy of the callee's body: its registers, labels, local and
``.param`` variables get a suffix unique to the call site, its parameters become the caller's
argument variables of that call (``.param`` variables live in per-thread local memory), its
return parameters the caller's return variables, and its ``ret`` a branch to the end of the copy.
The min-PC scheduler then sees one straight-line body, so divergence inside a callee reconverges
as it does anywhere else. Recursion, indirect calls (function pointers, ``prototype``) and bodies
that would grow past ``MAX_INSTRS`` are refused (``UnsupportedPtx``). Two extern functions of
the device runtime have no body but a model (``EXTERNS``): ``vprintf`` (``printf``) does
nothing and returns 0, ``__assertfail`` (a failed ``assert``) becomes an ``assertfail``
instruction that reports an ``assert_failed`` finding; calls to any other extern are refused.
"""

from __future__ import annotations

import re

from verify.ptxsim.errors import UnsupportedPtx
from verify.ptxsim.parser import (
    Addr,
    Entry,
    Imm,
    Instr,
    Module,
    Operand,
    PredDst,
    Raw,
    Reg,
    Sym,
    Var,
    Vec,
)

MAX_INSTRS = 200_000
MAX_DEPTH = 16


def _vprintf(ins: Instr, guard: Reg | None, rets: list[str], args: list[str]) -> list[Instr]:
    """``printf`` (``vprintf(format, args)``): no output and no effect on memory; it returns 0
    (on a GPU it returns the number of arguments, which kernels practically never read)."""
    return [Instr(ins.line, "st.param.b32", guard, (Addr(Sym(r), 0), Imm("0"))) for r in rets]


def _assertfail(ins: Instr, guard: Reg | None, rets: list[str], args: list[str]) -> list[Instr]:
    """``assert`` (``__assertfail(message, file, line, function, size)``): the interpreter's
    ``assertfail`` instruction reports it (``verify.ptxsim.ops_intx.assertfail``)."""
    return [Instr(ins.line, "assertfail", guard, tuple(Sym(a) for a in args))]


# extern functions of the CUDA device runtime a kernel may call without a body in the module
EXTERNS = {"vprintf": _vprintf, "__assertfail": _assertfail}


def _names(raw: Operand) -> list[str]:
    if isinstance(raw, Sym):
        return [raw.name]
    if isinstance(raw, Reg):
        return [raw.name]
    if not isinstance(raw, Raw):
        return []
    return [x for x in re.split(r"[\s(),]+", raw.text) if x]


def _call_parts(ins: Instr) -> tuple[list[str], str, list[str]]:
    """(return variables, callee, argument variables) of a ``call``."""
    ops = list(ins.operands)
    fi = next((i for i, o in enumerate(ops) if isinstance(o, Sym)), None)
    if fi is None or any(isinstance(o, Raw) and "prototype" in o.text for o in ops) or len(
            ops) > fi + 2:
        raise UnsupportedPtx(f"unsupported PTX instruction '{ins.opcode}' at line {ins.line} "
                             "(indirect call)")
    rets = [n for o in ops[:fi] for n in _names(o)]
    args = [n for o in ops[fi + 1:] for n in _names(o)]
    callee = ops[fi]
    assert isinstance(callee, Sym)
    return rets, callee.name, args


def _declared(e: Entry) -> dict[str, str]:
    regs = dict(e.regs)
    for prefix, typ, count in e.reg_ranges:
        for i in range(count):
            regs[f"{prefix}{i}"] = typ
    return regs


class _Inliner:
    def __init__(self, module: Module, entry: Entry) -> None:
        self.module = module
        self.out = Entry(entry.name, params=list(entry.params), regs=dict(entry.regs),
                         reg_ranges=list(entry.reg_ranges), vars=list(entry.vars),
                         line=entry.line)
        self.sites = 0

    def emit(self, e: Entry, regmap: dict[str, str], symmap: dict[str, str], suffix: str,
             ret_label: str | None, stack: tuple[str, ...]) -> None:
        out = self.out
        at: dict[int, list[str]] = {}
        for name, i in e.labels.items():
            at.setdefault(i, []).append(name)
        labels = set(e.labels)

        def reg(r: Reg) -> Reg:
            return Reg(regmap.get(r.name, r.name), r.neg)

        def op(o: Operand) -> Operand:
            if isinstance(o, Reg):
                return reg(o)
            if isinstance(o, Sym):
                if o.name in regmap:
                    return Sym(regmap[o.name])
                if o.name in labels:
                    return Sym(o.name + suffix)
                return Sym(symmap.get(o.name, o.name))
            if isinstance(o, Addr):
                b = o.base
                nb: Reg | Sym | None = b
                if isinstance(b, Reg):
                    nb = reg(b)
                elif isinstance(b, Sym):
                    nb = Sym(regmap.get(b.name, symmap.get(b.name, b.name)))
                return Addr(nb, o.offset)
            if isinstance(o, Vec):
                return Vec(tuple(reg(x) if isinstance(x, Reg) else x for x in o.items))
            if isinstance(o, PredDst):
                return PredDst(reg(o.reg), reg(o.pred))
            return o

        for i, ins in enumerate(e.instrs):
            for name in at.get(i, []):
                out.labels[name + suffix] = len(out.instrs)
            guard = reg(ins.guard) if ins.guard is not None else None
            root = ins.parts[0]
            if root == "call":
                rets, callee, args = _call_parts(ins)
                self.call(ins, guard, [symmap.get(n, n) for n in rets], callee,
                          [symmap.get(n, n) for n in args], stack)
            elif root == "ret" and ret_label is not None:
                out.instrs.append(Instr(ins.line, "bra.uni", guard, (Sym(ret_label),)))
            else:
                out.instrs.append(Instr(ins.line, ins.opcode, guard,
                                        tuple(op(o) for o in ins.operands)))
            if len(out.instrs) > MAX_INSTRS:
                raise UnsupportedPtx(f"inlining the calls of {stack[0]} gives more than "
                                     f"{MAX_INSTRS} instructions")
        for name in at.get(len(e.instrs), []):
            out.labels[name + suffix] = len(out.instrs)

    def call(self, ins: Instr, guard: Reg | None, rets: list[str], callee: str,
             args: list[str], stack: tuple[str, ...]) -> None:
        where = f"'{ins.opcode}' at line {ins.line}"
        f = self.module.funcs.get(callee)
        if f is None and callee in EXTERNS:
            self.out.instrs.extend(EXTERNS[callee](ins, guard, rets, args))
            return
        if f is None:
            raise UnsupportedPtx(f"unsupported PTX instruction {where} (call to {callee}, which "
                                 "has no body in this module)")
        if callee in stack:
            raise UnsupportedPtx(f"unsupported PTX instruction {where} (recursive call to "
                                 f"{callee})")
        if len(stack) > MAX_DEPTH:
            raise UnsupportedPtx(f"unsupported PTX instruction {where} (call to {callee} nested "
                                 f"more than {MAX_DEPTH} calls deep: the inliner's limit)")
        if len(args) != len(f.params) or len(rets) != len(f.returns):
            raise UnsupportedPtx(f"unsupported PTX instruction {where} ({callee} takes "
                                 f"{len(f.params)} parameters and returns {len(f.returns)})")
        self.sites += 1
        suffix = f"$c{self.sites}"
        out = self.out
        skip = f"$skip{self.sites}"
        if guard is not None:
            out.instrs.append(Instr(ins.line, "bra.uni", Reg(guard.name, not guard.neg),
                                    (Sym(skip),)))
        regmap = {name: name + suffix for name in _declared(f)}
        for name, typ in _declared(f).items():
            out.regs[name + suffix] = typ
        symmap = {p.name: a for p, a in zip(f.params, args, strict=True)}
        symmap.update({p.name: r for p, r in zip(f.returns, rets, strict=True)})
        for v in f.vars:
            symmap[v.name] = v.name + suffix
            out.vars.append(Var(v.name + suffix, v.space, v.size, v.align, v.extern, v.init,
                                v.ptx_type))
        end = f"$ret{self.sites}"
        self.emit(f, regmap, symmap, suffix, end, (*stack, callee))
        out.labels[end] = len(out.instrs)
        if guard is not None:
            out.labels[skip] = len(out.instrs)


def inline_calls(module: Module, entry: Entry) -> Entry:
    """``entry`` with every call expanded (itself when it makes no call)."""
    if not any(i.parts[0] == "call" for i in entry.instrs):
        return entry
    inl = _Inliner(module, entry)
    inl.emit(entry, {}, {}, "", None, (entry.name,))
    return inl.out
