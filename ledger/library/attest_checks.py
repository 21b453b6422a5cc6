"""What a certificate attestation and a build provenance are both checked by (``ledger.library
.attestation``, ``ledger.library.provenance``; docs/attestations.md): the DSSE signature under the
signer key a predicate names, the log evidence through the ``Verifier``'s receipt path, the sealed
manifest, the subjects against given files."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from ledger.core import dsse, intoto
from ledger.core.attestation import signer_public
from ledger.core.bundle import blake3_digest, parse_manifest
from ledger.core.encoding import hex_encode
from ledger.core.entries import decode_entry, node_key_id
from ledger.core.errors import BadInput, LedgerError, TamperDetected
from ledger.core.receipt import Receipt
from verify.report import Report, failed, passed

if TYPE_CHECKING:
    from ledger.library.certificate import Certificate
    from ledger.library.verifier import Examined, Verifier


@dataclasses.dataclass(frozen=True)
class Attested:
    """A verified attestation: its statement, the certificate the verification gave, and how
    its subjects were checked (``files`` given, else against the sealed ``manifest``)."""

    statement: intoto.Statement
    certificate: Certificate
    key_id: str
    subjects_checked: str


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
