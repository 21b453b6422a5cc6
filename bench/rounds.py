"""Repeated timings for the benchmarks: every figure a range over rounds, never a best run.

``timed_rounds`` runs each function once per round, in order, for ``repeat`` rounds, so load on a
shared machine hits the product and its peer alike; ``per_round`` gives the ratio of each round;
``mmm`` writes ``min / median / max``; ``cpu`` and ``machine`` name the machine for a header.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence


def timed_rounds(
    fns: dict[str, Callable[[], object]],
    repeat: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds (by ``clock``) of each function, one call per round, ``repeat`` rounds."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(1, repeat)):
        for name, fn in fns.items():
            t0 = clock()
            fn()
            out[name].append(clock() - t0)
    return out


def per_round(top: Sequence[float], bottom: Sequence[float]) -> list[float]:
    """``top[i] / bottom[i]`` for each round."""
    return [a / b for a, b in zip(top, bottom, strict=True)]


def mmm(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """``min / median / max`` of ``values``, each written with ``fmt``."""
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values),
                                               max(values)))


def cpu() -> str:
    """The CPU model and count (``/proc/cpuinfo``; the architecture where that cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    except OSError:
        pass
    return f"{platform.machine()} ({os.cpu_count()} CPUs)"


def machine() -> str:
    """The CPU, Python's version and the UTC time, for a benchmark's header."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"{cpu()}, Python {sys.version.split()[0]}, {when}"
