"""Errors and result types of the PTX interpreter (SPEC 8 ``falsify.*``, issue 4).

``UnsupportedPtx`` is a ``CannotCheck`` (exit 3): the interpreter met an instruction or a form it
does not model, so it stops instead of guessing. ``PtxSyntaxError`` is ``BadInput`` (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ledger.core.errors import BadInput, CannotCheck
from verify.model import FINDING_KINDS as FINDING_KINDS  # the one list (contract waivers name them)


@dataclass(frozen=True)
class Finding:
    kind: str
    message: str
    line: int | None
    block: tuple[int, int, int] | None
    thread: tuple[int, int, int] | None
    address: int | None


class UnsupportedPtx(CannotCheck):
    """An instruction (or operand form) outside the modelled subset; names it and its line.

    Raised during a run, it carries the findings made before it in ``findings``."""

    findings: tuple[Finding, ...] = ()


class NotConverged(Exception):
    """Internal: a .sync warp instruction ran while lanes it needs are elsewhere; the machine
    parks the arriving threads until the others come (or nothing else can run)."""


class PtxSyntaxError(BadInput):
    """The PTX text cannot be parsed."""


@dataclass(frozen=True)
class SimResult:
    findings: tuple[Finding, ...]
    thread_instructions: int
    warp_instructions: int
    engine: str
    # ``launch(..., schedule_values=True)``: each out/inout buffer whose bytes differ under the
    # second schedule, with its contents there (the caller judges them, e.g. under a tolerance)
    second_schedule: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    # what the run judged benign, with its evidence (e.g. a same-value store by the lanes of one
    # warp in one instruction): not findings, shown in the detail as notes
    notes: tuple[str, ...] = ()
    # findings a contract waiver covered: (the waiver's index, the finding's text)
    waived: tuple[tuple[int, str], ...] = ()
    # ``launch(..., blocks=...)``: per out/inout buffer, the elements the run blocks wrote (a
    # plain store or an atomic); the caller compares only those (blocks not run wrote nothing)
    written: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
