"""How many examples a hypothesis test runs: its own count in the suite, that count times
``LEDGER_HYPOTHESIS_SCALE`` in a longer campaign (``scripts/sanitize_native.py`` runs the tests of
the compiled module this way under AddressSanitizer and UBSan)."""

from __future__ import annotations

import os


def examples(count: int) -> int:
    """``count`` times the whole number in ``LEDGER_HYPOTHESIS_SCALE`` (1 when unset or not a
    positive whole number)."""
    raw = os.environ.get("LEDGER_HYPOTHESIS_SCALE", "")
    scale = int(raw) if raw.isdigit() and int(raw) > 0 else 1
    return count * scale
