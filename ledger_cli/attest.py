"""``ledger attest REF [--build] [--out FILE]`` and ``ledger verify-attestation FILE`` (SPEC 7
and 10, docs/attestations.md): the command lines of ``ledger.library.attestation``.
``register(app)`` adds them to the typer app (``ledger_cli.commands``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.core.encoding import hex_encode
from ledger.core.errors import BadInput, LedgerError
from ledger_cli.home import home_dir, open_log
from ledger_cli.options import HomeOpt, JsonOpt

if TYPE_CHECKING:
    import nacl.signing

    from ledger.library.verifier import Verifier
    from ledger.log import Log


def register(app: typer.Typer) -> None:
    """Add ``ledger attest`` and ``ledger verify-attestation`` to the typer app."""

    @app.command("attest")
    def attest(
        ref: Annotated[str, typer.Argument(
            help="Bundle digest, leaf hash, index, NAME@VERSION or a bundle directory.")],
        build: Annotated[bool, typer.Option(
            "--build", help="SLSA Provenance v1 of the PTX built from the .cu instead.")] = False,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Write the DSSE envelope here (default: stdout).")] = None,
        key: Annotated[str | None, typer.Option(
            "--key", help="The sealing node key NAME (default: the one that sealed it).")] = None,
        passphrase_file: Annotated[Path | None, typer.Option(
            "--passphrase-file", help="Passphrase of an encrypted key.")] = None,
        home: HomeOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Sign an in-toto Statement of a sealed kernel into a DSSE envelope with the node key
        that sealed it (its certificate and log inclusion; --build: its PTX build)."""
        raise typer.Exit(run_attest(ref, build, out, key, passphrase_file, home, json_out))

    @app.command("verify-attestation")
    def verify_attestation(
        file: Annotated[Path, typer.Argument(help="A DSSE envelope `ledger attest` wrote.")],
        files: Annotated[list[Path] | None, typer.Argument(
            help="Files to check against the subjects (by name).")] = None,
        bundle: Annotated[Path | None, typer.Option(
            "--bundle", help="The bundle directory: every subject checked against its files.")
        ] = None,
        policy: Annotated[Path | None, typer.Option(
            "--policy", help="Trust policy file (default: $LEDGER_POLICY, else "
            "$XDG_CONFIG_HOME/kernel-ledger/policy.json).")] = None,
        vkey_opt: Annotated[str | None, typer.Option(
            "--vkey", help="Trusted log verifier key (default: the policy's, else the "
            "ledger's own).")] = None,
        home: HomeOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Check an attestation: envelope signature by the registered signer of the entry,
        statement, subjects against the files given, log inclusion and the trust policy."""
        raise typer.Exit(run_verify(file, files or [], bundle, policy, vkey_opt, home, json_out))


def run_attest(
    ref: str, build: bool, out: Path | None, key: str | None, passphrase_file: Path | None,
    home: Path | None, json_out: bool,
) -> int:
    from ledger.core.entries import node_key_id
    from ledger.core.fsutil import write_atomic
    from ledger.library import attestation
    from ledger_cli import output

    log = open_log(home, read_only=True)
    try:
        statement = _statement(log, ref, build)
    finally:
        log.store.close()
    signer = _signer_of(statement)
    sk = _node_key(log.keydir, key or _sealing_key(log.keydir, signer), passphrase_file)
    kid = hex_encode(node_key_id(bytes(sk.verify_key)))
    if signer != kid:
        raise BadInput(f"node key {kid} did not seal this entry (its signer is {signer}): "
                       "attest with the sealing node's key (--key NAME)")
    envelope = attestation.sign(statement, sk)
    data = envelope.to_bytes()
    if out is None:
        if json_out:
            output.emit_json(envelope.to_json())
        else:
            output.plain(data.decode("utf-8").rstrip("\n"))
        return 0
    write_atomic(out, data, 0o644, exclusive=False)
    if json_out:
        output.emit_json({"out": str(out), "keyid": kid, "predicateType":
                          statement["predicateType"], "subjects": len(statement["subject"])})
    else:
        output.plain(f"wrote {out}: {statement['predicateType']} of "
                     f"{len(statement['subject'])} subject(s), signed by node key {kid}")
    return 0


def _node_key(keydir: Path, name: str, passphrase_file: Path | None) -> nacl.signing.SigningKey:
    from ledger.keys import load_node_secret, read_passphrase

    pw = read_passphrase(passphrase_file) if passphrase_file else None
    sk, _pub = load_node_secret(keydir, name, pw)
    return sk


def _sealing_key(keydir: Path, signer: str) -> str:
    """The name of the node key in ``keydir`` whose id is ``signer`` (its ``NAME.pub``)."""
    from ledger.core.fsutil import read_small
    from ledger.keys import NodePublic

    names = sorted(p.stem for p in keydir.glob("*.key")) if keydir.is_dir() else []
    for name in names:
        pub = keydir / f"{name}.pub"
        try:
            if hex_encode(NodePublic.from_bytes(read_small(pub, 1 << 16)).key_id) == signer:
                return name
        except LedgerError:
            continue
    raise BadInput(f"no node key in {keydir} sealed this entry (its signer is {signer}): "
                   "attest on the sealing node, or name its key with --key NAME")


def _statement(log: Log, ref: str, build: bool) -> dict[str, Any]:
    """The verified statement of ``ref`` in the node's own ledger (under its own log key)."""
    from ledger.library.attestation import certificate_statement
    from ledger.library.logs import LocalLog
    from ledger.library.verifier import Verifier
    from ledger.trust import Policy

    verifier = Verifier(Policy(log=log.verifier), LocalLog.of(log.store))
    found = verifier.find(ref)
    statement = certificate_statement(verifier, ref)
    if not build:
        return statement
    from ledger import __version__
    from ledger.library.provenance import provenance_statement

    assert found.files is not None  # certificate_statement refused a bundle without files
    return provenance_statement(statement, found.files, __version__)


def _signer_of(statement: dict[str, Any]) -> str:
    pred = statement["predicate"]
    if "signer" in pred:
        return str(pred["signer"]["key_id"])
    builder = str(pred["runDetails"]["builder"]["id"])
    return builder.rsplit("/", 1)[-1]


def run_verify(
    file: Path, files: list[Path], bundle: Path | None, policy: Path | None,
    vkey_opt: str | None, home: Path | None, json_out: bool,
) -> int:
    from ledger.core.dsse import MAX_ENVELOPE_BYTES
    from ledger.core.fsutil import read_small
    from ledger.library.attestation import check_subject_files, verify_attestation
    from ledger.library.evidence import read_bundle_dir
    from ledger_cli import output

    data = read_small(file, MAX_ENVELOPE_BYTES, "attestation")
    given = read_bundle_dir(bundle) if bundle is not None else None
    verifier = _verifier(policy, vkey_opt, home)
    try:
        done = verify_attestation(data, verifier, given, f"attestation {file}")
    finally:
        if verifier.log is not None:
            verifier.log.close()
    if files:
        check_subject_files(done.statement, _named_files(files, done.statement.subjects),
                            f"attestation {file}", complete=False)
    cert = done.certificate
    checked = "the given files" if given is not None or files else "the sealed manifest"
    if json_out:
        output.emit_json({"verified": True, "predicateType": done.statement.predicate_type,
                          "key_id": done.key_id, "subjects": sorted(done.statement.subjects),
                          "subjects_checked": checked, "certificate": cert.to_json()})
    else:
        output.plain(
            f"attestation {file} verified: {done.statement.predicate_type} of {cert.kernel} "
            f"({cert.bundle_digest[:16]}), signed by node key {done.key_id} "
            f"({cert.signer.name or 'unnamed'}), entry {cert.index} in the tree of size "
            f"{cert.tree_size}; subjects checked against {checked}; verdict {cert.verdict}")
    return 0


def _verifier(policy: Path | None, vkey_opt: str | None, home: Path | None) -> Verifier:
    import dataclasses

    from ledger import trust
    from ledger.core.note import parse_vkey
    from ledger.library.logs import LocalLog
    from ledger.library.verifier import Verifier
    from ledger_cli.verifying import home_vkey

    pol, witnesses, need = trust.resolve(policy, [], None)
    base = pol or trust.Policy()
    vk = parse_vkey(vkey_opt) if vkey_opt else base.log or home_vkey(home)
    keys = base.log_keys if vk is base.log else (vk,)
    # this log's ledger here, if any: its consistency proofs carry an older attestation's
    # checkpoint to one remembered since (as `ledger verify --receipt` does)
    store = trust.local_store(home_dir(home), vk)
    return Verifier(dataclasses.replace(base, log=vk, log_keys=keys, witnesses=witnesses,
                                        quorum=need), LocalLog.of(store) if store else None)


def _named_files(paths: list[Path], names: dict[str, Any]) -> dict[str, bytes]:
    """Each given file under the subject name it is: its path as given, else its base name."""
    from ledger.core.fsutil import read_small

    out: dict[str, bytes] = {}
    for p in paths:
        name = str(p) if str(p) in names else p.name
        if name not in names:
            raise BadInput(f"{p}: no subject of the attestation is named {p.name!r}")
        out[name] = read_small(p, 1 << 30, "file")
    return out
