"""``ledger verify`` without the command tree (issue 12: a small verify spent over a third of its
time importing, typer and the shell's other commands a fifth of that).

SPEC 7 keeps ``ledger`` one typer app, and the app stays the reference: ``parse`` reads a
*plain* ``verify`` command line into exactly the values typer would hand the command, and
``answer`` runs ``ledger_cli.verifying.verify`` (the function the typer command calls) with
them. Plain means:

* ``verify`` first, then the hash (one word, anywhere among the options, as click allows) and
  verify's own options, each given at most once (``--witness`` any number of times), as
  ``--option VALUE`` or ``--option=VALUE``; the flags ``--json``, ``--no-gpu`` and
  ``--trust-bundle-code`` alone;
* no word or value that is empty or starts with ``-`` (``-h``, ``--help``, ``--``, an unknown
  option, a negative number: click decides what those mean);
* ``--seed`` and ``--quorum`` in plain decimal digits (``plain_int``: what typer reads alike,
  the seed within its range); a ``PATH`` that names nothing, or something this process may
  read (typer refuses an unreadable one); no shell completion asked for (``_LEDGER_COMPLETE``).

Anything else returns None and the typer app answers, so every usage error, help text and
unusual form is the app's own. tests/ledger_cli/test_quickverify.py holds ``parse`` equal to the
values the
typer app passes for a broad set of command lines, and None wherever the app would refuse or
answer differently. The command's run is then the same function either way; ``answer`` maps
what it raises as typer's runner and ``ledger_cli.commands.main`` do (``_as_typer_would``,
``ledger_cli.exits``), so output and exit codes match byte for byte.
"""

from __future__ import annotations

import errno
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:  # pathlib is loaded for a PATH value only (``ledger verify --help``: quickhelp)
    from collections.abc import Callable
    from typing import Any

COMMAND = "verify"
# verify's options that take a value: the parameter each sets and how its text converts
VALUES = {
    "--bundle": ("bundle", "path"),
    "--receipt": ("receipt", "path"),
    "--vkey": ("vkey_opt", "str"),
    "--require": ("require", "str"),
    "--witness": ("witness", "many"),
    "--quorum": ("quorum", "int"),
    "--policy": ("policy", "path"),
    "--home": ("home", "path"),
    "--seed": ("seed", "seed"),
}
FLAGS = {"--json": "json_out", "--no-gpu": "no_gpu", "--trust-bundle-code": "trust_bundle_code"}
DEFAULTS: dict[str, object] = {
    "bundle": None, "receipt": None, "vkey_opt": None, "require": None, "witness": None,
    "quorum": None, "policy": None, "home": None, "json_out": False, "seed": None,
    "no_gpu": False, "trust_bundle_code": False,
}
SEED_MAX = 2**63 - 1  # SeedOpt's max (ledger_cli.commands)
_NOT_PLAIN = object()


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments typer would call ``verifying.verify`` with for ``argv`` (the words
    after ``ledger``), or None when ``argv`` is not a plain ``verify`` command line."""
    if not argv or argv[0] != COMMAND or os.environ.get("_LEDGER_COMPLETE"):
        return None
    params: dict[str, Any] = dict(DEFAULTS)
    given: set[str] = set()
    words: list[str] = []
    rest = iter(argv[1:])
    for word in rest:
        if not word.startswith("-"):
            words.append(word)
            continue
        if word in FLAGS:
            name = FLAGS[word]
            if name in given:
                return None
            given.add(name)
            params[name] = True
            continue
        option, eq, text = word.partition("=")
        if option not in VALUES:
            return None
        value: str | None = text if eq else next(rest, None)
        if not value or value.startswith("-"):
            return None
        name, kind = VALUES[option]
        got = _convert(kind, value)
        if got is _NOT_PLAIN:
            return None
        if kind == "many":
            params[name] = [*(params[name] or ()), got]
        elif name in given:
            return None
        given.add(name)
        if kind != "many":
            params[name] = got
    if len(words) != 1 or not words[0]:
        return None
    params["hash"] = words[0]
    return params


def _convert(kind: str, value: str) -> object:
    if "\x00" in value:  # no process is given one in argv; typer fails on it its own way
        return _NOT_PLAIN
    if kind in ("str", "many"):
        return value
    if kind == "path":
        from pathlib import Path

        path = Path(value)
        try:
            os.stat(path)
        except OSError:
            return path  # typer does not ask a PATH to exist here
        # typer's default path checks (readable); the test holds the options to those defaults
        return path if os.access(path, os.R_OK) else _NOT_PLAIN
    if not plain_int(value):
        return _NOT_PLAIN
    number = int(value)
    if kind == "seed" and not 0 <= number <= SEED_MAX:
        return _NOT_PLAIN
    return number


def answer(argv: list[str]) -> int | None:
    """The exit code of ``ledger verify`` run for a plain ``argv``, or None (the app answers)."""
    params = parse(argv)
    if params is None:
        return None
    from ledger_cli import exits, verifying

    return exits.exit_code(lambda: _as_typer_would(lambda: verifying.verify(**params)))


def _as_typer_would(run: Callable[[], int]) -> int:
    """``run()`` with what typer's runner (``typer.core._main``, not standalone) and
    ``ledger_cli.commands.main`` make of an end of input, Ctrl-C and a closed stdout."""
    try:
        return run()
    except EOFError:
        sys.stderr.write("\n")
        sys.stderr.flush()
        from ledger_cli import output

        output.error_line("aborted")
        return 130
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        if e.errno != errno.EPIPE:
            raise
        sys.stdout = _PacifyFlush(sys.stdout)
        sys.stderr = _PacifyFlush(sys.stderr)
        sys.exit(1)


def plain_int(text: str) -> bool:
    """``-?(0|[1-9][0-9]{0,17})``: what ``int()`` and typer's conversion read alike (no sign
    ``+``, no spaces, no ``_``, no ``1.0``: the app answers those its own way)."""
    digits = text[1:] if text.startswith("-") else text
    return (
        0 < len(digits) <= 18
        and digits.isascii()
        and digits.isdigit()
        and (digits == "0" or digits[0] != "0")
    )


class _PacifyFlush:
    """click's ``PacifyFlushWrapper``: a stream whose flush ignores a closed pipe (EPIPE), so
    the interpreter's last flush does not print a second error."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.wrapped, attr)
