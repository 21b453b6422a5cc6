"""Block sampling (issue 32, "Sizes"): a launch over the interpreter's cost cap run on some of its
blocks, so a size domain's maximum is run at least once (docs/falsification.md, "Sizes the
verifier chooses").

1. ``unsafe_reason``: blocks may be sampled only when they cannot communicate through global
   memory in a way the run could need: no global (or generic) ``atom``/``red``, no gpu- or
   sys-scope fence, no writable module ``.global`` variable. Otherwise the launch runs whole or
   not at all, and the detail says why.
2. ``pick_blocks``: every corner block of the grid (first and last along each dimension), one
   block on each last and first face, then a seeded sample of the rest, up to ``SAMPLE_BLOCKS``.
3. The interpreter runs those blocks only (``verify.ptxsim.launch(blocks=...)``) and reports which
   output elements they wrote; the runner compares those elements only (``compare_output(only=)``)
   and makes no ``unwritten`` finding. What sampling can miss: a bug only in blocks not run, a
   race or a double write between a run block and one not run, an element no block writes.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

SAMPLE_BLOCKS = 16  # blocks of a sampled launch (corners and faces first, then a seeded sample)

_GLOBAL_ATOMIC = re.compile(rb"^\s*(?:@!?%\w+\s+)?(?:atom|red)\.(?!shared\b)", re.M)
_WIDE_FENCE = re.compile(rb"\b(?:membar\.(?:gl|sys)|fence\.[\w.]*\b(?:gpu|sys))\b")
_MODULE_GLOBAL = re.compile(rb"^\s*(?:\.visible\s+|\.weak\s+)?\.global\s", re.M)


def unsafe_reason(ptx: bytes) -> str | None:
    """Why the blocks of this module's kernels may communicate (so a launch must not be
    sampled), or None. Conservative: a generic ``atom`` counts as global."""
    if _GLOBAL_ATOMIC.search(ptx):
        return "the kernel uses global atomics"
    if _WIDE_FENCE.search(ptx):
        return "the kernel has a gpu-scope fence"
    if _MODULE_GLOBAL.search(ptx):
        return "the kernel has module .global variables"
    return None


def grid_blocks(grid: tuple[int, int, int]) -> int:
    return grid[0] * grid[1] * grid[2]


def pick_blocks(grid: tuple[int, int, int], n: int, rng: np.random.Generator) -> tuple[int, ...]:
    """At most ``n`` linear block ids (x fastest), ascending: the corners, then for each grid
    dimension over 1 a block on its last face and one on its first face (other coordinates drawn
    from ``rng``), then blocks drawn from ``rng`` among the rest; all of them when the grid has at
    most ``n``."""
    gx, gy, gz = grid
    total = gx * gy * gz
    if total <= n:
        return tuple(range(total))

    def lin(x: int, y: int, z: int) -> int:
        return x + gx * (y + gy * z)

    picked: list[int] = []
    for x, y, z in itertools.product(*({0, g - 1} for g in grid)):
        picked.append(lin(x, y, z))
    for d, g in enumerate(grid):
        if g < 2:
            continue
        for edge in (g - 1, 0):
            c = [int(rng.integers(k)) for k in grid]
            c[d] = edge
            picked.append(lin(*c))
    out = list(dict.fromkeys(picked))[:n]
    have = set(out)
    while len(out) < n:
        b = int(rng.integers(total))
        if b not in have:
            have.add(b)
            out.append(b)
    return tuple(sorted(out))
