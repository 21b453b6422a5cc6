"""The shell: the ``ledger`` command line, the one layer that meets both the ledger core (the log,
its store, its HTTP side: every other module of ``ledger``) and ``verify`` (the independent
checks). Nothing in the core or in ``verify`` imports it; tests/test_layering.py holds that.

``app`` (and the command tree) is loaded on first use, so importing one module of the shell
(``ledger_cli.output``), answering ``ledger --help`` or running a plain ``ledger verify`` does
not build it."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

if TYPE_CHECKING:  # ``typing`` itself is not loaded to answer ``ledger --help``
    from typing import Any

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """The console script ``ledger``: help and version from ``ledger_cli.quickhelp`` and a plain
    ``ledger verify`` from ``ledger_cli.quickverify`` where they can answer (no command tree
    loaded), everything else through ``commands.main``.

    Run as the process's command (``argv`` None: the console script, ``python -m ledger_cli``),
    the objects left when the command ends are frozen out of the garbage collector
    (``gc.freeze``) before the interpreter shuts down: its last collections then skip the ~30,000
    objects of the modules a verify loads (numpy, the interpreter, rich): ~20 ms of a small
    ``ledger verify`` (medians of 16 alternating runs, ~388 against ~411 ms; issue 12).
    Nothing is skipped that shutdown otherwise does: ``atexit``, finalizers and the release of
    every module still run. A caller that passes ``argv`` (tests, a program that embeds the
    CLI) keeps its collector as it was."""
    try:
        _main(argv)
    finally:
        if argv is None:
            import gc

            gc.freeze()


def _main(argv: list[str] | None) -> None:
    # numpy's OpenBLAS starts a worker thread per further core when it loads, which spins for
    # work that never comes (numpy here works on small arrays: the PTX interpreter, the
    # references) until OpenBLAS stops it before the first fork: on two cores it took a core
    # from the imports after numpy's (issue 12: about 30 ms of a small verify's import and wall
    # time, measured). A user's own setting is kept; verify.sandbox sets the same for a
    # bundle's reference.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = sys.argv[1:] if argv is None else list(argv)
    code = None
    if args[:1] == ["verify"]:
        from ledger_cli.quickverify import answer as verify

        code = verify(args)
    if code is None:
        from ledger_cli.quickhelp import answer

        code = answer(args)
    if code is not None:
        sys.stdout.flush()
        sys.exit(code)
    from ledger_cli.commands import main as run

    run(argv)


def __getattr__(name: str) -> Any:
    if name == "app":
        from ledger_cli import commands

        return commands.app
    raise AttributeError(f"module 'ledger_cli' has no attribute {name!r}")
