"""The typed contract model that every check reads (format: contracts/README.md).

``verify.contract.load_contract(bytes) -> LoadedContract`` builds these from YAML; the checks use
only these frozen types, never the raw YAML. ``kernel`` is None for a plain provable-contracts
contract that carries no executable-kernel extension (such a contract fails ``contract.lint`` in a
bundle, because nothing in it can be run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Dtype = Literal["f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "u8", "s8"]
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")  # bf16 is stored as uint16 bits (verify/bfloat16.py)
RANDOM = "random"  # a float scalar's value drawn from the test's input range (seeded)
# Every kind of finding the PTX interpreter reports (``verify.ptxsim.errors.Finding.kind``); a
# contract waiver names one of them
FINDING_KINDS = (
    "out_of_bounds",
    "race",
    "divergent_barrier",
    "partial_barrier",
    "uninitialised_read",
    "unwritten",
    "double_write",
    "step_limit",
    "misaligned",
    "undefined_register",
    "shuffle_undefined_lane",
    "global_race",
    "cp_async_in_flight",
    "schedule_dependent",
    "assert_failed",
    "division_by_zero",
    "stale_module_state",
)
OBLIGATIONS = ("PO1", "PO2", "PO3", "PO4", "PO5", "PO6", "PO7", "PO8")

# What each proof obligation means, and the dynamic properties that can back it (SPEC 8).
OBLIGATION_TITLES = {
    "PO1": "index coverage and disjointness: every output element written exactly once",
    "PO2": "memory bounds: every global and shared access in bounds",
    "PO3": "barrier convergence: every barrier reached by the whole block, never under divergence",
    "PO4": "floating-point rounding: results within the stated ulp / relative bound",
    "PO5": "resources: registers, shared memory and spills within the contract's budget",
    "PO6": "initialisation: no read of uninitialised shared memory",
    "PO7": "race freedom: no shared-memory data race between barriers",
    "PO8": "termination and functional agreement with the reference",
}

# Dynamic properties a falsification test (or ptx.assemble for "resources") can provide.
PROPERTIES = (
    "coverage",  # PO1: each output element written exactly once
    "bounds",  # PO2: no out-of-bounds access
    "convergence",  # PO3: barriers never under divergence / partial block
    "rounding",  # PO4: reference agreement under an ulp tolerance
    "resources",  # PO5: ptxas registers / shared / spills within budget
    "initialised",  # PO6: no read of uninitialised shared memory
    "race_free",  # PO7: no shared-memory race
    "reference",  # PO8: terminates within the step limit and agrees with the reference
)


@dataclass(frozen=True)
class Param:
    name: str
    kind: Literal["ptr", "scalar"]
    dtype: Dtype
    intent: Literal["in", "out", "inout"] = "in"  # pointers only
    shape: tuple[str, ...] = ()  # pointers: element counts as expressions of the sizes
    value: str = ""  # scalars: an expression of the sizes; float scalars also "random" or a
    # literal number (its text, e.g. "2.5"): see ``scalar_literal``


def scalar_literal(value: str) -> float | None:
    """The number a float scalar's ``value`` text spells (``"2.5"``, ``"-1e-3"``), else None."""
    try:
        f = float(value)
    except ValueError:
        return None
    return f if f == f and abs(f) != float("inf") else None


@dataclass(frozen=True)
class FutharkOracle:
    """``kernel.futhark_oracle``: the spec's entry point used as an oracle (issue 8)."""

    entry: str
    args: tuple[str, ...]  # parameter or size-variable names, in the entry's argument order
    results: tuple[str, ...]  # out/inout pointer parameter names, in the entry's result order


@dataclass(frozen=True)
class Launch:
    grid: tuple[str, str, str]  # expressions of the sizes
    block: tuple[str, str, str]
    shared_bytes: str = "0"  # dynamic shared memory, expression


@dataclass(frozen=True)
class SizeRange:
    """The declared domain of one size variable (``kernel.size_domain.<name>``): part of the
    claim. The verifier chooses its own sizes inside it (``verify.sizes``)."""

    name: str
    min: int
    max: int
    multiple_of: int = 1

    def text(self) -> str:
        """``n a multiple of 4, 1 ≤ n ≤ 2^20``."""
        rng = f"{_num_text(self.min)} ≤ {self.name} ≤ {_num_text(self.max)}"
        if self.multiple_of > 1:
            return f"{self.name} a multiple of {self.multiple_of}, {rng}"
        return rng


def _num_text(v: int) -> str:
    if v >= 1024 and v & (v - 1) == 0:
        return f"2^{v.bit_length() - 1}"
    return str(v)


def domain_text(domain: tuple[SizeRange, ...], constraints: tuple[str, ...] = ()) -> str:
    """The size domain as one phrase, e.g. ``n a multiple of 4, 1 ≤ n ≤ 2^20; k <= 4096``."""
    parts = [r.text() for r in domain] + list(constraints)
    return "; ".join(parts) if parts else "no size domain declared"


@dataclass(frozen=True)
class Tolerance:
    ulp: float | None = None  # max units in the last place
    rel: float | None = None  # max |got-want| / max(|want|, tiny)
    abs: float | None = None  # max |got-want| (combined with rel: pass if either holds)
    why: str = ""  # the author's justification of a loose bound (contract.lint asks for it)


@dataclass(frozen=True)
class FalsificationTest:
    id: str  # FALSIFY-...; the check id is "falsify.<id>"
    rule: str
    prediction: str
    sizes: tuple[dict[str, int], ...]  # each a binding of the size variables
    tolerance: Tolerance
    properties: tuple[str, ...]  # from PROPERTIES
    seed: int = 0
    input_low: float = -1.0
    input_high: float = 1.0
    executable: bool = True  # False for pv-style prose tests with no sizes / property


@dataclass(frozen=True)
class Claim:
    obligation: str  # PO1..PO8
    theorem: str  # fully qualified Lean name
    property: str  # from PROPERTIES
    statement: str = ""


@dataclass(frozen=True)
class Waiver:
    """``kernel.waivers[i]`` (issue 32): a finding of one class at one PTX location that the
    author declares harmless, with the written reason. Waived findings are shown as waived in
    the falsify and certificate details, never dropped; a waiver that matches nothing fails."""

    finding: str  # a finding kind (verify.ptxsim.errors.FINDING_KINDS), e.g. "global_race"
    entry: str  # the PTX .entry it is in
    line: int | None  # the PTX line of the instruction, or
    label: str  # a PTX label: any instruction from it to the next label of the entry
    reason: str

    def where(self) -> str:
        return f"{self.entry} " + (f"PTX line {self.line}" if self.line is not None else
                                   f"block {self.label}")


@dataclass(frozen=True)
class Kernel:
    name: str
    version: str
    entry: str  # the PTX .entry name
    ptx: str  # bundle path of the PTX file
    target: str = "sm_86"
    source: str = ""  # bundle path of the .cu file, if any
    build: tuple[str, ...] = ()  # argv that rebuilds ``ptx`` from ``source`` (run in the bundle)
    reference: str = ""  # name in verify's trusted reference registry ("" with reference_file)
    reference_file: str = ""  # {file, function} form: a Python file of the bundle ...
    reference_function: str = ""  # ... and the function in it (run only in verify.sandbox)
    params: tuple[Param, ...] = ()
    launch: Launch | None = None
    max_registers: int | None = None
    max_shared_bytes: int | None = None
    allow_spills: bool = False
    futhark: str = ""  # bundle path of the Futhark spec
    futhark_oracle: FutharkOracle | None = None
    size_domain: tuple[SizeRange, ...] = ()  # one per size variable; () when not declared
    size_constraints: tuple[str, ...] = ()  # relations such as "rows * cols <= 1048576"
    waivers: tuple[Waiver, ...] = ()


@dataclass(frozen=True)
class LeanRef:
    theorem: str
    status: str  # as claimed in the contract (e.g. "proved", "sorry")
    where: str  # where in the contract it is named, for messages


@dataclass(frozen=True)
class Contract:
    name: str
    version: str
    description: str
    kernel: Kernel | None
    falsification: tuple[FalsificationTest, ...] = ()
    claims: tuple[Claim, ...] = ()
    lean_refs: tuple[LeanRef, ...] = ()  # every Lean theorem the contract names anywhere
    equations: tuple[str, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)
