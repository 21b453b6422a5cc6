"""The cyclic garbage collector paused for a batch (issue 12).

A batch append (``Log.seal_many``) or a mirror's batch allocates several objects per entry (rows,
results, tasks) that live until the batch ends and form no reference cycles. Each 700 allocations
start a collection, and every tenth of those, then every tenth of *those*, walks every tracked
object of the whole process, the caller's bundles included: with 50,000 bundles held, such a full
pass stalled a 10,000-entry batch by ~100 ms, and collections took ~12% of the storing process's
samples (py-spy, docs/benchmarks.md). Reference counting still frees everything at once; only
cycles made during the batch wait until it ends, when the collector runs as it would have. A mirror
spent ~4% less CPU per entry with its batches run so (bench_mirror.py, same-run A/B).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off, then turn it back on if it was on (a caller
    that turned it off itself keeps it off)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
