"""Help text a person reads: typer labels each value with its Python type (``<bool>``, ``<str>``,
``<list[Path]>``); the shell shows plain metavars instead (``TEXT``, ``PATH...``, nothing for a
flag), and names arguments as click does (``HASH``, ``[DIR]``, ``DIRECTORIES...``; typer's plain
help writes ``{hash}``). Typer has no public switch for this, so ``plain_types()`` wraps the two
public parameter classes' ``display_type_rich`` and the argument's display names; on a typer
without them it does nothing (help keeps typer's labels, nothing else changes).
``one_line_summaries`` makes each command's line in a command list its docstring's first
paragraph on one line."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

_WORDS = {
    "bool": "",
    "str": "TEXT",
    "int": "INTEGER",
    "float": "NUMBER",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIR",
    "Path": "PATH",
}
_LABEL = re.compile(r"^<(list\[)?([A-Za-z_]+)( range)?\]?>(\.\.\.)?$")


def plain(label: str | None) -> str | None:
    """``<list[Path]>`` -> ``PATH...``, ``<bool>`` -> ``""``, ``<int range>`` -> ``INTEGER``;
    any other label (a metavar the command set, choices) unchanged."""
    if label is None:
        return None
    m = _LABEL.match(label)
    if m is None or m.group(2) not in _WORDS:
        return label
    word = _WORDS[m.group(2)]
    many = bool(m.group(1) or m.group(4))
    return f"{word}..." if word and many else word


def usage_name(name: str, required: bool, many: bool) -> str:
    """An argument in a usage line as click and most tools write it: ``HASH``, ``[HASH]``,
    ``DIR...`` (typer's plain help writes ``{hash}``)."""
    word = name if name.isupper() else name.upper()
    shown = word if required else f"[{word}]"
    return f"{shown}..." if many else shown


def plain_types() -> None:
    try:
        from typer.core import TyperArgument, TyperOption
    except ImportError:  # pragma: no cover - depends on the installed typer
        return
    if hasattr(TyperArgument, "_usage_display_name") and not getattr(
        TyperArgument._usage_display_name, "_ledger_plain", False
    ):

        def usage(self: Any) -> str:
            return usage_name(str(self.metavar or self.name), bool(self.required),
                              self.nargs != 1)

        def listed(self: Any) -> str:
            return usage_name(str(self.metavar or self.name), True, self.nargs != 1)

        usage._ledger_plain = listed._ledger_plain = True  # type: ignore[attr-defined]
        TyperArgument._usage_display_name = usage  # type: ignore[method-assign]
        if hasattr(TyperArgument, "_rich_display_name"):
            TyperArgument._rich_display_name = listed  # type: ignore[method-assign]
    for cls in (TyperArgument, TyperOption):
        original: Callable[..., str | None] | None = getattr(cls, "display_type_rich", None)
        if original is None or getattr(original, "_ledger_plain", False):
            continue

        def display(self: Any, *args: Any, _orig: Callable[..., str | None] = original,
                    **kwargs: Any) -> str | None:
            return plain(_orig(self, *args, **kwargs))

        display._ledger_plain = True  # type: ignore[attr-defined]
        cls.display_type_rich = display  # type: ignore[method-assign]


def one_line_summaries(app: typer.Typer) -> None:
    """Every command's ``short_help`` (its line in ``ledger -h``) made its docstring's first
    paragraph joined into one line, so the list wraps at the terminal's width, not at the
    docstring's line breaks; in every sub-app too."""
    import inspect

    for info in app.registered_commands:
        if info.short_help is None and info.callback is not None:
            doc = info.help or inspect.getdoc(info.callback) or ""
            info.short_help = " ".join(doc.split("\n\n", 1)[0].split()) or None
    for group in app.registered_groups:
        if group.typer_instance is not None:
            one_line_summaries(group.typer_instance)
