"""Network commands of the ``ledger`` CLI (SPEC 7, 9): serve, export-tiles, mirror, witness, submit.

``register(app)`` adds them to the typer app it is given (``ledger_cli.commands`` calls it), one
group at a time: the serving commands, ``mirror``, ``submit`` and the ``witness`` group.
Commands stay thin: the work is in ``ledger.http.server``, ``ledger.mirror``, ``ledger.witness`` and
``ledger.submit``; errors are the project's error tree, mapped to exit codes in one place
(``ledger_cli.commands.main``).
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ledger_cli import output
from ledger_cli.home import home_dir
from ledger_cli.options import HomeOpt, JsonOpt, new_app

if TYPE_CHECKING:
    from ledger.core.bundle import Bundle
    from ledger.core.note import NoteVerifier
    from ledger.mirror import SyncResult
    from ledger.store import Store
    from ledger.submit import Submitted
    from verify.report import Report

WITNESS_HOME = "~/.local/share/kernel-ledger-witness"

DEFAULT_SYNC_TIMEOUT = 900.0
DEFAULT_SUBMIT_TIMEOUT = 300.0
MAX_SECONDS = 7 * 24 * 3600.0


def seconds(option: str, value: float) -> float:
    """A positive, finite number of seconds (at most a week) for ``option``; BadInput if not."""
    from ledger.core.errors import BadInput

    if not (0 < value <= MAX_SECONDS):  # also refuses nan
        raise BadInput(f"{option} must be a number of seconds above 0 and at most "
                       f"{MAX_SECONDS:.0f}, got {value}")
    return value


WitnessDir = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help=f"Witness directory (default: $LEDGER_WITNESS_HOME, else {WITNESS_HOME}).",
        show_default=False,
    ),
]


def witness_dir(d: Path | None) -> Path:
    if d is not None:
        return d
    env = os.environ.get("LEDGER_WITNESS_HOME")
    return Path(env) if env else Path(WITNESS_HOME).expanduser()


def policy_log_key(vkey: str | None, policy: Path | None = None) -> "NoteVerifier":
    """``--vkey`` (a key or a file), else the log key of the trust policy (``policy``, else the
    one in force; issue 14); BadInput when neither is given."""
    from ledger import trust
    from ledger.core.errors import BadInput
    from ledger.core.vkeyfile import read_vkey

    if vkey:
        return read_vkey(vkey)
    path = trust.policy_path(policy)
    loaded = trust.load_policy(path) if path is not None else None
    if loaded is None or loaded.log is None:
        raise BadInput("give --vkey VKEY (or name the log's key in a trust policy: "
                       "$LEDGER_POLICY or $XDG_CONFIG_HOME/kernel-ledger/policy.json)")
    return loaded.log


def register(app: typer.Typer) -> None:
    """Add the network commands to ``app``, one group at a time."""
    register_serving(app)
    register_mirror(app)
    register_submit(app)
    register_witness(app)


# --- serve, export-tiles ----------------------------------------------------------------------


def register_serving(app: typer.Typer) -> None:
    app.command()(serve)
    app.command("export-tiles")(export_tiles)


def check_port(port: int) -> int:
    from ledger.core.errors import BadInput

    if not 0 < port < 65536:
        raise BadInput(f"--port must be 1..65535, got {port}")
    return port


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8080,
    accept_submissions: Annotated[
        bool,
        typer.Option(
            "--accept-submissions",
            help="Accept POST /api/v1/submit (shared sealing; needs the log key).",
        ),
    ] = False,
    access_log: Annotated[bool, typer.Option("--access-log", help="Log each request.")] = False,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="The URL readers reach this server at (behind a proxy), for the links in "
            "pages and the feed; default: the address it listens on. The Host header is "
            "never used.",
        ),
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Serve the ledger over HTTP: checkpoint, tiles, JSON API and HTML pages."""
    from ledger.http.server import serve as run

    check_port(port)
    if public_url is not None:
        from ledger.http.state import check_public_url

        public_url = check_public_url(public_url)
    announce = f"ledger: serving {home_dir(home)} on http://{host}:{port}/"
    run(home_dir(home), host, port, accept_submissions, access_log, announce, public_url)


def export_tiles(
    dest: Annotated[Path, typer.Argument(help="Directory to write checkpoint and tiles into.")],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write the checkpoint and every tile as static files (C2SP tlog-tiles layout)."""
    from ledger.export import export_tiles as run

    with output.progress("exporting tiles", None, enabled=not json_out) as bar:
        size, written = run(home_dir(home), dest, lambda d, t: bar.update(d, total=t))
    if json_out:
        output.emit_json({"directory": str(dest), "tree_size": size, "files": written})
    else:
        output.plain(f"exported tree of size {size} to {dest} ({written} files written)")


# --- mirror -----------------------------------------------------------------------------------


def register_mirror(app: typer.Typer) -> None:
    app.command()(mirror)


def mirror(
    url: Annotated[str, typer.Argument(help="Base URL of the ledger to follow.")],
    vkey: Annotated[
        str | None,
        typer.Option("--vkey", help="The log's verifier key (or a file); default: the trust "
                     "policy's log key."),
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", help="Keep polling.")] = False,
    witness: Annotated[
        list[str] | None,
        typer.Option("--witness", help="Require a cosignature by this witness key (or file)."),
    ] = None,
    quorum: Annotated[
        int | None,
        typer.Option("--quorum", help="Cosignatures needed among the witnesses (default: "
                     "every --witness, else the policy's quorum)."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="Trust policy file (default: $LEDGER_POLICY, else "
                     "the config default): log key, witnesses, quorum."),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between polls with --follow.")
    ] = 30.0,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds",
            help="With --follow, stop after N polls (N >= 1); exit 3 when none succeeded.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds one sync may take in all (each request: at most 60 s).",
        ),
    ] = DEFAULT_SYNC_TIMEOUT,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Follow a remote ledger: verify its checkpoint, consistency, entries and blobs, and keep
    a verified copy in LEDGER_HOME (exit 1 and evidence on a rewrite)."""
    from ledger.core.errors import BadInput
    from ledger.core.vkeyfile import read_vkey
    from ledger.witness import parse_cosigner_vkey

    seconds("--interval", interval)
    seconds("--timeout", timeout)
    if rounds is not None and not follow:
        raise BadInput("--rounds needs --follow")
    if rounds is not None and rounds < 1:
        raise BadInput(f"--rounds must be at least 1, got {rounds}")
    pinned = policy_log_key(vkey, policy)
    witnesses = [parse_cosigner_vkey(read_vkey(w).vkey) for w in witness or []]
    run = MirrorRun(url, home_dir(home), pinned, witnesses, follow, json_out, quorum, policy)
    run.sync(interval, rounds, timeout)


class MirrorRun:
    """One ``ledger mirror``: the pinned log key, the witnesses required (given, else the trust
    policy's K of N, issue 14) and the checkpoint memory, checked before anything is stored."""

    def __init__(
        self, url: str, home: Path, pinned: "NoteVerifier", witnesses: "list[NoteVerifier]",
        follow: bool, json_out: bool, quorum: int | None = None, policy: Path | None = None,
    ) -> None:
        from ledger import trust

        self.url, self.home, self.pinned, self.witnesses = url, home, pinned, witnesses
        self.follow, self.json_out = follow, json_out
        self.policy_ws: tuple[NoteVerifier, ...] = ()
        self.need = 0
        if not witnesses or quorum is not None:  # K of N (issue 34: --quorum, --policy),
            # checked with the memory before storing; --witness alone still requires each
            _policy, self.policy_ws, self.need = trust.resolve(
                policy, [w.vkey for w in witnesses], quorum)
            self.witnesses = []
        self.memory = trust.CheckpointMemory.default()
        self.behind = (f"{url} serves an older tree than this verifier has seen: mirror a server "
                       "that holds the newer one (or wait until this one catches up)")

    def sync(self, interval: float, rounds: int | None, timeout: float) -> None:
        from ledger.mirror import Mirror, Remote
        from ledger.mirror import follow as follow_loop

        remote = Remote(self.url, timeout=timeout)
        try:
            with output.progress("mirroring", None, enabled=not self.json_out) as bar:
                m = Mirror(
                    self.home,
                    remote,
                    self.pinned.vkey,
                    self.witnesses,
                    progress=lambda done, total: bar.update(done, total=total),
                    before_store=self.before_store,
                    keep=self.policy_ws,  # their cosignatures are kept with the note, no other line
                )
                if self.follow:
                    follow_loop(m, interval, self.show, self.warn, rounds=rounds)
                else:
                    self.show(m.sync())
        finally:
            remote.close()

    def before_store(self, store: "Store", note: bytes) -> None:  # issue 14: memory first
        from ledger import trust

        trust.guard(note, self.pinned, self.policy_ws, self.need, self.memory,
                    trust.store_prover(store), self.behind)

    def show(self, r: "SyncResult") -> None:
        from ledger import trust

        trust.remember_store(self.home, self.pinned, self.memory, self.behind, self.policy_ws,
                             self.need)
        if self.json_out:
            output.emit_json(r.to_json(), None if self.follow else 1)  # one line a poll
        else:
            output.plain(
                f"mirrored {r.origin}: size {r.old_size} -> {r.new_size} "
                f"({r.entries} entries, {r.blobs} blobs, {r.requests} requests, "
                f"{r.seconds:.2f} s)"
            )

    @staticmethod
    def warn(e: Exception, delay: float) -> None:
        output.error_line(f"{e} (retrying in {delay:.0f} s)")


# --- submit -----------------------------------------------------------------------------------


def register_submit(app: typer.Typer) -> None:
    app.command()(submit)


def submit(
    directory: Annotated[Path, typer.Argument(help="Bundle directory to seal remotely.")],
    server: Annotated[str, typer.Option("--server", help="Base URL of the log server.")],
    key: Annotated[str, typer.Option("--key", help="Node key NAME in LEDGER_HOME/keys.")],
    vkey: Annotated[
        str | None,
        typer.Option("--vkey", help="The log's verifier key (or a file) to check with; "
                     "default: the trust policy's log key."),
    ] = None,
    passphrase_file: Annotated[
        Path | None, typer.Option("--passphrase-file", help="Passphrase of an encrypted key.")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Seconds to keep trying in all (retries back off)."),
    ] = DEFAULT_SUBMIT_TIMEOUT,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Check a bundle locally, sign it over the server's verified checkpoint with a node key
    registered in that log, submit it (shared sealing), wait until it is included, and write
    its offline receipt into the bundle directory (cosigned when witnesses are configured and
    have cosigned)."""
    from ledger import trust
    from ledger.core.entries import node_key_id
    from ledger.keys import load_node_secret, read_passphrase
    from ledger.net.client import check_base_url
    from ledger.onboard import explain_refusal
    from ledger.submit import submit_bundle
    from ledger_cli import wiring

    seconds("--timeout", timeout)
    check_base_url(server, "--server")
    pinned = policy_log_key(vkey)
    pw = read_passphrase(passphrase_file) if passphrase_file else None
    sk, _pub = load_node_secret(home_dir(home) / "keys", key, pw)
    bundle, report = _checked_bundle(directory, json_out)
    with explain_refusal(key, node_key_id(bytes(sk.verify_key)), server):  # issue 34: exit 2
        done = submit_bundle(
            server, bundle, wiring.contract_fields(bundle, report), sk, pinned, timeout=timeout,
            memory=trust.CheckpointMemory.default(),
        )
    written = _write_submit_receipt(directory, done, server, pinned)
    _report_submitted(directory, bundle.digest, done, report, written, json_out)


def _checked_bundle(directory: Path, json_out: bool) -> "tuple[Bundle, Report]":
    """The bundle at ``directory`` and its local report; exit 1 (nothing sent) when a check
    failed."""
    from ledger_cli import wiring
    from ledger_cli.verifying import report_json
    from verify.context import Options

    [(_d, bundle, report)] = wiring.check_dirs([directory], Options())
    if report.verdict == "failed":
        first = next((c for c in report.checks if c.status == "failed"), None)
        why = f"{first.id}: {first.detail}" if first else "no checks ran"
        output.error_line(f"{directory}: refused, a check failed ({why})")
        if json_out:
            output.emit_json({"refused": str(directory), "report": report_json(report)})
        raise typer.Exit(1)
    return bundle, report


@dataclass(frozen=True)
class ReceiptWritten:
    """What became of a submitted bundle's receipt: its path (None when it could not be written,
    ``error`` then says why) and whether it is cosigned (``cosign``: the note on that)."""

    path: Path | None
    error: str | None
    cosigned: bool | None
    cosign: str | None


def _write_submit_receipt(
    directory: Path, done: "Submitted", server: str, pinned: "NoteVerifier"
) -> ReceiptWritten:
    """Like seal: a receipt that cannot be written does not undo or hide the entry."""
    from ledger.core.errors import LedgerError
    from ledger.core.fsutil import write_atomic
    from ledger.core.receipt import FILE_NAME
    from ledger.submit import cosign_receipt

    path = directory / FILE_NAME
    try:
        write_atomic(path, done.receipt().to_bytes(), 0o644, exclusive=False)
        cosigned, cosign = cosign_receipt(path, server, pinned)
    except (LedgerError, OSError) as e:
        error = str(e) if isinstance(e, LedgerError) else (e.strerror or str(e))
        return ReceiptWritten(None, error, None, None)
    return ReceiptWritten(path, None, cosigned, cosign)


def _report_submitted(
    directory: Path, digest: bytes, done: "Submitted", report: "Report", written: ReceiptWritten,
    json_out: bool,
) -> None:
    from ledger.core.encoding import hex_encode
    from ledger_cli.verifying import report_json

    if json_out:
        output.emit_json(
            {
                "index": done.index,
                "bundle_digest": hex_encode(digest),
                "leaf_hash": hex_encode(done.leaf_hash),
                "attempts": done.attempts,
                "checkpoint": done.checkpoint.decode("utf-8"),
                "report": report_json(report),
                "receipt": str(written.path) if written.path is not None else None,
                "cosigned": written.cosigned,
                "already_sealed": done.already,  # issue 33 item 8: the entry it had
                **({"receipt_error": written.error} if written.error else {}),
                **({"cosign": written.cosign} if written.cosign else {}),
            }
        )
    else:
        what = f"already sealed {directory} as entry" if done.already else \
            f"submitted {directory}: index"
        output.plain(
            f"{what} {done.index}  bundle {hex_encode(digest)}  "
            f"leaf {hex_encode(done.leaf_hash)}  verdict {report.verdict}"
        )
        if written.path is not None:
            output.plain(f"  receipt {written.path}")
        if written.cosigned and written.cosign:  # issue 34: cosigned by the server's witnesses
            output.plain(f"  {written.cosign}")
        elif written.cosigned is False and written.cosign:
            # submitted all the same (exit 0): a note, as `seal` gives one, never an error
            output.plain(f"  note: {written.cosign}")
    if written.error is not None:
        output.error_line(
            f"{directory}: included as entry {done.index}, but its receipt could not be "
            f"written ({written.error}); run the same `ledger submit` again, or "
            f"`ledger receipt write {hex_encode(done.leaf_hash)}` on the log"
        )
        from ledger_cli.exits import SEALED_NO_RECEIPT

        raise typer.Exit(SEALED_NO_RECEIPT)


# --- witness ----------------------------------------------------------------------------------


def register_witness(app: typer.Typer) -> None:
    witness_app = new_app("A checkpoint witness (C2SP tlog-witness) and asking one to cosign.")
    app.add_typer(witness_app, name="witness")
    witness_app.command("init")(witness_init)
    witness_app.command("vkey")(witness_vkey)
    witness_app.command("add-log")(witness_add_log)
    witness_app.command("serve")(witness_serve)
    witness_app.command("add-checkpoint")(witness_add_checkpoint)


def witness_init(
    name: Annotated[str, typer.Option("--name", help="Witness name, e.g. witness.example")],
    wdir: WitnessDir = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a witness key in the witness directory and print its verifier key."""
    from ledger.witness import Witness

    w = Witness.init(witness_dir(wdir), name)
    if json_out:
        output.emit_json({"name": name, "vkey": w.vkey})
    else:
        output.plain(w.vkey)


def witness_vkey(wdir: WitnessDir = None, json_out: JsonOpt = False) -> None:
    """Print the witness's cosignature verifier key."""
    from ledger.witness import Witness

    vkey = Witness(witness_dir(wdir)).vkey
    if json_out:
        output.emit_json({"vkey": vkey})
    else:
        output.plain(vkey)


def witness_add_log(
    vkey: Annotated[str, typer.Argument(help="The log's verifier key (or a file).")],
    wdir: WitnessDir = None,
    json_out: JsonOpt = False,
) -> None:
    """Trust a log: the witness will cosign checkpoints signed by this key."""
    from ledger.core.vkeyfile import read_vkey
    from ledger.witness import Witness

    origin = Witness(witness_dir(wdir)).add_log(read_vkey(vkey).vkey)
    if json_out:
        output.emit_json({"origin": origin})
    else:
        output.plain(f"witnessing {origin}")


def witness_serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8081,
    wdir: WitnessDir = None,
) -> None:
    """Serve POST /add-checkpoint (C2SP tlog-witness)."""
    from ledger.http.server import run_server, server_config
    from ledger.http.witness import make_witness_app

    check_port(port)
    app_ = make_witness_app(witness_dir(wdir))
    run_server(server_config(app_, host, port), f"ledger: witness on http://{host}:{port}/")


def witness_add_checkpoint(
    url: Annotated[str, typer.Argument(help="Base URL of the witness.")],
    vkey: Annotated[str, typer.Option("--vkey", help="The witness's cosignature key.")],
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the exchange may take in all.")
    ] = 120.0,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Send this log's latest checkpoint to a witness and keep its cosignature, which
    `ledger serve` then publishes with GET /checkpoint."""
    from ledger.core.vkeyfile import read_vkey
    from ledger.witness import request_cosignature

    seconds("--timeout", timeout)
    wv = read_vkey(vkey)
    note = request_cosignature(home_dir(home), url, wv.vkey, timeout=timeout)
    if not json_out:
        output.note(note)
        return
    from ledger.core.encoding import b64_encode
    from ledger.core.note import note_text, parse_checkpoint

    cp = parse_checkpoint(note_text(note))
    # checkpoint --json's fields, and the witness that cosigned
    output.emit_json({"origin": cp.origin, "size": cp.size, "root": b64_encode(cp.root),
                      "note": note.decode("utf-8"), "witness": wv.vkey})
