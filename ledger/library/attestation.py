"""Attestations (SPEC 10, docs/attestations.md): an in-toto Statement v1 of a sealed kernel in a
DSSE envelope signed with the sealing node's Ed25519 key, and its verification.

* ``certificate_statement(verifier, ref)``: the statement of a verified entry (subjects: the
  bundle's files with ``sha256`` and ``blake3``; predicate: ``ledger.core.attestation``);
* ``sign(statement, key)``: the DSSE envelope (``keyid``: the node key id, hex);
* ``verify_attestation(data, verifier, files)``: the envelope's signature under the signer key
  the predicate names, that key being the entry's signer and registered in the log, the
  statement's shape, the predicate equal to what its own log evidence implies, the subjects
  against the sealed manifest (and against ``files`` when given), the entry's inclusion in a
  checkpoint signed by the policy's log key, witnesses and quorum, then the policy's rules: the
  same ``Verifier`` steps as ``Verifier.verify``. Any mismatch raises ``TamperDetected`` (exit 1),
  an unmet rule ``PolicyError``, a malformed file ``BadInput`` (exit 2).

SLSA Provenance v1 of the PTX build (``ledger attest --build``) is ``ledger.library.provenance``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nacl.signing

from ledger.core import dsse, intoto
from ledger.core.attestation import certificate_predicate, receipt_of_predicate, signer_public
from ledger.core.bundle import blake3_digest, parse_manifest
from ledger.core.encoding import hex_encode
from ledger.core.entries import decode_entry, node_key_id
from ledger.core.errors import BadInput, LedgerError, TamperDetected
from ledger.core.note import parse_checkpoint
from ledger.core.receipt import Receipt
from verify.report import Report, failed, passed

if TYPE_CHECKING:
    from ledger.library.certificate import Certificate
    from ledger.library.verifier import Examined, Found, Verifier


@dataclasses.dataclass(frozen=True)
class Attested:
    """A verified attestation: its statement, the certificate the verification gave, and how
    its subjects were checked (``files`` given, else against the sealed ``manifest``)."""

    statement: intoto.Statement
    certificate: Certificate
    key_id: str
    subjects_checked: str


def receipt_of(verifier: Verifier, found: Found) -> Receipt:
    """The receipt of a found entry: its evidence, the checkpoint with the cosignatures a local
    log collected for it (as ``ledger receipt write`` writes it)."""
    from ledger.core.cosigned import COSIGNED_META, with_cosignatures
    from ledger.library.logs import LocalLog

    ev = found.evidence
    note = ev.checkpoint
    if isinstance(verifier.log, LocalLog):
        note = with_cosignatures(note, verifier.log.store.meta(COSIGNED_META))
    origin = parse_checkpoint(_note_text(note)).origin
    return Receipt(origin, ev.item, note, ev.signer, ev.revocation, revoked=ev.revoked)


def certificate_statement(verifier: Verifier, ref: str | Path) -> dict[str, Any]:
    """The unsigned statement of the entry ``ref`` names, verified under the verifier's policy."""
    found = verifier.find(ref)
    verifier.check(found)  # raises unless it verifies and meets the policy
    if found.files is None:
        raise BadInput(f"the files of {ref} are not at hand: give its bundle directory")
    rec = receipt_of(verifier, found)
    predicate = certificate_predicate(rec, verifier.log_key(rec.checkpoint).name)
    return intoto.statement(intoto.subjects(found.files), intoto.CERTIFICATE_V1, predicate)


def sign(statement: dict[str, Any], key: nacl.signing.SigningKey) -> dsse.Envelope:
    """The DSSE envelope of ``statement`` signed by node key ``key`` (``keyid``: its id, hex)."""
    keyid = hex_encode(node_key_id(bytes(key.verify_key)))
    return dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, intoto.to_payload(statement), key, keyid)


def open_envelope(data: bytes) -> tuple[dsse.Envelope, intoto.Statement]:
    """The envelope and its in-toto statement (``BadInput`` for any other shape)."""
    env = dsse.parse_envelope(data)
    if env.payload_type != dsse.INTOTO_PAYLOAD_TYPE:
        raise BadInput(f"the envelope's payloadType is {env.payload_type[:80]!r}, not "
                       f"{dsse.INTOTO_PAYLOAD_TYPE}")
    return env, intoto.parse_statement(env.payload)


def check_signature(env: dsse.Envelope, predicate: dict[str, Any]) -> str:
    """The signer key id, once the envelope verifies under the key the predicate names."""
    public = signer_public(predicate)
    kid = hex_encode(node_key_id(public))
    sig = env.verified_by(public)
    if sig is None:
        raise TamperDetected(f"the envelope's signature does not verify under node key {kid}, "
                             "the signer the predicate names")
    if sig.keyid and sig.keyid.lower() != kid:
        raise TamperDetected(f"the envelope's keyid {sig.keyid[:40]} is not the signer {kid}")
    return kid


def verify_attestation(
    data: bytes, verifier: Verifier, files: dict[str, bytes] | None = None,
    where: str = "the attestation",
) -> Attested:
    """Verify a certificate attestation (module docstring); the verified ``Attested``."""
    env, st = open_envelope(data)
    if st.predicate_type == intoto.SLSA_PROVENANCE_V1:
        from ledger.library.provenance import verify_provenance

        return verify_provenance(env, st, verifier, files, where)
    if st.predicate_type != intoto.CERTIFICATE_V1:
        raise BadInput(f"unknown predicateType {st.predicate_type[:80]!r} (this tool checks "
                       f"{intoto.CERTIFICATE_V1} and {intoto.SLSA_PROVENANCE_V1})")
    kid = check_signature(env, st.predicate)
    rec = receipt_of_predicate(st.predicate)
    blake = {name: d.get("blake3") for name, d in st.subjects.items()}
    cert = verify_logged(verifier, rec, files, where, blake, kid, exact=True)
    expected = certificate_predicate(rec, verifier.log_key(rec.checkpoint).name)
    for key in sorted(set(expected) | set(st.predicate)):
        if expected.get(key) != st.predicate.get(key):
            raise TamperDetected(f"{where}: predicate field {key[:40]!r} is not what the entry "
                                 f"and its log evidence say")
    _match_subjects(st, {p: hex_encode(d) for p, d in manifest_rows(rec)}, files, where)
    return Attested(st, cert, kid, "files" if files is not None else "manifest")


def verify_logged(
    verifier: Verifier, rec: Receipt, files: dict[str, bytes] | None, where: str,
    named: dict[str, str | None], kid: str, *, exact: bool = False,
) -> Certificate:
    """The log evidence verified as ``Verifier.verify`` verifies a receipt: inclusion under the
    policy's log key, the signer's registration and status, witnesses and quorum, the policy;
    the entry's signer must be ``kid``. Without files, ``integrity.manifest`` checks the sealed
    manifest against the BLAKE3 digests the statement ``named`` (``exact``: all of its files)."""
    found = verifier.receipt_data(json.dumps(rec.to_json()).encode("utf-8"), files, where)
    done = verifier.examine(found)
    if files is None:
        done = _manifest_from_named(done, rec, named, exact)
    cert = verifier.certify(done)
    if cert.signer.key_id.lower() != kid:
        raise TamperDetected(f"{where}: signed by node key {kid}, but the entry was sealed by "
                             f"{cert.signer.key_id}")
    return cert


def _manifest_from_named(
    done: Examined, rec: Receipt, named: dict[str, str | None], exact: bool
) -> Examined:
    """``integrity.manifest`` with no files: the sealed manifest against the named digests."""
    try:
        rows = manifest_rows(rec)
    except BadInput as e:
        check = failed("integrity.manifest", str(e))
    else:
        want = {p: hex_encode(d) for p, d in rows}
        names = set(named) | set(want) if exact else set(named)
        bad = sorted(n for n in names if want.get(n) != named.get(n))
        check = (failed("integrity.manifest", f"subject {bad[0][:120]!r} of the statement is "
                        "not the sealed manifest's") if bad else
                 passed("integrity.manifest", f"no files given: the {len(named)} subjects' "
                        "BLAKE3 digests are the sealed manifest's (sha256 not checked)"))
    checks = tuple(check if c.id == "integrity.manifest" else c for c in done.report.checks)
    return dataclasses.replace(done, report=Report(done.report.bundle_digest, checks))


def manifest_rows(rec: Receipt) -> list[tuple[str, bytes]]:
    """The sealed manifest of the receipt's entry (``BadInput`` when it does not parse)."""
    try:
        entry = decode_entry(rec.item.entry)
        manifest = str(entry.manifest or "").encode("utf-8")
        rows = parse_manifest(manifest)
    except LedgerError as e:
        raise BadInput(f"the entry's manifest does not parse: {e}") from e
    if hex_encode(blake3_digest(manifest)) != entry.bundle_digest:
        raise BadInput("the entry's manifest does not hash to its bundle digest")
    return rows


def _match_subjects(
    st: intoto.Statement, manifest: dict[str, str], files: dict[str, bytes] | None, where: str
) -> None:
    blake = {name: d.get("blake3") for name, d in st.subjects.items()}
    if blake != manifest:
        bad = sorted(n for n in set(blake) | set(manifest) if blake.get(n) != manifest.get(n))
        raise TamperDetected(f"{where}: subject {bad[0][:120]!r} is not the sealed manifest's")
    if files is not None:
        check_subject_files(st, files, where)


def check_subject_files(
    st: intoto.Statement, files: dict[str, bytes], where: str, *, complete: bool = True
) -> None:
    """The subjects' digests (every algorithm this tool knows) against the given files:
    ``complete``, every subject must be among them; else each file must be a subject."""
    have = {s["name"]: s["digest"] for s in intoto.subjects(files)}
    for name in sorted(set(st.subjects) - set(have) if complete else set(have) - set(st.subjects)):
        raise TamperDetected(f"{where}: {name[:120]!r} is a subject but not a given file"
                             if complete else f"{where}: {name[:120]!r} is not a subject")
    for name in sorted(set(st.subjects) & set(have)):
        for alg, value in st.subjects[name].items():
            if alg in have[name] and have[name][alg] != value:
                raise TamperDetected(f"{where}: subject {name[:120]!r}: its {alg} is not the "
                                     "given file's")


def _note_text(note: bytes) -> bytes:
    from ledger.core.note import note_text

    return note_text(note)

