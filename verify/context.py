"""What every check group receives: the bundle in memory, the parsed contract, earlier results.

Check groups are functions ``run(ctx: Context) -> list[Check]`` (see ``verify.runner``). They read
``ctx.bundle`` (bytes in memory, never the user's directory), ``ctx.contract`` (None when
``contract.schema`` failed), and ``ctx.results`` (the checks run so far, in order). A group that
needs files on disk for an external tool asks ``ctx.scratch()`` for a fresh temporary copy of the
bundle, removed when the run ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core.bundle import Bundle
from verify.model import Contract
from verify.report import Check
from verify.tools import RunningTool


@dataclass(frozen=True)
class Options:
    """Trusted settings of one verification run (from the CLI, never from the bundle); frozen,
    so no check group can change what the later ones run with."""

    # seed of the verifier's own draws in falsify.* (chosen sizes and their inputs, the author's
    # sizes again); None: a fresh one per run. The contract's seeds are used as well, never alone.
    seed: int | None = None
    # False: only the author's sizes at the contract's seeds (the behaviour before issue 15); for
    # bench/bench_sizes.py, which measures what the chosen sizes add. Not a CLI option.
    extend_sizes: bool = True
    timeout: float = 300.0  # per external tool run, seconds
    use_gpu: bool = True  # try CuPy when a device exists
    # PTX interpreter: warp-instructions before a launch counts as "never ends" (PO8); about
    # 35 s of interpretation, and far above what the bundled kernels need at their test sizes
    interp_step_limit: int = 10_000_000
    # Run a bundle's own reference without a sandbox where none can be set up (rlimits only);
    # by default such tests are skipped (verify.sandbox)
    trust_bundle_code: bool = False


@dataclass
class Context:
    bundle: Bundle
    options: Options = field(default_factory=Options)
    contract: Contract | None = None
    results: list[Check] = field(default_factory=list)
    _tmp: list[Path] = field(default_factory=list)

    def result(self, check_id: str) -> Check | None:
        for c in self.results:
            if c.id == check_id:
                return c
        return None

    def scratch(self) -> Path:
        """A fresh temporary directory holding a copy of the bundle's files."""
        d = Path(tempfile.mkdtemp(prefix="ledger-check-"))
        self._tmp.append(d)
        self.bundle.materialize(d)
        return d

    def close(self) -> None:
        for d in self._tmp:
            shutil.rmtree(d, ignore_errors=True)
        self._tmp.clear()


@dataclass
class Started:
    """Checks whose external tools were started and run in the background (``start(ctx)`` of a
    check group, see ``verify.runner``): ``finish()`` waits for the tools and gives the checks;
    ``cancel()`` stops them when the run is abandoned."""

    finish: Callable[[], list[Check]]
    tools: list[RunningTool] = field(default_factory=list)

    def cancel(self) -> None:
        for t in self.tools:
            t.kill()


def done(checks: list[Check]) -> Started:
    """A ``Started`` with nothing running: its checks are already known."""
    return Started(lambda: checks)
