"""The ``ledger`` command line (SPEC 7). Commands stay thin; errors map to exit codes in one place.

Exit codes: 0 success / verified; 1 verification failed; 2 bad input or usage; 3 could not check.
With ``--json`` a command prints one JSON object on stdout and nothing else there.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.core.errors import BadInput, LedgerError
from ledger_cli import exits, helptext, net, new, output, rebuild, verifying
from ledger_cli.home import home_dir, open_log
from ledger_cli.options import HomeOpt, JsonOpt, new_app
from ledger_cli.verifying import (
    check_steps,
    home_vkey,
    options_of,
    print_report,
    report_exit,
    table_steps,
)

if TYPE_CHECKING:  # types only: the modules load when a command needs them (fast start-up)
    from ledger.log import Log
    from ledger.store import Store
    from ledger.witness import Asked
    from ledger_cli.wiring import Refused, SealResult

    # what seal says about witness cosignatures: (quorum met, one line, each witness's answer)
    Cosign = tuple[bool, str, list[Asked]]

helptext.plain_types()

app = typer.Typer(
    name="ledger",
    help="Append-only, tamper-evident ledger and verifier for proof-carrying GPU kernels.",
    rich_markup_mode=None,  # click's plain help, as options.new_app makes every group
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    context_settings={"help_option_names": ["-h", "--help"]},
)
keys_app = new_app("Node keys: create, export, register, revoke, list.")
proof_app = new_app("Inclusion and consistency proofs.")
receipt_app = new_app("Offline receipts.")


def _version(value: bool) -> None:
    if value:
        from ledger import __version__

        output.plain(f"ledger {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_version,
            metavar="",
        ),
    ] = False,
) -> None:
    """Append-only, tamper-evident ledger and verifier for proof-carrying GPU kernels."""


app.add_typer(keys_app, name="keys")
app.add_typer(proof_app, name="proof")
app.add_typer(receipt_app, name="receipt")

# -- init, vkey, checkpoint ------------------------------------------------------------------------


@app.command()
def init(
    origin: Annotated[str, typer.Option("--origin", help="Log origin, e.g. example.com/kernels.")],
    db: Annotated[
        str | None,
        typer.Option(
            "--db", metavar="URL",
            help="Keep the log in this PostgreSQL database (postgresql://USER@HOST:PORT/DB) "
            "instead of the SQLite file in LEDGER_HOME.",
        ),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a ledger: the SQLite database (or PostgreSQL with --db) and the log key that signs
    checkpoints."""
    from ledger.log import Log

    log = Log.init(home_dir(home), origin, db)
    if json_out:
        output.emit_json(
            {"home": str(log.home), "origin": log.origin, "vkey": log.store.meta("vkey")}
        )
    else:
        output.plain(f"created ledger {log.origin} in {log.home}")
        output.plain(f"verifier key: {log.store.meta('vkey')}")
        output.plain("pin it: give it as --vkey to `ledger audit` and `ledger verify` elsewhere")


@app.command()
def vkey(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Print the log's verifier key (C2SP / Go note format)."""
    log = open_log(home, read_only=True)
    key = str(log.store.meta("vkey"))
    if json_out:
        output.emit_json({"origin": log.origin, "vkey": key})
    else:
        output.plain(key)


@app.command()
def checkpoint(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Print the latest signed checkpoint (C2SP tlog-checkpoint signed note) with the witness
    cosignatures collected for it, as GET /checkpoint serves it."""
    from ledger.core.cosigned import published_note
    from ledger.core.encoding import b64_encode
    from ledger.core.note import note_text, parse_checkpoint
    from ledger.cosign import cosignatures

    log = open_log(home, read_only=True)
    note = published_note(log.store, log.store.checkpoint())
    if not json_out:
        output.note(note)  # the control and bidi characters of ledger.core.text as "?"
        return
    cp = parse_checkpoint(note_text(note))
    output.emit_json(
        {"origin": cp.origin, "size": cp.size, "root": b64_encode(cp.root),
         "note": note.decode("utf-8"), "cosignatures": cosignatures(note, log.verifier)}
    )


# -- keys ------------------------------------------------------------------------------------------


@keys_app.command("new")
def keys_new(
    name: Annotated[str, typer.Argument(help="Key name (letters, digits, . _ -).")],
    passphrase_file: Annotated[
        Path | None,
        typer.Option("--passphrase-file", help="Encrypt the secret with this passphrase."),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a node key pair in LEDGER_HOME/keys (secret file mode 0600)."""
    from ledger.core.encoding import hex_encode
    from ledger.keys import new_node_key, read_passphrase

    keydir = home_dir(home) / "keys"
    pw = read_passphrase(passphrase_file) if passphrase_file else None
    pub = new_node_key(keydir, name, pw)
    if json_out:
        output.emit_json(
            {
                "name": name,
                "key_id": hex_encode(pub.key_id),
                "public_file": str(keydir / f"{name}.pub"),
                "encrypted": pw is not None,
            }
        )
    else:
        output.plain(f"node key {name}: id {hex_encode(pub.key_id)}")
        output.plain(
            f"secret: {keydir / (name + '.key')} (mode 0600)" + (", encrypted" if pw else "")
        )
        output.plain(f"public: {keydir / (name + '.pub')}")


@keys_app.command("export")
def keys_export(
    name: Annotated[str, typer.Argument(help="The node key NAME in LEDGER_HOME/keys.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the export file here (default: print it)."),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write what a new node sends the log's operator: its public key, id, name and proof of
    possession (no secret); the operator runs `ledger keys register FILE`."""
    import json

    from ledger.core.encoding import hex_encode
    from ledger.core.fsutil import write_atomic
    from ledger.onboard import export_node_key

    pub, data = export_node_key(home_dir(home) / "keys", name)
    if out is not None:
        write_atomic(out, data, 0o644)
    kid = hex_encode(pub.key_id)
    if json_out:
        output.emit_json({"name": pub.name, "key_id": kid,
                          "file": str(out) if out is not None else None,
                          "export": json.loads(data)})
    elif out is None:
        output.plain(data.decode("utf-8").rstrip("\n"))
    else:
        output.plain(f"wrote {out}: node key {pub.name} ({kid})")
        output.plain(f"send it to the log's operator, who runs `ledger keys register {out.name}`")


@keys_app.command("register")
def keys_register(
    key: Annotated[
        str, typer.Argument(help="A key NAME in LEDGER_HOME/keys, a .pub file, or the file "
                            "`ledger keys export` wrote.")
    ],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Append a key-registration entry (signed by the log key) for a node key."""
    from ledger.core.encoding import hex_encode
    from ledger.onboard import load_registration

    log = open_log(home)
    pub, _path = load_registration(key, log.keydir)
    sealed = log.register(pub)
    if json_out:
        output.emit_json(
            {
                "index": sealed.index,
                "key_id": hex_encode(pub.key_id),
                "name": pub.name,
                "leaf_hash": hex_encode(sealed.leaf_hash),
            }
        )
    else:
        output.plain(f"registered {pub.name} ({hex_encode(pub.key_id)}) at entry {sealed.index}")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The 16-hex node key id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why the key is revoked.")],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Append a key-revocation entry: the key may no longer seal."""
    from ledger.core.encoding import hex_decode, hex_encode

    log = open_log(home)
    kid = hex_decode(key_id.strip().lower(), 8, "key id")
    sealed = log.revoke(kid, reason)
    if json_out:
        output.emit_json({"index": sealed.index, "key_id": hex_encode(kid), "reason": reason})
    else:
        output.plain(f"revoked {hex_encode(kid)} at entry {sealed.index}")


@keys_app.command("list")
def keys_list(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """List the node keys registered in the log, with their status."""
    from ledger.core.encoding import b64_encode, hex_encode

    log = open_log(home, read_only=True)
    rows = log.store.key_rows()
    items = [
        {
            "key_id": hex_encode(k.key_id),
            "name": k.name,
            "public_key": b64_encode(k.public),
            "registered_index": k.registered_at,
            "revoked_index": k.revoked_at,
            "reason": k.revoke_reason,
            "status": "revoked" if k.revoked_at is not None else "active",
        }
        for k in rows
    ]
    if json_out:
        output.emit_json({"keys": items})
    else:
        output.rows_table(
            "node keys",
            ["key id", "name", "status", "registered", "revoked", "reason"],
            [
                [
                    i["key_id"],
                    i["name"],
                    i["status"],
                    i["registered_index"],
                    "" if i["revoked_index"] is None else i["revoked_index"],
                    i["reason"],
                ]
                for i in items
            ],
        )


# -- check, seal, verify ---------------------------------------------------------------------------

SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed",
        min=0,
        max=2**63 - 1,
        help="Seed of the verifier's own draws (chosen sizes, fresh inputs); default: a fresh "
        "one, recorded in each falsify detail. Reproduces a run exactly.",
    ),
]
NoGpuOpt = Annotated[bool, typer.Option("--no-gpu", help="Never use a CUDA device.")]
TrustOpt = Annotated[
    bool,
    typer.Option(
        "--trust-bundle-code",
        help="Where no sandbox (bubblewrap) can be set up, run a bundle's own reference, and "
        "nvcc on its source (rebuild.ptx), anyway, with resource limits only (default: such "
        "checks are skipped).",
    ),
]


@app.command()
def check(
    directory: Annotated[Path, typer.Argument(help="An unsealed bundle directory.")],
    json_out: JsonOpt = False,
    seed: SeedOpt = None,
    no_gpu: NoGpuOpt = False,
    trust_bundle_code: TrustOpt = False,
) -> None:
    """Run the verifier on an unsealed bundle (needs no ledger)."""
    from ledger_cli import wiring

    with output.progress("checking", check_steps(), enabled=not json_out) as bar:
        ((_, _, report),) = wiring.check_dirs(
            [directory],
            options_of(seed, no_gpu, trust_bundle_code),
            progress=table_steps(bar, json_out),
        )
    print_report(report, json_out)
    raise typer.Exit(report_exit(report, []))


@app.command()
def seal(
    directories: Annotated[list[Path], typer.Argument(help="Bundle directories to seal.")],
    key: Annotated[
        str | None, typer.Option("--key", help="Node key NAME (default: the only one).")
    ] = None,
    passphrase_file: Annotated[
        Path | None, typer.Option("--passphrase-file", help="Passphrase of an encrypted key.")
    ] = None,
    no_receipt: Annotated[
        bool, typer.Option("--no-receipt", help="Do not write receipts.")
    ] = False,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
    seed: SeedOpt = None,
    no_gpu: NoGpuOpt = False,
    trust_bundle_code: TrustOpt = False,
) -> None:
    """Check each bundle, refuse all if any check fails, then hash, sign and append each one."""
    from ledger.keys import load_node_secret, read_passphrase
    from ledger_cli import wiring

    log = open_log(home)
    name = key or only_key(log.keydir)
    pw = read_passphrase(passphrase_file) if passphrase_file else None
    sk, _pub = load_node_secret(log.keydir, name, pw)
    wiring.check_node_may_seal(log, sk)
    steps = check_steps() * len(directories)
    with output.progress("checking", steps, enabled=not json_out) as bar:
        checked = []
        for d in directories:
            options = options_of(seed, no_gpu, trust_bundle_code)
            checked.extend(wiring.check_dirs([d], options, progress=bar.step))
    bad = [(d, rep) for d, _, rep in checked if rep.verdict == "failed"]
    if bad:
        whys = []
        for d, rep in bad:
            first = next((c for c in rep.checks if c.status == "failed"), None)
            why = f"a check failed ({first.id}: {first.detail})" if first else "no checks ran"
            whys.append(why)
            output.error_line(f"{d}: refused, {why}")
        if json_out:
            output.emit_json(
                {
                    "entries": [],
                    "refused": [
                        {"directory": str(d), "reason": why, "report": verifying.report_json(rep)}
                        for (d, rep), why in zip(bad, whys, strict=True)
                    ]
                    + [
                        {
                            "directory": str(d),
                            "reason": "not sealed: another bundle of the batch failed a check",
                            "report": verifying.report_json(rep),
                        }
                        for d, _, rep in checked
                        if rep.verdict != "failed"
                    ],
                }
            )
        raise typer.Exit(1)
    refused: list[Refused] = []
    with output.progress("sealing", len(checked), enabled=not json_out) as bar:
        results = wiring.seal_checked(
            log,
            checked,
            sk,
            write_receipts=not no_receipt,
            progress=lambda s: bar.advance(),
            refused=refused,
        )
    cosign = _seal_cosign(log, results)  # issue 14: witnesses configured in the trust policy
    raise typer.Exit(_report_seals(results, refused, json_out, cosign))


def _report_seals(
    results: list[SealResult], refused: list[Refused], json_out: bool,
    cosign: Cosign | None = None,
) -> int:
    """Exactly what a batch appended and what it refused, and why (issue 9 item 19). Exit 0 when
    everything was sealed (or had been sealed by this key already, issue 33 item 8) with its
    receipt; 2 when the log refused a bundle; ``SEALED_NO_RECEIPT`` (4) when every bundle was
    sealed but a receipt could not be written: the entry is committed, and running the same
    ``seal`` again (or ``ledger receipt write``) writes it; 3 when the output could not be."""
    from ledger.core.encoding import hex_encode
    try:
        _print_seals(results, refused, json_out, cosign)
    except OSError as e:  # stdout is a full disk or a closed pipe: the seals still happened
        for r in results:
            output.error_line(
                f"{r.directory}: sealed as entry {r.sealed.index} (leaf "
                f"{hex_encode(r.sealed.leaf_hash)}), but the output could not be written "
                f"({e.strerror})"
            )
        return 3
    for r in results:
        if r.receipt_error is not None:
            output.error_line(
                f"{r.directory}: sealed as entry {r.sealed.index}, but its receipt could not be "
                f"written ({r.receipt_error}); run the same `ledger seal` again, or `ledger "
                f"receipt write {hex_encode(r.sealed.leaf_hash)} --out {r.directory}`"
            )
    for x in refused:
        output.error_line(f"{x.directory}: refused, nothing appended for it ({x.reason})")
    if refused:
        return 2
    if any(r.receipt_error is not None for r in results):
        return exits.SEALED_NO_RECEIPT
    return 0


def _print_seals(
    results: list[SealResult], refused: list[Refused], json_out: bool,
    cosign: Cosign | None = None,
) -> None:
    from ledger.core.encoding import hex_encode
    if json_out:
        entries = []
        for r in results:
            item: dict[str, Any] = {
                "index": r.sealed.index,
                "bundle_digest": hex_encode(r.bundle.digest),
                "leaf_hash": hex_encode(r.sealed.leaf_hash),
                "report": verifying.report_json(r.report),
                # added to SPEC 8's item: the receipt written for it (null when none was)
                "receipt": str(r.receipt) if r.receipt is not None else None,
                # issue 33 item 8: nothing appended, this key had sealed the bundle as this entry
                "already_sealed": r.sealed.already,
            }
            entries.append(item)
        obj: dict[str, Any] = {"entries": entries}  # SPEC 8's items, plus "receipt"
        missing = [r for r in results if r.receipt_error is not None]
        if missing:
            obj["receipt_errors"] = [
                {"index": r.sealed.index, "directory": str(r.directory), "error": r.receipt_error}
                for r in missing
            ]
        if refused:
            obj["refused"] = [{"directory": str(x.directory), "reason": x.reason} for x in refused]
        if cosign is not None:  # issue 14: cosigned, and what each witness answered
            ok, account, asked = cosign
            obj["cosigned"], obj["cosign"] = ok, account
            obj["witnesses"] = [
                {"witness": a.witness, "url": a.url, "cosigned": a.error is None,
                 "error": a.error}
                for a in asked
            ]
        output.emit_json(obj)
    else:
        for r in results:
            done = "already sealed" if r.sealed.already else "sealed"
            output.plain(
                f"{done} {r.directory} as entry {r.sealed.index} (verdict {r.report.verdict})"
            )
            output.plain(f"  bundle  {hex_encode(r.bundle.digest)}")
            output.plain(f"  leaf    {hex_encode(r.sealed.leaf_hash)}")
            if r.receipt is not None:
                output.plain(f"  receipt {r.receipt}")
            if verifying.partial_text(r.report):
                output.plain(f"  {verifying.partial_text(r.report)}")
        if cosign is not None:  # sealed all the same (exit 0); a note says why not cosigned
            output.plain(cosign[1] if cosign[0] else f"note: {cosign[1]}")


def _seal_cosign(log: Log, results: list[SealResult]) -> Cosign | None:
    """Issue 14 on ``seal``: with witnesses configured (the trust policy in force, for this log),
    ask each witness the policy gives a URL for to cosign the checkpoint this seal made, then
    rewrite each receipt written with the cosigned checkpoint (the C2SP tlog-proof text inside
    then carries the cosignatures). None when no witnesses are configured; else (the quorum is
    met, one line saying so or exactly why not, what each witness answered)."""
    from ledger import trust
    from ledger.core.cosigned import published_note
    from ledger.core.note import note_text, parse_checkpoint
    from ledger.witness import ask_witnesses
    from ledger_cli import wiring

    if not results:
        return None
    try:
        policy, witnesses, need = trust.resolve(None, [], None)
    except LedgerError as e:
        return False, f"receipts not cosigned: the trust policy cannot be read ({e})", []
    if policy is None or not witnesses:
        return None
    if policy.log is not None and policy.log.vkey != log.verifier.vkey:
        return False, (
            f"receipts not cosigned: the trust policy {policy.source} is for another log "
            f"({policy.log.name}), so its witnesses were not asked"
        ), []
    asked = ask_witnesses(log.home, [(w, policy.url(w)) for w in witnesses])
    unchanged = []
    for r in results:
        if r.receipt is None or all(a.error is not None for a in asked):
            continue
        try:
            wiring.write_receipt(log, r.sealed.index, r.directory)
        except (LedgerError, OSError) as e:  # the receipt first written stays
            unchanged.append(f"{r.receipt} ({e})")
    note = published_note(log.store, log.store.checkpoint())
    size = parse_checkpoint(note_text(note)).size
    good, _bad = trust.check_quorum(note, witnesses, 0)
    refused = "; ".join(a.line() for a in asked if a.error is not None)
    kept = f"; receipts left without the cosignatures: {', '.join(unchanged)}" if unchanged else ""
    if len(good) >= need:
        return True, (
            f"cosigned: the checkpoint of size {size} carries {len(good)} of the "
            f"{len(witnesses)} witnesses' cosignatures (quorum {need})"
            + ("; the receipts carry them" if any(r.receipt for r in results) else "")
            + (f"; not cosigned by {refused}" if refused else "") + kept
        ), asked
    return False, (
        f"receipts not cosigned: the checkpoint of size {size} carries {len(good)} of the {need} "
        f"witness cosignatures the trust policy asks for ({refused or 'none answered'}); once "
        "they answer, `ledger witness add-checkpoint URL --vkey WVKEY` and then `ledger receipt "
        "write HASH --out DIR` bring a receipt to the cosigned checkpoint" + kept
    ), asked


def only_key(keydir: Path) -> str:
    names = sorted(p.stem for p in keydir.glob("*.key")) if keydir.is_dir() else []
    if len(names) != 1:
        raise BadInput(
            "give --key NAME"
            + (
                f" (keys: {', '.join(names)})"
                if names
                else "; no node keys yet (run `ledger keys new NAME`)"
            )
        )
    return names[0]


@app.command()
def verify(
    hash: Annotated[str, typer.Argument(
        help="Bundle digest, leaf hash (>= 8 hex), index, NAME@VERSION or a bundle directory.")],
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="Check this directory instead of the stored files."),
    ] = None,
    receipt: Annotated[
        Path | None,
        typer.Option(
            "--receipt", help="Work offline from this receipt and the log's verifier key."
        ),
    ] = None,
    vkey_opt: Annotated[
        str | None,
        typer.Option("--vkey", help="Trusted log verifier key (default: the ledger's own)."),
    ] = None,
    require: Annotated[
        str | None,
        typer.Option(
            "--require",
            help="Comma-separated check ids "
            "that must run (e.g. lean.kernel,falsify.*); "
            "exit 3 when one is skipped.",
        ),
    ] = None,
    witness: Annotated[
        list[str] | None,
        typer.Option("--witness", help="Witness cosignature key (or file) to require."),
    ] = None,
    quorum: Annotated[
        int | None,
        typer.Option("--quorum", help="Cosignatures needed (default: every --witness)."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="Trust policy file (default: $LEDGER_POLICY, else "
                     "$XDG_CONFIG_HOME/kernel-ledger/policy.json)."),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
    seed: SeedOpt = None,
    no_gpu: NoGpuOpt = False,
    trust_bundle_code: TrustOpt = False,
) -> None:
    """Rebuild a sealed bundle, re-run every check, confirm hashes, signatures and proofs."""
    raise typer.Exit(
        verifying.verify(
            hash=hash, bundle=bundle, receipt=receipt, vkey_opt=vkey_opt, require=require,
            witness=witness, quorum=quorum, policy=policy, home=home, json_out=json_out,
            seed=seed, no_gpu=no_gpu, trust_bundle_code=trust_bundle_code,
        )
    )


# -- reading ---------------------------------------------------------------------------------------


def _entry_json(store: Store, index: int) -> dict[str, Any]:
    from ledger.core.encoding import hex_encode
    from ledger.core.entries import decode_stored

    data = store.entry(index)
    entry = decode_stored(index, data).fields
    return {"index": index, "leaf_hash": hex_encode(store.leaf_hash(index)), "entry": entry}


@app.command()
def show(
    hash: Annotated[str, typer.Argument(
        help="Bundle digest, leaf hash (>= 8 hex), index or NAME@VERSION.")],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one entry."""
    from ledger.kernels import resolve_ref

    log = open_log(home, read_only=True)
    item = _entry_json(log.store, resolve_ref(log.store, hash))
    if json_out:
        output.emit_json(item)
        return
    e = item["entry"]
    lines = [f"entry {item['index']}  leaf {item['leaf_hash']}"]
    for k in sorted(e):
        if k in ("checks", "manifest", "obligations"):
            continue
        value = e[k]
        if k == "kernel" and isinstance(value, dict):  # "name version", not a Python dict
            value = " ".join(str(value.get(f, "?")) for f in ("name", "version"))
        lines.append(f"  {k}: {value}")
    if e.get("manifest"):
        lines.append("  manifest:")
        lines += [f"    {line}" for line in str(e["manifest"]).splitlines()]
    # stored entries may have odd shapes (written before shapes were validated): show, not crash
    for o in _items(e.get("obligations")):
        if isinstance(o, dict):
            o = f"{o.get('obligation')}: {o.get('theorem')} / {o.get('property')}"
        lines.append(f"  claim {o}")
    for c in _items(e.get("checks")):
        if isinstance(c, dict):
            c = f"{c.get('id')}: {c.get('status')} - {c.get('detail')}"
        lines.append(f"  check {c}")
    # at a terminal's width no token is split mid-way (a base64 signature, a hash): a value too
    # long for its line is cut with an ellipsis, and the last line says where to read it whole
    width, cut = output.fit_width(), False
    for line in lines:
        text, was_cut = output.unsplit(output.clean(line), width)
        cut = cut or was_cut
        output.plain(text)
    if cut:
        output.plain("(… marks a value cut to fit the width; --json shows every value whole)")


def _items(value: object) -> list[object]:
    return value if isinstance(value, list) else [] if value is None else [value]


@app.command("log")
def log_cmd(
    start: Annotated[
        int | None,
        typer.Option(
            "--start", min=0, metavar="INDEX",
            help="First index (default: the last --limit entries).",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, metavar="N", help="At most this many entries.")
    ] = 50,
    kernel: Annotated[
        str | None,
        typer.Option(
            "--kernel", metavar="NAME",
            help="Only bundles of kernels whose name starts with or contains NAME (any case; "
            "* is a wildcard), over the whole log.",
        ),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List entries, with each bundle's verdict and signer."""
    from ledger_cli import logview

    log = open_log(home, read_only=True)
    size = log.store.size()
    limit = max(1, min(limit, 10_000))
    title = f"{log.origin}: {size} entries"
    if kernel is not None:
        items = logview.kernel_items(log.store, size, kernel, limit)
        title += f", {len(items)} of kernel {kernel!r}"
    else:
        first = max(0, size - limit) if start is None else max(0, min(start, size))
        items = logview.range_items(log.store, first, limit)
    if json_out:
        output.emit_json({"size": size, "entries": logview.json_items(items)})
    else:
        logview.print_table(title, items)


@app.command()
def audit(
    home: HomeOpt = None,
    json_out: JsonOpt = False,
    vkey_opt: Annotated[
        str | None,
        typer.Option(
            "--vkey",
            help="Verifier key to check against (default: the one `init` recorded in "
            "LEDGER_HOME/log.vkey and printed; a mirror: the key it was pinned to).",
        ),
    ] = None,
) -> None:
    """Recompute every hash, the tree, every chain link and every signature."""
    from ledger.audit import audit as run_audit
    from ledger.audit import check_memory
    from ledger.core.encoding import b64_encode
    from ledger.core.note import parse_vkey
    from ledger.trust import CheckpointMemory

    log = open_log(home, read_only=True)
    vk = parse_vkey(vkey_opt.strip()) if vkey_opt else log.verifier
    size = log.store.size()
    with output.progress("auditing", size, enabled=not json_out) as bar:
        res = run_audit(log.store, vk, progress=lambda n: bar.update(n))
    check_memory(log.store, vk, res, CheckpointMemory.default())  # a rollback since last time
    if json_out:
        output.emit_json(
            {
                "ok": res.ok,
                "size": res.size,
                "root": b64_encode(res.root),  # as in the checkpoint note and every "root"
                "first_bad_index": res.first_bad_index,
                "vkey": vk.vkey,  # the whole verifier key, as `ledger vkey --json` prints it
                "checked": {
                    "entries": res.entries,
                    "signatures": res.signatures,
                    "hashes": res.hashes,
                    "checkpoints": res.checkpoints,
                    "blobs": res.blobs,
                },
                "problems": [{"index": i, "message": m} for i, m in res.sorted_problems()],
            }
        )
    elif res.ok:
        output.plain(
            f"audit passed: {res.entries} entries, {res.signatures} signatures, "
            f"{res.hashes} tree hashes, {res.checkpoints} checkpoints, "
            f"{res.blobs} blobs; root {b64_encode(res.root)}; "
            f"log key {vk.label}"
        )
    else:
        for _i, m in res.sorted_problems()[:20]:
            output.error_line(m)
        output.error_line(
            f"audit failed: first bad index {res.first_bad_index} ({len(res.problems)} problems)"
        )
    if not res.ok:
        raise typer.Exit(1)


# -- proofs ----------------------------------------------------------------------------------------


@proof_app.command("inclusion")
def proof_inclusion(
    hash: Annotated[str, typer.Argument(help="Bundle digest, leaf hash or index.")],
    size: Annotated[
        int | None, typer.Option("--size", help="Tree size (default: current).")
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print an RFC 9162 inclusion proof (leaf's sibling first)."""
    from ledger.core.encoding import b64_encode

    log = open_log(home, read_only=True)
    index = log.store.resolve(hash)
    n = log.store.size() if size is None else size
    if not index < n <= log.store.size():
        raise BadInput(f"--size must be in {index + 1}..{log.store.size()}")
    proof = log.store.inclusion_proof(index, n)
    hashes = [b64_encode(h) for h in proof]
    obj = {
        "index": index,
        "tree_size": n,
        "leaf_hash": b64_encode(log.store.leaf_hash(index)),
        "hashes": hashes,
    }
    if json_out:
        output.emit_json(obj)
    else:
        output.plain(f"inclusion of entry {index} in tree of size {n}:")
        for h in hashes:
            output.plain(f"  {h}")


@proof_app.command("consistency")
def proof_consistency(
    old: Annotated[int, typer.Argument(help="Old tree size.")],
    new: Annotated[int, typer.Argument(help="New tree size.")],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print an RFC 9162 consistency proof between two tree sizes."""
    from ledger.core.encoding import b64_encode

    log = open_log(home, read_only=True)
    if not 0 <= old <= new <= log.store.size():
        raise BadInput(f"need 0 <= OLD <= NEW <= {log.store.size()}")
    proof = log.store.consistency_proof(old, new)
    hashes = [b64_encode(h) for h in proof]
    if json_out:
        output.emit_json({"old_size": old, "new_size": new, "hashes": hashes})
    else:
        output.plain(f"consistency of {old} -> {new}:")
        for h in hashes:
            output.plain(f"  {h}")


@receipt_app.command("write")
def receipt_write(
    hash: Annotated[str, typer.Argument(
        help="Bundle digest, leaf hash (>= 8 hex), index or NAME@VERSION.")],
    out: Annotated[
        Path, typer.Option("--out", help="Directory to write ledger-receipt.json into.")
    ] = Path("."),
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Write a fresh offline receipt for any sealed entry (e.g. after a crash lost one)."""
    from ledger.kernels import resolve_ref
    from ledger_cli import wiring

    log = open_log(home)
    index = resolve_ref(log.store, hash)
    if not out.is_dir():
        raise BadInput(f"--out {out}: not a directory")
    path = wiring.write_receipt(log, index, out)
    if json_out:
        output.emit_json({"index": index, "receipt": str(path)})
    else:
        output.plain(f"receipt for entry {index} written to {path}")


@receipt_app.command("refresh")
def receipt_refresh(
    file: Annotated[Path, typer.Argument(help="The receipt (ledger-receipt.json) to refresh.")],
    server: Annotated[str, typer.Option("--server", help="Base URL of the log server.")],
    vkey_opt: Annotated[
        str | None, typer.Option("--vkey", help="Trusted log verifier key (or a file).")
    ] = None,
    witness: Annotated[
        list[str] | None,
        typer.Option("--witness", help="Witness cosignature key (or file) to require."),
    ] = None,
    quorum: Annotated[
        int | None,
        typer.Option("--quorum", help="Cosignatures needed (default: every --witness)."),
    ] = None,
    policy: Annotated[Path | None, typer.Option("--policy", help="Trust policy file.")] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Bring a receipt up to the server's newest (cosigned) checkpoint with a consistency proof
    from the receipt's own checkpoint."""
    from ledger import trust
    from ledger.core.vkeyfile import read_vkey
    from ledger.refresh import refresh_receipt

    pol, witnesses, need = trust.resolve(policy, witness or [], quorum)
    if vkey_opt:
        vk = read_vkey(vkey_opt)
    elif pol is not None and pol.log is not None:
        vk = pol.log
    else:
        vk = home_vkey(home)
    done = refresh_receipt(
        file, server, vk, witnesses, need, trust.CheckpointMemory.default()
    )
    if json_out:
        output.emit_json(
            {"receipt": str(file), "old_size": done.old_size, "new_size": done.new_size,
             "cosignatures": done.cosignatures}
        )
    else:
        output.plain(
            f"receipt {file}: size {done.old_size} -> {done.new_size}, "
            f"{done.cosignatures} cosignature(s); {done.memory}"
        )


from ledger_cli import attest as attest_cli  # noqa: E402
from ledger_cli import db as db_cli  # noqa: E402
from ledger_cli import lock as lock_cli  # noqa: E402
from ledger_cli import publish as publish_cli  # noqa: E402

net.register(app)  # serve, export-tiles, mirror, witness, submit
new.register(app)  # new
rebuild.register(app)
publish_cli.register(app)  # publish (issue 13)
db_cli.register(app)  # db copy (issue 13)
lock_cli.register(app)  # lock add, lock verify (issue 31)
attest_cli.register(app)  # attest, verify-attestation (issue 35)
helptext.one_line_summaries(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: the typer app, its exits and click's usage errors (one stderr line, exit 2)
    mapped here, everything else by the shell's one error -> exit map (``ledger_cli.exits``)."""
    sys.exit(exits.exit_code(lambda: _run_app(argv)))


def _command_path(argv: list[str]) -> str:
    """``ledger keys register`` for ``keys register --bad``: the (sub)command the arguments name,
    for a usage error click raised without its context ("Try '... --help'")."""
    import typer.main

    cmd: Any = typer.main.get_command(app)
    path = ["ledger"]
    for arg in argv:
        sub = getattr(cmd, "commands", {}).get(arg)
        if sub is None:
            if arg.startswith("-"):
                continue
            break
        cmd = sub
        path.append(arg)
    return " ".join(path)


def _run_app(argv: list[str] | None) -> int:
    try:
        code = app(args=argv, prog_name="ledger", standalone_mode=False)
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        output.error_line("aborted")
        code = 130
    except typer.TyperException as err:  # click's usage errors (typer vendors click)
        ctx = getattr(err, "ctx", None)
        if type(err).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
        else:
            fmt = getattr(err, "format_message", None)
            msg = fmt() if callable(fmt) else str(err)
            where = ctx.command_path if ctx is not None and ctx.command_path else (
                _command_path(sys.argv[1:] if argv is None else argv))
            output.error_line(f"{msg.rstrip('.')}. Try '{where} --help'.")
        code = 2
    return code if isinstance(code, int) else 0
