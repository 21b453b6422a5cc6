"""The PostgreSQL driver, an optional dependency: ``psycopg`` comes with the ``postgres`` extra
(``pip install 'kernel-ledger[postgres]'``; ``scripts/setup.sh --test`` installs it). A SQLite
ledger never imports it; a ``postgresql://`` URL without it is one clear error, not an
``ImportError`` traceback (docs/dependencies.md)."""

from __future__ import annotations

import importlib
from types import ModuleType

from ledger.core.errors import CannotCheck

MISSING = (
    "a PostgreSQL ledger needs the psycopg driver, which is not installed: "
    "install kernel-ledger[postgres] (pip install -e '.[postgres]' in a checkout)"
)


def import_psycopg() -> ModuleType:
    """The ``psycopg`` module; ``CannotCheck`` (exit 3) naming the extra when it is missing."""
    try:
        return importlib.import_module("psycopg")
    except ImportError as e:
        raise CannotCheck(MISSING) from e
