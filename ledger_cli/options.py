"""Options every command module of the shell shares (the bottom of the shell's typer side: imports
nothing from the shell but ``ledger_cli.home``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ledger_cli.home import DEFAULT_HOME


def new_app(help: str, name: str | None = None) -> typer.Typer:
    """A Typer (the root or a group) as the whole shell makes them: help through click's plain
    formatter, not typer's rich panels (loading rich's console, markdown and syntax modules to
    render them doubled `ledger --help`'s start-up: issue 12, under 100 ms), and help shown when
    a group is given no command."""
    return typer.Typer(name=name, help=help, rich_markup_mode=None, no_args_is_help=True)

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

