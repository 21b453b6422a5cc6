"""Read a kernel contract (SPEC 8 ``contract.schema``); format: contracts/README.md.

``load_contract(bytes)`` turns untrusted YAML into the frozen ``verify.model.Contract``:

1. refuse more than ``MAX_BYTES`` bytes and anything that is not UTF-8;
2. parse with a ``yaml.SafeLoader`` subclass that refuses aliases (so no "billion laughs"),
   nesting deeper than ``MAX_DEPTH``, more than ``MAX_NODES`` nodes, duplicate mapping keys,
   non-string mapping keys, and every tag outside the plain JSON types (no ``!!python/...``,
   ``!!binary``, ``!!set``, timestamps stay strings);
3. recognise what is not a contract (a pv binding registry, a trueno ``PerformanceContract``);
4. build the typed model, naming the field path of the first problem in a ``ContractError``.

``eval_expr`` (from ``verify.expr``, re-exported here) evaluates the size expressions of shapes,
scalar values and launch geometry. ``run(ctx)`` is the check group that reports
``contract.schema`` and ``contract.lint`` (the gates live in ``verify.contract_lint``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, cast

import yaml

from ledger.core.errors import ContractError
from ledger.core.text import unsafe_at
from verify import contract_doc as sections
from verify.context import Context, Started, done
from verify.contract_doc import BOOL_HINT as _BOOL_HINT
from verify.contract_doc import DTYPES as DTYPES
from verify.contract_doc import MAX_CONSTANT_VALUES as MAX_CONSTANT_VALUES
from verify.contract_doc import MAX_SIZE as MAX_SIZE
from verify.contract_doc import MIN_REASON as MIN_REASON
from verify.contract_doc import Expr, Refusal, section
from verify.contract_doc import type_name as _type_name
from verify.expr import eval_expr as eval_expr
from verify.expr import expr_names as expr_names
from verify.expr import parse_relation
from verify.model import (
    FLOAT_DTYPES,
    LAUNCH_VALUES,
    NAN_RULES,
    RANDOM,
    SPECIALS,
    Claim,
    Constant,
    Contract,
    Dtype,
    FalsificationTest,
    FutharkOracle,
    InputDomain,
    Kernel,
    Launch,
    LeanRef,
    Param,
    SizeRange,
    Tolerance,
    Waiver,
    domain_text,
)
from verify.report import Check, failed, passed, skipped

MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_NODES = 10_000
MAX_DOMAIN_VARS = 16
MAX_CONSTRAINTS = 16

INTENTS = ("in", "out", "inout")
Intent = Literal["in", "out", "inout"]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TARGET = re.compile(r"sm_[0-9]{2,3}[a-z]?")
_PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "seq", "map")
)


# ---------------------------------------------------------------------------------------------
# Safe YAML


class _Loader(yaml.SafeLoader):
    """SafeLoader without aliases, timestamps or exotic tags; bounded depth and node count."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            ev = self.peek_event()  # type: ignore[no-untyped-call]
            raise ContractError(f"{_where(ev.start_mark)}YAML aliases (*name) are not allowed")
        ev = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = getattr(ev, "anchor", None)
        if anchor is not None:
            raise ContractError(f"{_where(ev.start_mark)}YAML anchors (&{anchor}) are not allowed")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise ContractError(f"{_where(ev.start_mark)}more than {MAX_NODES} YAML nodes")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ContractError(f"{_where(ev.start_mark)}nesting deeper than {MAX_DEPTH} levels")
        try:
            node: Any = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node.tag == "tag:yaml.org,2002:merge":
            raise ContractError(f"{_where(node.start_mark)}YAML merge keys (<<) are not allowed")
        if node.tag not in _PLAIN_TAGS:
            raise ContractError(f"{_where(node.start_mark)}YAML tag {node.tag!r} is not allowed")
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise ContractError(f"{_where(node.start_mark)}expected a mapping")
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise ContractError(
                    f"{_where(key_node.start_mark)}mapping key is a {key_node.id}, not a string"
                )
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                word = str(key_node.value)
                hint = ""
                if isinstance(key, bool) and word.lower() not in ("true", "false"):
                    hint = f" (YAML reads an unquoted {word} as a boolean: quote it, '{word}')"
                raise ContractError(
                    f"{_where(key_node.start_mark)}mapping key {key!r} is not a string{hint}"
                )
            if key in out:
                raise ContractError(f"{_where(key_node.start_mark)}duplicate key {key!r}")
            out[key] = self.construct_object(value_node, deep=deep)
        return out


# Timestamps stay strings, and floats follow YAML 1.2 (``1e-5`` and ``1.5e38`` are numbers, which
# YAML 1.1 reads as strings): rebuild the implicit resolvers (a copy, not SafeLoader's table).
_FLOAT = "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag not in (_FLOAT, "tag:yaml.org,2002:timestamp")]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


MAX_MESSAGE = 400
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(msg: str) -> str:
    """A message as one bounded line: control characters escaped, long text cut."""
    msg = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", msg)
    return msg if len(msg) <= MAX_MESSAGE else msg[: MAX_MESSAGE - 3] + "..."


def _where(mark: Any) -> str:
    if mark is None:
        return "contract: "
    return f"contract: line {mark.line + 1}, column {mark.column + 1}: "


def _reader_error(e: yaml.reader.ReaderError) -> str:
    return f"contract: character U+{e.character:04X} at offset {e.position} is not allowed in YAML"


def parse_yaml(data: bytes) -> Any:
    """Parse untrusted contract bytes into plain Python data, or raise ``ContractError``."""
    try:
        return _parse_yaml(data)
    except ContractError as e:
        raise ContractError(one_line(str(e))) from e


def _parse_yaml(data: bytes) -> Any:
    if not isinstance(data, bytes | bytearray):
        raise ContractError("contract: expected bytes")
    if len(data) > MAX_BYTES:
        raise ContractError(f"contract: {len(data)} bytes is over the {MAX_BYTES}-byte limit")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ContractError(f"contract: not UTF-8 (bad byte at offset {e.start})") from e
    if "\x00" in text:
        raise ContractError("contract: contains a NUL character")
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as e:
        raise ContractError(_reader_error(e)) from e
    try:
        doc = loader.get_single_node()
        if doc is None:
            raise ContractError("contract: the YAML document is empty")
        return loader.construct_document(doc)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or "malformed YAML"
        raise ContractError(f"{_where(mark)}YAML syntax error: {problem}") from e
    except yaml.reader.ReaderError as e:
        raise ContractError(_reader_error(e)) from e
    except yaml.YAMLError as e:
        raise ContractError(f"contract: YAML error: {str(e).splitlines()[0]}") from e
    except RecursionError as e:  # defence in depth; compose_node bounds the depth first
        raise ContractError(f"contract: nesting deeper than {MAX_DEPTH} levels") from e
    finally:
        loader.dispose()


# ---------------------------------------------------------------------------------------------
# Typed model


def _map(v: object, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ContractError(f"{path}: expected a mapping, got {_type_name(v)}")
    return v


def _list(v: object, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise ContractError(f"{path}: expected a list, got {_type_name(v)}")
    return v


def _str(v: object, path: str, *, numbers: bool = False) -> str:
    if isinstance(v, str):
        return v
    if numbers and isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    hint = _BOOL_HINT if isinstance(v, bool) else ""
    raise ContractError(f"{path}: expected a string, got {_type_name(v)}{hint}")


def _line(v: object, path: str, *, numbers: bool = False) -> str:
    """``_str`` of text recorded in the ledger and shown to people (a kernel's name, a version):
    no control or bidi character (``ledger.core.text``, issue 33 item 7)."""
    s = _str(v, path, numbers=numbers)
    at = unsafe_at(s)
    if at is not None:
        raise ContractError(f"{path}: holds the control or bidi character U+{ord(s[at]):04X}")
    return s


def _opt_str(d: Mapping[str, Any], key: str, path: str, *, numbers: bool = False) -> str:
    v = d.get(key)
    return "" if v is None else _str(v, f"{path}.{key}", numbers=numbers)


def _int(v: object, path: str, lo: int = 0, hi: int = 1 << 62) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ContractError(f"{path}: expected an integer, got {_type_name(v)}")
    if not lo <= v <= hi:
        raise ContractError(f"{path}: {v} is out of range [{lo}, {hi}]")
    return v


def _num(v: object, path: str) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise ContractError(f"{path}: expected a number, got {_type_name(v)}")
    f = float(v)
    if f != f or f in (float("inf"), float("-inf")):
        raise ContractError(f"{path}: expected a finite number")
    return f


def _name(v: object, path: str) -> str:
    s = _str(v, path)
    if not _NAME.fullmatch(s):
        raise ContractError(f"{path}: {s[:40]!r} is not a name ([A-Za-z_][A-Za-z0-9_]*)")
    return s


def _expr(v: object, path: str) -> str:
    """A size expression at ``path``, read as the models read one (``contract_doc.Expr``)."""
    try:
        return str(Expr.check(v))
    except Refusal as e:  # worded ": expected an expression ..."
        raise ContractError(f"{path}{e}") from e


def _known(d: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for k in d:
        if k not in allowed:
            raise ContractError(f"{path}.{k}: unknown field (allowed: {', '.join(allowed)})")


_DOMAIN_KEYS = ("range", "distribution", "index_of", "sorted", "unique", "permutation",
                "offsets_of", "total", "nullable")
DISTRIBUTIONS = ("uniform", "normal")


def _param(v: object, path: str) -> Param:
    d = _map(v, path)
    _known(d, ("name", "ptr", "scalar", "intent", "shape", "value", "tied", *_DOMAIN_KEYS), path)
    name = _name(d.get("name"), f"{path}.name")
    if ("ptr" in d) == ("scalar" in d):
        raise ContractError(f"{path}: needs exactly one of 'ptr' or 'scalar'")
    kind = "ptr" if "ptr" in d else "scalar"
    dtype = _str(d[kind], f"{path}.{kind}")
    if dtype not in DTYPES:
        raise ContractError(f"{path}.{kind}: {dtype!r} is not one of {', '.join(DTYPES)}")
    domain = _input_domain(d, kind, dtype, path)
    if kind == "ptr":
        for k in ("value", "tied"):
            if k in d:
                raise ContractError(f"{path}.{k}: only scalars have a {k}")
        intent = _str(d.get("intent", "in"), f"{path}.intent")
        if intent not in INTENTS:
            raise ContractError(f"{path}.intent: {intent!r} is not one of in, out, inout")
        shape = _list(d.get("shape"), f"{path}.shape")
        if not shape:
            raise ContractError(f"{path}.shape: must list at least one extent")
        dims = tuple(_expr(x, f"{path}.shape[{i}]") for i, x in enumerate(shape))
        return Param(name, "ptr", cast(Dtype, dtype), intent=cast(Intent, intent), shape=dims,
                     domain=domain)
    for k in ("intent", "shape"):
        if k in d:
            raise ContractError(f"{path}.{k}: only pointers have {k}")
    if "tied" in d:
        return _tied_scalar(d, name, dtype, domain, path)
    if "value" not in d:
        raise ContractError(f"{path}.value: missing (a scalar needs a value expression)")
    value = _scalar_value(d["value"], dtype, f"{path}.value", domain)
    return Param(name, "scalar", cast(Dtype, dtype), value=value, domain=domain)


def _tied_scalar(d: Mapping[str, Any], name: str, dtype: str, domain: InputDomain | None,
                 path: str) -> Param:
    """``{name: block_size, scalar: s32, tied: block.x}``: the launch value itself (issue 32)."""
    if "value" in d:
        raise ContractError(f"{path}: give value or tied, not both")
    if dtype in FLOAT_DTYPES:
        raise ContractError(f"{path}.tied: only an integer scalar can be tied to a launch value")
    if domain is not None:
        raise ContractError(f"{path}.tied: a tied scalar takes its launch value, not a range")
    tied = _str(d["tied"], f"{path}.tied")
    if tied not in LAUNCH_VALUES:
        raise ContractError(f"{path}.tied: {tied!r} is not one of {', '.join(LAUNCH_VALUES)}")
    return Param(name, "scalar", cast(Dtype, dtype), tied=tied)


def _input_domain(d: Mapping[str, Any], kind: str, dtype: str, path: str) -> InputDomain | None:
    """A parameter's own input domain (issue 32; contracts/README.md "Input domains")."""
    if not any(k in d for k in _DOMAIN_KEYS):
        return None
    if kind == "scalar":
        extra = [k for k in _DOMAIN_KEYS if k in d and k not in ("range", "distribution")]
        if extra:
            raise ContractError(f"{path}.{extra[0]}: only pointers have {extra[0]}")
    low = high = None
    if d.get("range") is not None:
        rd = _map(d["range"], f"{path}.range")
        _known(rd, ("low", "high"), f"{path}.range")
        for k in ("low", "high"):
            if rd.get(k) is None:
                raise ContractError(f"{path}.range.{k}: missing (a range needs low and high)")
        low, high = _num(rd["low"], f"{path}.range.low"), _num(rd["high"], f"{path}.range.high")
        if low > high:
            raise ContractError(f"{path}.range: low {low} is above high {high}")
    dist = _str(d.get("distribution", "uniform"), f"{path}.distribution")
    if dist not in DISTRIBUTIONS:
        raise ContractError(f"{path}.distribution: {dist!r} is not one of "
                            f"{', '.join(DISTRIBUTIONS)}")
    flags = {k: _bool(d.get(k, False), f"{path}.{k}")
             for k in ("sorted", "unique", "permutation", "nullable")}
    index_of = "" if d.get("index_of") is None else _expr(d["index_of"], f"{path}.index_of")
    offsets_of = "" if d.get("offsets_of") is None else _name(d["offsets_of"],
                                                               f"{path}.offsets_of")
    total = "" if d.get("total") is None else _expr(d["total"], f"{path}.total")
    _domain_consistent(path, dtype, low, index_of, offsets_of, total, flags)
    return InputDomain(low, high, dist, index_of, flags["sorted"], flags["unique"],
                       flags["permutation"], offsets_of, total, flags["nullable"])


def _domain_consistent(path: str, dtype: str, low: float | None, index_of: str,
                       offsets_of: str, total: str, flags: Mapping[str, bool]) -> None:
    if (offsets_of == "") != (total == ""):
        raise ContractError(f"{path}: offsets_of and total go together (offsets into an array, "
                            "ending at its total)")
    shaped = [k for k, v in (("index_of", index_of), ("offsets_of", offsets_of)) if v]
    if len(shaped) == 2:
        raise ContractError(f"{path}: give index_of or offsets_of, not both")
    if shaped and dtype in FLOAT_DTYPES:
        raise ContractError(f"{path}.{shaped[0]}: an index or offsets array has an integer dtype")
    if shaped and low is not None:
        raise ContractError(f"{path}.range: an {shaped[0]} array takes its values from "
                            f"{shaped[0]}, not a range")
    order = [k for k in ("sorted", "unique", "permutation") if flags[k]]
    if order and not index_of:
        raise ContractError(f"{path}.{order[0]}: only an index array (index_of) has {order[0]}")
    if flags["permutation"] and flags["sorted"]:
        raise ContractError(f"{path}: a sorted permutation is the identity: give sorted or "
                            "permutation")


def _bool(v: object, path: str) -> bool:
    if not isinstance(v, bool):
        raise ContractError(f"{path}: expected true or false, got {_type_name(v)}")
    return v


def _scalar_value(v: object, dtype: str, path: str, domain: InputDomain | None = None) -> str:
    """A scalar's value: a size expression; a float scalar also "random" or a literal number; an
    integer scalar also "random" when it has its own ``range``."""
    if dtype in FLOAT_DTYPES:
        if v == RANDOM:
            return RANDOM
        if isinstance(v, float):
            return repr(_num(v, path))
    elif v == RANDOM and domain is not None and domain.low is not None:
        return RANDOM
    elif v == RANDOM or isinstance(v, float):
        raise ContractError(
            f"{path}: {v!r} is only allowed for a float scalar (f16, bf16, f32, f64) or an "
            "integer scalar with its own range")
    if domain is not None:
        raise ContractError(f"{path}: a scalar with a range takes value: random")
    return _expr(v, path)


def _kernel(v: object) -> Kernel:
    path = "kernel"
    if isinstance(v, str):
        raise ContractError(
            "kernel: expected a mapping (the executable-kernel extension), got a string"
        )
    d = _map(v, path)
    _known(
        d,
        (
            "name",
            "version",
            "entry",
            "target",
            "ptx",
            "source",
            "build",
            "futhark",
            "futhark_oracle",
            "reference",
            "params",
            "launch",
            "resources",
            "size_domain",
            "size_constraints",
            "waivers",
            "constants",
            "preconditions",
        ),
        path,
    )
    for k in ("name", "version"):
        if d.get(k) is None:
            raise ContractError(f"kernel.{k}: missing (recorded in the ledger entry)")
    name = _line(d["name"], "kernel.name")
    if not name.strip():
        raise ContractError("kernel.name: empty")
    target = _opt_str(d, "target", path) or "sm_86"
    if not _TARGET.fullmatch(target):
        raise ContractError(f"kernel.target: {target!r} is not an sm_NN target")
    build: tuple[str, ...] = ()
    if d.get("build") is not None:
        argv = _list(d["build"], "kernel.build")
        build = tuple(_str(x, f"kernel.build[{i}]") for i, x in enumerate(argv))
        if not build or build[0] not in ("nvcc", "triton"):  # triton: verify.triton_build
            raise ContractError(
                "kernel.build[0]: the build command must start with 'nvcc' or 'triton'"
            )
    params = _params(d.get("params"))
    launch = None if d.get("launch") is None else _launch(d["launch"])
    max_regs, max_shared, allow_spills = _resources(d.get("resources"))
    ref_name, ref_file, ref_function = _reference(d.get("reference"))
    return Kernel(
        name=name,
        version=_line(d["version"], "kernel.version", numbers=True),
        entry=_opt_str(d, "entry", path),
        ptx=_opt_str(d, "ptx", path),
        target=target,
        source=_opt_str(d, "source", path),
        build=build,
        reference=ref_name,
        reference_file=ref_file,
        reference_function=ref_function,
        params=tuple(params),
        launch=launch,
        max_registers=max_regs,
        max_shared_bytes=max_shared,
        allow_spills=allow_spills,
        futhark=_opt_str(d, "futhark", path),
        futhark_oracle=_futhark_oracle(d.get("futhark_oracle")),
        size_domain=_size_domain(d.get("size_domain")),
        size_constraints=_size_constraints(d.get("size_constraints")),
        waivers=_waivers(d.get("waivers")),
        constants=_constants(d.get("constants")),
        preconditions=_preconditions(d.get("preconditions")),
    )


def _params(v: object) -> list[Param]:
    params: list[Param] = []
    if v is None:
        return params
    for i, p in enumerate(_list(v, "kernel.params")):
        params.append(_param(p, f"kernel.params[{i}]"))
    seen: set[str] = set()
    for i, p2 in enumerate(params):
        if p2.name in seen:
            raise ContractError(f"kernel.params[{i}].name: duplicate parameter {p2.name!r}")
        seen.add(p2.name)
    return params


def _launch(v: object) -> Launch:
    ld = section(sections.LaunchDoc, v, "kernel.launch")
    grid, block = tuple(map(str, ld.grid)), tuple(map(str, ld.block))  # plain str, as before
    return Launch(grid=(grid[0], grid[1], grid[2]), block=(block[0], block[1], block[2]),
                  shared_bytes=str(ld.shared_bytes))


def _resources(v: object) -> tuple[int | None, int | None, bool]:
    """``kernel.resources``: (max_registers, max_shared_bytes, spills allowed)."""
    if v is None:
        return None, None, False
    rd = section(sections.Resources, v, "kernel.resources")
    return rd.max_registers, rd.max_shared_bytes, rd.spills == "allow"


MAX_WAIVERS = 32


def _waivers(v: object) -> tuple[Waiver, ...]:
    """``kernel.waivers``: ``{finding, entry, line | label, reason}`` each (issue 32)."""
    if v is None:
        return ()
    items = _list(v, "kernel.waivers")
    if len(items) > MAX_WAIVERS:
        raise ContractError(f"kernel.waivers: {len(items)} waivers, at most {MAX_WAIVERS}")
    out = []
    for i, w in enumerate(items):
        wd = section(sections.WaiverDoc, w, f"kernel.waivers[{i}]")
        out.append(Waiver(wd.finding, wd.entry, wd.line, wd.label, wd.reason.strip()))
    return tuple(out)


MAX_CONSTANTS = 16
MAX_PRECONDITIONS = 16


def _constants(v: object) -> tuple[Constant, ...]:
    """``kernel.constants``: ``{name, dtype, values}`` or ``{name, dtype, count, range}`` each:
    the host-set contents of a module-scope ``__constant__`` array (issue 32)."""
    if v is None:
        return ()
    items = _list(v, "kernel.constants")
    if len(items) > MAX_CONSTANTS:
        raise ContractError(f"kernel.constants: {len(items)} arrays, at most {MAX_CONSTANTS}")
    out = []
    for i, c in enumerate(items):
        cd = section(sections.ConstantDoc, c, f"kernel.constants[{i}]")
        if cd.range is None:
            out.append(Constant(cd.name, cd.dtype, len(cd.values), cd.values))
        else:
            assert cd.count is not None  # ConstantDoc.rule: a range comes with a count
            out.append(Constant(cd.name, cd.dtype, cd.count, (), cd.range.low, cd.range.high))
    if len({c.name for c in out}) != len(out):
        raise ContractError("kernel.constants: a __constant__ array is named twice")
    return tuple(out)


def _preconditions(v: object) -> tuple[str, ...]:
    """``kernel.preconditions``: ``"targets[i] < V"`` relations over the inputs (issue 32).
    ``verify.inputs`` (numpy) loads only for a contract that has some: a plain contract is read
    before nvcc starts, without numpy (issue 12, start-up)."""
    if v is None:
        return ()
    from verify.inputs import parse_precondition

    return _relations(v, "kernel.preconditions", MAX_PRECONDITIONS, parse_precondition, "")


def _reference(v: object) -> tuple[str, str, str]:
    """``kernel.reference``: a trusted registry name, or ``{file, function}`` of the bundle."""
    path = "kernel.reference"
    if v is None:
        return "", "", ""
    if isinstance(v, str):
        return v, "", ""
    if not isinstance(v, dict):
        raise ContractError(
            f"{path}: expected a trusted reference name or {{file, function}}, got {_type_name(v)}"
        )
    ref = section(sections.BundleReference, v, path)
    return "", ref.file, ref.function


def _futhark_oracle(v: object) -> FutharkOracle | None:
    path = "kernel.futhark_oracle"
    if v is None:
        return None
    o = section(sections.Oracle, v, path)
    return FutharkOracle(o.entry, o.args, o.results)


def _size_domain(v: object) -> tuple[SizeRange, ...]:
    """``kernel.size_domain``: ``{name: {min, max, multiple_of?}}``, every key required but
    ``multiple_of`` (the bounds are part of the claim, so there is no silent default)."""
    if v is None:
        return ()
    path = "kernel.size_domain"
    d = _map(v, path)
    if not d:
        raise ContractError(f"{path}: must name at least one size variable")
    if len(d) > MAX_DOMAIN_VARS:
        raise ContractError(f"{path}: more than {MAX_DOMAIN_VARS} size variables")
    out = []
    for name, spec in d.items():
        p = f"{path}.{name}"
        _name(name, p)
        sd = section(sections.SizeSpec, spec, p)
        out.append(SizeRange(name, sd.min, sd.max, sd.multiple_of))
    return tuple(out)


def _size_constraints(v: object) -> tuple[str, ...]:
    if v is None:
        return ()
    return _relations(v, "kernel.size_constraints", MAX_CONSTRAINTS, parse_relation,
                      "expected a relation: ")


def _relations(v: object, path: str, most: int, parse: Callable[[str], object],
               why: str) -> tuple[str, ...]:
    """A list of at most ``most`` relation texts at ``path``, each read by ``parse`` (its
    ``ContractError`` named by the item's path, after ``why``)."""
    items = _list(v, path)
    if len(items) > most:
        raise ContractError(f"{path}: more than {most} relations")
    out = []
    for i, x in enumerate(items):
        text = _str(x, f"{path}[{i}]")
        try:
            parse(text)
        except ContractError as e:
            raise ContractError(f"{path}[{i}]: {why}{e}") from e
        out.append(text)
    return tuple(out)


_EXEC_KEYS = ("sizes", "tolerance", "properties")


def _ftest(v: object, path: str) -> FalsificationTest:
    d = _map(v, path)
    tid = _str(d.get("id"), f"{path}.id") if "id" in d else ""
    if not tid:
        raise ContractError(f"{path}.id: missing")
    rule = _opt_str(d, "rule", path, numbers=True)
    prediction = _opt_str(d, "prediction", path, numbers=True)
    present = [k for k in _EXEC_KEYS if d.get(k) is not None]
    if not present:
        return FalsificationTest(tid, rule, prediction, (), Tolerance(), (), executable=False)
    missing = [k for k in _EXEC_KEYS if k not in present]
    if missing:
        raise ContractError(
            f"{path}: has {', '.join(present)} but no {', '.join(missing)} "
            "(an executable test needs sizes, tolerance and properties)"
        )
    sizes_l = _list(d["sizes"], f"{path}.sizes")
    if not sizes_l:
        raise ContractError(f"{path}.sizes: must list at least one binding")
    sizes: list[dict[str, int]] = []
    for i, s in enumerate(sizes_l):
        sm = _map(s, f"{path}.sizes[{i}]")
        binding = {}
        for k, x in sm.items():
            _name(k, f"{path}.sizes[{i}]")
            binding[k] = _int(x, f"{path}.sizes[{i}].{k}", 0, MAX_SIZE)
        sizes.append(binding)
    td = section(sections.ToleranceDoc, d["tolerance"], f"{path}.tolerance")
    props_l = _list(d["properties"], f"{path}.properties")
    props = tuple(_str(x, f"{path}.properties[{i}]") for i, x in enumerate(props_l))
    if not props:
        raise ContractError(f"{path}.properties: must list at least one property")
    seed = _int(d.get("seed", 0), f"{path}.seed", 0, (1 << 64) - 1)
    inputs = sections.Inputs() if d.get("inputs") is None else section(
        sections.Inputs, d["inputs"], f"{path}.inputs")
    specials, nan = _specials(d, path)
    return FalsificationTest(
        tid,
        rule,
        prediction,
        tuple(sizes),
        Tolerance(td.ulp, td.rel, td.abs, td.why),
        props,
        seed=seed,
        input_low=inputs.low,
        input_high=inputs.high,
        executable=True,
        specials=specials,
        nan=nan,
    )


def _specials(d: Mapping[str, Any], path: str) -> tuple[tuple[str, ...], str]:
    """``specials: [nan, inf]`` (the claim covers them) and ``nan: equal | any`` (issue 32)."""
    items = _list(d.get("specials", []), f"{path}.specials")
    specials = tuple(_str(x, f"{path}.specials[{i}]") for i, x in enumerate(items))
    for i, s in enumerate(specials):
        if s not in SPECIALS:
            raise ContractError(f"{path}.specials[{i}]: {s!r} is not one of {', '.join(SPECIALS)}")
    nan = _str(d.get("nan", "equal"), f"{path}.nan")
    if nan not in NAN_RULES:
        raise ContractError(f"{path}.nan: {nan!r} is not one of {', '.join(NAN_RULES)}")
    if "nan" in specials and d.get("nan") is None:
        raise ContractError(f"{path}.nan: a test with NaN inputs states how a NaN is compared "
                            f"(nan: {' or '.join(NAN_RULES)})")
    return tuple(dict.fromkeys(specials)), nan


def _claim(v: object, path: str) -> Claim:
    cd = section(sections.ClaimDoc, v, path)
    return Claim(cd.obligation, cd.theorem, cd.property, cd.statement)


def _reject_non_contracts(doc: dict[str, Any]) -> None:
    if "metadata" in doc:
        return
    if "bindings" in doc:
        raise ContractError(
            "not a contract: this is a provable-contracts binding registry (top-level "
            "'bindings'), not a kernel contract (no 'metadata')"
        )
    if "kind" in doc:
        kind = doc["kind"]
        raise ContractError(
            f"not a contract: kind {kind!r} is not supported; expected a provable-contracts "
            "contract with a 'metadata' mapping"
        )
    raise ContractError("metadata: missing (a contract starts with a 'metadata' mapping)")


def load_contract(data: bytes) -> Contract:
    """Parse and validate contract bytes into the typed model; raise ``ContractError``."""
    try:
        return _build(parse_yaml(data))
    except ContractError as e:
        raise ContractError(one_line(str(e))) from e


def contract_from_doc(doc: Any) -> Contract:
    """Build the typed model from YAML already parsed by ``parse_yaml``."""
    try:
        return _build(doc)
    except ContractError as e:
        raise ContractError(one_line(str(e))) from e


def _build(doc: Any) -> Contract:
    if not isinstance(doc, dict):
        raise ContractError(f"contract: the document must be a mapping, got {_type_name(doc)}")
    _reject_non_contracts(doc)
    meta = _map(doc["metadata"], "metadata")
    raw_version = meta.get("version")
    version = "" if raw_version is None else _line(raw_version, "metadata.version", numbers=True)
    description = _opt_str(meta, "description", "metadata")
    refs: list[LeanRef] = []
    formulas: dict[str, str] = {}
    if doc.get("equations") is not None:
        for ename, eq in _map(doc["equations"], "equations").items():
            ep = f"equations.{ename}"
            ed = _map(eq, ep)
            formulas[ename] = _opt_str(ed, "formula", ep, numbers=True)
            if ed.get("lean_theorem") is not None:
                thm = _str(ed["lean_theorem"], f"{ep}.lean_theorem")
                refs.append(LeanRef(thm, "claimed", f"{ep}.lean_theorem"))
    obligations: list[str] = []
    if doc.get("proof_obligations") is not None:
        for i, po in enumerate(_list(doc["proof_obligations"], "proof_obligations")):
            pp = f"proof_obligations[{i}]"
            pd = _map(po, pp)
            obligations.append(_opt_str(pd, "property", pp))
            if pd.get("lean") is not None:
                ld = _map(pd["lean"], f"{pp}.lean")
                if ld.get("theorem") is None:
                    raise ContractError(f"{pp}.lean.theorem: missing")
                thm = _str(ld["theorem"], f"{pp}.lean.theorem")
                status = _opt_str(ld, "status", f"{pp}.lean") or "unstated"
                refs.append(LeanRef(thm, status, f"{pp}.lean"))
    tests: list[FalsificationTest] = []
    if doc.get("falsification_tests") is not None:
        for i, t in enumerate(_list(doc["falsification_tests"], "falsification_tests")):
            tests.append(_ftest(t, f"falsification_tests[{i}]"))
    claims: list[Claim] = []
    if doc.get("certificate") is not None:
        for i, c in enumerate(_list(doc["certificate"], "certificate")):
            claim = _claim(c, f"certificate[{i}]")
            claims.append(claim)
            refs.append(LeanRef(claim.theorem, "claimed", f"certificate[{i}].theorem"))
    kernel = _kernel(doc["kernel"]) if doc.get("kernel") is not None else None
    kani = doc.get("kani_harnesses")
    extra: dict[str, object] = {
        "formulas": formulas,
        "obligations": tuple(obligations),
        "kani_harnesses": len(kani) if isinstance(kani, list) else 0,
        "top_level_keys": tuple(doc),
    }
    return Contract(
        name=kernel.name if kernel is not None else next(iter(formulas), ""),
        version=kernel.version if kernel is not None else version,
        description=description,
        kernel=kernel,
        falsification=tuple(tests),
        claims=tuple(claims),
        lean_refs=tuple(refs),
        equations=tuple(formulas),
        extra={"metadata_version": version, **extra},
    )


# ---------------------------------------------------------------------------------------------
# Check group


def run(ctx: Context) -> list[Check]:
    """``contract.schema`` and ``contract.lint``; sets ``ctx.contract`` when the schema passes."""
    return start(ctx).finish()


def start(ctx: Context) -> Started:
    """``contract.schema`` now (it sets ``ctx.contract``, which the groups with tools read), and
    ``contract.lint`` when the result is collected: ``verify.runner`` starts nvcc and ptxas
    between the two, so the lint gates (and the Lean scanner they load) run beside nvcc instead
    of before it (issue 12, start-up)."""
    from verify import contract_lint  # the gates; imported here to keep this module small

    try:
        data = ctx.bundle.file("contract.yaml")
    except KeyError:
        data = None
    if data is None:
        reason = "bundle has no contract.yaml"
        return done(
            [failed("contract.schema", reason), skipped("contract.lint", f"not run: {reason}")]
        )
    try:
        doc = parse_yaml(data)
        contract = contract_from_doc(doc)
        problems = contract_lint.schema_errors(doc)
    except ContractError as e:
        return done([
            failed("contract.schema", str(e), "PyYAML", yaml.__version__),
            skipped("contract.lint", "not run: contract.schema failed"),
        ])
    if problems:
        return done([
            failed("contract.schema", "; ".join(problems[:5]), "PyYAML", yaml.__version__),
            skipped("contract.lint", "not run: contract.schema failed"),
        ])
    ctx.contract = contract
    k = contract.kernel
    schema = passed(
        "contract.schema",
        f"contract.yaml parsed: kernel {k.name if k else '(none)'} version {contract.version}, "
        f"{len(contract.falsification)} falsification tests, {len(contract.claims)} claims, "
        f"{_theorems_named(contract)}"
        + (f"; size domain: {domain_text(k.size_domain, k.size_constraints)}" if k else ""),
        "PyYAML",
        yaml.__version__,
    )
    files = {f.path: f.data for f in ctx.bundle.files}
    return Started(lambda: [schema, contract_lint.lint_check(contract, files)])


def _theorems_named(contract: Contract) -> str:
    """``4 Lean theorems named (6 references)``: the distinct theorems the contract names, and
    how often it names them when that differs (a scaffold names one theorem four times)."""
    distinct = len({r.theorem for r in contract.lean_refs})
    refs = len(contract.lean_refs)
    said = f"{distinct} Lean theorem{'' if distinct == 1 else 's'} named"
    return said if refs == distinct else f"{said} ({refs} references)"
