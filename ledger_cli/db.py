"""``ledger db``: where the ledger's database lives (issue 13, PostgreSQL).

``ledger db copy --to postgresql://...`` moves the SQLite ledger of LEDGER_HOME into an empty
PostgreSQL database, proves both trees equal (roots recomputed from the entry bytes on each side,
both printed) and then makes LEDGER_HOME use PostgreSQL (``ledger.store.copy.copy_home``).
``ledger db migrate`` brings the ledger's schema up to this program's (issue 33 item 4): the only
command besides ``init`` that changes a schema; every read command opens the database read-only
and names this command when the schema is older. ``register(app)`` adds the ``db`` group to the
typer app (``ledger_cli.commands``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ledger_cli import output
from ledger_cli.home import home_dir
from ledger_cli.options import HomeOpt, JsonOpt, new_app

app = new_app("The ledger's database: move it to PostgreSQL, migrate its schema.")


def register(root: typer.Typer) -> None:
    """Add ``ledger db ...`` to the typer app."""
    root.add_typer(app, name="db")


@app.command("copy")
def copy(
    to: Annotated[
        str,
        typer.Option(
            "--to", metavar="URL",
            help="An empty PostgreSQL database: postgresql://USER@HOST:PORT/DB.",
        ),
    ],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Move this SQLite ledger to a PostgreSQL database and prove both roots equal; afterwards
    LEDGER_HOME uses PostgreSQL (the SQLite file is kept, renamed). Stop writers and `serve`
    first."""
    from ledger.core.encoding import b64_encode
    from ledger.store.copy import copy_home
    from ledger.store.postgres import shown_url

    h = home_dir(home)
    got = copy_home(h, to)
    kept = str(got.kept)
    if json_out:
        output.emit_json(
            {
                "to": shown_url(to),
                "size": got.size,
                "sqlite_root": b64_encode(got.sqlite_root),  # tree roots: base64, as in
                "postgresql_root": b64_encode(got.pg_root),  # the checkpoint note
                "equal": got.sqlite_root == got.pg_root,
                "rows": got.rows,
                "kept": kept,
            }
        )
        return
    rows = ", ".join(f"{n} {t}" for t, n in got.rows.items())
    # each root on a line of its own that fits 80 columns, so a terminal never folds a hash
    output.plain(f"copied to {shown_url(to)}: {rows}")
    output.plain(f"tree size {got.size}; roots:")
    output.plain(f"  sqlite      {b64_encode(got.sqlite_root)}")
    output.plain(f"  postgresql  {b64_encode(got.pg_root)}")
    output.plain(f"roots equal; {h} now uses the PostgreSQL database (SQLite file kept as {kept})")


@app.command("migrate")
def migrate(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Bring the ledger's schema up to this program's version (back it up first). Read commands
    never migrate; they name this command when the schema is older. Refused, nothing written,
    where the schema's bookkeeping was altered (exit 1)."""
    from ledger.store import migrate_store

    h = home_dir(home)
    before, after = migrate_store(h)
    if json_out:
        output.emit_json({"home": str(h), "from": before, "to": after,
                          "migrated": after != before})
        return
    if after == before:
        output.plain(f"schema version {after}: up to date, nothing to do")
    else:
        output.plain(f"schema migrated from version {before} to {after}")
