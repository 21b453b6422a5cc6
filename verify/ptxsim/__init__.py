"""PTX interpreter: run nvcc's PTX on the CPU, vectorised over threads with numpy, and report
bugs with thread, address and PTX line (SPEC 8 ``falsify.*``, issue 4).

Public API (used by the falsification runner): ``load_module``, ``launch``, ``Buffer``,
``Scalar``, ``Finding``, ``SimResult``, ``UnsupportedPtx``, ``PtxSyntaxError``. The design is
described in docs/ptx-interpreter.md.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ledger.core.encoding import hex_encode
from ledger.core.errors import CannotCheck
from verify.ptxsim.compiler import build
from verify.ptxsim.errors import Finding, PtxSyntaxError, SimResult, UnsupportedPtx
from verify.ptxsim.machine import Machine
from verify.ptxsim.memory import GlobalSpace
from verify.ptxsim.parser import Module as _Parsed
from verify.ptxsim.parser import parse
from verify.ptxsim.program import Program

__all__ = [
    "Buffer",
    "Finding",
    "Module",
    "PtxSyntaxError",
    "Scalar",
    "SimResult",
    "UnsupportedPtx",
    "launch",
    "load_module",
]

VERSION = "0.1.0"
MAX_THREADS = 1 << 25  # every register is one array over all threads of the grid
ENGINE = f"ptxsim {VERSION}"


@dataclass
class Buffer:
    data: np.ndarray
    intent: str  # "in" | "out" | "inout"
    name: str


@dataclass(frozen=True)
class Scalar:
    value: int | float
    ptx_type: str


@dataclass
class Module:
    """A parsed PTX module; entries are compiled on first launch and cached."""

    parsed: _Parsed
    programs: dict[str, Program] = field(default_factory=dict)

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(self.parsed.entries)

    def program(self, entry: str) -> Program:
        if entry not in self.programs:
            if entry not in self.parsed.entries:
                raise PtxSyntaxError(f"no .entry named {entry!r} in the PTX module (entries: "
                                     f"{', '.join(self.parsed.entries) or 'none'})")
            self.programs[entry] = build(self.parsed, self.parsed.entries[entry])
        return self.programs[entry]


def load_module(ptx: bytes | str) -> Module:
    """Parse PTX text once; the module can be launched many times."""
    if isinstance(ptx, bytes):
        try:
            ptx = ptx.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PtxSyntaxError("PTX is not UTF-8 text") from e
    return Module(parse(ptx))


_PACK = {".u8": "<B", ".s8": "<b", ".u16": "<H", ".s16": "<h", ".u32": "<I", ".s32": "<i",
         ".u64": "<Q", ".s64": "<q", ".b8": "<B", ".b16": "<H", ".b32": "<I", ".b64": "<Q",
         ".f32": "<f", ".f64": "<d", ".pred": "<B"}


def _param_bytes(prog: Program, args: Sequence[Buffer | Scalar], gs: GlobalSpace) -> bytes:
    params = prog.entry.params
    if len(args) != len(params):
        raise PtxSyntaxError(f"kernel {prog.entry.name} takes {len(params)} parameters, "
                             f"{len(args)} given")
    out = bytearray(prog.param_size)
    bi = 0
    for p, off, a in zip(params, prog.param_offsets, args, strict=True):
        if isinstance(a, Buffer):
            if p.size != 8:
                raise PtxSyntaxError(f"parameter {p.name} ({p.ptx_type}) cannot take buffer "
                                     f"{a.name!r}: a pointer needs a 64-bit parameter")
            raw = struct.pack("<Q", gs.args[bi].base)
            bi += 1
        else:
            fmt = _PACK.get(a.ptx_type)
            if fmt is None or struct.calcsize(fmt) != p.size:
                raise PtxSyntaxError(f"parameter {p.name} is {p.ptx_type} ({p.size} bytes); "
                                     f"scalar of type {a.ptx_type} does not fit")
            try:
                raw = struct.pack(fmt, a.value)
            except struct.error as e:
                raise PtxSyntaxError(f"parameter {p.name}: {a.value!r} is not a valid "
                                     f"{a.ptx_type}") from e
        out[off: off + len(raw)] = raw
    return bytes(out)


def launch(module: Module, entry: str, grid: tuple[int, int, int], block: tuple[int, int, int],
           args: Sequence[Buffer | Scalar], dynamic_shared: int = 0, step_limit: int = 50_000_000,
           max_findings: int = 20, tracking: bool = True,
           schedule_seed: int | None = None, schedule_values: bool = False,
           out_undefined: bool = False, run_on: bool = False,
           waivers: Mapping[tuple[str, int], int] | None = None,
           constants: Mapping[str, bytes] | None = None,
           blocks: Sequence[int] | None = None) -> SimResult:
    """Run one kernel launch; buffers are modified in place; returns the findings.

    ``tracking=False`` turns off register definedness and global race tracking (only to
    measure their cost in bench/bench_ptxsim.py; the falsification runner never does).
    ``schedule_seed``: when the run ends without a finding, run the launch again on copies of
    the original buffers under a second schedule seeded with it (atomics on one location and
    conflicting stores of one instruction applied in a seeded thread order, cp.async copies
    landing when issued) and report ``schedule_dependent`` for an output that differs; with
    ``schedule_values`` an output that differs is returned in ``SimResult.second_schedule``
    instead, for the caller to judge (a float sum whose rounding follows the order of its
    atomics may be within the caller's tolerance). ``out_undefined``: the contents of ``out``
    buffers are unspecified (the falsification runner's poison stands for whatever a device's
    memory holds), so a read of an element nothing in the launch wrote yet, plain or by an atomic
    other than ``exch``, is ``uninitialised_read``; off, the caller's array is the start.
    ``run_on``: run on to the end (or ``step_limit``) after a finding, as a device would, so the
    buffers hold the whole launch's result; by default a launch stops ``AFTER_FINDING_STEPS``
    warp-instructions after its first finding (``verify.ptxsim.machine``). ``waivers``: (finding
    kind, PTX line) -> a contract waiver's index; such a finding is not reported but returned in
    ``SimResult.waived``, and the run goes on as if there were none. ``constants``: the host-set
    contents of module-scope ``.const`` arrays by name (``kernel.constants``), replacing their
    initialisers for this launch. ``blocks``: run only these blocks of the grid (linear ids,
    x fastest; ``%nctaid`` is still the whole grid): the others do not run, so no ``unwritten``
    finding is made and ``SimResult.written`` says, per out/inout buffer, which elements the run
    blocks wrote (the falsification runner's block sampling, docs/falsification.md)."""
    prog = module.program(entry)
    if constants:
        prog = _with_constants(prog, constants)
    if any(x < 1 for x in (*grid, *block)) or block[0] * block[1] * block[2] > 1024 or \
            dynamic_shared < 0:
        raise PtxSyntaxError(f"invalid launch shape grid={grid} block={block} "
                             f"dynamic_shared={dynamic_shared}")
    ids = None if blocks is None else _block_ids(blocks, grid)
    nblk = grid[0] * grid[1] * grid[2] if ids is None else int(ids.size)
    threads = nblk * -(-block[0] * block[1] * block[2] // 32) * 32
    if threads > MAX_THREADS:
        raise CannotCheck(f"a launch of {threads} threads is more than the PTX interpreter "
                          f"runs ({MAX_THREADS}); use smaller sizes or a GPU")
    bufs = _buffers(args)
    stateful = any(intent == "var" for _, intent, _, _ in prog.module_vars)
    original = [d.copy() for _, _, d in bufs] if schedule_seed is not None or stateful else None
    gs = GlobalSpace(bufs, prog.module_vars)
    params = _param_bytes(prog, args, gs)
    m = Machine(prog, grid, block, gs, params, dynamic_shared, step_limit, max_findings,
                tracking, blocks=ids)
    m.out_undefined = out_undefined
    m.waivers = dict(waivers or {})
    if run_on:
        m.after_finding = None
    try:
        m.run()
    except UnsupportedPtx as e:
        e.findings = tuple(m.findings)
        raise
    written: dict[str, np.ndarray] = {}
    if ids is not None:
        written = {b.name: (b.writer >= 0) | b.atomic for b in gs.args
                   if b.writer is not None and b.atomic is not None}
    elif not m.stopped:
        _unwritten(m, gs)
    if original is not None and stateful and not m.findings:
        _launch_again(prog, grid, block, bufs, original, dynamic_shared, step_limit, m)
    second: dict[str, np.ndarray] = {}
    if original is not None and schedule_seed is not None and not m.findings:
        second = _second_schedule(prog, grid, block, bufs, original, dynamic_shared, step_limit,
                                  schedule_seed, m, schedule_values)
    return SimResult(tuple(m.findings), m.thread_instr, m.warp_instr, ENGINE, second,
                     tuple(m.notes), tuple(m.waived), written)


def _buffers(args: Sequence[Buffer | Scalar]) -> list[tuple[str, str, np.ndarray]]:
    """The buffer arguments as (name, intent, data), checked."""
    bufs = []
    for a in args:
        if isinstance(a, Buffer):
            if a.intent not in ("in", "out", "inout"):
                raise PtxSyntaxError(f"buffer {a.name!r}: intent must be in, out or inout")
            if a.data.ndim != 1 or not a.data.flags.c_contiguous:
                raise PtxSyntaxError(f"buffer {a.name!r} must be a 1-D contiguous array")
            bufs.append((a.name, a.intent, a.data))
    return bufs


def _block_ids(blocks: Sequence[int], grid: tuple[int, int, int]) -> np.ndarray:
    """``blocks`` as a sorted array of distinct linear block ids inside the grid."""
    ids = np.unique(np.asarray(list(blocks), dtype=np.int64))
    if ids.size == 0 or ids[0] < 0 or ids[-1] >= grid[0] * grid[1] * grid[2]:
        raise PtxSyntaxError(f"blocks must name at least one block of the grid {grid}")
    return ids


def _with_constants(prog: Program, constants: Mapping[str, bytes]) -> Program:
    """A shallow copy of ``prog`` whose module ``.const`` arrays named in ``constants`` start
    with those bytes (the rest of a longer array keeps its initialiser). ``PtxSyntaxError`` for
    a name that is not a ``.const`` variable of the module, or more bytes than it holds."""
    import copy

    consts = {name: (i, init) for i, (name, intent, _, init) in enumerate(prog.module_vars)
              if intent == "const"}
    out = list(prog.module_vars)
    for name, data in constants.items():
        if name not in consts:
            raise PtxSyntaxError(f"__constant__ {name!r} is not a .const variable of the module "
                                 f"(.const: {', '.join(consts) or 'none'})")
        i, init = consts[name]
        if len(data) > len(init):
            raise PtxSyntaxError(f"__constant__ {name!r} holds {len(init)} bytes, the contract "
                                 f"gives {len(data)}")
        vname, intent, base, _ = out[i]
        out[i] = (vname, intent, base, data + init[len(data):])
    new = copy.copy(prog)
    new.module_vars = out
    return new


def _launch_again(prog: Program, grid: tuple[int, int, int], block: tuple[int, int, int],
                  bufs: list[tuple[str, str, np.ndarray]], original: list[np.ndarray],
                  dynamic_shared: int, step_limit: int, first: Machine) -> None:
    """A module is loaded once and launched many times: its ``.global`` variables keep what the
    last launch left. When the first run changed one, launch again on copies of the original
    buffers from that state; an output that differs (or a finding) is ``stale_module_state``:
    the result depends on the launches before it (a ticket counter the last block never resets)."""
    from verify.ptxsim.machine import StopRun

    changed = [(name, init, b.u8.tobytes()) for (name, intent, _, init), b in
               zip(prog.module_vars, first.g.bufs, strict=False)
               if intent == "var" and b.u8.tobytes() != init]
    if not changed:
        return
    left = [(name, intent, base, b.u8.tobytes()) for (name, intent, base, _), b in
            zip(prog.module_vars, first.g.bufs, strict=False)]
    gs2 = GlobalSpace([(n, i, d) for (n, i, _), d in zip(bufs, original, strict=True)], left)
    m2 = Machine(prog, grid, block, gs2, first.params, dynamic_shared, step_limit, 1,
                 tracking=False, blocks=first.block_ids)
    m2.out_undefined = first.out_undefined
    m2.waivers = first.waivers
    try:
        m2.run()
    except UnsupportedPtx:
        return
    name, init, now = changed[0]
    state = (f"module variable '{name}' left as {_bytes_text(now)} by the first launch "
             f"({_bytes_text(init)} when the module loaded)"
             + (f", and {len(changed) - 1} more" if len(changed) > 1 else ""))
    first.line = 0
    why = ""
    if m2.findings:
        why = f"reports {m2.findings[0].message}"
    else:
        for (bname, intent, d1), d2 in zip(bufs, original, strict=True):
            diff = np.flatnonzero(d1.view(np.uint8) != d2.view(np.uint8)) if intent != "in" \
                else np.zeros(0, np.int64)
            if diff.size:
                e = int(diff[0]) // d1.itemsize
                why = (f"gives element {e} of output buffer '{bname}' = {d2[e].item()!r}, "
                       f"{d1[e].item()!r} in the first launch")
                break
    if why:
        try:
            first.report("stale_module_state", f"a second launch of the loaded module {why}: "
                         f"{state}; the result depends on the launches before it", None, None,
                         key=("stale_module_state",))
        except StopRun:
            pass


def _bytes_text(b: bytes) -> str:
    """A module variable's bytes: its first 32-bit words as integers (at most 4)."""
    if len(b) % 4 == 0 and b:
        words = np.frombuffer(b, np.uint32)
        return ("[" + ", ".join(str(int(x)) for x in words[:4])
                + (", ..." if words.size > 4 else "") + "]") if words.size > 1 else str(
                    int(words[0]))
    return hex_encode(b[:16]) + ("..." if len(b) > 16 else "")


def _second_schedule(prog: Program, grid: tuple[int, int, int], block: tuple[int, int, int],
                     bufs: list[tuple[str, str, np.ndarray]], original: list[np.ndarray],
                     dynamic_shared: int, step_limit: int, seed: int, first: Machine,
                     values: bool) -> dict[str, np.ndarray]:
    """Run again on copies of the inputs under the seeded schedule; compare the outputs: a
    differing one is a ``schedule_dependent`` finding, or (``values``) returned by name."""
    from verify.ptxsim.machine import StopRun

    gs2 = GlobalSpace([(n, i, d) for (n, i, _), d in zip(bufs, original, strict=True)],
                      prog.module_vars)
    # race tracking again only where blocks handed data off through fences and atomics: their
    # order decides which accesses are ordered, and this schedule applies the atomics in another
    hb = first.g.hb
    m2 = Machine(prog, grid, block, gs2, first.params, dynamic_shared, step_limit, 1,
                 tracking=hb is not None and hb.n_events > 0, schedule_seed=seed,
                 blocks=first.block_ids)
    m2.out_undefined = first.out_undefined
    m2.waivers = first.waivers
    try:
        m2.run()
    except UnsupportedPtx:
        return {}
    if m2.findings:  # a finding only this schedule shows (e.g. a step limit): report it too
        first.findings.extend(m2.findings)
        return {}
    first.line = 0
    second: dict[str, np.ndarray] = {}
    for (name, intent, d1), d2 in zip(bufs, original, strict=True):
        if intent == "in":
            continue
        diff = np.flatnonzero(d1.view(np.uint8) != d2.view(np.uint8))
        if diff.size and values:
            second[name] = d2
        elif diff.size:
            e = int(diff[0]) // d1.itemsize
            n_el = np.unique(diff // d1.itemsize).size
            try:
                first.report("schedule_dependent",
                             f"element {e} of output buffer '{name}' is {d1[e].item()!r} under "
                             f"the interpreter's schedule and {d2[e].item()!r} under a second "
                             f"schedule (seed {seed}: atomics and conflicting stores in another "
                             "thread order, cp.async copies landing when issued); "
                             f"{n_el} element(s) differ: the result depends on the order "
                             "threads run", None,
                             None, key=("schedule", name))
            except StopRun:
                return second
    return second


def _unwritten(m: Machine, gs: GlobalSpace) -> None:
    from verify.ptxsim.machine import StopRun

    m.line = 0
    for b in gs.bufs:
        if b.intent != "out" or b.writer is None or b.atomic is None:
            continue
        never = (b.writer < 0) & ~b.atomic
        if never.any():
            first = int(np.flatnonzero(never)[0])
            try:
                m.report("unwritten", f"{int(never.sum())} of {never.size} elements of output "
                         f"buffer '{b.name}' were never written (first: element {first})",
                         None, b.base + first * b.itemsize, key=("unwritten", b.name))
            except StopRun:
                return
