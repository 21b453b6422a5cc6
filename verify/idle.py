"""Idle blocks: a warning of ``contract.lint`` (never a failure; issue 34).

A declared launch that runs more blocks than a kernel can use passes every check (the guard
``i < n`` keeps the extra threads from touching memory), yet the contract then records a wrong
launch: e.g. ``grid: ceil_div(n, 64)`` with ``block: 256`` launches four threads per element.
Without running the kernel, the launch and the shapes bound it. The warning is given at a size
binding - the author's (every falsification test's ``sizes``) and the verifier's (the size
domain's corners: every variable at its minimum, and each one at its maximum) - when whole blocks
never touch an output there, decided in four steps:

1. The grid spreads elements over blocks: ``grid.x`` (and, for a 2-D launch, ``grid.y``; the
   other grid dimensions 1) is ``ceil_div(X, B)``, ``(X + c) // B`` or ``X // B``: the author
   counts ``X`` elements, ``B`` per block. A block per row (``grid: [rows, 1, 1]``), a product of
   tile counts flattened into x (``ceil_div(M, 32) * ceil_div(N, 32)``) and a fixed grid (a
   grid-stride loop) are not judged.
2. The launch declares fewer elements per block than it has threads (``B < block threads``; in
   2-D ``B_x * B_y < block.x * block.y``). A tile with several elements per thread
   (``transpose``: 32 x 32 elements per 32 x 8 threads) is not judged.
3. The grid counts all the work: every output (``out``/``inout`` pointer) is shaped only by the
   sizes ``X`` names (in 2-D, each axis by one dimension's sizes). A kernel whose output has an
   axis the grid does not count (a warp per row over ``[rows, cols]`` with ``grid: ceil_div(rows,
   4)``) spreads a block's threads over it by design, and is not judged.
4. At one thread per element, ``E`` elements (the largest extent of a pointer parameter shaped by
   those sizes, per dimension) need ``ceil(E / block threads)`` blocks; a launch of more has
   whole blocks whose threads all start past the last element, so they never touch an output.
   Counting whole blocks, a block rounding a size up (in one or two dimensions) is no warning,
   and a kernel with several elements per thread has fewer blocks than that and passes.

A launch of one thread per element for a kernel whose threads each handle several is not seen
here (that needs the interpreter's observed writes, which ``contract.lint`` does not run);
``ledger new`` reads the elements per thread from the source instead
(``ledger_cli.scaffold.per_thread``). ``ledger check`` prints each warning as a ``warning:``
line under the verdict (``ledger_cli.verifying.print_report``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.core.errors import ContractError
from verify.expr import Expr, eval_expr, eval_tree, parse_expr, tree_names
from verify.model import Contract, Kernel
from verify.sizes import domain_problems


@dataclass(frozen=True)
class _Dim:
    """One spread grid dimension: ``X`` elements counted, ``B`` of them per block."""

    count: Expr
    per_block: Expr
    names: frozenset[str]


@dataclass(frozen=True)
class Idle:
    """A launch with whole idle blocks at one size binding, per judged dimension."""

    blocks: tuple[int, ...]
    threads: tuple[int, ...]  # threads per block along each judged dimension
    elements: tuple[int, ...]
    needed: tuple[int, ...]


def _bindings(c: Contract, k: Kernel) -> list[tuple[str, dict[str, int]]]:
    out: list[tuple[str, dict[str, int]]] = []
    for t in c.falsification:
        out.extend((f"{t.id} sizes[{i}]", dict(b)) for i, b in enumerate(t.sizes))
    if k.size_domain:
        low = {r.name: -(-r.min // r.multiple_of) * r.multiple_of for r in k.size_domain}
        out.append(("the domain's minimum", low))
        for r in k.size_domain:
            top = {**low, r.name: r.max // r.multiple_of * r.multiple_of}
            if not domain_problems(k, top):
                out.append((f"the domain's maximum of {r.name}", top))
    return out


def _spread(grid: str) -> _Dim | None:
    """Step 1: ``ceil_div(X, B)``, ``(X + c) // B`` or ``X // B`` as (X, B), else None."""
    try:
        tree = parse_expr(str(grid))
    except ContractError:
        return None
    if tree[0] not in ("ceil_div", "//"):
        return None
    count, per_block = tree[1], tree[2]
    if tree[0] == "//" and count[0] == "+" and count[2][0] == "int":
        count = count[1]  # (X + B - 1) // B
    names = tree_names(count)
    return _Dim(count, per_block, names) if names else None


def _dims(k: Kernel) -> list[_Dim] | None:
    """The spread dimensions (x, or x and y) when the grid is one of step 1's, else None."""
    assert k.launch is not None
    grid = [str(g).strip() for g in k.launch.grid]
    x, y = _spread(grid[0]), _spread(grid[1])
    if x is None or grid[2] != "1" or (y is None and grid[1] != "1"):
        return None
    return [x] if y is None else [x, y]


def _extents(k: Kernel, dims: list[_Dim], sizes: Mapping[str, int]) -> list[int] | None:
    """Step 3 and the elements of step 4: per dimension, the largest extent of a pointer
    parameter shaped by its sizes; None when an output has an axis the grid does not count."""
    best = [0] * len(dims)
    for p in k.params:
        if not p.shape:
            continue
        axes = [parse_expr(str(a)) for a in p.shape]
        if len(dims) == 1:
            covered = all(tree_names(a) <= dims[0].names for a in axes)
            if covered:
                best[0] = max(best[0], math.prod(eval_tree(a, sizes) for a in axes))
        else:
            where = [next((i for i, d in enumerate(dims) if tree_names(a) <= d.names), None)
                     for a in axes]
            covered = all(w is not None for w in where)
            for a, w in zip(axes, where, strict=True):
                if w is not None:
                    best[w] = max(best[w], eval_tree(a, sizes))
        if not covered and p.intent != "in":
            return None  # the grid does not count all of an output: not judged
    return best if all(best) else None


def idle_blocks(k: Kernel, sizes: Mapping[str, int]) -> Idle | None:
    """The whole idle blocks of the launch at ``sizes`` (module docstring), or None."""
    if k.launch is None:
        return None
    dims = _dims(k)
    if dims is None:
        return None
    grid = [eval_expr(e, sizes) for e in k.launch.grid]
    block = [eval_expr(e, sizes) for e in k.launch.block]
    threads = [math.prod(block)] if len(dims) == 1 else block[:2]
    declared = math.prod(eval_tree(d.per_block, sizes) for d in dims)
    if declared >= math.prod(threads) or any(t < 1 for t in threads):
        return None  # step 2: a tile with several elements per thread (or no threads)
    extents = _extents(k, dims, sizes)
    if extents is None:
        return None
    needed = [-(-e // t) for e, t in zip(extents, threads, strict=True)]
    blocks = grid[: len(dims)]
    if all(b <= n for b, n in zip(blocks, needed, strict=True)):
        return None
    return Idle(tuple(blocks), tuple(threads), tuple(extents), tuple(needed))


def idle_warnings(c: Contract) -> list[str]:
    """One line per size binding whose launch has whole idle blocks (module docstring)."""
    k = c.kernel
    if k is None or k.launch is None:
        return []
    out: list[str] = []
    for where, sizes in _bindings(c, k):
        try:
            hit = idle_blocks(k, sizes)
        except ContractError:
            continue  # an unbound or bad expression is the "executable"/"launch" gates' report
        if hit is not None:
            shown = ", ".join(f"{n}={v}" for n, v in sizes.items())

            def x(v: tuple[int, ...]) -> str:
                return " x ".join(str(i) for i in v)

            out.append(
                f"at {where} ({shown}) the launch runs {x(hit.blocks)} blocks of "
                f"{x(hit.threads)} threads for at most {x(hit.elements)} elements per buffer, "
                f"which {x(hit.needed)} blocks cover at one element per thread: whole blocks "
                "never touch an output (check kernel.launch.grid against the elements each "
                "thread handles)"
            )
    return out
