"""Options every command module of the shell shares (the bottom of the shell: imports nothing
from it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer


def new_app(help: str, name: str | None = None) -> typer.Typer:
    """A Typer (the root or a group) as the whole shell makes them: help through click's plain
    formatter, not typer's rich panels (loading rich's console, markdown and syntax modules to
    render them doubled `ledger --help`'s start-up: issue 12, under 100 ms), and help shown when
    a group is given no command."""
    return typer.Typer(name=name, help=help, rich_markup_mode=None, no_args_is_help=True)

DEFAULT_HOME = "~/.local/share/kernel-ledger"
HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help=f"Ledger directory (default: $LEDGER_HOME, else {DEFAULT_HOME}).",
        show_default=False,
        metavar="DIR",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout.", metavar="")
]


def home_dir(home: Path | None) -> Path:
    if home is not None:
        return home
    env = os.environ.get("LEDGER_HOME")
    if env:
        return Path(env)
    return Path(DEFAULT_HOME).expanduser()
