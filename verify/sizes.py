"""Sizes the verifier chooses itself (issue 15): edges of the launch shape, a prime, the domain's
maximum, random draws, all inside the contract's declared ``kernel.size_domain``.

A contract's author lists the sizes its falsification tests run at; a careless or dishonest one
lists only "nice" sizes (multiples of the block), where an unguarded tail or a dropped edge tile
never shows. ``choose_sizes`` derives more bindings from the kernel's launch expressions and its
size domain, the way property-based testing picks its own inputs:

- per size variable (the others at the domain's minimum): the minimum; ``tile - 1``, ``tile``,
  ``tile + 1`` for each tile read from the grid expressions (``ceil_div(n, 256)``, ``n // 32``,
  ``(n + 15) // 16`` give 256, 32, 16; a grid dimension equal to the variable gives 1);
  ``block - 1``, ``block``, ``block + 1`` for the block's thread count and each of its dimensions
  above 1; the first prime above two blocks (or two tiles); the domain's maximum, or, when that
  launch is over the engine's cost cap, the largest value under the cap (the detail says so);
  for a grid of several blocks that is a constant, ``stride - 1``, ``stride``, ``stride + 1``
  of its thread count (the grid-stride loop's second trip; ``grid_stride``);
- every variable at once: each at ``tile + 1``, each at ``tile - 1``, each at its prime;
- ``RANDOM_DRAWS`` bindings drawn log-uniformly inside the domain (seeded: ``--seed``
  reproduces them), under the cost cap.

Every value is snapped to the domain's ``multiple_of`` (both neighbours), must satisfy
``size_constraints``, and must differ from the author's bindings. The cost of a binding is the
largest of its thread count, its buffer elements and the product of its size variables (a GEMM's
``m * n * k``); bindings over the engine's cap are not run (``cost_cap`` in ``verify.falsify``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger.core.errors import ContractError
from verify.expr import eval_expr, eval_relation, expr_names, parse_expr
from verify.model import Kernel, SizeRange

if TYPE_CHECKING:  # the generator is the caller's (falsify): contract.lint runs without numpy
    import numpy as np

RANDOM_DRAWS = 3
MAX_UNIT = (
    1 << 24
)  # tiles and block sizes above this are ignored (hostile contracts: no huge primes)
MAX_CHOSEN = 12  # bindings per test at most
# Candidate tiers in the order they are taken: 0 edges (min, first tile or block +-1), 1 every
# variable at once, 5 random draws, 2 primes, 4 the maximum (or largest under the cap), 3 the
# other block sizes +-1, 6 the exact tile and block sizes (the "nice" ones authors list).
TIER_ORDER = (0, 1, 7, 5, 2, 4, 3, 6)  # 7: a maximum within REACH (issue 32)
MANDATORY = (0, 1, 7)  # the edges always run (each under the cost cap); the rest within allowances
BIG_SHARE = 4  # the maximum and the random draws each cost at most cost_cap / BIG_SHARE
ALLOWANCE_LAUNCHES = 1  # the non-edge chosen sizes of a test cost at most this many capped launches
# Issue 32 ("Sizes"): a domain maximum up to REACH (per size variable) runs in every test, the
# others at their minimum, when its launch costs at most REACH_SHARE capped launches; a launch
# of many blocks counts as sampled when the runner may sample it (``sample_blocks``).
REACH = 1 << 12
REACH_SHARE = 32
REACH_TIER = 7


@dataclass(frozen=True)
class Chosen:
    sizes: dict[str, int]
    why: str  # e.g. "n block+1", "random", "m,n,k tile+1"


@dataclass(frozen=True)
class Plan:
    chosen: tuple[Chosen, ...]
    notes: tuple[str, ...]  # what could not be chosen, and why


def tiles(kernel: Kernel) -> dict[str, set[int]]:
    """Tile sizes per size variable, read from the grid expressions."""
    out: dict[str, set[int]] = {}
    if kernel.launch is None:
        return out
    for g in kernel.launch.grid:
        try:
            tree = parse_expr(str(g))
        except ContractError:
            continue
        found = _tile_of(tree)
        if found is not None:
            out.setdefault(found[0], set()).add(found[1])
    return out


def _tile_of(t: tuple[object, ...]) -> tuple[str, int] | None:
    """``ceil_div(n, T)``, ``n // T``, ``(n + T - 1) // T`` -> (n, T); ``n`` -> (n, 1)."""
    if t[0] == "name":
        return str(t[1]), 1
    if t[0] in ("ceil_div", "//") and len(t) == 3:
        a, b = t[1], t[2]
        if not (isinstance(b, tuple) and b[0] == "int" and int(b[1]) > 0):
            return None
        size = int(b[1])
        if isinstance(a, tuple) and a[0] == "name":
            return str(a[1]), size
        if (
            isinstance(a, tuple)
            and a[0] == "+"
            and isinstance(a[1], tuple)
            and a[1][0] == "name"
            and isinstance(a[2], tuple)
            and a[2][0] == "int"
        ):
            return str(a[1][1]), size
    return None


def block_sizes(kernel: Kernel) -> list[int]:
    """The block's x dimension (or, when it is 1, its thread count) first, then its thread count
    and its other dimensions above 1 (constant blocks only)."""
    if kernel.launch is None:
        return []
    try:
        dims = [eval_expr(b, {}) for b in kernel.launch.block]
    except ContractError:
        return []
    first = dims[0] if dims[0] > 1 else math.prod(dims)  # x: the lanes a loop usually strides
    rest = sorted({d for d in [math.prod(dims), *dims] if d > 1 and d != first})
    return [d for d in ([first] if first > 1 else []) + rest if d <= MAX_UNIT]


def next_prime(n: int) -> int:
    """The smallest prime above ``n``."""
    c = max(2, n + 1)
    while any(c % p == 0 for p in range(2, math.isqrt(c) + 1)):
        c += 1
    return c


def snap(r: SizeRange, v: int) -> list[int]:
    """``v`` made legal for the range: itself, or both neighbouring multiples, clamped."""
    q = r.multiple_of
    lo = -(-r.min // q) * q
    hi = r.max // q * q
    if v % q == 0:
        cands = [v]
    else:
        cands = [v // q * q, v // q * q + q]
    return sorted({min(max(c, lo), hi) for c in cands})


LAUNCH_OVERHEAD = 4096  # cost units of one launch however small (the interpreter's set-up)
TRIP_COST = 4096  # cost units of one trip of a loop over a size variable (measured: 3-16 ms)
LOOP_STEP = 32  # the largest step assumed for such a loop


def grid_stride(kernel: Kernel) -> int | None:
    """The thread count of a grid of more than one block whose grid and block are constants
    (no size variable): the stride of the grid-stride loop such a kernel covers its sizes with.
    None otherwise (a grid that grows with a size spreads that size over its blocks)."""
    if kernel.launch is None:
        return None
    try:
        grid = [eval_expr(g, {}) for g in kernel.launch.grid]
        block = [eval_expr(b, {}) for b in kernel.launch.block]
    except ContractError:
        return None
    if math.prod(grid) < 2 or not 1 < math.prod(grid) * math.prod(block) <= MAX_UNIT:
        return None
    return math.prod(grid) * math.prod(block)


def grid_vars(kernel: Kernel) -> set[str]:
    """Size variables the grid expressions use (the launch spreads them over blocks)."""
    out: set[str] = set()
    if kernel.launch is not None:
        for g in kernel.launch.grid:
            try:
                out |= expr_names(str(g))
            except ContractError:
                continue
    return out


def cost(kernel: Kernel, sizes: Mapping[str, int], sample_blocks: int = 0) -> int:
    """Work units of one launch (about 5 microseconds each in the interpreter on one core;
    docs/benchmarks.md): its threads and buffer elements, ``LAUNCH_OVERHEAD``, and
    ``TRIP_COST`` per trip of the loops over the size variables the grid does not spread (each
    taken in steps of the block's x dimension, at most ``LOOP_STEP``; in steps of the whole
    grid when the grid is a constant of several blocks: ``grid_stride``). The
    interpreter steps every thread of a launch together, so a long loop costs about as much in a
    single block as in many: the trips, not the threads, dominate there. ``sample_blocks``: the
    launch runs on at most that many of its blocks (``verify.sampling``), so only their threads
    count."""
    threads = elements = 0
    trips = 1
    try:
        if kernel.launch is not None:
            grid = [eval_expr(g, sizes) for g in kernel.launch.grid]
            block = [eval_expr(b, sizes) for b in kernel.launch.block]
            nblocks = math.prod(grid)
            if sample_blocks:
                nblocks = min(nblocks, sample_blocks)
            threads = nblocks * math.prod(block)
            step = min(block[0] if block[0] > 1 else max(math.prod(block), 1), LOOP_STEP)
            step = max(step, grid_stride(kernel) or 1)
            spread = grid_vars(kernel)
            for name, v in sizes.items():
                if name not in spread:
                    trips *= max(1, -(-v // step))
        for p in kernel.params:
            if p.kind == "ptr":
                elements += math.prod(eval_expr(d, sizes) for d in p.shape)
    except ContractError:
        pass  # make_case reports the expression that does not evaluate
    return threads + elements + LAUNCH_OVERHEAD + (trips - 1) * TRIP_COST


def domain_problems(kernel: Kernel, binding: Mapping[str, int]) -> list[str]:
    """Why a size binding lies outside the kernel's declared size domain (empty: inside)."""
    out = []
    for r in kernel.size_domain:
        if r.name not in binding:
            continue
        v = binding[r.name]
        if not r.min <= v <= r.max:
            out.append(f"{r.name}={v} is outside [{r.min}, {r.max}]")
        elif v % r.multiple_of:
            out.append(f"{r.name}={v} is not a multiple of {r.multiple_of}")
    if out:
        return out
    for rel in kernel.size_constraints:
        try:
            if not eval_relation(rel, binding):
                out.append(f"breaks size_constraints {rel!r}")
        except ContractError as e:
            out.append(str(e))
    return out


def in_domain(kernel: Kernel, sizes: Mapping[str, int]) -> bool:
    return not domain_problems(kernel, sizes)


def choose_sizes(
    kernel: Kernel,
    author: Sequence[Mapping[str, int]],
    rng: np.random.Generator,
    cost_cap: int,
    allowance: int | None = None,
    sample_blocks: int = 0,
    no_sample: str = "",
) -> Plan:
    """The verifier's own bindings for one test (module docstring).

    Candidates are taken in order of priority (``TIER_ORDER``: edges first, then joint edges,
    random draws, primes, the maximum, and the exact tile and block sizes last); the edges always,
    the others while their total cost stays within ``allowance`` (default
    ``ALLOWANCE_LAUNCHES * cost_cap``) and the number of bindings within
    ``MAX_CHOSEN``; each launch must cost at most ``cost_cap``. The result runs cheapest first.
    A maximum up to ``REACH`` is a third mandatory tier under ``REACH_SHARE * cost_cap``, its
    cost counted on ``sample_blocks`` blocks when that is not 0 (the runner samples the launch);
    ``no_sample`` says why the runner may not sample (for the "not run" note).
    """
    domain = {r.name: r for r in kernel.size_domain}
    if not domain:
        return Plan((), ("sizes not extended: the contract declares no kernel.size_domain",))
    if allowance is None:
        allowance = ALLOWANCE_LAUNCHES * cost_cap
    cands = _Candidates(kernel, domain, cost_cap, sample_blocks, no_sample)
    tile_map = tiles(kernel)
    blocks = block_sizes(kernel)
    stride = grid_stride(kernel)
    if not tile_map and not blocks:
        cands.notes.append("no tile or block size readable from the launch expressions")
    for name, r in domain.items():
        units = cands.edges(name, r, tile_map.get(name, ()), blocks, stride)
        cands.prime_and_joint(name, r, units)
        cands.maximum(name, r)
    if len(domain) > 1:
        for label, values in cands.joint.items():
            cands.tiers[1].append((dict(values), f"all {label}"))
    for _ in range(RANDOM_DRAWS):
        point = _draw(kernel, domain, rng, cost_cap // BIG_SHARE)
        if point is not None:
            cands.tiers[5].append((point, "random"))
    picked, left_out = _select(kernel, cands.tiers, author, cost_cap, allowance, sample_blocks)
    notes = cands.notes
    if left_out:
        notes.append(f"{left_out} more candidate sizes not run (the per-test allowance)")
    _note_maxima_run(notes, cands.unrun_max, picked, author)
    if not picked:
        notes.append("sizes not extended: no binding inside the domain and under the cost cap")
    return Plan(picked, tuple(notes))


_Tiers = list[list[tuple[dict[str, int], str]]]


class _Candidates:
    """The candidate bindings of one test by tier, and the notes written while proposing them.

    Each candidate moves one size from ``base`` (every size at its minimum); ``joint`` gathers
    the per-size edges and primes that run together when the domain has several sizes.
    """

    def __init__(self, kernel: Kernel, domain: Mapping[str, SizeRange], cost_cap: int,
                 sample_blocks: int = 0, no_sample: str = "") -> None:
        self.kernel = kernel
        self.domain = domain
        self.cost_cap = cost_cap
        self.sample_blocks = sample_blocks
        self.no_sample = no_sample
        self.base = {n: snap(r, r.min)[0] for n, r in domain.items()}
        self.tiers: _Tiers = [[] for _ in range(8)]
        self.joint: dict[str, dict[str, int]] = {"tile+1": {}, "tile-1": {}, "prime": {}}
        self.unrun_max: dict[str, tuple[int, int]] = {}  # name -> (its max, the index of its note)
        self.notes: list[str] = []

    def propose(self, tier: int, name: str, value: int, why: str) -> None:
        for v in snap(self.domain[name], value):
            self.tiers[tier].append(({**self.base, name: v}, f"{name} {why}"))

    def edges(
        self,
        name: str,
        r: SizeRange,
        its_tiles: Iterable[int],
        blocks: Sequence[int],
        stride: int | None,
    ) -> list[tuple[int, str]]:
        """Propose the minimum and each side of the size's units; return the units (size, label)."""
        var_tiles = sorted(t for t in its_tiles if 1 < t <= MAX_UNIT)
        units = [(t, "tile") for t in var_tiles] or [(b, "block") for b in blocks]
        if not var_tiles and r.multiple_of > 1:  # the declared granularity is its edge unit
            units = [(r.multiple_of, "step"), *units]
        self.propose(0, name, r.min, "min")
        for i, (u, label) in enumerate(units):
            tier = 0 if i == 0 else 3
            self.propose(tier, name, u - 1, f"{label}-1 ({u})")
            self.propose(tier, name, u + 1, f"{label}+1 ({u})")
            self.propose(6, name, u, f"{label} ({u})")
        if stride is not None and stride not in blocks:
            # a constant grid covers the sizes with a grid-stride loop: its second trip starts
            # at the grid's thread count, where a loop's tail and unrolled bodies first show
            self.propose(0, name, stride - 1, f"grid-stride-1 ({stride})")
            self.propose(0, name, stride + 1, f"grid-stride+1 ({stride})")
            self.propose(6, name, stride, f"grid-stride ({stride})")
            units.append((stride, "grid-stride"))
        if var_tiles:  # the block's own sizes matter less where the grid tiles the variable
            for b in blocks:
                if b not in var_tiles:
                    self.propose(3, name, b - 1, f"block-1 ({b})")
                    self.propose(3, name, b + 1, f"block+1 ({b})")
        return units

    def prime_and_joint(self, name: str, r: SizeRange, units: Sequence[tuple[int, str]]) -> None:
        """Propose a prime above two of the largest unit; record the size's joint values."""
        unit = max([u for u, _ in units], default=1)
        prime = next_prime(2 * unit) if 2 * unit < min(r.max, MAX_UNIT) else snap(r, r.max)[-1]
        if 2 * unit < min(r.max, MAX_UNIT):
            kind = next((lb for u, lb in units if u == unit), "unit")
            self.propose(2, name, prime, f"prime above two {kind}s")
        edge = units[0][0] if units else 1
        self.joint["tile+1"][name] = snap(r, edge + 1)[-1]
        self.joint["tile-1"][name] = snap(r, max(edge - 1, r.min))[0]
        self.joint["prime"][name] = snap(r, prime)[-1]

    def maximum(self, name: str, r: SizeRange) -> None:
        """Propose the size's maximum, or the largest under the cap for it with a note."""
        top = snap(r, r.max)[-1]
        at_top = {**self.base, name: top}
        big_cap = self.cost_cap // BIG_SHARE
        if cost(self.kernel, at_top) <= big_cap:
            self.tiers[4].append((at_top, f"{name} max"))
            return
        why = ""
        if r.max <= REACH:  # issue 32: run it anyway when a few capped launches afford it
            reach_cap = self.cost_cap * REACH_SHARE
            units = cost(self.kernel, at_top, self.sample_blocks)
            if units <= reach_cap:
                self.tiers[REACH_TIER].append((at_top, f"{name} max"))
                return
            on = f" on {self.sample_blocks} blocks" if self.sample_blocks else ""
            why = f"; {units} units{on}, over the {reach_cap} a maximum up to {REACH} may take"
            if self.no_sample:
                why += f"; blocks not sampled: {self.no_sample}"
        fit = _largest_under(self.kernel, r, self.base, big_cap)
        note = f"max {name}={top} not run (over the cost cap of {big_cap} for it{why})"
        if fit is not None:
            self.tiers[4].append(({**self.base, name: fit}, f"{name} largest under the cap"))
            note += f"; largest run {name}={fit}"
        self.unrun_max[name] = (top, len(self.notes))
        self.notes.append(note)


def _select(
    kernel: Kernel,
    tiers: _Tiers,
    author: Sequence[Mapping[str, int]],
    cost_cap: int,
    allowance: int,
    sample_blocks: int = 0,
) -> tuple[tuple[Chosen, ...], int]:
    """The candidates taken in ``TIER_ORDER`` within the allowances, cheapest first; and how
    many were left out for the allowances."""
    seen = {_key(a) for a in author}
    chosen: list[tuple[int, Chosen]] = []
    spent = 0
    left_out = 0
    for tier in TIER_ORDER:
        for sizes, why in tiers[tier]:
            k = _key(sizes)
            if k in seen or not in_domain(kernel, sizes):
                continue
            seen.add(k)
            c = cost(kernel, sizes)
            if tier == REACH_TIER:  # a maximum within REACH: its own cap, sampled if need be
                if cost(kernel, sizes, sample_blocks) > cost_cap * REACH_SHARE:
                    continue
            elif c > cost_cap:
                continue
            if tier not in MANDATORY:
                if len(chosen) >= MAX_CHOSEN or spent + c > allowance:
                    left_out += 1
                    continue
                spent += c
            chosen.append((c, Chosen(sizes, why)))
    chosen.sort(key=lambda cc: cc[0])  # stable: cheapest first, priority order among equals
    return tuple(c for _, c in chosen), left_out


def _note_maxima_run(
    notes: list[str],
    unrun_max: Mapping[str, tuple[int, int]],
    picked: Sequence[Chosen],
    author: Sequence[Mapping[str, int]],
) -> None:
    """Rewrite the "not run" note of each maximum that ran in another binding after all."""
    # a maximum too costly with the others at their minimum may still run in a joint binding
    # (all primes) or the author's: then the note would say "not run" of a size that ran
    ran = [c.sizes for c in picked] + [dict(a) for a in author]
    for name, (top, at) in unrun_max.items():
        where = next((b for b in ran if b.get(name) == top), None)
        if where is not None:
            shown = ",".join(f"{k}={v}" for k, v in where.items())
            notes[at] = f"max {name}={top} run at {shown} (alone it is over the cost cap)"


def _key(sizes: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(sizes.items()))


def _largest_under(kernel: Kernel, r: SizeRange, base: Mapping[str, int], cap: int) -> int | None:
    """The largest legal value of ``r.name`` (others at ``base``) whose launch fits ``cap``."""
    q = r.multiple_of
    lo, hi = -(-r.min // q), r.max // q  # in units of q
    if cost(kernel, {**base, r.name: lo * q}) > cap:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(kernel, {**base, r.name: mid * q}) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return lo * q


def _draw(
    kernel: Kernel, domain: Mapping[str, SizeRange], rng: np.random.Generator, cap: int
) -> dict[str, int] | None:
    """One binding drawn log-uniformly in the domain, inside its relations and under ``cap``."""
    for _ in range(64):
        point = {}
        for name, r in domain.items():
            lo, hi = max(r.min, 1), max(r.max, 1)
            v = round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))
            vs = snap(r, min(max(v, r.min), r.max))
            point[name] = vs[int(rng.integers(len(vs)))]
        if in_domain(kernel, point) and cost(kernel, point) <= cap:
            return point
    return None
