"""The contract's fixed-shape sections as frozen pydantic v2 models (contracts/README.md).

``verify.contract`` reads a section through ``section(Model, value, path)``, which turns the
first problem pydantic finds into today's one-line ``ContractError``: the YAML path of the field,
then what is wrong and how to fix it (``kernel.launch.grid: missing``, ``kernel.waivers[0].reason:
a written reason is required ...``). The models replace the field-by-field reading of those
sections: which keys exist (``extra="forbid"``: ``unknown field (allowed: ...)``), which are
required (``missing``, with the section's reason), and each field's type and range. Each field
is checked by a ``BeforeValidator`` that words its own refusal, and ``strict=True`` leaves no
coercion: a YAML boolean is never an integer, a number never a string.

A YAML ``null`` counts as an absent key where the hand-written reader treated it so
(``d.get(k) is None``: ``ABSENT_IF_NULL``); elsewhere it is refused as the field's wrong type.

Not here, and why (docs/dependencies.md): a parameter's entry, its input domain and a
falsification test keep their reading in ``verify.contract``: what a field may hold there turns on
the other fields (a value's grammar on the dtype, ``tied`` against ``value`` and ``range``, the
index-array flags against each other, prose against executable tests), so a model would be one
validator holding the same code; the relation and expression grammars are ``verify.expr`` and
``verify.inputs``, parsers rather than shapes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from ledger.core.errors import ContractError
from verify.expr import parse_expr
from verify.model import FINDING_KINDS

MAX_SIZE = 1 << 40  # a size binding's largest value (falsification_tests[i].sizes)
MAX_CONSTANT_VALUES = 1 << 16  # elements of one __constant__ array
MIN_REASON = 10  # characters: a waiver's reason is written text, not a placeholder
DTYPES = ("f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "u8", "s8")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# YAML 1.1 (PyYAML) reads these unquoted words as booleans: a parameter called ``off`` or ``on``
BOOL_HINT = " (YAML reads unquoted on, off, yes, no, true and false as booleans: quote it, 'off')"


def type_name(v: object) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }
    return names.get(type(v), "null" if v is None else type(v).__name__)


def refuse(msg: str, at: str = "") -> PydanticCustomError:
    """A refusal worded here: ``at`` is what follows the field's own path (``.low``, ``[2]``)."""
    return PydanticCustomError("contract", "{msg}", {"msg": msg, "at": at})


# ---------------------------------------------------------------------------------------------
# Field checks, each wording its refusal as the hand-written reader did


def check_str(v: object) -> str:
    if isinstance(v, str):
        return v
    hint = BOOL_HINT if isinstance(v, bool) else ""
    raise refuse(f"expected a string, got {type_name(v)}{hint}")


def check_text(v: object) -> str:
    """Free text a YAML author may write as a bare number (``rule: 1``)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    return check_str(v)


def check_name(v: object) -> str:
    s = check_str(v)
    if not _NAME.fullmatch(s):
        raise refuse(f"{s[:40]!r} is not a name ([A-Za-z_][A-Za-z0-9_]*)")
    return s


def check_num(v: object) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise refuse(f"expected a number, got {type_name(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise refuse("expected a finite number")
    return f


def int_in(lo: int, hi: int) -> Callable[[object], int]:
    def check(v: object) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise refuse(f"expected an integer, got {type_name(v)}")
        if not lo <= v <= hi:
            raise refuse(f"{v} is out of range [{lo}, {hi}]")
        return v

    return check


def check_expr(v: object) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, str):
        hint = BOOL_HINT if isinstance(v, bool) else ""
        raise refuse(f"expected an expression, got {type_name(v)}{hint}")
    try:
        parse_expr(v)
    except ContractError as e:
        raise refuse(f"expected an expression: {e}") from e
    return v


def list_of(check: Callable[[object], Any]) -> Callable[[object], tuple[Any, ...]]:
    """A list, each item checked by ``check`` (a refusal names the item: ``[i]``)."""

    def check_list(v: object) -> tuple[Any, ...]:
        if not isinstance(v, list):
            raise refuse(f"expected a list, got {type_name(v)}")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(check(x))
            except PydanticCustomError as e:
                ctx = e.context or {}
                raise refuse(str(ctx.get("msg", e)), f"[{i}]{ctx.get('at', '')}") from e
        return tuple(out)

    return check_list


def check_dim3(v: object) -> tuple[str, str, str]:
    items = list_of(check_expr)(v)
    if len(items) != 3:
        raise refuse(f"expected 3 expressions, got {len(items)}")
    return (items[0], items[1], items[2])


Str = Annotated[str, BeforeValidator(check_str)]
Text = Annotated[str, BeforeValidator(check_text)]
Name = Annotated[str, BeforeValidator(check_name)]
Num = Annotated[float, BeforeValidator(check_num)]
Expr = Annotated[str, BeforeValidator(check_expr)]
Dim3 = Annotated[tuple[str, str, str], BeforeValidator(check_dim3)]
Names = Annotated[tuple[str, ...], BeforeValidator(list_of(check_name))]


# ---------------------------------------------------------------------------------------------
# Sections


class Section(BaseModel):
    """A YAML mapping of known keys; ``MISSING`` words the fix for a required one."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    MISSING: ClassVar[str] = ""  # appended to "missing"
    OPEN: ClassVar[bool] = False  # True: other keys are allowed and ignored
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = None  # None: every field

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, v: object) -> object:
        if not isinstance(v, dict):
            raise refuse(f"expected a mapping, got {type_name(v)}")
        if not cls.OPEN:
            for k in v:
                if k not in cls.model_fields:
                    allowed = ", ".join(cls.model_fields)
                    raise refuse(f"unknown field (allowed: {allowed})", f".{k}")
        drop = cls.model_fields.keys() if cls.ABSENT_IF_NULL is None else cls.ABSENT_IF_NULL
        kept = {k: x for k, x in v.items()
                if k in cls.model_fields and not (x is None and k in drop)}
        for name, field in cls.model_fields.items():  # missing keys first, as before
            if field.is_required() and name not in kept:
                raise refuse(f"missing{cls.MISSING}", f".{name}")
        return kept


class Open(Section):
    """A section whose other keys are allowed (provable-contracts' own fields)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="ignore")
    OPEN: ClassVar[bool] = True


class Range(Section):
    low: Num
    high: Num
    MISSING: ClassVar[str] = " (a range needs low and high)"

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low > self.high:
            raise refuse(f"low {self.low} is above high {self.high}")
        return self


class Inputs(Section):
    """``falsification_tests[i].inputs``: the range the inputs are drawn from."""

    low: Num = -1.0
    high: Num = 1.0
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = frozenset()

    @model_validator(mode="after")
    def _ordered(self) -> Inputs:
        if self.low > self.high:
            raise refuse(f"low {self.low} is above high {self.high}")
        return self


def _not_negative(v: object) -> float:
    f = check_num(v)
    if f < 0:
        raise refuse("must not be negative")
    return f


class ToleranceDoc(Section):
    ulp: Annotated[float, BeforeValidator(_not_negative)] | None = None
    rel: Annotated[float, BeforeValidator(_not_negative)] | None = None
    abs: Annotated[float, BeforeValidator(_not_negative)] | None = None
    why: Str = ""

    @model_validator(mode="after")
    def _some_bound(self) -> ToleranceDoc:
        if self.ulp is None and self.rel is None and self.abs is None:
            raise refuse("needs ulp, rel or abs")
        return self


class Launch(Section):
    grid: Dim3
    block: Dim3
    shared_bytes: Expr = "0"
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = frozenset()


def _spills(v: object) -> str:
    s = check_str(v)
    if s not in ("forbid", "allow"):
        raise refuse(f"{s!r} is not forbid or allow")
    return s


class Resources(Section):
    max_registers: Annotated[int, BeforeValidator(int_in(1, 255))] | None = None
    max_shared_bytes: Annotated[int, BeforeValidator(int_in(0, 1 << 62))] | None = None
    spills: Annotated[str, BeforeValidator(_spills)] = "forbid"
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = frozenset({"max_registers",
                                                                 "max_shared_bytes"})


class BundleReference(Section):
    """``kernel.reference`` as ``{file, function}``: a Python file of the bundle."""

    file: Str
    function: Name
    MISSING: ClassVar[str] = " (a bundle reference needs file and function)"

    @model_validator(mode="after")
    def _file_named(self) -> BundleReference:
        if not self.file.strip():
            raise refuse("empty", ".file")
        return self


class Oracle(Section):
    """``kernel.futhark_oracle``: the spec's entry point used as an oracle."""

    entry: Name
    args: Names = ()
    results: Names = ()
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = frozenset({"entry"})

    @model_validator(mode="after")
    def _has_results(self) -> Oracle:
        if not self.results:
            raise refuse("must name at least one output parameter", ".results")
        return self


class SizeSpec(Section):
    """``kernel.size_domain.<name>``: ``{min, max, multiple_of?}``."""

    min: Annotated[int, BeforeValidator(int_in(0, MAX_SIZE))]
    max: Annotated[int, BeforeValidator(int_in(0, MAX_SIZE))]
    multiple_of: Annotated[int, BeforeValidator(int_in(1, 1 << 20))] = 1
    MISSING: ClassVar[str] = " (the domain's bounds are part of the claim)"
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = frozenset({"min", "max"})

    @model_validator(mode="after")
    def _not_empty(self) -> SizeSpec:
        lo, hi, step = self.min, self.max, self.multiple_of
        if lo > hi:
            raise refuse(f"min {lo} is above max {hi}")
        if -(-lo // step) * step > hi:
            raise refuse(f"no multiple of {step} lies in [{lo}, {hi}]")
        return self


def _finding(v: object) -> str:
    s = check_str(v)
    if s not in FINDING_KINDS:
        raise refuse(f"{s!r} is not a finding class ({', '.join(FINDING_KINDS)})")
    return s


def _reason(v: object) -> str:
    s = check_str(v).strip()
    if len(s) < MIN_REASON:
        raise refuse(f"a written reason is required (at least {MIN_REASON} characters) saying "
                     "why the finding is harmless")
    return s


class WaiverDoc(Section):
    """``kernel.waivers[i]``: ``{finding, entry, line | label, reason}``."""

    finding: Annotated[str, BeforeValidator(_finding)]
    entry: Str
    line: Annotated[int, BeforeValidator(int_in(1, 1 << 24))] | None = None
    label: Str = ""
    reason: Annotated[str, BeforeValidator(_reason)]

    @model_validator(mode="before")
    @classmethod
    def _one_location(cls, v: object) -> object:
        if isinstance(v, dict) and all(k in cls.model_fields for k in v):
            if all(v.get(k) is not None for k in ("finding", "entry", "reason")) and (
                (v.get("line") is None) == (v.get("label") is None)
            ):
                raise refuse("give exactly one PTX location, line or label")
        return v


def _dtype(v: object) -> str:
    s = check_str(v)
    if s not in DTYPES:
        raise refuse(f"{s!r} is not one of {', '.join(DTYPES)}")
    return s


def _values(v: object) -> tuple[float, ...]:
    nums: tuple[float, ...] = list_of(check_num)(v)
    if not 1 <= len(nums) <= MAX_CONSTANT_VALUES:
        raise refuse(f"1 to {MAX_CONSTANT_VALUES} values")
    return nums


class ConstantDoc(Section):
    """``kernel.constants[i]``: ``{name, dtype, values}`` or ``{name, dtype, count, range}``."""

    name: Name
    dtype: Annotated[str, BeforeValidator(_dtype)]
    values: Annotated[tuple[float, ...], BeforeValidator(_values)] = ()
    count: Annotated[int, BeforeValidator(int_in(1, MAX_CONSTANT_VALUES))] | None = None
    range: Range | None = None
    ABSENT_IF_NULL: ClassVar[frozenset[str] | None] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _values_or_range(cls, v: object) -> object:
        """Before the fields: ``values`` or ``count`` and ``range``, a null one refused."""
        if isinstance(v, dict) and all(k in cls.model_fields for k in v):
            if ("values" in v) == ("range" in v):
                raise refuse("give values, or count and range")
            if "range" in v and v.get("count") is None:
                raise refuse("expected an integer, got null", ".count")
            if "range" in v and v["range"] is None:
                raise refuse("expected a mapping, got null", ".range")
        return v


class ClaimDoc(Open):
    """``certificate[i]``: one obligation, the Lean theorem and the dynamic property."""

    obligation: Str
    theorem: Str
    property: Str
    statement: Str = ""


M = TypeVar("M", bound=BaseModel)


def section(model: type[M], value: object, path: str) -> M:
    """``value`` read as ``model``, or a ``ContractError`` naming the field at ``path``."""
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise ContractError(_message(e, path)) from e


def _message(e: ValidationError, path: str) -> str:
    err = e.errors(include_url=False)[0]
    where = path
    for part in err["loc"]:
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    ctx = err.get("ctx") or {}
    if err["type"] == "contract":
        return f"{where}{ctx.get('at', '')}: {ctx.get('msg', err['msg'])}"
    return f"{where}: {err['msg']}"  # pydantic's own wording: no section above leaves one to it

