"""The cyclic garbage collector paused for a batch (issue 12).

A batch append (``Log.seal_many``) or a mirror's batch allocates several objects per entry (rows,
results, tasks) that live until the batch ends and form no reference cycles. Each 700 allocations
start a collection, and every tenth of those, then every tenth of *those*, walks every tracked
object of the whole process, the caller's bundles included: with 50,000 bundles held, such a full
pass stalled a 10,000-entry batch by ~100 ms, and collections took ~12% of the storing process's
samples (py-spy, docs/benchmarks.md). Reference counting still frees everything at once. A mirror
spent ~4% less CPU per entry with its batches run so (bench_mirror.py, same-run A/B). What the
batch leaves behind is then moved to the oldest generation unwalked (``_promote_young``), so a
cycle made during the batch waits for the next full collection.
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
            _promote_young()
            gc.enable()


def _promote_young() -> None:
    """Move every tracked object to the oldest generation without walking any of them.

    The objects a batch leaves behind (its results, the caller's copy of its items) were all
    made while the collector was off, so they are all young, and the allocation count is far
    past the first threshold: the collection that ran at the first allocation after the batch
    walked them all (~5 ms after a 10,000-entry batch, 1.6% of a run of batches,
    docs/benchmarks.md), and most of them again in the next generation's. ``gc.freeze`` then
    ``gc.unfreeze`` moves the generations' lists whole (constant time) into the oldest one,
    which only a full collection walks, as it would have walked them at the end anyway.
    Skipped when the process froze objects itself: ``unfreeze`` would thaw those too."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
