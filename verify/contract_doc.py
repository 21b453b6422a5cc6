"""The contract's fixed-shape sections as frozen msgspec models (issue 35; contracts/README.md).

Each section (``kernel.launch``, ``kernel.resources``, a bundle reference, the Futhark oracle, a
size-domain entry, a waiver, a ``__constant__`` array and its range, a test's tolerance and
inputs, a certificate claim) is a ``msgspec.Struct`` (``frozen``, ``forbid_unknown_fields``): its
fields say which keys exist, which are required, each value's type and bounds (``msgspec.Meta``).
``section(Model, value, path)`` reads one YAML value into it with
``msgspec.convert(strict=True)`` (no coercion: a YAML boolean is never an integer, a number never a
string) and words the first refusal as the hand-written reader did, one line, the YAML path and
what to fix:

1. a value that is not a mapping is refused (``expected a mapping, got ...``);
2. a null is dropped where it counts as an absent key (``NULL_IS_ABSENT``), and the keys are put in
   the order the reader checks them: unknown keys first (``forbid_unknown_fields`` refuses the
   first), then the fields in ``ORDER`` (msgspec checks a mapping's keys in the order they come);
3. with no unknown key, an absent required key is refused (``missing`` and ``MISSING``) before any
   value is looked at, or, where ``MISSING`` is None, given as null, for its type to word it;
4. ``rule`` (a classmethod) checks what the reader checked between two fields (a waiver's one
   location once its finding class is valid; a size's ``min`` against ``max`` before
   ``multiple_of``);
5. ``msgspec.convert``. Its ``ValidationError`` holds the path (``$.grid[1]``, the same notation
   as the YAML paths here). A refusal worded in this module (a custom type's ``check``, through
   ``dec_hook``; a ``__post_init__``) starts with ``:``, ``.`` or ``[`` and is used as it is;
   msgspec's own (``Expected `int`, got `str```) is worded again from the field's type, its
   ``Meta`` and the value at that path (``_word``).

Not here, and why (docs/dependencies.md): a parameter, its input domain and a falsification test's
top level stay in ``verify.contract``: what a field may hold there turns on the other fields (a
value's grammar on the dtype, ``tied`` against ``value`` and ``range``, the index-array flags), so
a model would be one validator holding the same code; the relation and expression grammars are
``verify.expr`` and ``verify.inputs``, parsers rather than shapes.
"""

from __future__ import annotations

import math
import re
import sys
import types
from collections.abc import Callable, Mapping
from functools import cache
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

import msgspec
import msgspec.structs
from msgspec import Meta

from ledger.core.errors import ContractError
from verify.expr import parse_expr
from verify.model import FINDING_KINDS, Dtype

MAX_SIZE = 1 << 40  # a size binding's largest value (falsification_tests[i].sizes)
MAX_CONSTANT_VALUES = 1 << 16  # elements of one __constant__ array
MIN_REASON = 10  # characters: a waiver's reason is written text, not a placeholder
DTYPES = ("f16", "bf16", "f32", "f64", "s32", "u32", "s64", "u64", "u8", "s8")
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# YAML 1.1 (PyYAML) reads these unquoted words as booleans: a parameter called ``off`` or ``on``
BOOL_HINT = " (YAML reads unquoted on, off, yes, no, true and false as booleans: quote it, 'off')"
_LARGEST = sys.float_info.max


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


class Refusal(ValueError):
    """A refusal worded here: ``at`` (``.results``, ``[2]``, or empty), ``: ``, the message.
    A ``ValueError``, so that msgspec reports one raised in a ``check`` or ``__post_init__``
    with its path."""

    def __init__(self, msg: str, at: str = "") -> None:
        super().__init__(f"{at}: {msg}")


def _words(refuse: Callable[[Any], str]) -> Meta:
    """``Meta`` carrying the wording of a value of the right type that breaks the constraint.
    Types that carry one are named at module level: msgspec evaluates a field's annotation text,
    and a lambda written there would be made again outside this module's namespace."""
    return Meta(extra={"refuse": refuse})


def _int(lo: int, hi: int) -> Meta:
    return Meta(ge=lo, le=hi)


# ---------------------------------------------------------------------------------------------
# Field types


class Expr(str):
    """A size expression (``verify.expr``): text it parses, or an integer (kept as its text).
    A custom type: msgspec hands the value to ``check`` (``dec_hook``); the reader turns it back
    into a plain ``str`` for the model (``verify.model.Launch``)."""

    @staticmethod
    def check(v: object) -> Expr:
        if isinstance(v, int) and not isinstance(v, bool):
            return Expr(v)
        if not isinstance(v, str):
            hint = BOOL_HINT if isinstance(v, bool) else ""
            raise Refusal(f"expected an expression, got {type_name(v)}{hint}")
        try:
            parse_expr(v)
        except ContractError as e:
            raise Refusal(f"expected an expression: {e}") from e
        return Expr(v)  # msgspec checks that a dec_hook returns the type asked for


Name = Annotated[str, Meta(pattern=rf"^{NAME}\Z"),
                 _words(lambda s: f"{s[:40]!r} is not a name ([A-Za-z_][A-Za-z0-9_]*)")]
Num = Annotated[float, Meta(ge=-_LARGEST, le=_LARGEST)]  # finite; an integer is read as a float
NonNegative = Annotated[float, Meta(ge=0.0, le=_LARGEST), _words(lambda _: "must not be negative")]
Dim3 = Annotated[tuple[Expr, Expr, Expr],
                 _words(lambda v: f"expected 3 expressions, got {len(v)}")]
Names = tuple[Name, ...]
Spills = Annotated[Literal["forbid", "allow"], _words(lambda s: f"{s!r} is not forbid or allow")]
File = Annotated[str, Meta(pattern=r"\S"), _words(lambda _: "empty")]
if TYPE_CHECKING:
    Finding = str  # one of FINDING_KINDS
else:
    Finding = Annotated[Literal[FINDING_KINDS], _words(
        lambda s: f"{s!r} is not a finding class ({', '.join(FINDING_KINDS)})")]
# at least MIN_REASON characters once stripped
Reason = Annotated[str, Meta(pattern=rf"\S[\s\S]{{{MIN_REASON - 2},}}\S"), _words(
    lambda _: f"a written reason is required (at least {MIN_REASON} characters) saying why "
              "the finding is harmless")]
DtypeName = Annotated[Dtype, _words(lambda s: f"{s!r} is not one of {', '.join(DTYPES)}")]
Values = Annotated[tuple[Num, ...], Meta(min_length=1, max_length=MAX_CONSTANT_VALUES),
                   _words(lambda _: f"1 to {MAX_CONSTANT_VALUES} values")]


# ---------------------------------------------------------------------------------------------
# Sections


class Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A YAML mapping of known keys; the class settings are steps 2-4 of the module docstring."""

    MISSING: ClassVar[str | None] = ""  # appended to "missing"; None: an absent key reads as null
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset()
    ORDER: ClassVar[tuple[str, ...]] = ()  # the order the fields are checked in; () the declared

    @classmethod
    def rule(cls, d: dict[str, Any]) -> None:
        """A check between two fields, before the values are read (none by default)."""


class Open(Section, frozen=True, forbid_unknown_fields=False):
    """A section whose other keys are allowed and ignored (provable-contracts' own fields)."""


class LaunchDoc(Section, frozen=True, kw_only=True):
    """``kernel.launch``: a null grid or block is refused as a list, not as missing."""

    grid: Dim3
    block: Dim3
    shared_bytes: Expr = Expr("0")


class Resources(Section, frozen=True, kw_only=True):
    max_registers: Annotated[int, _int(1, 255)] | None = None
    max_shared_bytes: Annotated[int, _int(0, 1 << 62)] | None = None
    spills: Spills = "forbid"
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset({"max_registers", "max_shared_bytes"})


class BundleReference(Section, frozen=True, kw_only=True):
    """``kernel.reference`` as ``{file, function}``: a Python file of the bundle."""

    file: File
    function: Name
    MISSING: ClassVar[str | None] = " (a bundle reference needs file and function)"
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset({"file", "function"})


class Oracle(Section, frozen=True, kw_only=True):
    """``kernel.futhark_oracle``: the spec's entry point used as an oracle."""

    entry: Name
    args: Names = ()
    results: Names = ()
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset({"entry"})

    def __post_init__(self) -> None:
        if not self.results:
            raise Refusal("must name at least one output parameter", ".results")


class SizeSpec(Section, frozen=True, kw_only=True):
    """``kernel.size_domain.<name>``: ``{min, max, multiple_of?}``."""

    min: Annotated[int, _int(0, MAX_SIZE)]
    max: Annotated[int, _int(0, MAX_SIZE)]
    multiple_of: Annotated[int, _int(1, 1 << 20)] = 1
    MISSING: ClassVar[str | None] = " (the domain's bounds are part of the claim)"
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset({"min", "max"})

    @classmethod
    def rule(cls, d: dict[str, Any]) -> None:
        lo, hi = d["min"], d["max"]
        if valid(cls, "min", lo) and valid(cls, "max", hi) and lo > hi:
            raise Refusal(f"min {lo} is above max {hi}")  # before multiple_of is read

    def __post_init__(self) -> None:
        lo, hi, step = self.min, self.max, self.multiple_of
        if -(-lo // step) * step > hi:
            raise Refusal(f"no multiple of {step} lies in [{lo}, {hi}]")


class WaiverDoc(Section, frozen=True, kw_only=True):
    """``kernel.waivers[i]``: ``{finding, entry, line | label, reason}``."""

    finding: Finding
    entry: str
    line: Annotated[int, _int(1, 1 << 24)] | None = None
    label: str = ""
    reason: Reason
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset(
        {"finding", "entry", "line", "label", "reason"})
    ORDER: ClassVar[tuple[str, ...]] = ("finding", "reason", "line", "label", "entry")

    @classmethod
    def rule(cls, d: dict[str, Any]) -> None:
        if valid(cls, "finding", d["finding"]) and ("line" in d) == ("label" in d):
            raise Refusal("give exactly one PTX location, line or label")


class Range(Section, frozen=True, kw_only=True):
    """``kernel.constants[i].range``: an absent bound is refused as a null number."""

    low: Num
    high: Num
    MISSING: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise Refusal(f"low {self.low} is above high {self.high}")


class ConstantDoc(Section, frozen=True, kw_only=True):
    """``kernel.constants[i]``: ``{name, dtype, values}`` or ``{name, dtype, count, range}``."""

    name: Name
    dtype: DtypeName
    values: Values = ()
    count: Annotated[int, _int(1, MAX_CONSTANT_VALUES)] | None = None
    range: Range | None = None
    MISSING: ClassVar[str | None] = None

    @classmethod
    def rule(cls, d: dict[str, Any]) -> None:
        """After name and dtype: ``values``, or ``count`` and ``range`` (a null one refused)."""
        if not (valid(cls, "name", d["name"]) and valid(cls, "dtype", d["dtype"])):
            return
        if ("values" in d) == ("range" in d):
            raise Refusal("give values, or count and range")
        if "values" in d:
            d.pop("count", None)  # not read beside values, as before
            return
        if d.get("count") is None:
            raise Refusal("expected an integer, got null", ".count")
        if valid(cls, "count", d["count"]) and d["range"] is None:
            raise Refusal("expected a mapping, got null", ".range")


class ToleranceDoc(Section, frozen=True, kw_only=True):
    """``falsification_tests[i].tolerance``: ``why`` is read first, then the bounds."""

    ulp: NonNegative | None = None
    rel: NonNegative | None = None
    abs: NonNegative | None = None
    why: str = ""
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset({"ulp", "rel", "abs", "why"})
    ORDER: ClassVar[tuple[str, ...]] = ("why", "ulp", "rel", "abs")

    def __post_init__(self) -> None:
        if self.ulp is None and self.rel is None and self.abs is None:
            raise Refusal("needs ulp, rel or abs")


class Inputs(Section, frozen=True, kw_only=True):
    """``falsification_tests[i].inputs``: the range the inputs are drawn from."""

    low: Num = -1.0
    high: Num = 1.0

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise Refusal(f"low {self.low} is above high {self.high}")


class ClaimDoc(Open, frozen=True, kw_only=True):
    """``certificate[i]``: one obligation, the Lean theorem and the dynamic property."""

    obligation: str
    theorem: str
    property: str
    statement: str = ""
    NULL_IS_ABSENT: ClassVar[frozenset[str]] = frozenset(
        {"obligation", "theorem", "property", "statement"})


# ---------------------------------------------------------------------------------------------
# Reading a section

S = TypeVar("S", bound=Section)


def section(model: type[S], value: object, path: str) -> S:
    """``value`` read as ``model``, or a ``ContractError`` naming the field at ``path``."""
    try:
        d = _prepare(model, value)
        return msgspec.convert(d, type=model, strict=True, dec_hook=_dec_hook)
    except Refusal as e:
        raise ContractError(f"{path}{e}") from e
    except msgspec.ValidationError as e:
        raise ContractError(_message(model, d, str(e), path)) from e


def valid(model: type[Section], field: str, value: object) -> bool:
    """Whether ``value`` is one ``field`` of ``model`` accepts (for a ``rule``)."""
    try:
        msgspec.convert(value, type=_fields(model)[field], strict=True, dec_hook=_dec_hook)
    except msgspec.ValidationError:
        return False
    return True


def _dec_hook(tp: type, v: object) -> object:
    check = getattr(tp, "check", None)
    if check is None:
        raise NotImplementedError(f"no reader for {tp!r}")
    return check(v)


@cache
def _fields(model: type[Section]) -> dict[str, Any]:
    """Field name to type (annotations resolved, ``Annotated`` kept), in declaration order."""
    return {f.name: f.type for f in msgspec.structs.fields(model)}


@cache
def _required(model: type[Section]) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(model) if f.required)


def _prepare(model: type[Section], value: object) -> dict[str, Any]:
    """Steps 1-4: the mapping's keys in checking order, nulls and absent keys settled."""
    if not isinstance(value, dict):
        raise Refusal(f"expected a mapping, got {type_name(value)}")
    fields = _fields(model)
    d = {k: x for k, x in value.items() if not (x is None and k in model.NULL_IS_ABSENT)}
    unknown = {k: x for k, x in d.items() if k not in fields}
    if unknown and not issubclass(model, Open):
        return {**unknown, **d}  # msgspec refuses the first unknown key
    for k in _required(model):
        if k not in d:
            if model.MISSING is not None:
                raise Refusal(f"missing{model.MISSING}", f".{k}")
            d[k] = None
    for k, nested in _nested(model).items():
        if isinstance(d.get(k), dict):
            d[k] = _prepare(nested, d[k])
    model.rule(d)
    return {k: d[k] for k in model.ORDER or fields if k in d}


def _unwrap(tp: Any) -> tuple[Any, list[Meta]]:
    """``tp`` without ``Annotated`` and ``| None``, and the ``Meta`` it carried."""
    metas: list[Meta] = []
    while True:
        if get_origin(tp) is Annotated:
            base, *extra = get_args(tp)
            metas += [m for m in extra if isinstance(m, Meta)]
            tp = base
        elif get_origin(tp) in (Union, types.UnionType):
            tp = next(a for a in get_args(tp) if a is not type(None))
        else:
            return tp, metas


@cache
def _nested(model: type[Section]) -> dict[str, type[Section]]:
    """The fields of ``model`` that are sections themselves (``ConstantDoc.range``)."""
    out = {}
    for k, tp in _fields(model).items():
        base, _ = _unwrap(tp)
        if isinstance(base, type) and issubclass(base, Section):
            out[k] = base
    return out


_STEP = re.compile(rf"\.({NAME})|\[([0-9]+)\]")
_AT = " - at `$"


def _message(model: type[Section], doc: dict[str, Any], text: str, path: str) -> str:
    """Step 5: msgspec's refusal ``text`` as the reader's line."""
    cut = text.rfind(_AT)
    msg, where = (text, "") if cut < 0 else (text[:cut], text[cut + len(_AT):-1])
    if msg[:1] in (":", ".", "["):
        return f"{path}{where}{msg}"  # a Refusal, with msgspec's path
    tp: Any = model
    value: Any = doc
    for step in _STEP.finditer(where):
        key, index = step.group(1), step.group(2)
        base, _ = _unwrap(tp)
        if key is not None:
            tp, value = _fields(base)[key], value[key]
        else:
            args = get_args(base)
            tp = args[0] if len(args) == 2 and args[1] is Ellipsis else args[int(index)]
            value = value[int(index)]
    if msg.startswith("Object contains unknown field"):
        base, _ = _unwrap(tp)
        key = next(k for k in value if k not in _fields(base))
        return f"{path}{where}.{key}: unknown field (allowed: {', '.join(_fields(base))})"
    return f"{path}{where}: {_word(tp, value, msg)}"


def _word(tp: Any, v: Any, msg: str) -> str:
    """The reader's wording of a value ``v`` that a field of type ``tp`` refuses."""
    base, metas = _unwrap(tp)
    number = isinstance(v, int | float) and not isinstance(v, bool)
    if base is str or get_origin(base) is Literal:
        if not isinstance(v, str):
            hint = BOOL_HINT if isinstance(v, bool) else ""
            return f"expected a string, got {type_name(v)}{hint}"
    elif base is int:
        if not isinstance(v, int) or isinstance(v, bool):
            return f"expected an integer, got {type_name(v)}"
        lo, hi = next((m.ge, m.le) for m in metas if m.ge is not None)
        return f"{v} is out of range [{lo}, {hi}]"
    elif base is float:
        if not number:
            return f"expected a number, got {type_name(v)}"
        if not math.isfinite(v):
            return "expected a finite number"
    elif get_origin(base) is tuple:
        if not isinstance(v, list):
            return f"expected a list, got {type_name(v)}"
    elif isinstance(base, type) and issubclass(base, Section) and not isinstance(v, Mapping):
        return f"expected a mapping, got {type_name(v)}"
    for m in metas:
        if m.extra and "refuse" in m.extra:
            refuse: Callable[[Any], str] = m.extra["refuse"]
            return refuse(v)
    return msg  # msgspec's own words: no field above leaves one to them
