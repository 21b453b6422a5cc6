"""Output for the CLI (SPEC 7): one JSON object on stdout with ``--json``; otherwise tables and
colour for people (``rich``, colour only on a terminal), progress on stderr, errors as one line on
stderr. The only place the CLI writes to the terminal.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Not on a terminal (a pipe, a file, CI logs): wide enough that check details are not folded.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)

STATUS_STYLE = {"passed": "green", "failed": "bold red", "skipped": "yellow"}
VERDICT_STYLE = {"verified": "bold green", "partial": "bold yellow", "failed": "bold red"}


# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a terminal shows
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object) -> str:
    """Text that did not come from this program, made safe for a terminal: control characters
    (escape sequences, carriage returns, bidi overrides) become ``?``; tabs and newlines stay."""
    return _CONTROL.sub("?", str(text))


def esc(text: object) -> str:
    """``clean`` and then escaped for rich markup: for every table cell and title (issue 9)."""
    return escape(clean(text))


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def error_line(message: str) -> None:
    text = " ".join(clean(message).split())
    sys.stderr.write(f"ledger: error: {text}\n")
    sys.stderr.flush()


def plain(text: str) -> None:
    out.print(clean(text), markup=False)


def report_table(report: Any, recorded: Sequence[Any] = ()) -> None:
    tools = {c.id: (c.tool, c.version) for c in recorded}
    table = Table(title=f"bundle {esc(report.bundle_digest)}", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("tool")
    table.add_column("detail", overflow="fold")
    for c in report.checks:
        tool, version = (c.tool, c.version) if c.tool else tools.get(c.id, ("", ""))
        style = STATUS_STYLE.get(c.status, "")
        table.add_row(
            esc(c.id),
            f"[{style}]{esc(c.status)}[/]" if style else esc(c.status),
            esc(f"{tool} {version}".strip()),
            esc(c.detail),
        )
    out.print(table)
    style = VERDICT_STYLE.get(report.verdict, "")
    out.print(
        f"verdict: [{style}]{esc(report.verdict)}[/]"
        if style
        else f"verdict: {esc(report.verdict)}"
    )


def rows_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=esc(title), title_justify="left")
    for c in columns:
        table.add_column(esc(c), overflow="fold")
    for r in rows:
        table.add_row(*[esc(x) for x in r])
    out.print(table)


@contextmanager
def progress(description: str, total: int | None, enabled: bool = True) -> Iterator[Any]:
    """A progress bar on stderr (only on a terminal and when enabled)."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not (enabled and err.is_terminal),
    )
    with bar:
        task = bar.add_task(description, total=total)

        class _P:
            def advance(self, n: int = 1) -> None:
                bar.advance(task, n)

            def update(self, completed: int, text: str | None = None) -> None:
                if text is not None:
                    bar.update(
                        task, completed=completed, description=f"{esc(description)} {esc(text)}"
                    )
                else:
                    bar.update(task, completed=completed)

        yield _P()
