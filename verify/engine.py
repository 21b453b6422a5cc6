"""What a falsification engine is: the launch types and the engine protocol (SPEC 8 ``falsify.*``).

``verify.falsify`` (which chooses an engine and judges its launches) and the engines themselves
(``falsify.InterpreterEngine`` over ``verify.ptxsim``; ``verify.gpu.CupyEngine`` on a CUDA device)
both import this module and nothing of each other's, so the two sides of a launch never import
each other (issue 11, "Engines").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

Dim3 = tuple[int, int, int]


@dataclass
class BufferArg:
    """A pointer argument: ``data`` is 1-D and contiguous, and is written back in place."""

    name: str
    intent: str  # "in" | "out" | "inout"
    data: np.ndarray[Any, Any]


@dataclass(frozen=True)
class ScalarArg:
    name: str
    value: int | float
    dtype: str  # a model dtype, e.g. "u32"


Arg = BufferArg | ScalarArg


@dataclass(frozen=True)
class Observed:
    """A finding as an engine reports it (kinds: ``verify.ptxsim.Finding.kind`` and
    ``device_error``)."""

    kind: str
    message: str
    line: int | None = None  # the PTX line, where the engine knows it (waivers match on it)


@dataclass(frozen=True)
class LaunchOutcome:
    engine: str  # e.g. "ptxsim 0.1" or "cupy 13.3.0 on NVIDIA H200"
    findings: tuple[Observed, ...] = ()
    thread_instructions: int = 0  # 0 when the engine does not count them
    seconds: float = 0.0
    # the interpreter's second schedule: each out/inout buffer that came out different there,
    # with its contents (judged against the oracles under the test's tolerance, like the first)
    second_schedule: tuple[tuple[str, np.ndarray[Any, Any]], ...] = ()
    # what the engine judged benign, with its evidence (the interpreter's ``benign_store``), and
    # the findings a contract waiver covered (``verify.waivers``): shown in the detail, never
    # dropped
    notes: tuple[str, ...] = ()
    waived: tuple[tuple[int, str], ...] = ()  # (the waiver's index, the finding's text)
    # a launch run on a sample of its blocks: per out/inout buffer, the elements they wrote
    written: tuple[tuple[str, np.ndarray[Any, Any]], ...] = ()


class Engine(Protocol):
    """Runs one launch of a PTX entry. Raises ``CannotCheck`` when it cannot run the PTX."""

    name: str  # "interpreter" | "cupy": the check's ``tool``
    version: str  # e.g. "ptxsim 0.1.0", "cupy 13.3.0": the check's ``version``
    description: str  # for the detail, e.g. "interpreter ptxsim 0.1 (CPU)"
    observes_findings: bool  # False: races, bounds and barriers cannot be seen (a GPU)

    def launch(
        self,
        ptx: bytes,
        entry: str,
        grid: Dim3,
        block: Dim3,
        args: Sequence[Arg],
        dynamic_shared: int,
        second_schedule: bool = True,
        waivers: Mapping[tuple[str, int], int] | None = None,
        constants: Mapping[str, bytes] | None = None,
        blocks: Sequence[int] | None = None,
    ) -> LaunchOutcome:
        """``second_schedule``: an engine that can run the launch again under another thread
        order (the interpreter, issue 10) does so when this is True and the launch is small
        enough; a device ignores it. ``waivers``: (finding kind, PTX line) -> a contract
        waiver's index (``verify.waivers``): an engine that reports findings returns those it
        covers in ``LaunchOutcome.waived``; a device sees no findings and ignores it.
        ``blocks``: run only these grid blocks (the interpreter's block sampling; it returns the
        elements they wrote in ``LaunchOutcome.written``); a device refuses it (CannotCheck)."""
        ...
