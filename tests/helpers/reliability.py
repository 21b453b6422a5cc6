"""The crash-and-concurrency drivers of the reliability campaign
(tests/campaigns/test_reliability.py) and its benchmark (bench/reliability.py): kill -9 a
sealing process at
random moments, and several processes sealing at once, each followed by a full audit."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger.audit import audit
from ledger.core.entries import decode_entry
from ledger.log import Log
from tests.helpers.ledgers import REPO


def _worker(home: Path, prefix: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.seal_worker", str(home), prefix, str(count)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _digests(log: Log) -> dict[int, str]:
    out = {}
    for i, _lh, data in log.store.rows():
        e = decode_entry(data)
        if e.bundle_digest is not None:
            out[i] = e.bundle_digest
    return out


def crash_rounds(home: Path, rounds: int, seed: int) -> dict[str, int]:
    """Kill a sealing worker ``rounds`` times at random moments; check after each kill."""
    rng = random.Random(seed)
    reported = 0
    killed_mid_run = 0
    for r in range(rounds):
        proc = _worker(home, f"crash{r}", 100_000)
        # time the kill from the worker's "ready" (ledger open, key loaded), not from its start:
        # on a loaded machine start-up alone can outlast a fixed delay
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.1, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        killed_mid_run += 1
        done = [ln.split() for ln in out.splitlines() if ln.startswith("done ")]
        reported += len(done)
        log = Log.open(home)
        res = audit(log.store, log.verifier)
        assert res.ok, res.problems
        have = _digests(log)
        for _, idx, digest in done:
            assert have.get(int(idx)) == digest
        assert log.store.size() == res.size
        log.close()
    return {"rounds": rounds, "killed": killed_mid_run, "reported_done": reported}


def concurrent_seal(home: Path, procs: int, each: int) -> int:
    workers = [_worker(home, f"p{p}", each) for p in range(procs)]
    for w in workers:
        out, err = w.communicate(timeout=900)
        assert w.returncode == 0, err
        assert out.count("done ") == each
    log = Log.open(home)
    res = audit(log.store, log.verifier)
    assert res.ok, res.problems
    idx = [r[0] for r in log.store.conn.execute("SELECT idx FROM entries ORDER BY idx")]
    assert idx == list(range(len(idx)))
    n = len(_digests(log))
    log.close()
    return n
