"""Oracles: what a ``falsify.*`` check compares the kernel's outputs with (SPEC 3 "References").

Three kinds, each named in every ``falsify.*`` detail and in the ``certificate``:

- ``trusted:<name>``: a reference of the verifier's own registry (``verify.references``), run in
  this process: code the verifier ships and trusts;
- ``bundle:<file>#<function>``: the bundle's own reference (``kernel.reference: {file,
  function}``), run only in ``verify.sandbox`` (never in this process). Agreement with it shows the
  PTX agrees with its author's executable spec, which is weaker than agreement with a reference
  the verifier ships; the certificate says so;
- ``futhark:<entry>``: the bundle's Futhark spec, compiled by the Futhark compiler and run on the
  same inputs (``verify.futhark_oracle``), when the contract declares ``kernel.futhark_oracle``
  and ``futhark`` is on PATH.

``oracles_for(kernel, files, options)`` returns the primary oracle (the contract's reference, or
the Futhark entry when the contract names no reference) and the extra ones (the Futhark entry
beside a reference), plus notes on oracles declared but not available here.

Every oracle computes a whole batch of cases at once (``compute``), so a sandboxed reference or a
compiled spec starts once per test, not once per size binding. It returns, per case, the output
arrays by parameter name or an error string (the reference could not compute that case); it raises
``CannotCheck`` when it cannot run at all here (no sandbox, no compiler), which the caller reports
as ``skipped``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ledger.core import verdict
from ledger.core.errors import CannotCheck
from verify.context import Options
from verify.model import Kernel

Arrays = dict[str, np.ndarray[Any, Any]]
Result = Arrays | str  # the outputs of one case, or why the oracle could not compute them

# How falsify details and the certificate spell an oracle: "oracle <kind>:<name>".
ORACLE_IN_DETAIL = verdict.ORACLE_IN_DETAIL
WEAKER = (
    "the author's own executable spec, run in a sandbox: agreement with it is weaker than "
    "agreement with a reference the verifier ships"
)


@dataclass(frozen=True)
class OutputSpec:
    """An output the contract expects: parameter name, model dtype, shape (element counts)."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class OracleCase:
    """One launch's inputs as every oracle receives them."""

    inputs: Mapping[str, np.ndarray[Any, Any]]  # in/inout pointers, and scalars as 0-d arrays
    sizes: Mapping[str, int]
    outputs: Sequence[OutputSpec]  # the out/inout pointer parameters, with element counts
    nulled: frozenset[str] = frozenset()  # out/inout pointers passed null: no output, not compared


class Oracle(Protocol):
    name: str  # "trusted:<name>", "bundle:<file>#<function>", "futhark:<entry>"
    kind: str  # "trusted" | "bundle" | "futhark"
    how: str  # how it last ran (e.g. the sandbox), for the detail; "" when nothing to say

    def compute(self, cases: Sequence[OracleCase]) -> list[Result]: ...


class TrustedOracle:
    kind = "trusted"
    how = ""

    def __init__(self, name: str, fn: Any) -> None:
        self.name = f"trusted:{name}"
        self._fn = fn

    def compute(self, cases: Sequence[OracleCase]) -> list[Result]:
        out: list[Result] = []
        for c in cases:
            try:
                out.append(dict(self._fn(dict(c.inputs), dict(c.sizes))))
            except (KeyError, ValueError, TypeError, IndexError) as e:
                out.append(f"could not compute: {e!r}")
        return out


class BundleOracle:
    kind = "bundle"

    def __init__(self, files: Mapping[str, bytes], file: str, function: str, trust: bool) -> None:
        self.name = f"bundle:{file}#{function}"
        self.how = ""
        self._args = (files, file, function, trust)
        self._session: Any = None
        self._error: CannotCheck | None = None

    def start(self) -> None:
        """Start the sandbox now (one start per bundle, every test a batch of it), so that it
        loads numpy and the reference while the kernel runs; ``compute`` starts it otherwise."""
        from verify import sandbox

        if self._session is not None or self._error is not None:
            return
        files, file, function, trust = self._args
        try:
            self._session = sandbox.Session(files, file, function, trust=trust)
            self.how = self._session.how
        except CannotCheck as e:  # SandboxUnavailable among them: raised again by compute
            self._error = e

    def compute(self, cases: Sequence[OracleCase]) -> list[Result]:
        from verify.sandbox import Case as SandboxCase

        self.start()
        if self._error is not None:
            raise self._error
        assert self._session is not None
        run = self._session.run(
            [SandboxCase(c.inputs, c.sizes, c.outputs, c.nulled) for c in cases]
        )
        return [r.error if r.error else r.outputs for r in run.cases]

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


@dataclass
class Oracles:
    primary: Oracle | None
    extra: list[Oracle]
    notes: list[str]  # declared oracles that cannot run here, with the reason
    problem: str = ""  # why there is no primary oracle (a failed check), "" otherwise

    def start(self) -> None:
        """Start what can start ahead (a bundle reference's sandbox)."""
        for o in [self.primary, *self.extra]:
            start = getattr(o, "start", None)
            if start is not None:
                start()

    def close(self) -> None:
        for o in [self.primary, *self.extra]:
            close = getattr(o, "close", None)
            if close is not None:
                close()


def oracles_for(kernel: Kernel, files: Mapping[str, bytes], options: Options) -> Oracles:
    """The oracles of ``kernel`` (see the module docstring)."""
    from verify.references import REFERENCES

    primary: Oracle | None = None
    problem = ""
    if kernel.reference_file:
        trust = bool(getattr(options, "trust_bundle_code", False))
        primary = BundleOracle(files, kernel.reference_file, kernel.reference_function, trust)
    elif kernel.reference:
        fn = REFERENCES.get(kernel.reference)
        if fn is None:
            problem = (
                f"kernel.reference {kernel.reference!r} is not in the trusted reference registry"
            )
        else:
            primary = TrustedOracle(kernel.reference, fn)
    extra: list[Oracle] = []
    notes: list[str] = []
    if kernel.futhark_oracle is not None:
        from verify.futhark_oracle import futhark_oracle

        fut, why = futhark_oracle(kernel, files, options)
        if fut is None:
            notes.append(f"the Futhark oracle {kernel.futhark_oracle.entry!r} did not run: {why}")
        elif primary is None and not problem:
            primary = fut
        else:
            extra.append(fut)
    if primary is None and not problem:
        if notes:
            raise CannotCheck("; ".join(notes))
        problem = "the contract names no reference (kernel.reference)"
    return Oracles(primary, extra, notes, problem)
