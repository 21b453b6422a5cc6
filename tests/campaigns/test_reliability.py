"""Crash safety and concurrency (issue 2, docs/reliability.md).

* kill -9 a sealing process at random moments, 50 times: afterwards ``ledger audit`` passes, no
  half-written entry exists, and every seal reported as done is present with its digest;
* 4 processes sealing 250 bundles each end with 1,000 entries, contiguous indices, a passing audit.

Both use real processes on one real SQLite file. ``bench/reliability.py`` runs the same procedures
at larger counts and writes the figures into docs/reliability.md.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.ledgers import add_node, new_ledger
from tests.helpers.reliability import concurrent_seal, crash_rounds


def test_kill_9_during_seal_50_times(tmp_path: Path) -> None:
    home = tmp_path / "home"
    add_node(new_ledger(home))
    stats = crash_rounds(home, 50, seed=1)
    assert stats["killed"] == 50
    assert stats["reported_done"] > 0


def test_four_processes_seal_1000(tmp_path: Path) -> None:
    home = tmp_path / "home"
    add_node(new_ledger(home))
    assert concurrent_seal(home, 4, 250) == 1000
