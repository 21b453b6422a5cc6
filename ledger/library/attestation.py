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

from pathlib import Path
from typing import TYPE_CHECKING, Any

import nacl.signing

from ledger.core import dsse, intoto
from ledger.core.attestation import certificate_predicate, receipt_of_predicate
from ledger.core.encoding import hex_encode
from ledger.core.entries import node_key_id
from ledger.core.errors import BadInput, TamperDetected
from ledger.core.note import note_text, parse_checkpoint
from ledger.core.receipt import Receipt
from ledger.library.attest_checks import (
    Attested,
    check_signature,
    check_subject_files,
    manifest_rows,
    verify_logged,
)
from ledger.library.provenance import verify_provenance

if TYPE_CHECKING:
    from ledger.library.evidence import Found
    from ledger.library.logs import ReadLog
    from ledger.library.verifier import Verifier
    from ledger.trust import Policy

__all__ = ["Attested", "attest", "certificate_statement", "check_subject_files", "open_envelope",
           "sign", "verify_attestation"]


def receipt_of(verifier: Verifier, found: Found) -> Receipt:
    """The receipt of a found entry: its evidence, the checkpoint with the cosignatures a local
    log collected for it (as ``ledger receipt write`` writes it)."""
    from ledger.core.cosigned import COSIGNED_META, with_cosignatures
    from ledger.library.logs import LocalLog

    ev = found.evidence
    note = ev.checkpoint
    if isinstance(verifier.log, LocalLog):
        note = with_cosignatures(note, verifier.log.store.meta(COSIGNED_META))
    origin = parse_checkpoint(note_text(note)).origin
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


def attest(ref: str | Path, policy: Policy, *, log: ReadLog | None = None) -> dict[str, Any]:
    """``ledger.attest``: the unsigned in-toto Statement of the kernel ``ref`` names, once it
    verifies under ``policy`` in ``log`` (``ledger.open_log``); the node that sealed it signs it
    into a DSSE envelope (``sign``, ``ledger attest``)."""
    from ledger.library.verifier import Verifier

    return certificate_statement(Verifier(policy, log), ref)


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


def verify_attestation(
    data: bytes, verifier: Verifier, files: dict[str, bytes] | None = None,
    where: str = "the attestation",
) -> Attested:
    """Verify a certificate attestation (module docstring); the verified ``Attested``."""
    env, st = open_envelope(data)
    if st.predicate_type == intoto.SLSA_PROVENANCE_V1:
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


def _match_subjects(
    st: intoto.Statement, manifest: dict[str, str], files: dict[str, bytes] | None, where: str
) -> None:
    blake = {name: d.get("blake3") for name, d in st.subjects.items()}
    if blake != manifest:
        bad = sorted(n for n in set(blake) | set(manifest) if blake.get(n) != manifest.get(n))
        raise TamperDetected(f"{where}: subject {bad[0][:120]!r} is not the sealed manifest's")
    if files is not None:
        check_subject_files(st, files, where)


