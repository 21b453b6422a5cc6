"""The one error -> exit code map of the shell (SPEC 7 exit codes), free of typer.

``exit_code(run)`` runs a command and maps what it raises: the project's error tree exits with
its documented code (``LedgerError.exit_code``); a database or system error exits 3 with one
line, but a damaged database file (``ledger.store.sqlite.damaged``) exits 1, as any altered byte
does;
Ctrl-C exits 130. Anything else is a bug: it still reaches the user as one line (set
``LEDGER_DEBUG=1`` for the traceback), never as a traceback. ``ledger_cli.commands.main`` runs
the typer app through it (typer's own exits and usage errors mapped first, there), and
``ledger_cli.quickverify`` runs ``ledger verify`` through it without the app.

Under ``--json`` (SPEC 7) an error of the project's tree is also printed on stdout as one JSON
object, ``{"error": {"message": TEXT, "exit_code": N, "type": NAME}}``
(docs/schemas/error.json), so a program reading stdout learns why as a person reading stderr
does.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable

from ledger.core.errors import CannotCheck, LedgerError, TamperDetected
from ledger_cli import output

# ``seal`` / ``submit`` only (issue 33 item 8): the entry was appended and committed, but its
# receipt could not be written. Distinct from 1-3, where nothing was appended; running the same
# command again answers with the existing entry and writes the receipt (README "Exit codes").
SEALED_NO_RECEIPT = 4


def os_error(e: OSError) -> str:
    where = f" ({e.filename})" if e.filename else ""
    return f"could not complete: {e.strerror or e}{where}"


def json_wanted(argv: list[str] | None = None) -> bool:
    """Whether the command line asks for ``--json`` (before a ``--`` ending the options)."""
    args = sys.argv[1:] if argv is None else argv
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(e: LedgerError) -> int:
    """One line on stderr (and the JSON error object under ``--json``); the error's exit code."""
    output.error_line(str(e))
    if json_wanted():
        output.emit_json({"error": {"message": " ".join(output.clean(str(e)).split()),
                                    "exit_code": e.exit_code, "type": type(e).__name__}})
    return e.exit_code


def exit_code(run: Callable[[], int]) -> int:
    """``run()``'s exit code, or the code of the error it raised (after one line on stderr)."""
    try:
        return run()
    except LedgerError as e:
        return fail(e)
    except sqlite3.Error as e:  # the database could not be used (locked, I/O), or is damaged
        from ledger.store.sqlite import damaged

        if damaged(e):  # its pages changed outside SQLite: a failed check, as a changed byte is
            output.error_line(f"the ledger database is damaged ({e}): its file was altered or "
                              "corrupted")
            return TamperDetected.exit_code
        output.error_line(f"the ledger database could not be used: {e}")
        return CannotCheck.exit_code
    except KeyboardInterrupt:
        output.error_line("interrupted")
        return 130
    except OSError as e:
        output.error_line(os_error(e))
        return 3
    except Exception as e:  # a bug; SystemExit is not an Exception
        if os.environ.get("LEDGER_DEBUG"):
            raise
        output.error_line(f"internal error ({type(e).__name__}: {e}); please report it")
        return 3
