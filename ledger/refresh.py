"""``ledger receipt refresh FILE --server URL`` (issue 14): bring an offline receipt up to the
server's newest checkpoint, with the witness cosignatures the server collected for it.

Steps, every request through the bounded ``HttpClient``:

1. open the receipt's own checkpoint with the trusted log key;
2. ``GET /checkpoint`` (the log's note with its cosignature lines): verified with the log key and,
   when witnesses are configured, required to carry the quorum (short of it, the error names each
   missing witness and why, from the server's ``GET /api/v1/witnesses``, ``ledger.cosign``);
3. ``GET /api/v1/proof/consistency?old=&new=``: verified from the receipt's root to the new root
   (the same size must have the same root; a smaller one is refused);
4. ``GET /api/v1/proof/inclusion`` for the entry and its signer's registration at the new size,
   each verified against the new root; ``GET /api/v1/revoked?size=N``: the new tree's revoked-key
   list, checked against the new checkpoint's commitment (``ledger.core.revoked``), and when it
   names the signer, its revocation entry (``GET /api/v1/entries/V``) with its inclusion proof:
   a revocation made after the old receipt is found, never copied from the old receipt;
5. the checkpoint memory sees the new checkpoint (consistency proofs from the server; a server
   behind the remembered tree is refused, ``trust.Unproven``, and the receipt left as it was);
6. the receipt is rewritten atomically: the new checkpoint (its ``tlog_proof`` text then carries
   the cosignatures) and a ``consistency`` member ``{"old_checkpoint", "hashes"}`` holding the
   previous checkpoint and the proof, so an offline verifier whose memory holds the old checkpoint
   can advance it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ledger.core import merkle
from ledger.core.encoding import b64_decode, b64_encode, hex_decode
from ledger.core.entries import decode_entry
from ledger.core.errors import BadInput, LedgerError, VerificationFailed
from ledger.core.fsutil import read_small, write_atomic
from ledger.core.note import MAX_NOTE_SIZE, Checkpoint, NoteVerifier, open_note, parse_checkpoint
from ledger.core.receipt import MAX_RECEIPT_BYTES, Included, Receipt
from ledger.core.revoked import (
    MAX_ANSWER_BYTES,
    Revoked,
    check_list,
    commitment,
    key_status,
    parse_answer,
)
from ledger.net.client import JSON, TEXT, BadAnswer, HttpClient, oneline
from ledger.trust import CheckpointMemory, QuorumMissing, cosigned_by, guard, witness_groups

MAX_PROOF_ANSWER = 64 * 1024


@dataclass(frozen=True)
class Refreshed:
    old_size: int
    new_size: int
    cosignatures: int  # given witnesses (distinct keys) with a valid cosignature on it
    memory: str


def _open(note: bytes, vkey: NoteVerifier, what: str) -> Checkpoint:
    try:
        cp = parse_checkpoint(open_note(note, [vkey]).text)
    except BadInput as e:
        raise BadAnswer(f"{what} is not a signed checkpoint: {oneline(str(e))}") from e
    if cp.origin != vkey.name:
        raise VerificationFailed(f"{what} is for origin {cp.origin!r}, not {vkey.name!r}")
    return cp


def _hashes(http: HttpClient, path: str, params: list[tuple[str, str]]) -> list[bytes]:
    a = http.get_ok(path, MAX_PROOF_ANSWER, params, types=JSON)
    try:
        obj = json.loads(a.body)
        hashes = obj["hashes"]
        if not isinstance(hashes, list) or len(hashes) > 64:
            raise ValueError("hashes is not a list of at most 64")
        return [b64_decode(str(h), 32, "proof hash") for h in hashes]
    except (ValueError, KeyError, TypeError, LedgerError) as e:
        raise BadAnswer(f"{a.url}: not a proof ({oneline(str(e))})") from e


def _reinclude(http: HttpClient, it: Included, cp: Checkpoint) -> Included:
    proof = _hashes(
        http, "api/v1/proof/inclusion", [("index", str(it.index)), ("size", str(cp.size))]
    )
    merkle.verify_inclusion(merkle.leaf_hash(it.entry), it.index, cp.size, proof, cp.root)
    return replace(it, inclusion=tuple(proof))


def _why_missing(
    note: bytes, url: str, witnesses: tuple[NoteVerifier, ...], client: httpx.Client | None
) -> str:
    """For each witness without a valid cosignature on ``note``: what the server's cosigner
    says about it (``ledger.cosign.missing_reasons``)."""
    from ledger.cosign import missing_reasons

    missing = [g[0] for g in witness_groups(witnesses) if not cosigned_by(note, g)]
    return missing_reasons(url, missing, client=client)


def fetch_status(
    http: HttpClient, entry: bytes, cp: Checkpoint, inline: tuple[Revoked, ...] | None = None
) -> tuple[tuple[Revoked, ...] | None, Included | None]:
    """The revoked-key list of the new tree (``GET /api/v1/revoked?size=N``, checked against the
    checkpoint's commitment) and, when it names the entry's signer, that key's revocation entry
    with its inclusion proof: fetched from the server, never copied from the old receipt (which
    could not know of a revocation made after it). (None, None) for a checkpoint that commits
    to no list (a server older than the list: the receipt then proves no status). ``inline``: the
    list sent with an answer already (``ledger submit``), checked the same way, no GET."""
    if commitment(cp) is None:
        return None, None
    items = inline
    if items is None:
        a = http.get_ok("api/v1/revoked", MAX_ANSWER_BYTES, [("size", str(cp.size))],
                        types=JSON)
        try:
            items = parse_answer(a.body, cp.size)
        except BadInput as e:
            raise BadAnswer(f"{a.url}: {oneline(str(e))}") from e
    try:
        signer = decode_entry(entry).signer
    except LedgerError:
        signer = None
    if signer is None:
        check_list(cp, items)
        return items, None
    at = key_status(hex_decode(signer, 8), cp, items).revoked_at
    if at is None:
        return items, None
    got = http.get_ok(f"api/v1/entries/{at}", MAX_PROOF_ANSWER, types=JSON)
    try:
        data = b64_decode(str(json.loads(got.body)["entry_b64"]), what="entry")
    except (ValueError, KeyError, TypeError, LedgerError) as err:
        raise BadAnswer(f"{got.url}: not an entry ({oneline(str(err))})") from err
    return items, _reinclude(http, Included(at, data, ()), cp)


def refresh_receipt(
    path: Path,
    url: str,
    vkey: NoteVerifier,
    witnesses: tuple[NoteVerifier, ...] = (),
    quorum: int = 0,
    memory: CheckpointMemory | None = None,
    timeout: float = 120.0,
    client: httpx.Client | None = None,
) -> Refreshed:
    data = read_small(path, MAX_RECEIPT_BYTES, "receipt")
    rec = Receipt.from_bytes(data)
    if rec.origin != vkey.name:
        raise BadInput(f"{path}: receipt is for {rec.origin!r}, not the trusted {vkey.name!r}")
    try:
        old = parse_checkpoint(open_note(rec.checkpoint, [vkey]).text)
    except LedgerError as e:
        raise VerificationFailed(f"{path}: the receipt's checkpoint does not verify: {e}") from e
    http = HttpClient(url, "the server", timeout=timeout, client=client)
    try:
        note = http.get_ok("checkpoint", MAX_NOTE_SIZE, types=TEXT).body
        new = _open(note, vkey, f"{http.url('checkpoint')}")
        proof: list[bytes] = []
        if new.size < old.size:
            raise VerificationFailed(
                f"the server's checkpoint (size {new.size}) is older than the receipt's "
                f"(size {old.size})"
            )
        if new.size == old.size and new.root != old.root:
            if memory is not None:
                raise memory.evidence(rec.checkpoint, note, f"two roots for size {new.size}")
            raise VerificationFailed(f"the server shows another root for size {new.size}")
        if 0 < old.size < new.size:
            proof = _hashes(
                http,
                "api/v1/proof/consistency",
                [("old", str(old.size)), ("new", str(new.size))],
            )
            merkle.verify_consistency(old.size, new.size, old.root, new.root, proof)
        item = _reinclude(http, rec.item, new)
        signer = _reinclude(http, rec.signer, new) if rec.signer is not None else None
        revoked, revocation = fetch_status(http, rec.item.entry, new)

        def prove(a: int, b: int) -> list[bytes] | None:
            if (a, b) == (old.size, new.size):
                return proof
            if b == new.size:
                return _hashes(
                    http, "api/v1/proof/consistency", [("old", str(a)), ("new", str(b))]
                )
            return None

        try:
            account = guard(
                note, vkey, witnesses, quorum, memory, prove,
                f"the server at {url} is behind that tree: refresh from a server that holds it",
            )
        except QuorumMissing as e:  # issue 34: which witness, and why (the server's cosigner)
            raise QuorumMissing(f"{e}; {_why_missing(note, url, witnesses, client)}") from e
    finally:
        http.close()
    fresh = Receipt(rec.origin, item, note, signer, revocation, revoked=revoked)
    obj: dict[str, Any] = fresh.to_json()
    obj["consistency"] = {
        "old_checkpoint": rec.checkpoint.decode("utf-8"),
        "hashes": [b64_encode(h) for h in proof],
    }
    write_atomic(path, (json.dumps(obj, indent=1) + "\n").encode(), 0o644, exclusive=False)
    # verified cosignatures by distinct given witnesses, never a count of lines the server sent
    cosigs = sum(cosigned_by(note, g) for g in witness_groups(witnesses))
    return Refreshed(old.size, new.size, cosigs, account)
