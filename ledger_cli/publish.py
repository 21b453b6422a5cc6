"""``ledger publish DEST`` (SPEC 7; issue 13 "static publishing"): the command line of
``ledger.publish``. ``register(app)`` adds it to the typer app (``ledger_cli.commands``)."""

from typing import Annotated

import typer

from ledger_cli.home import home_dir
from ledger_cli.options import HomeOpt, JsonOpt


def register(app: typer.Typer) -> None:
    """Add ``ledger publish`` to the typer app."""
    from ledger_cli import output

    @app.command("publish")
    def publish(
        dest: Annotated[
            str,
            typer.Argument(help="A directory, or s3://bucket/prefix (S3-compatible storage)."),
        ],
        endpoint_url: Annotated[
            str | None,
            typer.Option("--endpoint-url", help="S3 endpoint of a non-AWS store (s3:// only)."),
        ] = None,
        home: HomeOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Write the checkpoint, tiles, entry bundles and bundle files as static files,
        incrementally, the checkpoint last (ledger mirror and C2SP tlog-tiles clients follow it)."""
        from ledger.publish import open_target
        from ledger.publish import publish as run

        target = open_target(dest, endpoint_url)
        try:
            with output.progress("publishing", None, enabled=not json_out) as bar:
                r = run(home_dir(home), target, lambda d, t: bar.update(d, total=t))
        finally:
            target.close()
        if json_out:
            output.emit_json(r.to_json())
        else:
            output.plain(
                f"published {r.origin} size {r.old_size} -> {r.size} to {r.destination} "
                f"({r.tiles} tiles, {r.blobs} bundle files, {r.bytes} bytes, {r.seconds:.2f} s)"
            )
