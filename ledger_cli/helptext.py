"""Help text a person reads: typer labels each value with its Python type (``<bool>``, ``<str>``,
``<list[Path]>``); the shell shows plain metavars instead (``TEXT``, ``PATH...``, nothing for a
flag), and names arguments as click does (``HASH``, ``[DIR]``, ``DIRECTORIES...``; typer's plain
help writes ``{hash}``). Typer has no public switch for this, so ``plain_types()`` wraps public
methods of the two public parameter classes: ``display_type_rich`` (the type label), and the
argument's click methods ``get_usage_pieces`` and ``get_help_record`` (its name); only public
names are read (issue 30); on a typer without them it does nothing (help keeps typer's labels,
nothing else changes).
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
    """Wrap the public click methods of typer's two parameter classes (idempotent)."""
    try:
        from typer.core import TyperArgument, TyperOption
    except ImportError:  # pragma: no cover - depends on the installed typer
        return
    if not getattr(TyperArgument.get_usage_pieces, "ledger_plain", False):
        TyperArgument.get_usage_pieces = _usage_pieces  # type: ignore[method-assign]
        wrap(TyperArgument, "get_help_record", _named_record)
    for cls in (TyperArgument, TyperOption):
        wrap(cls, "display_type_rich", plain)


def wrap(cls: Any, method: str, after: Callable[..., Any]) -> None:
    """``cls.method`` made ``after(self, result)`` of itself (``after(result)`` for one that
    takes one argument); nothing when the method is missing or already wrapped."""
    original: Callable[..., Any] | None = getattr(cls, method, None)
    if original is None or getattr(original, "ledger_plain", False):
        return

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        got = original(self, *args, **kwargs)
        return plain(got) if after is plain else after(self, got)

    wrapped.ledger_plain = True  # type: ignore[attr-defined]
    setattr(cls, method, wrapped)


def _usage_pieces(self: Any, ctx: Any) -> list[str]:
    """An argument in the usage line: ``HASH``, ``[DIR]``, ``DIRECTORIES...``."""
    return [usage_name(str(self.metavar or self.name), bool(self.required), self.nargs != 1)]


_usage_pieces.ledger_plain = True  # type: ignore[attr-defined]


def _named_record(self: Any, record: tuple[str, str] | None) -> tuple[str, str] | None:
    """An argument's line in the help list named as in the usage line, always required-style
    (``HASH``, ``DIRECTORIES...``): typer writes the name as given (``hash``), then the type."""
    if record is None:
        return None
    shown = str(self.metavar or self.name)
    label, text = record
    rest = label[len(shown):] if label.startswith(shown) else label
    rest = rest.removeprefix("...") if self.metavar is None and self.nargs != 1 else rest
    return usage_name(shown, True, self.nargs != 1) + rest, text


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
