"""Help and version without loading the command tree (issue 12: ``ledger --help`` under 100 ms).

Importing typer, click and the shell's command modules costs several times the interpreter's own
start, all to print text that only changes when the code does. ``help.json`` (package data) holds
the help of every command and group exactly as click's plain formatter renders it for a terminal
of 80 columns or more (click caps help at 78 columns, so every such width prints the same
bytes); ``answer`` prints it for ``ledger [GROUP...] -h|--help``, for a group given no command
(help, exit 2, as click does) and for ``ledger --version``. Anything else, and any terminal
narrower than 80 columns, goes to the command tree as before.

``python -m ledger_cli.quickhelp`` writes ``help.json`` again from the app;
tests/ledger_cli/test_shell.py fails, naming that command, whenever the file and the app disagree.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:
    from typing import Any

HELP_FILE = os.path.join(os.path.dirname(__file__), "help.json")  # no pathlib: start-up
HELP_FLAGS = ("-h", "--help")
MIN_COLUMNS = 80  # click renders help at min(terminal width, 80) - 2 columns


def _columns() -> int:
    """The width click's formatter would use: ``shutil.get_terminal_size``'s rule (``COLUMNS``,
    else the terminal's, else 80), without importing shutil and its compressors."""
    raw = os.environ.get("COLUMNS", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    out = sys.__stdout__
    try:
        return (os.get_terminal_size(out.fileno()).columns if out else 0) or MIN_COLUMNS
    except (ValueError, OSError):
        return MIN_COLUMNS


def answer(argv: list[str]) -> int | None:
    """The exit code after printing the help or version ``argv`` asks for, or None when the
    command tree must answer (``main`` then runs it)."""
    if argv == ["--version"]:
        from ledger import __version__

        sys.stdout.write(f"ledger {__version__}\n")
        return 0
    if argv and argv[-1] in HELP_FLAGS:
        path, code = argv[:-1], 0
    else:
        path, code = argv, 2  # a bare group: its help, as a usage error
    if any(word.startswith("-") for word in path) or os.environ.get("_LEDGER_COMPLETE"):
        return None
    if _columns() < MIN_COLUMNS:
        return None
    try:
        with open(HELP_FILE, encoding="utf-8") as f:
            helps = json.load(f)
    except (OSError, ValueError):
        return None
    key = " ".join(path)
    entry = helps.get(key) if isinstance(helps, dict) else None
    if not isinstance(entry, dict) or (code == 2 and not entry.get("group")):
        return None  # a command given no arguments: its own usage error
    sys.stdout.write(str(entry["help"]))
    return code


def render_all() -> dict[str, dict[str, object]]:
    """Every command's and group's help as ``ledger ... --help`` prints it at 80 columns (the
    caller sets ``COLUMNS=80``: click sizes help from the terminal)."""
    from typer.main import get_command

    from ledger_cli.commands import app

    out: dict[str, dict[str, object]] = {}

    def walk(cmd: Any, path: list[str], parent: Any) -> None:
        ctx = cmd.context_class(cmd, info_name=path[-1] if path else "ledger", parent=parent,
                                help_option_names=list(HELP_FLAGS))
        subs: dict[str, Any] | None = getattr(cmd, "commands", None)
        out[" ".join(path)] = {"help": ctx.get_help() + "\n", "group": subs is not None}
        for sub in sorted(subs or {}):
            walk((subs or {})[sub], [*path, sub], ctx)

    walk(get_command(app), [], None)
    return out


def write() -> None:
    os.environ["COLUMNS"] = str(MIN_COLUMNS)
    text = json.dumps(render_all(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    with open(HELP_FILE, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    write()
    print(f"wrote {HELP_FILE}")
