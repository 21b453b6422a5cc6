"""The integrity checks of SPEC 8: manifest, signature, signer, inclusion, checkpoint.

Input is evidence, not a database: the entry bytes, its inclusion proof, a signed checkpoint,
the signer's ``key-registration`` entry with its own inclusion proof, and (online) any
revocation of that key. The same code checks a live ledger (``ledger verify <hash>``) and an
offline receipt. The log's verifier key is trusted configuration passed in by the caller, never
taken from the evidence.

Steps:
1. ``integrity.checkpoint``: the note verifies under the trusted log key and names its origin;
2. ``integrity.inclusion``: the entry's leaf hash and proof lead to the checkpoint's root (and
   an offline receipt agrees with itself: ``Evidence.receipt_problem``);
3. ``integrity.manifest``: the files hash to the entry's manifest, the manifest to its digest;
4. ``integrity.signer``: the signer's registration is a log-signed entry included in the same
   tree before this entry, and the key has not been revoked: the checkpoint's committed revoked-key
   list (``ledger.core.revoked.key_status``) says so, or (online, an older checkpoint) the replayed
   log holds no revocation; offline, a receipt without that list leaves the status unproven
   (``skipped``), and a newer checkpoint of the same log at hand (``Later``) that revokes the key
   fails the check;
5. ``integrity.signature``: the entry's node signature verifies under the registered key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import nacl.exceptions
import nacl.signing

from ledger.core.bundle import blake3_digest, make_manifest, parse_manifest
from ledger.core.encoding import b64_decode, hex_decode, hex_encode
from ledger.core.entries import Entry, decode_entry, pop_message, verify_signature
from ledger.core.errors import LedgerError
from ledger.core.merkle import leaf_hash, verify_inclusion
from ledger.core.note import Checkpoint, NoteVerifier, open_note, parse_checkpoint
from ledger.core.receipt import Included
from ledger.core.revoked import Revoked, key_status
from verify.report import Check, failed, passed, skipped


@dataclass(frozen=True)
class Evidence:
    item: Included
    checkpoint: bytes
    signer: Included | None
    revocation: Included | None = None
    revocations_known: bool = True  # False offline: a receipt cannot prove "not revoked"
    # set when the stored log could not be replayed up to the checkpoint (online), so the
    # absence of a revocation cannot be relied on: integrity.signer fails with this text
    history_problem: str | None = None
    # set when an offline receipt disagrees with itself or names another log
    # (``Receipt.problem``): integrity.inclusion fails with this text
    receipt_problem: str | None = None
    # the revoked-key list of the checkpoint's tree (``ledger.core.revoked``); None: not given
    revoked: tuple[Revoked, ...] | None = None
    # offline, the log's own ledger at hand: its newer checkpoint, list and signer's revocation
    later: Later | None = None


@dataclass(frozen=True)
class Later:
    """A newer checkpoint of the same log at hand (offline verify with the log's own ledger at
    LEDGER_HOME): its note, its revoked-key list, and the signer's revocation entry in its tree
    (with the inclusion proof), if the ledger holds one."""

    checkpoint: bytes
    revoked: tuple[Revoked, ...] | None
    revocation: Included | None = None


def check_checkpoint(note: bytes, vkey: NoteVerifier) -> tuple[Check, Checkpoint | None]:
    try:
        opened = open_note(note, [vkey])
        cp = parse_checkpoint(opened.text)
    except LedgerError as e:
        return failed("integrity.checkpoint", f"checkpoint rejected: {e}"), None
    if cp.origin != vkey.name:
        return failed(
            "integrity.checkpoint", f"checkpoint origin {cp.origin!r} is not {vkey.name!r}"
        ), None
    return passed(
        "integrity.checkpoint",
        f"checkpoint of size {cp.size} signed by {vkey.name}+{hex_encode(vkey.key_id)}",
    ), cp


def _included(it: Included, cp: Checkpoint) -> None:
    verify_inclusion(leaf_hash(it.entry), it.index, cp.size, list(it.inclusion), cp.root)


def check_evidence(
    ev: Evidence, vkey: NoteVerifier, files: Mapping[str, bytes] | None
) -> tuple[list[Check], Entry | None]:
    """Run the five integrity checks; return them and the decoded entry (None if undecodable)."""
    checks: list[Check] = []
    cp_check, cp = check_checkpoint(ev.checkpoint, vkey)
    checks.append(cp_check)
    try:
        entry = decode_entry(ev.item.entry)
    except LedgerError as e:
        checks.append(failed("integrity.manifest", f"entry {ev.item.index} is malformed: {e}"))
        return checks, None

    if ev.receipt_problem is not None:
        checks.append(failed("integrity.inclusion", ev.receipt_problem))
    elif cp is None:
        checks.append(failed("integrity.inclusion", "no trusted checkpoint to prove against"))
    else:
        try:
            _included(ev.item, cp)
            checks.append(
                passed(
                    "integrity.inclusion",
                    f"entry {ev.item.index} is in the tree of size {cp.size} "
                    f"({len(ev.item.inclusion)}-hash proof)",
                )
            )
        except LedgerError as e:
            checks.append(failed("integrity.inclusion", f"entry {ev.item.index}: {e}"))

    if entry.type != "bundle":
        # key entries are signed by the log key itself
        try:
            verify_signature(entry.fields, vkey.public, ev.item.entry)
            checks.append(
                passed("integrity.signature", f"{entry.type} entry signed by the log key")
            )
        except LedgerError as e:
            checks.append(failed("integrity.signature", f"{entry.type} entry: {e}"))
        return checks, entry
    checks.append(_check_manifest(entry, files))
    signer_check, public = _check_signer(ev, entry, vkey, cp)
    checks.append(signer_check)
    if public is None:
        checks.append(failed("integrity.signature", "no registered key to check the signature"))
    else:
        try:
            verify_signature(entry.fields, public)
            checks.append(
                passed("integrity.signature", f"Ed25519 signature by node key {entry.signer}")
            )
        except LedgerError as e:
            checks.append(failed("integrity.signature", str(e)))
    return checks, entry


def _check_manifest(entry: Entry, files: Mapping[str, bytes] | None) -> Check:
    manifest = str(entry.manifest).encode("utf-8")
    try:
        rows = parse_manifest(manifest)
    except LedgerError as e:
        return failed("integrity.manifest", f"recorded manifest is invalid: {e}")
    if hex_encode(blake3_digest(manifest)) != entry.bundle_digest:
        return failed("integrity.manifest", "recorded manifest does not hash to the bundle digest")
    if files is None:
        return failed("integrity.manifest", "no bundle files to check")
    want = dict(rows)
    got: dict[str, bytes] = {}  # each file hashed once, the digest compared and listed
    for rel in sorted(set(want) | set(files)):
        if rel not in files:
            return failed("integrity.manifest", f"{rel}: listed in the manifest but missing")
        if rel not in want:
            return failed("integrity.manifest", f"{rel}: not listed in the sealed manifest")
        got[rel] = blake3_digest(files[rel])
        if got[rel] != want[rel]:
            return failed("integrity.manifest", f"{rel}: BLAKE3 does not match the manifest")
    if make_manifest(got.items()) != manifest:
        return failed("integrity.manifest", "files do not reproduce the manifest byte for byte")
    return passed(
        "integrity.manifest",
        f"{len(rows)} files hash to the manifest; manifest hashes to {entry.bundle_digest}",
    )


def _check_signer(
    ev: Evidence, entry: Entry, vkey: NoteVerifier, cp: Checkpoint | None
) -> tuple[Check, bytes | None]:
    sid = str(entry.signer)
    if ev.signer is None:
        return failed("integrity.signer", f"no registration found for signer {sid}"), None
    try:
        reg = decode_entry(ev.signer.entry)
        if reg.type != "key-registration" or reg.key_id != sid:
            raise ValueError(f"entry {ev.signer.index} is not the registration of {sid}")
        verify_signature(reg.fields, vkey.public)
        pub = b64_decode(str(reg.public_key), 32)
        nacl.signing.VerifyKey(pub).verify(
            pop_message(str(reg.name), pub), b64_decode(str(reg.pop), 64)
        )
        if ev.signer.index >= ev.item.index:
            raise ValueError(
                f"signer registered at entry {ev.signer.index}, not before entry {ev.item.index}"
            )
        if cp is None:
            raise ValueError("no trusted checkpoint to prove the registration against")
        _included(ev.signer, cp)
    except (LedgerError, ValueError, nacl.exceptions.BadSignatureError) as e:
        return failed("integrity.signer", str(e)), None
    detail = f"node key {sid} ({reg.name}) registered at entry {ev.signer.index}"
    return _check_status(ev, sid, detail, vkey, cp), pub


def _check_status(
    ev: Evidence, sid: str, detail: str, vkey: NoteVerifier, cp: Checkpoint
) -> Check:
    """integrity.signer once the registration holds: the key's status at the checkpoint (the
    committed revoked-key list, ``ledger.core.revoked.key_status``), any revocation evidence, and
    a newer checkpoint of the same log at hand (``Evidence.later``)."""
    try:
        if ev.revocation is not None:
            at = _revoked_by(ev.revocation, sid, vkey, cp)
            return failed("integrity.signer", f"{detail}, revoked at entry {at}")
        status = key_status(hex_decode(sid, 8), cp, ev.revoked)
        if status.revoked_at is not None:
            return failed("integrity.signer", f"{detail}, {status.describe()}")
        later = _later_revocation(ev.later, sid, vkey, cp) if ev.later is not None else None
    except (LedgerError, ValueError) as e:
        return failed("integrity.signer", f"{detail}; revocation evidence is invalid: {e}")
    if later is not None:
        return failed("integrity.signer", f"{detail}; {later}")
    if ev.history_problem is not None:
        return failed("integrity.signer", f"{detail}; {ev.history_problem}")
    if status.proven:
        return passed("integrity.signer", f"{detail}; {status.describe()}")
    if ev.revocations_known:
        return passed("integrity.signer", f"{detail}; not revoked")
    return skipped(
        "integrity.signer",
        f"{detail}; revocation status not proven: the receipt's checkpoint (size {cp.size}) "
        "commits to no revoked-key list (an older receipt), so a revocation in its own tree or "
        "later is not ruled out: refresh it (`ledger receipt refresh`) or verify against the log",
    )


def _revoked_by(it: Included, sid: str, vkey: NoteVerifier, cp: Checkpoint) -> str:
    """Check ``it`` as the log-signed revocation of ``sid`` included in ``cp``'s tree; return
    what to say about it ("<index>: <reason>"). ValueError or LedgerError when it is not."""
    rev = decode_entry(it.entry)
    verify_signature(rev.fields, vkey.public)
    _included(it, cp)
    if rev.type != "key-revocation" or rev.key_id != sid:
        raise ValueError(f"entry {it.index} is not a revocation of {sid}")
    return f"{it.index}: {rev.reason}"


def _later_revocation(
    later: Later, sid: str, vkey: NoteVerifier, cp: Checkpoint
) -> str | None:
    """The revocation of ``sid`` a newer checkpoint of the same log proves (None: none)."""
    check, newer = check_checkpoint(later.checkpoint, vkey)
    if newer is None:
        raise ValueError(f"the local ledger's {check.detail}")
    if newer.size <= cp.size:
        return None
    status = key_status(hex_decode(sid, 8), newer, later.revoked)
    if later.revocation is not None:
        at = _revoked_by(later.revocation, sid, vkey, newer)
        return f"revoked at entry {at} in the local ledger's newer tree of size {newer.size}"
    if status.revoked_at is not None:
        return (f"revoked at entry {status.revoked_at} in the local ledger's newer tree of size "
                f"{newer.size} (its checkpoint's revoked-key list)")
    return None
