"""The shell: the ``ledger`` command line, the one layer that meets both the ledger core (the log,
its store, its HTTP side: every other module of ``ledger``) and ``verify`` (the independent
checks). Nothing in the core or in ``verify`` imports it; tests/test_layering.py holds that.

``main`` (the console script ``ledger``) and ``app`` are loaded on first use, so importing one
module of the shell (``ledger.cli.output``) does not build the whole command tree."""

from __future__ import annotations

from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ledger.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module 'ledger.cli' has no attribute {name!r}")
