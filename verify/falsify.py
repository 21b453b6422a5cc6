"""Falsification tests of a kernel contract: the ``falsify.<TEST-ID>`` checks (SPEC 8).

One check per falsification test of ``ctx.contract``. A test runs at the author's size bindings
and then at bindings the verifier chooses inside ``kernel.size_domain`` (``verify.sizes``: edges
of the launch shape, a prime, the maximum under the cost cap, seeded random draws; issue 15).
For each binding:

1. seed: the author's bindings draw from one numpy Generator seeded with the test's ``seed``, in
   order; the chosen ones from a generator seeded with the run's seed (``options.seed``, or a
   fresh one per run when that is None) and the test id; both seeds are in the detail, and
   ``--seed`` reproduces the run exactly;
2. draw fresh inputs for every ``in``/``inout`` pointer parameter, uniform in the test's
   [low, high], cast to the parameter's dtype (f16 through numpy float16); at the sizes the
   verifier chooses, plant the range's edges (high, 0 and -0 when in range, low) at a few spread
   positions (``plant_edges``: a uniform draw never gives them); fill every ``out`` buffer with
   0xFF bytes first (a NaN pattern for floats, so an unwritten element shows); a parameter with
   its own domain (range, index array, offsets, nullable), integer scalars drawn or tied to the
   launch, ``__constant__`` contents and preconditions: ``verify.inputs`` (issue 32), which
   also lays out the verifier's own values (negative rows, ties, extremes, zeros, bounds,
   subnormals, NaN/Inf when the test's ``specials`` say so) in every run;
3. evaluate buffer shapes, scalar values, grid, block and dynamic shared memory from the
   contract's expressions (``verify.expr.eval_expr``: a small safe parser, never ``eval``);
4. launch on the engine (``choose_engine``: CuPy on a CUDA device, else the PTX interpreter
   ``verify.ptxsim``); any finding the engine reports fails the test, whether or not the test
   lists the property it violates (a finding is a bug);
5. compare every ``out``/``inout`` buffer with the oracles (``verify.oracle``): the trusted
   reference ``verify.references.REFERENCES[kernel.reference]``, or the bundle's own reference run
   in ``verify.sandbox`` (never in this process), and the Futhark spec's entry when the contract
   declares one and ``futhark`` is on PATH; under the test's tolerance (``compare_output``: ulp on
   the integer encoding for floats, or rel/abs). Every detail names its oracle
   (``oracle trusted:<name>``, ``oracle bundle:<file>#<function>``, ``oracle futhark:<entry>``).
   The oracles get every binding of a test in one batch (one sandbox start per test).

On a GPU the device cannot report races, barrier divergence, uninitialised reads or bounds:
coverage is checked from the poison left in ``out`` buffers, and the interpreter is run as well on
the test's smallest binding to look for every other finding (see docs/falsification.md).

Status: ``passed`` when every binding ran without a finding and within tolerance; ``failed`` with
the first finding or the first element out of tolerance; ``skipped`` when the engine could not run
the PTX (``UnsupportedPtx``, a ``CannotCheck``) or the time budget (``options.timeout`` seconds
for all tests of the bundle together) was spent, never ``passed``.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ledger.core.errors import BadInput, CannotCheck
from verify.compare import Comparison as Comparison
from verify.compare import cast_to, values_of
from verify.compare import compare_output as compare_output
from verify.compare import describe_tolerance as describe_tolerance
from verify.compare import np_dtype as np_dtype
from verify.compare import ulp_distance as ulp_distance
from verify.context import Context, Options
from verify.engine import Arg as Arg
from verify.engine import BufferArg as BufferArg
from verify.engine import Dim3 as Dim3
from verify.engine import Engine as Engine
from verify.engine import LaunchOutcome as LaunchOutcome
from verify.engine import Observed as Observed
from verify.engine import ScalarArg as ScalarArg
from verify.inputs import PATTERN_TEXT as PATTERN_TEXT
from verify.inputs import PATTERNS as PATTERNS
from verify.inputs import apply_pattern as apply_pattern
from verify.inputs import (
    check_preconditions,
    constant_bytes,
    draw_pointer,
    input_range,
    nan_rule,
    patterns_for,
    structured,
)
from verify.inputs import edge_values as edge_values
from verify.inputs import plant_edges as plant_edges
from verify.inputs import random_values as random_values
from verify.model import (
    FLOAT_DTYPES,
    RANDOM,
    FalsificationTest,
    Kernel,
    Param,
    Tolerance,
    Waiver,
    scalar_literal,
)
from verify.oracle import ORACLE_IN_DETAIL, OracleCase, Oracles, OutputSpec, Result, oracles_for
from verify.report import Check, failed, passed, skipped
from verify.sampling import SAMPLE_BLOCKS, pick_blocks, unsafe_reason
from verify.waivers import describe as describe_waiver
from verify.waivers import resolve as resolve_waivers

MAX_LAUNCH_BYTES = 512 << 20  # all buffers of one launch together
MAX_BLOCK_THREADS = 1024
MAX_GRID_BLOCKS = 1 << 20  # more blocks than any contract test needs
MAX_THREADS = 1 << 22  # threads of one launch: the interpreter holds every thread's registers
MAX_DYNAMIC_SHARED = 227 << 10  # the largest opt-in shared memory per block of any current GPU
# Buffers of one test's bindings held at once: they are built, launched and judged in batches of
# about this many bytes (a contract may list thousands of bindings of up to MAX_LAUNCH_BYTES each)
MAX_HELD_BYTES = MAX_LAUNCH_BYTES
# Every falsify.* check of one bundle shares one wall-clock budget: ``options.timeout`` seconds
# (a contract can list many tests and sizes; the step limit bounds each launch only).
BUDGET_SPENT = "not run: the falsification time budget (--timeout) was spent on earlier launches"
EDGES_NOTE = "inputs at chosen sizes hold the range's edges (high, 0, low)"
PTX_TYPES = {
    "f16": ".f16",
    "bf16": ".b16",  # the interpreter gets the bit pattern (``engine_scalar``)
    "f32": ".f32",
    "f64": ".f64",
    "s32": ".s32",
    "u32": ".u32",
    "s64": ".s64",
    "u64": ".u64",
    "u8": ".u8",
    "s8": ".s8",
}
# Which property (and obligation) each finding kind violates, for the detail.
FINDING_PROPERTY = {
    "unwritten": "coverage/PO1",
    "double_write": "coverage/PO1",
    "out_of_bounds": "bounds/PO2",
    "misaligned": "bounds/PO2",
    "divergent_barrier": "convergence/PO3",
    "partial_barrier": "convergence/PO3",
    "uninitialised_read": "initialised/PO6",
    "stale_module_state": "initialised/PO6",  # state an earlier launch left, not this one's
    "undefined_register": "initialised/PO6",
    "shuffle_undefined_lane": "initialised/PO6",
    "race": "race_free/PO7",
    "global_race": "race_free/PO7",
    "cp_async_in_flight": "race_free/PO7",
    "schedule_dependent": "race_free/PO7",
    "step_limit": "reference/PO8",
    "device_error": "bounds/PO2",
    "assert_failed": "bounds/PO2",  # the kernel's own assert traps, as device_error on a GPU
    "division_by_zero": "initialised/PO6",  # an unspecified value, like an unwritten register
}


SECOND_SCHEDULE_SEED = 1  # fixed: a verdict must not depend on a random draw
SECOND_SCHEDULE_MAX_THREADS = 1 << 16  # larger launches run once (the run time doubles)
# Issue 10's second run shares issue 15's time budget: every author binding gets it, and of the
# verifier's chosen bindings the ones with the most threads (the most contention for atomics and
# conflicting stores), at most this many per test; the detail says which sizes ran under which.
SECOND_SCHEDULE_CHOSEN = 2


class InterpreterEngine:
    """The CPU engine: ``verify.ptxsim``, which reports races, bounds, barriers and coverage."""

    name = "interpreter"
    observes_findings = True

    def __init__(self, step_limit: int = 50_000_000, max_findings: int = 20, why: str = "") -> None:
        from verify import ptxsim

        self._sim = ptxsim
        self.step_limit = step_limit
        self.max_findings = max_findings
        self._modules: dict[bytes, Any] = {}
        self.version = ptxsim.ENGINE  # "ptxsim <version>"
        where = f"CPU; {why}" if why else "CPU"
        self.description = f"interpreter {self.version} ({where})"

    def module(self, ptx: bytes) -> Any:
        key = hashlib.sha256(ptx).digest()
        if key not in self._modules:
            if len(self._modules) >= 8:
                self._modules.clear()
            self._modules[key] = self._sim.load_module(ptx)
        return self._modules[key]

    def launch(
        self,
        ptx: bytes,
        entry: str,
        grid: Dim3,
        block: Dim3,
        args: Sequence[Arg],
        dynamic_shared: int,
        second_schedule: bool = True,
        waivers: Mapping[tuple[str, int], int] | None = None,
        constants: Mapping[str, bytes] | None = None,
        blocks: Sequence[int] | None = None,
    ) -> LaunchOutcome:
        sim = self._sim
        module = self.module(ptx)
        sim_args: list[Any] = []
        for a in args:
            if isinstance(a, BufferArg):
                sim_args.append(sim.Buffer(data=a.data, intent=a.intent, name=a.name))
            else:
                value = int(cast_to("bf16", [a.value])[0]) if a.dtype == "bf16" else a.value
                sim_args.append(sim.Scalar(value=value, ptx_type=PTX_TYPES[a.dtype]))
        run_grid = grid if blocks is None else (len(blocks), 1, 1)  # the blocks that run
        need = interpreter_bytes(module.program(entry), run_grid, block, dynamic_shared)
        if need > MAX_INTERP_BYTES:
            raise TooLarge(
                f"the interpreter's state for this launch would take about {need >> 20} MiB "
                f"(registers, .local and .shared per thread and block; at most "
                f"{MAX_INTERP_BYTES >> 20} MiB)"
            )
        small = math.prod(grid) * math.prod(block) <= SECOND_SCHEDULE_MAX_THREADS
        small = small and blocks is None  # a sampled launch runs once
        t0 = time.perf_counter()
        try:
            res = sim.launch(
                module,
                entry,
                grid,
                block,
                sim_args,
                dynamic_shared=dynamic_shared,
                step_limit=self.step_limit,
                max_findings=self.max_findings,
                # issue 10: small launches run again under a second, seeded schedule; what
                # differs there is judged like the first run's outputs (``judge_case``)
                schedule_seed=SECOND_SCHEDULE_SEED if second_schedule and small else None,
                schedule_values=True,
                out_undefined=True,  # out buffers are poisoned: their contents are unspecified
                waivers=waivers,
                constants=constants,
                blocks=blocks,
            )
        except CannotCheck as e:
            if need > COLLECT_AFTER_BYTES:
                gc.collect()
            # Findings made before the run met something it cannot model are still bugs.
            early = tuple(Observed(f.kind, f.message, f.line) for f in getattr(e, "findings", ()))
            if not early:
                raise
            seconds = time.perf_counter() - t0
            return LaunchOutcome(f"{sim.ENGINE} (stopped: {e})", early, 0, seconds)
        if need > COLLECT_AFTER_BYTES:
            # the machine's state is held in reference cycles (closures over it), which only the
            # cyclic collector frees, and a few numpy arrays never trigger it: without this, each
            # large launch's state stays until much later, and several add up to gigabytes
            gc.collect()
        seconds = time.perf_counter() - t0
        found = tuple(Observed(f.kind, f.message, f.line) for f in res.findings)
        return LaunchOutcome(
            str(res.engine),
            found,
            int(res.thread_instructions),
            seconds,
            tuple(res.second_schedule.items()),
            notes=tuple(res.notes),
            waived=tuple(res.waived),
            written=tuple(res.written.items()),
        )


# What the interpreter's state of one launch may take (``interpreter_bytes``): the bundled
# kernels need at most about 10 MiB at their sizes, vector_add at MAX_THREADS about 1 GiB
MAX_INTERP_BYTES = 2 << 30
COLLECT_AFTER_BYTES = 64 << 20  # a launch whose state may be larger is collected right after it
THREAD_BYTES = 64  # the machine's own arrays per thread (ids, masks, a schedule, counters)
SHARED_TRACKING = 48  # bytes the machine holds per byte of shared memory (value, race tracking)


def interpreter_bytes(prog: Any, grid: Dim3, block: Dim3, dynamic_shared: int) -> int:
    """An upper estimate of the memory ``verify.ptxsim`` allocates for a launch of ``prog``
    (a ``verify.ptxsim.program.Program``), before it runs: per thread (warps padded to 32) its
    own arrays, one value and one definedness flag per register the code names, and each
    ``.local`` byte with its flag; per block ``SHARED_TRACKING`` bytes per shared byte."""
    blocks = math.prod(grid)
    threads = blocks * -(-math.prod(block) // 32) * 32
    regs = {r for ci in prog.code for r in (*ci.reads, *ci.writes)}
    reg_bytes = sum(int(np.dtype(prog.store_types.get(r, np.uint32)).itemsize) + 1 for r in regs)
    shared = int(prog.static_shared) + dynamic_shared
    stride = max(16, -(-shared // 16) * 16) if shared else 0
    local = int(prog.local_size)
    return threads * (THREAD_BYTES + reg_bytes + 2 * local) + blocks * stride * SHARED_TRACKING


def choose_engine(options: Options) -> Engine:
    """CuPy when it imports, a device is present and ``options.use_gpu``; else the interpreter.

    The engine's ``description`` names it: the device name for CuPy, the ptxsim version (and why
    no GPU is used) for the interpreter.
    """
    why = "GPU use disabled"
    if options.use_gpu:
        from verify.gpu import probe

        cupy_engine, why = probe()
        if cupy_engine is not None:
            return cupy_engine
    return InterpreterEngine(step_limit=options.interp_step_limit, why=why)


# --- one launch ------------------------------------------------------------------------------


@dataclass
class Case:
    """One size binding made concrete: arguments, launch shape, and the reference's inputs."""

    sizes: dict[str, int]
    args: list[Arg]
    grid: Dim3
    block: Dim3
    dynamic_shared: int
    inputs: dict[str, np.ndarray[Any, Any]]  # copies of the in/inout values, for the reference
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)  # pointer dims
    constants: dict[str, bytes] = dataclasses.field(default_factory=dict)  # __constant__ contents
    # the grid blocks a sampled launch runs (``verify.sampling``); () runs every block
    blocks: tuple[int, ...] = ()


class TooLarge(CannotCheck):
    pass


def _eval(expr: str, sizes: Mapping[str, int], where: str) -> int:
    from verify.expr import eval_expr

    try:
        return int(eval_expr(expr, sizes))
    except BadInput as e:
        raise BadInput(f"{where}: {e}") from e


def _dim3(exprs: Sequence[str], sizes: Mapping[str, int], where: str, cap: int) -> Dim3:
    vals = [_eval(x, sizes, f"{where}[{i}]") for i, x in enumerate(exprs)]
    if len(vals) != 3 or any(v < 1 for v in vals):
        raise BadInput(f"{where} must be three positive integers, got {vals}")
    if math.prod(vals) > cap:
        raise BadInput(f"{where} {vals} has more than {cap} entries")
    return vals[0], vals[1], vals[2]


def make_case(
    kernel: Kernel,
    test: FalsificationTest,
    sizes: Mapping[str, int],
    rng: np.random.Generator,
    *,
    edges: bool = False,
    dry: bool = False,
    pattern: str = "",
) -> Case:
    """Build the arguments of one launch; raise ``BadInput`` for a bad expression, ``TooLarge``.

    ``edges``: plant the input range's edges (``plant_edges``) in every in/inout buffer after
    its random draw (the verifier's chosen bindings; the author's stay purely random, so their
    results do not change). ``dry``: every check and the launch shape, but empty buffers and no
    draw from ``rng`` for them (what a test's bindings will need, before any is allocated).
    ``pattern``: lay out every in/inout buffer's draw as ``apply_pattern`` says (no edges);
    ``null``: every nullable pointer is passed as a null pointer (``verify.inputs``)."""
    if kernel.launch is None:
        raise BadInput("the kernel has no launch section")
    args: list[Arg] = []
    drawn: dict[str, np.ndarray[Any, Any]] = {}
    ranges: dict[str, tuple[float, float]] = {}
    total = 0
    shapes: dict[str, tuple[int, ...]] = {}
    for p in kernel.params:
        if p.kind == "scalar":
            args.append(_scalar_arg(p, test, sizes, rng, {}) if not p.tied else
                        ScalarArg(p.name, 0, p.dtype))  # a launch value: set below
            continue
        if pattern == "null" and p.domain is not None and p.domain.nullable:
            args.append(ScalarArg(p.name, 0, "u64"))  # a null pointer (verify.inputs)
            continue
        dims = [_eval(d, sizes, f"param {p.name} shape[{i}]") for i, d in enumerate(p.shape)]
        if any(d < 0 for d in dims):
            raise BadInput(f"param {p.name}: negative shape {dims}")
        count = math.prod(dims)
        shapes[p.name] = tuple(dims)
        dt = np_dtype(p.dtype)
        total += count * dt.itemsize
        if total > MAX_LAUNCH_BYTES:
            raise TooLarge(f"buffers of this launch exceed {MAX_LAUNCH_BYTES >> 20} MiB")
        if dry:
            data = np.empty(0, dt)
        elif p.intent == "out":
            data = np.full(count * dt.itemsize, 0xFF, dtype=np.uint8).view(dt)
        else:
            data = _draw(p, test, sizes, rng, count, dims, edges, pattern,
                         kernel.preconditions, ranges)
            drawn[p.name] = data
        args.append(BufferArg(p.name, p.intent, data))
    launch = kernel.launch
    grid = _dim3(launch.grid, sizes, "launch.grid", MAX_GRID_BLOCKS)
    block = _dim3(launch.block, sizes, "launch.block", MAX_BLOCK_THREADS)
    shared = _eval(launch.shared_bytes or "0", sizes, "launch.shared_bytes")
    if not 0 <= shared <= MAX_DYNAMIC_SHARED:
        raise BadInput(f"launch.shared_bytes {shared} is outside [0, {MAX_DYNAMIC_SHARED}]")
    threads = math.prod(grid) * math.prod(block)
    if threads > MAX_THREADS:
        raise TooLarge(f"{threads} threads in one launch (at most {MAX_THREADS} are run)")
    tied = {"grid.x": grid[0], "grid.y": grid[1], "grid.z": grid[2], "block.x": block[0],
            "block.y": block[1], "block.z": block[2], "shared_bytes": shared}
    for i, p in enumerate(kernel.params):
        if p.kind == "scalar" and p.tied:
            args[i] = _scalar_arg(p, test, sizes, rng, tied)
    if kernel.preconditions and not dry:
        dtypes = {p.name: p.dtype for p in kernel.params}
        check_preconditions(kernel.preconditions, drawn, dtypes, sizes, rng, ranges)
    inputs = {k: v.copy() for k, v in drawn.items()}
    consts = constant_bytes(kernel.constants, rng) if kernel.constants and not dry else {}
    return Case(dict(sizes), args, grid, block, shared, inputs, shapes, consts)


def _scalar_arg(p: Param, test: FalsificationTest, sizes: Mapping[str, int],
                rng: np.random.Generator, tied: Mapping[str, int]) -> ScalarArg:
    """A scalar argument: drawn, a literal, a launch value, or a size expression."""
    if p.value == RANDOM:
        lo, hi = input_range(p, test, sizes)
        drawn = random_values(rng, p.dtype, 1, lo, hi)
        value = values_of(p.dtype, drawn)[0]
        return ScalarArg(p.name, float(value) if p.dtype in FLOAT_DTYPES else int(value),
                         p.dtype)
    literal = scalar_literal(p.value) if p.dtype in FLOAT_DTYPES else None
    if literal is not None:
        rounded = values_of(p.dtype, cast_to(p.dtype, [literal]))
        return ScalarArg(p.name, float(rounded[0]), p.dtype)
    val = tied[p.tied] if p.tied else _eval(p.value or "0", sizes, f"param {p.name}")
    sdt = np_dtype(p.dtype)
    if np.issubdtype(sdt, np.integer):
        info = np.iinfo(sdt)
        if not int(info.min) <= val <= int(info.max):
            raise BadInput(f"param {p.name}: value {val} does not fit {p.dtype}")
        return ScalarArg(p.name, val, p.dtype)
    return ScalarArg(p.name, float(val), p.dtype)


def _draw(p: Param, test: FalsificationTest, sizes: Mapping[str, int],
          rng: np.random.Generator, count: int, dims: Sequence[int], edges: bool, pattern: str,
          preconditions: Sequence[str], ranges: dict[str, tuple[float, float]],
          ) -> np.ndarray[Any, Any]:
    """One in/inout buffer: drawn in its domain, then laid out as ``pattern`` (or with the
    range's edges planted); index and offsets arrays keep their structure."""
    lo, hi = input_range(p, test, sizes, preconditions)
    ranges[p.name] = (lo, hi)
    data = draw_pointer(p, count, sizes, rng, (lo, hi))
    if structured(p):
        return data
    if pattern and pattern != "null":
        apply_pattern(data, pattern, lo, hi, p.dtype, dims[-1] if dims else 0, rng)
    elif edges:
        plant_edges(data, p.dtype, lo, hi)
    return data


def copy_case(case: Case) -> Case:
    """The same launch with fresh copies of every buffer (to run a second engine on it)."""
    args: list[Arg] = [
        BufferArg(a.name, a.intent, a.data.copy()) if isinstance(a, BufferArg) else a
        for a in case.args
    ]
    return Case(
        case.sizes, args, case.grid, case.block, case.dynamic_shared, case.inputs, case.shapes,
        case.constants,
    )


def oracle_case(kernel: Kernel, case: Case) -> OracleCase:
    """What the oracles receive for ``case``: in/inout pointers and scalars (0-d arrays)."""
    by_name = {p.name: p for p in kernel.params}
    inputs = {k: values_of(by_name[k].dtype, v) for k, v in case.inputs.items()}
    for a in case.args:  # a null pointer (a u64 0 in place of a buffer) is not an input
        if isinstance(a, ScalarArg) and by_name[a.name].kind == "scalar":  # bf16 as float32
            inputs[a.name] = np.array(a.value, dtype=np.float32 if a.dtype == "bf16" else
                                      np_dtype(a.dtype))
    for name, raw in case.constants.items():  # __constant__ arrays, by their PTX name
        c = next(c for c in kernel.constants if c.name == name)
        inputs[name] = values_of(c.dtype, np.frombuffer(raw, dtype=np_dtype(c.dtype)).copy())
    outputs = [  # a null pointer (not in shapes) has no output
        OutputSpec(p.name, p.dtype, case.shapes[p.name])
        for p in kernel.params
        if p.kind == "ptr" and p.intent != "in" and p.name in case.shapes
    ]
    nulled = frozenset(  # a nullable output passed null: the reference may still return it
        p.name for p in kernel.params
        if p.kind == "ptr" and p.intent != "in" and p.name not in case.shapes
    )
    return OracleCase(inputs, case.sizes, outputs, nulled)


def poison_findings(case: Case, expected: Mapping[str, np.ndarray[Any, Any]]) -> list[Observed]:
    """``unwritten`` for out elements still holding the 0xFF poison (unless expected so)."""
    found: list[Observed] = []
    for a in case.args:
        if not isinstance(a, BufferArg) or a.intent != "out" or a.data.size == 0:
            continue
        size = a.data.itemsize
        raw = a.data.view(np.uint8).reshape(-1, size)
        poisoned = np.all(raw == 0xFF, axis=1)
        want = expected.get(a.name)
        if want is not None and np.asarray(want).size == a.data.size:
            dtype = "bf16" if a.data.dtype == np.uint16 and not np.issubdtype(
                np.asarray(want).dtype, np.integer) else ""
            want_raw = np.ascontiguousarray(
                cast_to(dtype, np.asarray(want).reshape(-1)) if dtype else
                np.asarray(want).reshape(-1).astype(a.data.dtype))
            poisoned &= ~np.all(want_raw.view(np.uint8).reshape(-1, size) == 0xFF, axis=1)
        idx = np.flatnonzero(poisoned)
        if idx.size:
            found.append(
                Observed(
                    "unwritten",
                    f"{a.name}[{int(idx[0])}] never written (still 0xFF poison after the launch); "
                    f"{idx.size} of {a.data.size} elements unwritten",
                )
            )
    return found


# --- one test --------------------------------------------------------------------------------


def _fmt_sizes(bindings: Sequence[Mapping[str, int]]) -> str:
    keys = sorted({k for b in bindings for k in b})
    if len(keys) == 1:
        k = keys[0]
        return f"{k}=" + ",".join(str(b.get(k, "?")) for b in bindings)
    return "; ".join(",".join(f"{k}={v}" for k, v in b.items()) for b in bindings)


@dataclass
class _Worst:
    """The largest errors seen over every buffer and binding of one test."""

    ulp: float | None = None
    abs: float = 0.0
    rel: float = 0.0
    # what the engine judged benign and what a contract waiver covered, over every binding
    notes: dict[str, None] = dataclasses.field(default_factory=dict)
    waived: dict[str, None] = dataclasses.field(default_factory=dict)
    used: set[int] = dataclasses.field(default_factory=set)  # indices of the waivers that held

    def seen(self, outcome: LaunchOutcome, waivers: Sequence[Waiver] = ()) -> None:
        for n in outcome.notes:
            self.notes.setdefault(n)
        for i, text in outcome.waived:
            self.used.add(i)
            reason = f" (waiver {i}: {waivers[i].reason!r})" if i < len(waivers) else ""
            self.waived.setdefault(f"{text}{reason}")

    def remarks(self) -> str:
        """``; note: ...; waived: ...`` for the detail (the first 3 of each, and a count)."""
        out = ""
        for what, items in (("note", list(self.notes)), ("waived", list(self.waived))):
            if items:
                more = f" (+{len(items) - 3} more)" if len(items) > 3 else ""
                out += f"; {what}: " + "; ".join(items[:3]) + more
        return out

    def add(self, c: Comparison) -> None:
        if c.max_ulp is not None:
            self.ulp = max(self.ulp or 0.0, c.max_ulp)
        self.abs = max(self.abs, c.max_abs)
        self.rel = max(self.rel, c.max_rel)

    def text(self, tol: Tolerance) -> str:
        if self.ulp is not None and (tol.ulp is not None or (tol.abs is None and tol.rel is None)):
            return f"max {self.ulp:g} ulp"
        return f"max abs {self.abs:.3g}, rel {self.rel:.3g}"


def _finding_text(findings: Sequence[Observed]) -> str:
    f = findings[0]
    prop = FINDING_PROPERTY.get(f.kind, "")
    more = f" (+{len(findings) - 1} more findings)" if len(findings) > 1 else ""
    message = f.message.removeprefix(f"{f.kind}: ")  # the interpreter starts with its kind too
    return f"{f.kind}{f' [{prop}]' if prop else ''}: {message}{more}"


def launch_and_judge(
    kernel: Kernel,
    test: FalsificationTest,
    case: Case,
    ptx: bytes,
    engine: Engine,
    expected_by: Mapping[str, Result],
    worst: _Worst,
) -> tuple[str, str] | None:
    """Run ``case`` on ``engine`` and compare with each oracle's outputs (``expected_by``: oracle
    name -> outputs or an error; the first is the primary oracle); None when it passed, else
    (status, reason)."""
    outcome = launch_case(kernel, case, ptx, engine, second_schedule=True)
    if isinstance(outcome, tuple):
        return outcome
    return judge_case(kernel, test, case, outcome, engine, expected_by, worst)


def launch_case(
    kernel: Kernel, case: Case, ptx: bytes, engine: Engine, second_schedule: bool = True
) -> LaunchOutcome | tuple[str, str]:
    """The engine's outcome, or ("skipped", why) when it could not run the launch. The
    contract's waivers go to the engine (``verify.waivers``) only when there are some."""
    extra: dict[str, Any] = {}
    if kernel.waivers:
        extra["waivers"] = resolve_waivers(kernel.waivers, ptx, kernel.entry)[0]
    if case.constants:
        extra["constants"] = case.constants
    if case.blocks:
        extra["blocks"] = case.blocks
    try:
        return engine.launch(
            ptx,
            kernel.entry,
            case.grid,
            case.block,
            case.args,
            case.dynamic_shared,
            second_schedule=second_schedule,
            **extra,
        )
    except CannotCheck as e:
        return "skipped", f"{engine.name} could not run it: {e}"
    except BadInput as e:  # verify.ptxsim.PtxSyntaxError: PTX the interpreter cannot read
        return "skipped", f"{engine.name} could not read the PTX: {e}"


def judge_case(
    kernel: Kernel,
    test: FalsificationTest,
    case: Case,
    outcome: LaunchOutcome,
    engine: Engine,
    expected_by: Mapping[str, Result],
    worst: _Worst,
) -> tuple[str, str] | None:
    """Findings first, then every out/inout buffer against every oracle; None when it passed."""
    for name, result in expected_by.items():
        if isinstance(result, str):
            return "failed", f"oracle {name}: {result}"
    primary = next(iter(expected_by.values()))
    assert not isinstance(primary, str)
    findings = list(outcome.findings)
    if not engine.observes_findings:
        findings += poison_findings(case, primary)
    if findings:
        return "failed", _finding_text(findings)
    by_name = {p.name: p for p in kernel.params}
    written = dict(outcome.written) if case.blocks else {}  # sampled: what its blocks wrote
    for name, expected in expected_by.items():
        assert not isinstance(expected, str)
        for a in case.args:
            if not isinstance(a, BufferArg) or a.intent == "in":
                continue
            if a.name not in expected:
                return "failed", f"oracle {name} gives no value for output {a.name}"
            try:
                dtype = by_name[a.name].dtype
                got = nan_rule(a.data, expected[a.name], dtype, test.nan)
                cmp = compare_output(
                    a.name, got, expected[a.name], dtype, test.tolerance, written.get(a.name)
                )
            except BadInput as e:
                return "failed", f"{e} (oracle {name})"
            if cmp.bad:
                tol = describe_tolerance(test.tolerance)
                return "failed", (
                    f"{cmp.first}; {cmp.bad} of {a.data.size} elements of {a.name} outside {tol} "
                    f"(oracle {name})"
                )
            worst.add(cmp)
        for out, data in outcome.second_schedule:
            verdict = _judge_second(out, data, case, expected, by_name[out].dtype, test, name)
            if verdict is not None:
                return "failed", verdict
    return None


def _judge_second(
    out: str,
    data: np.ndarray[Any, Any],
    case: Case,
    expected: Mapping[str, Any],
    dtype: str,
    test: FalsificationTest,
    oracle: str,
) -> str | None:
    """An output that came out different under the interpreter's second schedule (issue 10),
    judged against the oracle under the test's tolerance: a float sum whose rounding follows the
    order of its atomics passes within a tolerance that fits; beyond it (or with 0 ulp) it is
    ``schedule_dependent``. None when it passed, else the reason."""
    first = next(a.data for a in case.args if isinstance(a, BufferArg) and a.name == out)
    try:
        cmp = compare_output(out, data, expected[out], dtype, test.tolerance)
    except BadInput as e:
        return f"{e} (oracle {oracle})"
    if not cmp.bad:
        return None
    diff = np.flatnonzero(first.view(np.uint8) != data.view(np.uint8))
    at = int(diff[0]) // first.itemsize if diff.size else 0
    tol = describe_tolerance(test.tolerance)
    return _finding_text([Observed(
        "schedule_dependent",
        f"element {at} of output buffer '{out}' is {first[at].item()!r} under the interpreter's "
        f"schedule and {data[at].item()!r} under a second schedule (seed {SECOND_SCHEDULE_SEED}: "
        "atomics and conflicting stores in another thread order, cp.async copies landing when "
        f"issued); under the second schedule {cmp.first}; {cmp.bad} of {data.size} elements "
        f"of {out} outside {tol} (oracle {oracle}): the result depends on the order threads run",
    )])


def _expected(kernel: Kernel, oracles: Oracles, cases: Sequence[Case]) -> list[dict[str, Result]]:
    """Every oracle's outputs for every case (one batch per oracle); raises ``CannotCheck``."""
    batch = [oracle_case(kernel, c) for c in cases]
    per_case: list[dict[str, Result]] = [{} for _ in cases]
    assert oracles.primary is not None
    for i, r in enumerate(oracles.primary.compute(batch)):
        per_case[i][oracles.primary.name] = r
    for oracle in list(oracles.extra):
        try:
            results = oracle.compute(batch)
        except CannotCheck as e:  # an extra oracle that cannot run here: said in the detail
            oracles.extra.remove(oracle)
            entry = oracle.name.partition(":")[2]
            oracles.notes.append(f"the {oracle.kind} oracle {entry!r} could not run: {e}")
            continue
        for i, r in enumerate(results):
            per_case[i][oracle.name] = r
    return per_case


def _oracle_text(oracles: Oracles) -> str:
    names = [o.name for o in [oracles.primary, *oracles.extra] if o is not None]
    how = [o.how for o in [oracles.primary, *oracles.extra] if o is not None and o.how]
    text = " and ".join(f"oracle {n}" for n in names)
    if how:
        text += f" ({'; '.join(how)})"
    if oracles.notes:
        text += f"; {'; '.join(oracles.notes)}"
    return text


def has_entry(ptx: bytes, entry: str) -> bool:
    """True when the PTX declares ``.entry <entry>`` (optionally ``.visible``/``.weak``)."""
    pattern = rb"^\s*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+" + re.escape(entry.encode())
    return re.search(pattern + rb"\s*\(", ptx, re.MULTILINE) is not None


def _smallest(bindings: Sequence[Mapping[str, int]]) -> Mapping[str, int]:
    return min(bindings, key=lambda b: (sum(b.values()), sorted(b.items())))


# --- sizes and seeds (issue 15) ----------------------------------------------------------------

# Work units (``verify.sizes.cost``) of one launch at a verifier-chosen size: the interpreter
# runs 2^16 in about 0.3 s; a device far more (still within MAX_THREADS and MAX_LAUNCH_BYTES).
CPU_COST_CAP = 1 << 16
GPU_COST_CAP = 1 << 22
AUTHOR_ONLY = "sizes not extended"  # the certificate marks such tests "author-chosen sizes only"


@dataclass(frozen=True)
class Binding:
    """One launch of a test: its sizes, the seed of its inputs, and who chose the sizes."""

    sizes: Mapping[str, int]
    seed: int
    chosen: str = ""  # why the verifier chose it ("n block+1 (256)"); "" for the author's
    pattern: str = ""  # "" (random inputs), or one of PATTERNS: how the input values are laid out
    sample: int = 0  # run on at most this many of the grid's blocks (``verify.sampling``); 0: all


def fresh_seed() -> int:
    """A seed for this run when ``--seed`` is not given (recorded in every falsify detail)."""
    import secrets

    return secrets.randbelow(1 << 32)


def _stream(run_seed: int, test_id: str, purpose: int) -> np.random.Generator:
    import zlib

    return np.random.default_rng([run_seed, zlib.crc32(test_id.encode()), purpose])


def plan_bindings(
    kernel: Kernel, test: FalsificationTest, run_seed: int, cost_cap: int,
    sample_blocks: int = 0, no_sample: str = "",
) -> tuple[list[Binding], str]:
    """The author's sizes at the contract's seed, then the verifier's sizes at ``run_seed`` (or,
    when none can be chosen, the author's sizes again at ``run_seed``, so that the contract's seed
    is never used alone); and a phrase for the detail. ``sample_blocks`` (0: never): a chosen
    binding over ``cost_cap`` whose grid has more blocks runs on that many of them
    (``verify.sampling``); ``no_sample`` says why blocks may not be sampled."""
    from verify.model import domain_text
    from verify.sizes import choose_sizes

    plan = choose_sizes(kernel, test.sizes, _stream(run_seed, test.id, 1), cost_cap,
                        sample_blocks=sample_blocks, no_sample=no_sample)
    out = [Binding(s, test.seed) for s in test.sizes]
    reached: list[str] = []
    for c in plan.chosen:
        sample, text = _sampled(kernel, c.sizes, cost_cap, sample_blocks)
        out.append(Binding(c.sizes, run_seed, c.why, sample=sample))
        if c.why.endswith(" max") and text:
            name = c.why.removesuffix(" max")
            reached.append(f"max {name}={c.sizes[name]} run{text}")
    again = pattern_bindings(kernel, plan.chosen, run_seed, cost_cap, test)
    out += again
    if (
        run_seed != test.seed and not plan.chosen
    ):  # the run's seed is used, never the contract's alone
        out += [Binding(s, run_seed) for s in test.sizes]
    if not plan.chosen:
        phrase = "; ".join(plan.notes)
    else:
        phrase = (
            f"chosen {_fmt_chosen([c.sizes for c in plan.chosen])} at seed {run_seed} "
            f"(domain {domain_text(kernel.size_domain, kernel.size_constraints)}"
            + "".join(f"; {n}" for n in [*plan.notes, *reached])
            + ")"
        )
        phrase += _patterns_text(again)
    return out, phrase


def _sampled(
    kernel: Kernel, sizes: Mapping[str, int], cost_cap: int, sample_blocks: int
) -> tuple[int, str]:
    """How many blocks a chosen binding runs on (0: all) and, for one over a quarter of the cost
    cap (a maximum within ``verify.sizes.REACH``), the detail's words: `` on 16 of 4096 blocks
    (edge blocks and a sample)`` or `` (every block)``."""
    from verify.sizes import BIG_SHARE, cost

    units = cost(kernel, sizes)
    if units <= cost_cap // BIG_SHARE:
        return 0, ""
    try:
        grid = kernel.launch.grid if kernel.launch else ()
        blocks = math.prod(_eval(g, sizes, "launch.grid") for g in grid)
    except BadInput:
        blocks = 0
    if sample_blocks and units > cost_cap and blocks > sample_blocks:
        return sample_blocks, f" on {sample_blocks} of {blocks} blocks (edge blocks and a sample)"
    return 0, " (every block)"


def _patterns_text(again: Sequence[Binding]) -> str:
    """``; n=4099 again with one repeated value per input; n=257 again with all-negative rows
    and with ...`` (bindings of one size grouped)."""
    groups: dict[str, list[str]] = {}
    for b in again:
        groups.setdefault(_fmt_sizes([b.sizes]), []).append(PATTERN_TEXT[b.pattern])
    return "".join(f"; {k} again with " + " and with ".join(v) for k, v in groups.items())


def pattern_bindings(
    kernel: Kernel, chosen: Sequence[Any], run_seed: int, cost_cap: int,
    test: FalsificationTest | None = None,
) -> list[Binding]:
    """The chosen size that costs most within ``cost_cap / BIG_SHARE`` (the most blocks and
    elements the plan can afford again) once more with one repeated value, and the chosen size
    of median cost among those once more for each of the other patterns
    (``verify.inputs.patterns_for``: in every run, whatever the seed)."""
    from verify.sizes import BIG_SHARE, cost

    fits = [c for c in chosen if cost(kernel, c.sizes) <= cost_cap // BIG_SHARE]
    if not fits:
        return []
    best = max(fits, key=lambda c: cost(kernel, c.sizes))
    out = [Binding(best.sizes, run_seed, f"{best.why}; {PATTERN_TEXT['repeated']}", "repeated")]
    if test is None:
        return out
    by_cost = sorted(fits, key=lambda c: cost(kernel, c.sizes))
    pick = by_cost[len(by_cost) // 2]  # the median: rows of some length, at a moderate cost
    nullable = any(p.domain is not None and p.domain.nullable for p in kernel.params)
    return out + [
        Binding(pick.sizes, run_seed, f"{pick.why}; {PATTERN_TEXT[p]}", p)
        for p in patterns_for(test, nullable) if p != "repeated"
    ]


def _fmt_chosen(bindings: Sequence[Mapping[str, int]]) -> str:
    keys = list(bindings[0]) if bindings else []
    if len(keys) == 1:
        return f"{keys[0]}=" + ",".join(str(b[keys[0]]) for b in bindings)
    return f"({','.join(keys)})=" + " ".join(
        "(" + ",".join(str(b.get(k, "?")) for k in keys) + ")" for b in bindings
    )


def _where(engine: Engine, b: Binding) -> str:
    origin = f" (chosen: {b.chosen})" if b.chosen else ""
    return f"{engine.description}: {_fmt_sizes([b.sizes])}{origin}; seed {b.seed}"


def run_test(
    kernel: Kernel,
    test: FalsificationTest,
    ptx: bytes,
    seed: int,
    engine: Engine,
    *,
    cross_check: Engine | None = None,
    deadline: float | None = None,
    oracles: Oracles | None = None,
    run_seed: int | None = None,
    bindings: Sequence[Binding] | None = None,
    waivers_used: set[int] | None = None,
) -> Check:
    """One ``falsify.<TEST-ID>`` check (steps 1-5 of the module docstring).

    ``seed`` seeds the inputs at the author's sizes (the contract's seed); ``run_seed`` (default
    ``seed``) seeds the inputs at the sizes the verifier chooses (``plan_bindings``) and the
    random draws among them; ``bindings`` replaces that plan (tests). When ``engine`` cannot
    observe findings (a GPU), ``cross_check`` (default: the interpreter) runs the test's smallest
    author binding to look for races, barrier divergence, bounds and uninitialised reads. Past
    ``deadline`` (``time.monotonic()``), no further binding starts and the test is skipped.
    ``oracles`` default to ``oracles_for(kernel, {}, Options())`` (enough for a trusted
    reference; a bundle reference needs the bundle's files). ``waivers_used`` collects the
    indices of the contract waivers that covered a finding (``run`` fails a waiver none used).
    """
    cid = f"falsify.{test.id}"
    tool = engine.name
    version = engine.version
    if not test.executable or not test.sizes:
        return skipped(cid, "not executable: no sizes/properties", tool, version)
    if oracles is None:
        try:
            oracles = oracles_for(kernel, {}, Options())
        except CannotCheck as e:
            return skipped(cid, f"no oracle can run here: {e}", tool, version)
        try:
            return run_test(
                kernel, test, ptx, seed, engine, cross_check=cross_check, deadline=deadline,
                oracles=oracles, run_seed=run_seed, bindings=bindings, waivers_used=waivers_used,
            )
        finally:
            oracles.close()
    if oracles.primary is None:
        return failed(cid, oracles.problem, tool, version)
    if not has_entry(ptx, kernel.entry):
        return failed(
            cid, f"kernel.entry {kernel.entry!r} is not an .entry of the PTX", tool, version
        )
    if run_seed is None:
        run_seed = seed
    cap = CPU_COST_CAP if engine.observes_findings else GPU_COST_CAP
    test_s = test if test.seed == seed else dataclasses.replace(test, seed=seed)
    sample, no_sample = 0, ""
    if engine.observes_findings:  # the interpreter may run a big grid on some of its blocks
        no_sample = unsafe_reason(ptx) or ""
        sample = 0 if no_sample else SAMPLE_BLOCKS
    plan, phrase = plan_bindings(kernel, test_s, run_seed, cap, sample, no_sample)
    if bindings is not None:  # the caller's bindings (tests, Options.extend_sizes off)
        plan = list(bindings)
        picked = [b.sizes for b in plan if b.chosen]
        phrase = (
            f"chosen {_fmt_chosen(picked)} at seed {run_seed}"
            if picked
            else f"{AUTHOR_ONLY}: only the author's sizes were run"
        )
    worst = _Worst(used=waivers_used if waivers_used is not None else set())
    check = _judge_test(
        kernel, test, ptx, (seed, run_seed, plan, phrase), engine, cross_check, deadline, oracles,
        worst,
    )
    if ORACLE_IN_DETAIL.search(check.detail) is None:  # every detail names its oracle
        check = Check(
            check.id, check.status, f"{check.detail} ({_oracle_text(oracles)})", tool, version
        )
    return check


def _threads(case: Case) -> int:
    return math.prod(case.grid) * math.prod(case.block)


def second_schedule_plan(cases: Sequence[tuple[Binding, Case]]) -> list[bool]:
    """Which launches the interpreter runs again under its second schedule (issue 10): every
    author binding, and the ``SECOND_SCHEDULE_CHOSEN`` chosen bindings with the most threads;
    none over ``SECOND_SCHEDULE_MAX_THREADS`` threads."""
    fits = [_threads(c) <= SECOND_SCHEDULE_MAX_THREADS and not b.sample for b, c in cases]
    chosen = [i for i, (b, _) in enumerate(cases) if b.chosen and fits[i]]
    chosen.sort(key=lambda i: (-_threads(cases[i][1]), i))
    keep = set(chosen[:SECOND_SCHEDULE_CHOSEN])
    return [fits[i] and (not b.chosen or i in keep) for i, (b, _) in enumerate(cases)]


def _schedule_text(cases: Sequence[tuple[Binding, Case]], twice: Sequence[bool]) -> str:
    """Which sizes ran under the second schedule, and which once (and why), for the detail."""
    two = [b.sizes for (b, _), t in zip(cases, twice, strict=True) if t]
    sampled = [b.sizes for b, _ in cases if b.sample]
    big = [b.sizes for (b, c), t in zip(cases, twice, strict=True)
           if not t and not b.sample and _threads(c) > SECOND_SCHEDULE_MAX_THREADS]
    rest = [b.sizes for (b, c), t in zip(cases, twice, strict=True)
            if not t and not b.sample and _threads(c) <= SECOND_SCHEDULE_MAX_THREADS]
    where = _fmt_chosen(two) if two else "no size"
    parts = [f"second schedule (seed {SECOND_SCHEDULE_SEED}) at {where}"]
    if big:
        parts.append(f"once at {_fmt_chosen(big)} (over {SECOND_SCHEDULE_MAX_THREADS} threads)")
    if sampled:
        parts.append(f"once at {_fmt_chosen(sampled)} (run on a sample of its blocks)")
    if rest:
        parts.append(
            f"once at {_fmt_chosen(rest)} (chosen sizes beyond the {SECOND_SCHEDULE_CHOSEN} "
            "with the most threads)"
        )
    return ", ".join(parts)


def _held_bytes(case: Case) -> int:
    """Bytes of the buffers a built case holds (its arguments and the inputs' copies)."""
    held = sum(a.data.nbytes for a in case.args if isinstance(a, BufferArg))
    return held + sum(v.nbytes for v in case.inputs.values())


def _run_batch(
    kernel: Kernel,
    test: FalsificationTest,
    ptx: bytes,
    engine: Engine,
    batch: Sequence[tuple[Binding, Case, bool]],
    deadline: float | None,
    oracles: Oracles,
    worst: _Worst,
    seed: int,
) -> Check | list[Mapping[str, int]]:
    """Launch each case of ``batch`` (binding, case, second schedule), then judge them against
    the oracles' outputs for all of them; the test's ``Check`` when one failed or could not run,
    else the sizes whose outputs differed under the second schedule (within the tolerance)."""
    cid = f"falsify.{test.id}"
    tool = engine.name
    version = engine.version
    assert oracles.primary is not None
    launched: list[tuple[Binding, Case, LaunchOutcome]] = []
    stop: tuple[Binding, str, str] | None = None  # binding, status, reason
    for b, case, again2 in batch:
        if deadline is not None and time.monotonic() > deadline:
            stop = (b, "skipped", BUDGET_SPENT)
            break
        outcome = launch_case(kernel, case, ptx, engine, second_schedule=again2)
        if isinstance(outcome, tuple):
            stop = (b, *outcome)
            break
        worst.seen(outcome, kernel.waivers)
        if engine.observes_findings and outcome.findings:
            stop = (b, "failed", _finding_text(outcome.findings))
            break
        launched.append((b, case, outcome))
    try:
        expected = _expected(kernel, oracles, [c for _, c, _ in launched]) if launched else []
    except CannotCheck as e:
        if stop is not None and stop[1] == "failed":  # a finding is a bug, oracle or not
            return failed(cid, f"{_where(engine, stop[0])}: {stop[2]}", tool, version)
        where = f"{engine.description}: {_fmt_sizes(test.sizes)}; seed {seed}"
        return skipped(
            cid, f"{where}: oracle {oracles.primary.name} cannot run: {e}", tool, version
        )
    for (b, case, outcome), want in zip(launched, expected, strict=True):
        verdict = judge_case(kernel, test, case, outcome, engine, want, worst)
        if verdict is not None:
            status, reason = verdict
            where = _where(engine, b)
            return Check(cid, status, f"{where}: {reason}", tool, version)  # type: ignore[arg-type]
    if stop is not None:
        b, status, reason = stop
        return Check(cid, status, f"{_where(engine, b)}: {reason}", tool, version)  # type: ignore[arg-type]
    return [b.sizes for b, _, o in launched if o.second_schedule]


def _judge_test(
    kernel: Kernel,
    test: FalsificationTest,
    ptx: bytes,
    seeds: tuple[int, int, list[Binding], str],
    engine: Engine,
    cross_check: Engine | None,
    deadline: float | None,
    oracles: Oracles,
    worst: _Worst,
) -> Check:
    cid = f"falsify.{test.id}"
    tool = engine.name
    version = engine.version
    assert oracles.primary is not None
    seed, run_seed, plan, phrase = seeds
    rngs: dict[int, np.random.Generator] = {
        seed: np.random.default_rng(seed),
        run_seed: _stream(run_seed, test.id, 0)
        if run_seed != seed
        else np.random.default_rng(seed),
    }
    dry = _dry_cases(kernel, test, plan, engine)
    if isinstance(dry, Check):
        return dry
    cases, too_large = dry
    twice = second_schedule_plan(cases)
    varied = _run_batches(
        kernel, test, ptx, engine, (cases, twice, rngs), deadline, oracles, worst, seed
    )
    if isinstance(varied, Check):
        return varied
    again = ""
    if run_seed != seed and any(b.seed == run_seed and not b.chosen for b in plan):
        again = f" and at seed {run_seed}"
    extra = "".join(f"; {t}" for t in too_large)
    if any(b.chosen for b, _ in cases):
        extra += f"; {EDGES_NOTE}"
    if engine.observes_findings:
        extra += f"; {_schedule_text(cases, twice)}"
        if varied:
            extra += (
                f" (outputs differ there within {describe_tolerance(test.tolerance)} at "
                f"{_fmt_chosen(varied)}: the order of the threads changes the rounding)"
            )
    summary = (
        f"{engine.description}: {_fmt_sizes(test.sizes)}; seed {seed}{again}; {phrase}{extra}; "
        f"{worst.text(test.tolerance)}{worst.remarks()}"
    )
    if engine.observes_findings:
        return passed(
            cid,
            f"{summary}; no race/bounds/barrier/coverage/initialisation/step-limit findings; "
            f"{_oracle_text(oracles)}",
            tool,
            version,
        )
    checker = cross_check if cross_check is not None else InterpreterEngine()
    return _cross_checked(kernel, test, ptx, seed, checker, oracles, summary, engine)


def _dry_cases(
    kernel: Kernel, test: FalsificationTest, plan: Sequence[Binding], engine: Engine
) -> Check | tuple[list[tuple[Binding, Case]], list[str]]:
    """Every binding's checks and launch shape first, without a buffer (``make_case(dry=True)``:
    a contract may list thousands of bindings, each up to MAX_LAUNCH_BYTES of buffers); the
    cases and the chosen sizes past the launch caps (noted; the others still run)."""
    cid = f"falsify.{test.id}"
    cases: list[tuple[Binding, Case]] = []
    too_large: list[str] = []
    for b in plan:
        try:
            cases.append((b, make_case(kernel, test, b.sizes, np.random.default_rng(0), dry=True)))
        except CannotCheck as e:
            if b.chosen:
                too_large.append(f"{_fmt_sizes([b.sizes])} not run ({e})")
                continue
            return skipped(cid, f"{_where(engine, b)}: {e}", engine.name, engine.version)
        except BadInput as e:
            return failed(cid, f"{_where(engine, b)}: {e}", engine.name, engine.version)
    return cases, too_large


def _run_batches(
    kernel: Kernel,
    test: FalsificationTest,
    ptx: bytes,
    engine: Engine,
    planned: tuple[list[tuple[Binding, Case]], list[bool], dict[int, np.random.Generator]],
    deadline: float | None,
    oracles: Oracles,
    worst: _Worst,
    seed: int,
) -> Check | list[Mapping[str, int]]:
    """In batches of at most MAX_HELD_BYTES of buffers (one binding at least): build, launch
    every binding of the batch, ask the oracles for all of them at once (a sandboxed reference
    starts while the kernel runs), judge, and let the buffers go before the next batch. The
    first failure in binding order is reported, as if each binding were judged right after its
    launch; the inputs are drawn in binding order, as when every binding is built first.
    Returns the failing check, or the sizes whose outputs varied under the second schedule."""
    cid = f"falsify.{test.id}"
    cases, twice, rngs = planned
    varied: list[Mapping[str, int]] = []
    pos = 0
    while pos < len(cases):
        batch: list[tuple[Binding, Case, bool]] = []
        held = 0
        while pos < len(cases) and (not batch or held < MAX_HELD_BYTES):
            b, _ = cases[pos]
            try:
                case = make_case(
                    kernel, test, b.sizes, rngs[b.seed], edges=bool(b.chosen), pattern=b.pattern
                )
            except CannotCheck as e:  # checked by the dry run above; not expected
                return skipped(cid, f"{_where(engine, b)}: {e}", engine.name, engine.version)
            except BadInput as e:
                return failed(cid, f"{_where(engine, b)}: {e}", engine.name, engine.version)
            if b.sample:
                case.blocks = pick_blocks(case.grid, b.sample, _stream(b.seed, test.id, 2))
            held += _held_bytes(case)
            batch.append((b, case, twice[pos]))
            pos += 1
        ran = _run_batch(kernel, test, ptx, engine, batch, deadline, oracles, worst, seed)
        if isinstance(ran, Check):
            return ran
        varied += ran
        del batch, case  # the buffers go before the next batch is built
    return varied


def _cross_checked(
    kernel: Kernel,
    test: FalsificationTest,
    ptx: bytes,
    seed: int,
    checker: Engine,
    oracles: Oracles,
    summary: str,
    engine: Engine,
) -> Check:
    """A GPU: the values and poison-based coverage passed; look for every other finding with
    the interpreter on the smallest binding (its inputs from a fresh generator with the seed)."""
    cid, tool, version = f"falsify.{test.id}", engine.name, engine.version
    against = _oracle_text(oracles)
    small = _smallest(test.sizes)
    where = f"{checker.description}: {_fmt_sizes([small])}"
    try:
        case = make_case(kernel, test, small, np.random.default_rng(seed))
        (want,) = _expected(kernel, oracles, [case])
    except (BadInput, CannotCheck) as e:  # already built once above, so not expected
        return skipped(cid, f"{summary}; partial: {where}: {e}; {against}", tool, version)
    verdict = launch_and_judge(kernel, test, case, ptx, checker, want, _Worst())
    if verdict is None:
        return passed(
            cid,
            f"{summary}; coverage from poison; {where}: no race/bounds/barrier/"
            f"initialisation/step-limit findings; {against}",
            tool,
            version,
        )
    status, reason = verdict
    if status == "skipped":
        return skipped(
            cid,
            f"{summary}; partial: races, barriers and bounds not checked: {where}: {reason}; "
            f"{against}",
            tool,
            version,
        )
    return failed(cid, f"{where}: {reason}", tool, version)


def run(ctx: Context) -> list[Check]:
    """One ``falsify.<TEST-ID>`` per falsification test of ``ctx.contract``; [] without a kernel
    (the ``certificate`` check reports obligations left unbacked)."""
    contract = ctx.contract
    if contract is None or contract.kernel is None or not contract.falsification:
        return []
    kernel = contract.kernel
    try:
        ptx = ctx.bundle.file(kernel.ptx)
    except KeyError:
        return [
            failed(f"falsify.{t.id}", f"the kernel's PTX {kernel.ptx!r} is not in the bundle")
            for t in contract.falsification
        ]
    files = {f.path: f.data for f in ctx.bundle.files}
    try:
        oracles = oracles_for(kernel, files, ctx.options)
    except CannotCheck as e:
        return [
            skipped(f"falsify.{t.id}", f"no oracle can run here: {e}")
            for t in contract.falsification
        ]
    oracles.start()  # a sandboxed reference loads while the kernel runs
    engine = choose_engine(ctx.options)
    cross: Engine | None = None
    if not engine.observes_findings:
        cross = InterpreterEngine(step_limit=ctx.options.interp_step_limit)
    checks: list[Check] = []
    used: set[int] = set()  # the contract waivers that covered a finding, over every test
    deadline = time.monotonic() + ctx.options.timeout
    run_seed = ctx.options.seed if ctx.options.seed is not None else fresh_seed()
    try:
        for t in contract.falsification:
            only_author = (
                None if ctx.options.extend_sizes else [Binding(s, t.seed) for s in t.sizes]
            )
            checks.append(
                run_test(
                    kernel,
                    t,
                    ptx,
                    t.seed,
                    engine,
                    cross_check=cross,
                    deadline=deadline,
                    oracles=oracles,
                    run_seed=run_seed,
                    bindings=only_author,
                    waivers_used=used,
                )
            )
    finally:
        oracles.close()
    return unmatched_waivers(kernel, ptx, checks, used)


def unmatched_waivers(kernel: Kernel, ptx: bytes, checks: list[Check], used: set[int]) -> list[
        Check]:
    """A waiver that covered no finding in any test fails the first passed ``falsify.*`` check
    (when every test ran: a skipped one may be where it would have held): a waiver must match
    something, never sit in a contract unchecked. One that covers no instruction at all always
    fails it (``contract.lint`` says so too)."""
    _, problems = resolve_waivers(kernel.waivers, ptx, kernel.entry)
    idle = [i for i in range(len(kernel.waivers)) if i not in used]
    if not idle or (not problems and any(c.status == "skipped" for c in checks)):
        return checks
    why = "; ".join(problems) if problems else "; ".join(
        f"waiver {i} ({describe_waiver(kernel.waivers[i])}) matched no finding in any "
        "falsification test" for i in idle)
    for k, c in enumerate(checks):
        if c.status == "passed":
            checks[k] = failed(c.id, f"{why}: a waiver must match a finding (remove it or "
                               f"correct its location); {c.detail}", c.tool, c.version)
            break
    return checks
