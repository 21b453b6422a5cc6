"""Steps of `Log.seal_many`, each against the way it was done before, in the same run (issue 12:
append at 0.6 of the signing rate).

1. **Encoding an entry** in a sealing worker (``BatchEncoder.encode``): its own members encoded
   and shape-checked in one call to ``native.join_plain`` (C), against the Python path that
   runs where that gives None (``check_bundle_shape`` and the ``json`` C encoder, member by
   member), on the same bundles, alternating.
2. **Putting a batch's files** in the storing thread (``Writer.put_bundle_files``): one loop
   per part against the former loop (a generator and a ``(part, digest)`` key per file, one
   set), on the same bundles (four files each, three shared by all), into fresh writers that
   never touch the database.
3. **Tasks out per worker** (``sealers.AHEAD``): batches of ``--batch`` entries sealed with
   the sealing workers, the setting alternating from one batch to the next; each batch's time
   is divided by the time of the batch before it with the first setting. On a VM whose speed
   moves by up to 1.5x within seconds, only such paired ratios say anything.

Each of 1 and 2 is timed ``--reps`` times per way, the ways alternating (min / median / max
per entry over those timings).

    .venv/bin/python bench/bench_append_steps.py [--reps 9] [--batches 24] [--batch 10000]
        [--ahead 2,3,4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_ledger import _bundles  # noqa: E402
from ledger import sealers  # noqa: E402
from ledger.core import entries as entries_mod  # noqa: E402
from ledger.core import native  # noqa: E402
from ledger.core.entries import BatchEncoder, chain_link  # noqa: E402
from ledger.log import Log  # noqa: E402
from ledger.store import writer as store_mod  # noqa: E402
from tests.helpers.ledgers import add_node  # noqa: E402


def _span(xs: list[float], fmt: str = "{:.2f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def _per_entry(fn: Any, n: int) -> float:
    """One timing of ``fn()``, in µs per each of its ``n`` entries."""
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) / n * 1e6


def encoding(reps: int) -> tuple[list[float], list[float]]:
    items = _bundles(2048, "enc-")
    heads = [(b, f) for b, f in items]
    link = {"origin": "bench.example/log", **chain_link(5, bytes(32))}
    enc = BatchEncoder(link, b"\x01" * 8)
    assert enc.native, "the C module is not built: nothing to compare"
    real = entries_mod.__dict__["join_plain"]

    def run() -> None:
        for head, fields in heads:
            enc.encode("2026-12-02T12:00:00.000000Z", head, fields)

    def python_path(*_: object) -> None:
        return None

    c_times: list[float] = []
    py_times: list[float] = []
    for r in range(reps):
        for way in ("c", "py") if r % 2 == 0 else ("py", "c"):
            entries_mod.__dict__["join_plain"] = real if way == "c" else python_path
            try:
                (c_times if way == "c" else py_times).append(_per_entry(run, len(heads)))
            finally:
                entries_mod.__dict__["join_plain"] = real
    return c_times, py_times


class _Files:
    """A writer's file rows without a database: the two ways share ``_blob_rows``."""

    def __init__(self) -> None:
        self._blob_rows: list[tuple[int, bytes, bytes]] = []
        self._blobs_part: int | None = None
        self._blobs_put: Any = set()

    _seen_in = store_mod.Writer._seen_in
    _put = store_mod.Writer._put

    def flush(self) -> None:
        """The rows stay (no database): both ways are timed up to the rows alone."""

    def before(self, first: int, files: list[Any]) -> None:
        """``put_bundle_files`` as it was: ``_put`` per bundle, one set of (part, digest)."""
        seen: set[tuple[int, bytes]] = self._blobs_put
        for k, bundle_files in enumerate(files):
            part = store_mod.part_of(first + k)
            for digest, data in ((f.digest, f.data) for f in bundle_files):
                key = (part, digest)
                if key not in seen:
                    seen.add(key)
                    self._blob_rows.append((part, digest, data))


def putting(reps: int) -> tuple[list[float], list[float]]:
    items = _bundles(2560, "put-")
    files = [b.files for b, _ in items]
    now: list[float] = []
    then: list[float] = []

    def new_way() -> None:
        w = _Files()
        for i in range(0, len(files), 256):
            store_mod.Writer.put_bundle_files(w, 1000 + i, files[i : i + 256])  # type: ignore[arg-type]

    def old_way() -> None:
        w = _Files()
        for i in range(0, len(files), 256):
            w.before(1000 + i, files[i : i + 256])

    a, b = _Files(), _Files()
    store_mod.Writer.put_bundle_files(a, 1000, files)  # type: ignore[arg-type]
    b.before(1000, files)
    assert a._blob_rows == b._blob_rows, "the two ways put different rows"
    for r in range(reps):
        for way in ("new", "old") if r % 2 == 0 else ("old", "new"):
            if way == "new":
                now.append(_per_entry(new_way, len(files)))
            else:
                then.append(_per_entry(old_way, len(files)))
    return now, then


def ahead(settings: list[int], batches: int, batch: int) -> dict[int, list[float]]:
    """Batch times with ``sealers.AHEAD`` alternating over ``settings``."""
    home = Path(tempfile.mkdtemp(prefix="bench-append-steps-")) / "home"
    kept = sealers.AHEAD
    try:
        log = Log.init(home, "bench.example/log")
        sk = add_node(log)
        made = [_bundles(batch, f"a{i}-") for i in range(batches)]
        log.seal_many(_bundles(batch, "start-"), sk)  # the workers start, kept for the rest
        times: dict[int, list[float]] = {s: [] for s in settings}
        for k, items in enumerate(made):
            sealers.AHEAD = settings[k % len(settings)]
            t = time.perf_counter()
            log.seal_many(items, sk)
            times[sealers.AHEAD].append(time.perf_counter() - t)
        log.close()
        return times
    finally:
        sealers.AHEAD = kept
        shutil.rmtree(home.parent, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--ahead", default="2,3,4", help="sealers.AHEAD settings to alternate")
    args = ap.parse_args()
    if not native.AVAILABLE:
        sys.exit("bench_append_steps: ledger.core._native is not built "
                 "(scripts/setup.sh builds it)")
    print(f"Command: `{' '.join(sys.argv)}`  ")
    c, py = encoding(args.reps)
    new, old = putting(args.reps)
    settings = [int(x) for x in args.ahead.split(",")]
    times = ahead(settings, args.batches, args.batch)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs, load "
          f"{load} at the end.\n")
    print("| step | this way, µs per entry | the way before, µs per entry | ratio (medians) |")
    print("|---|---:|---:|---:|")
    print(f"| `BatchEncoder.encode` (`join_plain` / Python path) | {_span(c)} | {_span(py)} | "
          f"{statistics.median(c) / statistics.median(py):.2f} |")
    print(f"| `Writer.put_bundle_files` (per part / per bundle) | {_span(new)} | {_span(old)} | "
          f"{statistics.median(new) / statistics.median(old):.2f} |")
    base = settings[0]
    print(f"\n{args.batches} batches of {args.batch:,}, `sealers.AHEAD` alternating "
          f"{args.ahead}; each batch's time over the time of the batch with {base} before it:\n")
    print("| AHEAD | batch ms, min / median / max | paired ratio, min / median / max |")
    print("|---:|---:|---:|")
    for s in settings:
        pairs = [t / b for t, b in zip(times[s], times[base], strict=False)]
        print(f"| {s} | {_span([t * 1e3 for t in times[s]], '{:.0f}')} | "
              f"{_span(pairs) if s != base else '1'} |")


if __name__ == "__main__":
    main()
