"""Output for the CLI (SPEC 7): one JSON object on stdout with ``--json``; otherwise tables and
colour for people (``rich``, colour only on a terminal), progress on stderr, errors as one line on
stderr. The only place the CLI writes to the terminal.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ledger.core.text import json_safe, shown

if TYPE_CHECKING:  # rich loads on first output, not at start-up (``ledger --help``, issue 12)
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from verify.report import Check, Report


def _columns() -> int | None:
    """``$COLUMNS`` when set (a terminal's width, or what a pipe asks for), else None."""
    raw = os.environ.get("COLUMNS", "")
    return int(raw) if raw.isascii() and raw.isdigit() and 20 <= int(raw) <= 10_000 else None


def _make(name: str) -> Console:
    from rich.console import Console

    # emoji=False: ``:name:`` in text that did not come from this program (a check's detail, a
    # kernel's name) is shown as written, never turned into an emoji (``esc`` escapes markup,
    # not emoji codes)
    if name == "err":
        return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    # On a terminal or with $COLUMNS: tables and text fit that width (long words folded).
    # Otherwise (a pipe, a file, CI logs): 160 columns and text lines never folded, so they stay
    # greppable.
    fit = sys.stdout.isatty() or _columns() is not None
    return Console(
        highlight=False, soft_wrap=not fit, width=_columns() or (None if fit else 160), emoji=False
    )


def __getattr__(name: str) -> Console:
    """``out`` (stdout) and ``err`` (stderr): the two consoles, made on first use."""
    if name in ("out", "err"):
        console = _make(name)
        globals()[name] = console
        return console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _console(name: str) -> Console:
    found: Console | None = globals().get(name)
    return found if found is not None else __getattr__(name)


STATUS_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow"}
VERDICT_STYLE = {"verified": "bold green", "partial": "bold yellow", "failed": "bold red"}


def clean(text: object) -> str:
    """Text that did not come from this program, made safe for a terminal: control characters
    (escape sequences, carriage returns, bidi overrides) become ``?``; tabs and newlines stay.
    The one definition of what may be shown is ``ledger.core.text``."""
    return shown(text)


def esc(text: object) -> str:
    """``clean`` and then escaped for rich markup: for every table cell and title (issue 9)."""
    from rich.markup import escape

    return escape(clean(text))


def emit_json(obj: Any, indent: int | None = 1) -> None:
    """One JSON document on stdout, every control or bidi character of its strings written as a
    ``\\uXXXX`` escape (``ledger.core.text.json_safe``): a reader gets the same strings back, a
    terminal shows the escape."""
    sys.stdout.write(json_safe(obj, indent) + "\n")
    sys.stdout.flush()


def note(data: bytes) -> None:
    """A signed note (or other text from a file) on stdout as it is, unless it holds a character
    that may not be shown: then that character is ``?`` (such a note verifies nowhere anyway)."""
    sys.stdout.write(shown(data.decode("utf-8", "replace")))
    sys.stdout.flush()


def error_line(message: str) -> None:
    text = " ".join(clean(message).split())
    sys.stderr.write(f"ledger: error: {text}\n")
    sys.stderr.flush()


def plain(text: str) -> None:
    _console("out").print(clean(text), markup=False)


def fit_width() -> int | None:
    """The width lines are folded at (a terminal, or ``$COLUMNS``), or None on a pipe, where
    text lines are never folded."""
    out = _console("out")
    return None if out.soft_wrap else out.width


def unsplit(text: str, width: int | None = None) -> tuple[str, bool]:
    """``text`` with no token that a ``width``-column fold would split: a line that is a label
    and one long token (``  signature: <base64>``) keeps the token on the line, cut with ``…`` to
    what is left of it; any other token longer than a line is cut to one line. Returns the text
    and whether anything was cut. ``width`` None (a pipe): unchanged."""
    if width is None:
        return text, False
    cut = False
    m = re.fullmatch(r"(\s*\S+:? )(\S+)", text)
    if m and len(text) > width and len(m.group(1)) < width // 2:
        room = width - len(m.group(1))
        return m.group(1) + m.group(2)[: room - 1] + "…", True
    words = []
    for w in re.split(r"(\s+)", text):
        if len(w) > width and not w.isspace():
            w, cut = w[: width - 1] + "…", True
        words.append(w)
    return "".join(words), cut


def prepare_table() -> None:
    """Load now what ``report_table`` needs (rich's console and table modules, the table of
    character widths: ~20 ms) and make the stdout console. ``ledger verify`` calls it while
    nvcc still runs, so that the table prints as soon as the last check is in (issue 12)."""
    from rich.cells import cell_len
    from rich.table import Table  # noqa: F401 (loaded, not used here)

    cell_len("\u4e2d")  # a wide character: loads the width table of rich's Unicode version
    _console("out")


def report_table(report: Report, recorded: Sequence[Check] = ()) -> None:
    from rich.table import Table

    out = _console("out")
    tools = {c.id: (c.tool, c.version) for c in recorded}
    table = Table(title=f"bundle {esc(report.bundle_digest)}", title_justify="left")
    # check ids are never cut or folded (two ids cut to the same text would read as one check):
    # rich narrows the wrapping columns (tool, detail) first. Below WIDE_TABLE columns the tool
    # opens the detail instead of taking a column of its own, so the detail keeps the room
    narrow = out.width < WIDE_TABLE
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if not narrow:
        table.add_column("tool", overflow="fold", max_width=20)
    table.add_column("detail", overflow="fold")
    for c in report.checks:
        tool, version = (c.tool, c.version) if c.tool else tools.get(c.id, ("", ""))
        style = STATUS_STYLE.get(c.status, "")
        status = f"[{style}]{esc(c.status)}[/]" if style else esc(c.status)
        shown = esc(short_tool(tool, version))
        detail = esc(detail_lines(c.detail))
        if narrow:
            table.add_row(esc(c.id), status, f"[dim]{shown}[/]\n{detail}" if shown else detail)
        else:
            table.add_row(esc(c.id), status, shown, detail)
    out.print(table)
    style = VERDICT_STYLE.get(report.verdict, "")
    out.print(
        f"verdict: [{style}]{esc(report.verdict)}[/]"
        if style
        else f"verdict: {esc(report.verdict)}"
    )


WIDE_TABLE = 110  # columns from which the report table gives the tool a column of its own
LONG_DETAIL = 160  # characters from which a detail shows its "; "-separated parts on own lines


def detail_lines(detail: str) -> str:
    """A long detail with each of its ``"; "``-separated parts (outside parentheses) on a line
    of its own: the certificate's obligations, a falsification test's engine, sizes and seeds
    read down a column instead of folded across it. Short details unchanged, and the recorded
    text never changes (this is only how a table shows it)."""
    if len(detail) < LONG_DETAIL:
        return detail
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(detail):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and detail.startswith("; ", i):
            parts.append(detail[start:i])
            start = i + 2
    return ";\n".join([*parts, detail[start:]])


# a version number: dotted digits and an optional -rc1 / +local suffix ("13.0.88", "4.21.0-rc1");
# "13.0.r13.0" is two of them, not one
_VERSION = re.compile(r"\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?")


def short_tool(tool: str, version: str) -> str:
    """``ptxas`` and ``Cuda compilation tools, release 13.0, V13.0.88`` -> ``ptxas 13.0.88``:
    the tool and the most detailed version number in its version text (the one with the most
    parts, the last of those), or the text itself when it holds none. ptxas records its last
    line, ``Build cuda_13.0.r13.0/compiler.36424714_0``: ``ptxas 13.0``."""
    found = _VERSION.findall(version)
    best = max(reversed(found), key=lambda v: v.count("."), default=version)
    return f"{tool} {best}".strip()


def rows_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.table import Table

    table = Table(title=esc(title), title_justify="left")
    for c in columns:
        table.add_column(esc(c), overflow="fold")
    for r in rows:
        table.add_row(*[esc(x) for x in r])
    _console("out").print(table)


def _may_be_terminal() -> bool:
    """False when rich's ``Console(stderr=True).is_terminal`` is sure to be False (stderr is no
    terminal and neither ``TTY_COMPATIBLE=1`` nor a non-empty ``FORCE_COLOR`` says otherwise):
    then no console is made for a bar that would not show, and rich's console module (~13 ms)
    does not load before ``ledger verify`` starts nvcc (issue 12, start-up)."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        tty = False
    return tty or os.environ.get("TTY_COMPATIBLE") == "1" or bool(os.environ.get("FORCE_COLOR"))


@contextmanager
def progress(description: str, total: int | None, enabled: bool = True) -> Iterator[Bar]:
    """A progress bar on stderr (only on a terminal and when enabled), with an ETA when the total
    is known. ``step(text)`` names the step that starts and moves the bar by one (the previous
    step is done); ``update`` sets the count (and the total, once it is known). Off a terminal
    the bar is a no-op and rich's progress module is never loaded (start-up, issue 12)."""
    err: Console | None = globals().get("err")  # a console already made is asked as it is
    if not enabled:
        err = None
    elif err is None and _may_be_terminal():
        err = _console("err")
    if err is None or not err.is_terminal:
        yield Bar(None, None, description)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
    with bar:
        task = bar.add_task(esc(description), total=total)
        yield Bar(bar, task, description)


class Bar:
    """Drives a rich progress bar; with ``bar`` None (no terminal) every call does nothing."""

    def __init__(self, bar: Progress | None, task: TaskID | None, description: str) -> None:
        self.bar, self.task, self.description = bar, task, description
        self.steps = 0  # steps started

    def advance(self, n: int = 1) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task, n)

    def step(self, text: str) -> None:
        self.update(self.steps, text)
        self.steps += 1

    def update(self, completed: int, text: str | None = None, total: int | None = None) -> None:
        if self.bar is None or self.task is None:
            return
        fields: dict[str, Any] = {"completed": completed}
        if text is not None:
            fields["description"] = f"{esc(self.description)} {esc(text)}"
        if total is not None:
            fields["total"] = total
        self.bar.update(self.task, **fields)
