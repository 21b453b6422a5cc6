"""Idle threads: a warning of ``contract.lint`` (never a failure; issue 34).

A declared launch that runs many more threads than a kernel can use passes every check (the
guard ``i < n`` keeps the extra threads from touching memory), yet the contract then records a
wrong launch: e.g. ``grid: ceil_div(n, 64)`` with ``block: 256`` launches four threads per
element. Without running the kernel, the shapes bound it: a thread of a kernel that touches at
most one element of each buffer per thread cannot be busy when the launch has more threads than
the largest buffer has elements. So at each size binding - the author's (every falsification
test's ``sizes``) and the verifier's (the size domain's corners: every variable at its minimum,
and each one at its maximum) - the warning is given when

    blocks launched > IDLE_FACTOR * ceil(elements of the largest pointer parameter / block)

i.e. the launch has more than twice the blocks that one thread per element of the largest buffer
needs (counting whole blocks, so a block rounding a small size up, in one or two dimensions, is
no warning). The bound is applied to the 1-D launches that spread elements over threads
(``grid: [ceil_div(n, B), 1, 1]`` or a division, ``block: [B, 1, 1]``: the elementwise kernels
the scaffold writes), not to a block per row or a 2-D tile, where one thread per element of the
largest buffer is not the design. Kernels with several elements per thread pass: the bound is
on the largest buffer, which such kernels cover with fewer threads. A launch of one thread per
element for a kernel whose threads each handle several is not seen here (that needs the
interpreter's observed writes, which ``contract.lint`` does not run); ``ledger new`` reads the
elements per thread from the source instead (``ledger_cli.scaffold.per_thread``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ledger.core.errors import ContractError
from verify.expr import eval_expr
from verify.model import Contract, Kernel
from verify.sizes import domain_problems

IDLE_FACTOR = 2


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


def _spread(grid_x: str) -> bool:
    """A grid that spreads elements over threads: ``ceil_div(n, 256)``, ``(n + 255) / 256``.
    A product of tile counts flattened into x (``ceil_div(M, 32) * ceil_div(N, 32)``, a tiled
    matmul's programs, Triton's way) is not: each block owns a tile, and at a thin corner of the
    domain most of its threads idle by design."""
    if re.search(r"\)\s*\*|\*\s*(ceil_div|\()", grid_x):
        return False
    return "ceil_div" in grid_x or "/" in grid_x


def _idle(k: Kernel, sizes: Mapping[str, int]) -> tuple[int, int] | None:
    """(threads, largest buffer's elements) when the launch idles threads at ``sizes``."""
    assert k.launch is not None
    grid = [eval_expr(e, sizes) for e in k.launch.grid]
    block = [eval_expr(e, sizes) for e in k.launch.block]
    buffers = [math.prod(eval_expr(e, sizes) for e in p.shape) for p in k.params if p.shape]
    if not buffers or grid[1:] != [1, 1] or block[1:] != [1, 1] or not _spread(k.launch.grid[0]):
        return None  # not the 1-D one-thread-per-element pattern this bound is about
    per_block, largest = math.prod(block), max(max(buffers), 1)
    needed = -(-largest // per_block)  # blocks that one thread per element needs
    blocks = math.prod(grid)
    return (blocks * per_block, largest) if blocks > IDLE_FACTOR * needed else None


def idle_warnings(c: Contract) -> list[str]:
    """One line per size binding whose launch runs idle threads (module docstring)."""
    k = c.kernel
    if k is None or k.launch is None:
        return []
    out: list[str] = []
    for where, sizes in _bindings(c, k):
        try:
            hit = _idle(k, sizes)
        except ContractError:
            continue  # an unbound or bad expression is the "executable"/"launch" gates' report
        if hit is not None:
            shown = ", ".join(f"{n}={v}" for n, v in sizes.items())
            out.append(
                f"at {where} ({shown}) the launch runs {hit[0]} threads for at most {hit[1]} "
                f"elements per buffer: over {IDLE_FACTOR}x, most threads never touch an output "
                "(check kernel.launch.grid against the elements each thread handles)"
            )
    return out
