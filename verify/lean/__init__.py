"""The Lean 4 checks ``lean.scan`` and ``lean.kernel`` (SPEC 8).

``scan_sources`` is the static scan (``verify.lean.scan``, built on ``verify.lean.lexer``);
``run`` is the check group that returns both checks (``verify.lean.kernel``).
"""

from verify.lean.kernel import run
from verify.lean.scan import LeanScan, Problem, scan_sources

__all__ = ["LeanScan", "Problem", "run", "scan_sources"]
