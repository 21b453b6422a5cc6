"""The ledger's storage (SPEC 4): one ``Store`` interface, one driver per engine.

* ``base``: the ``Store`` protocol and the reads both engines share (``BaseStore``);
* ``common``: file names, parts, the shared rules (lost-row refusal, schema bookkeeping);
* ``writer``: one write transaction (``Writer``);
* ``sqlite``: the SQLite driver (``LEDGER_HOME/ledger.db``);
* ``postgres``: the PostgreSQL driver (the database ``LEDGER_HOME/db.url`` names);
* ``copy``: ``ledger db copy``, SQLite to PostgreSQL; ``walcheckpoint``: SQLite's WAL thread.

``open_store`` chooses the driver from the ledger's own trusted configuration (whether
``LEDGER_HOME/db.url`` exists), never from anything a request carries. Only ``create_store``
(``init``) and ``migrate_store`` (``ledger db migrate``) change a schema; a read command opens
with ``read_only=True`` and can write nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.store.base import Store
from ledger.store.common import URL_NAME

__all__ = ["Store", "create_store", "migrate_store", "open_store"]


def open_store(home: Path, *, read_only: bool = False) -> Store:
    """The ledger database of ``home``, on the engine its configuration names; ``read_only``:
    opened so that nothing can be written (SQLite ``mode=ro``, a PostgreSQL read-only session)."""
    if os.path.lexists(home / URL_NAME):
        from ledger.store.postgres import PgStore

        return PgStore.open(home, read_only=read_only)
    from ledger.store.sqlite import SqliteStore

    return SqliteStore.open(home, read_only=read_only)


def create_store(home: Path, origin: str, db: str | None = None) -> Store:
    """A new ledger database for ``home``: a SQLite file, or in the PostgreSQL database ``db``
    (a ``postgresql://`` URL) which ``home/db.url`` then names."""
    if db is not None:
        from ledger.store.postgres import PgStore

        return PgStore.create(home, origin, db)
    from ledger.store.sqlite import SqliteStore

    return SqliteStore.create(home, origin)


def migrate_store(home: Path) -> tuple[int, int]:
    """``ledger db migrate``: bring ``home``'s schema up to this program's; (version before,
    version after). Refused, nothing written, where its bookkeeping was altered."""
    if os.path.lexists(home / URL_NAME):
        from ledger.store.postgres import PgStore

        return PgStore.migrate_home(home)
    from ledger.store.sqlite import SqliteStore

    return SqliteStore.migrate_home(home)
