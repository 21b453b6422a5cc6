"""Fault injection for the crash campaigns (issue 33 item 8; ``tests/campaigns/test_seal_kill.py``):
with ``LEDGER_FAULT_KILL_AT=<point>`` in the environment, the process kills itself with SIGKILL
(as ``kill -9`` would, no cleanup, no ``finally``) when it reaches that named point. Never set in
normal use; an unknown point name is ignored.

The points of a seal, in order (``POINTS``):

- ``seal.checked``: the bundle is checked, nothing is written yet;
- ``seal.appended``: the entry and its checkpoint are written inside the transaction, not
  committed;
- ``seal.committed``: the transaction committed, the receipt not written;
- ``seal.receipt-written``: the receipt is in place, nothing printed yet.
"""

from __future__ import annotations

import os
import signal

KILL_ENV = "LEDGER_FAULT_KILL_AT"
POINTS = ("seal.checked", "seal.appended", "seal.committed", "seal.receipt-written")


def kill_point(name: str) -> None:
    """SIGKILL this process when ``LEDGER_FAULT_KILL_AT`` names ``name``."""
    if os.environ.get(KILL_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
