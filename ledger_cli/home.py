"""The ledger directory a command works on (SPEC 7 ``--home``): the option, else ``$LEDGER_HOME``,
else ``~/.local/share/kernel-ledger``. Free of typer, like everything ``ledger verify`` runs
(``ledger_cli.quickverify``)."""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:
    from ledger.log import Log

DEFAULT_HOME = "~/.local/share/kernel-ledger"


def home_dir(home: Path | None) -> Path:
    if home is not None:
        return home
    env = os.environ.get("LEDGER_HOME")
    if env:
        return Path(env)
    return Path(DEFAULT_HOME).expanduser()


def open_log(home: Path | None, *, read_only: bool = False) -> Log:
    """The ledger a command works on; ``read_only`` for a command that only reads (its database
    opened so that nothing can be written)."""
    from ledger.log import Log

    return Log.open(home_dir(home), read_only=read_only)
