"""Parameter values without pydantic (start-up, issue 12).

Typer 0.29 turns every command-line value into its Python type through a pydantic
``TypeAdapter``, built for every parameter of the command that runs, given or not: importing
pydantic (and the package metadata for its plugins) and building the adapters was a fifth of
``ledger verify``'s time importing. The shell's parameters are plain ``str``, ``int``,
``Path`` and lists of them, so ``light_params()`` gives typer's parameters a conversion that
does these itself, with exactly typer's result:

* ``str`` as given; a flag's ``bool`` as given (``--help``, ``--json``: typer converts a flag
  it was not given too); ``int`` from plain decimal digits (an optional ``-``, no leading zero,
  at most 18 digits) within the option's ``min``/``max``; ``Path`` as ``Path(value)`` through
  typer's own path checks (``coerce_cli_path``, which needs no pydantic once the value is a
  ``Path``); ``list[...]`` of those, item by item, as a list;
* anything else (another type, a parser, choices, files, a value outside that subset such as
  ``+1`` or ``1_000``, a value typer refuses) goes to typer's own conversion, built only then:
  every error message, and every value the subset does not cover, is typer's own.
  ``tests/test_cli_shell.py`` holds both paths to the same results.

On a typer without these internals (older or newer) it does nothing: typer converts as it
always did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_SLOW = object()  # "not in the subset": typer's own conversion decides


class LightParam:
    """Converts one parameter's values: the subset above here, the rest through typer's own
    ``RuntimeParam`` (``build(descriptor)``, made on first need)."""

    def __init__(self, descriptor: Any, build: Any, coerce_path: Any) -> None:
        self.descriptor = descriptor
        self.info = descriptor.parameter_info
        self._build = build
        self._coerce_path = coerce_path
        self._full: Any = None
        annotation = descriptor.annotation
        self.many = getattr(annotation, "__origin__", None) is list
        self.leaf = annotation.__args__[0] if self.many else annotation

    def full(self) -> Any:
        if self._full is None:
            self._full = self._build(self.descriptor)
        return self._full

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:  # as typer's RuntimeParam.coerce, which needs no adapter for it
            return () if multi else None
        out = _SLOW
        if not (multi and isinstance(value, str)):
            try:
                out = self._fast(value, param, ctx)
            except Exception:  # typer's own conversion below reports it, its way
                out = _SLOW
        if out is _SLOW:
            return self.full().coerce(value, param=param, ctx=ctx)
        return out

    def _fast(self, value: Any, param: Any, ctx: Any) -> Any:
        if not self.many:
            return self._one(value, param, ctx)
        if type(value) not in (list, tuple):
            return _SLOW
        items = [self._one(v, param, ctx) for v in value]
        return _SLOW if any(i is _SLOW for i in items) else items

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        leaf = self.leaf
        if leaf is str or leaf is bool:
            return value if type(value) is leaf else _SLOW
        if leaf is int:
            if type(value) is str and plain_int(value):
                value = int(value)
            elif type(value) is not int:
                return _SLOW
            lo, hi = self.info.min, self.info.max
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                return _SLOW  # typer says what the range is
            return value
        if leaf is Path:
            if type(value) is not str:
                return _SLOW
            # what typer does after pydantic made the Path; a refusal is redone by typer
            return self._coerce_path(Path(value), self.info, path_type=Path, param=param,
                                     ctx=ctx)
        return _SLOW


def plain_int(text: str) -> bool:
    """``-?(0|[1-9][0-9]{0,17})``: what ``int()`` and pydantic read alike (no sign ``+``, no
    spaces, no ``_``, no ``1.0``: those go to typer's own conversion)."""
    digits = text[1:] if text.startswith("-") else text
    return (
        0 < len(digits) <= 18
        and digits.isascii()
        and digits.isdigit()
        and (digits == "0" or digits[0] != "0")
    )


def _light_kind(descriptor: Any) -> bool:
    """Whether ``LightParam`` covers this parameter's type at all."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or getattr(info, "parser", None) is not None:
        return False
    if getattr(info, "clamp", False):
        return False
    annotation: Any = descriptor.annotation
    if getattr(annotation, "__origin__", None) is list:
        args: tuple[Any, ...] = getattr(annotation, "__args__", ())
        if len(args) != 1:
            return False
        annotation = args[0]
    if annotation is Path:
        return getattr(info, "path_type", None) in (None, Path)
    return annotation in (str, int, bool)


def light_params() -> None:
    """Install ``LightParam`` for every typer parameter whose type it covers (idempotent)."""
    try:
        from typer import core
        from typer._coercion import build_runtime_param
        from typer._param_types import coerce_cli_path
    except ImportError:  # pragma: no cover - depends on the installed typer
        return
    cls: Any = getattr(core, "_TyperParameter", None)
    original = getattr(cls, "get_runtime_param", None)
    if original is None or getattr(original, "_ledger_light", False):
        return

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            desc = self.type_descriptor
            self._runtime_param = (
                LightParam(desc, build_runtime_param, coerce_cli_path)
                if _light_kind(desc)
                else build_runtime_param(desc)
            )
        return self._runtime_param

    get_runtime_param._ledger_light = True  # type: ignore[attr-defined]
    cls.get_runtime_param = get_runtime_param
