"""Offline receipts (SPEC 7 ``seal`` / ``verify --receipt``): everything needed to check one sealed
entry with nothing but the log's verifier key.

A receipt is a JSON object (written as ``ledger-receipt.json`` into the bundle directory, which the
manifest leaves out):

    {"format": "kernel-ledger-receipt/v1", "origin": ..., "index": N,
     "entry": base64, "inclusion": [base64, ...], "checkpoint": "<signed note text>",
     "tlog_proof": "<C2SP tlog-proof text>",
     "signer": {"index": R, "entry": base64, "inclusion": [base64, ...]},
     "revocation": {"index": V, "entry": base64, "inclusion": [base64, ...]},
     "revoked_keys": [{"key_id": hex, "index": V}, ...]}

``inclusion`` proves the entry in the tree of the checkpoint; ``signer`` carries the node key's
``key-registration`` entry and its inclusion proof in the same tree, so the signer's registration is
checked offline too. ``revocation`` (optional) carries the signer's ``key-revocation`` entry when
the key was revoked inside the receipt's tree, so an offline check fails as an online one would;
``revoked_keys`` (issue 33) is the full revoked-key list of the checkpoint's tree, which hashes to
the checkpoint's ``kernel-ledger/revoked`` line (``ledger.core.revoked``): it proves the signer's
status at that checkpoint, absent (not revoked) or present with its revocation's index. A receipt
without it (written before it existed, or whose checkpoint has no such line) proves only the
registration, and its verification says the signer's status was not proven.
``tlog_proof`` repeats the entry's proof in the C2SP tlog-proof@v1 text form
(``c2sp.org/tlog-proof@v1``, ``index``, proof hashes, blank line, checkpoint) for other clients.
Receipts are untrusted input: parsed with limits, every hash and signature re-checked, and
``Receipt.problem`` requires the ``tlog_proof`` text to repeat the members and the ``origin`` to
be the trusted log's (else ``integrity.inclusion`` fails: exit 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledger.core.encoding import b64_decode, b64_encode
from ledger.core.errors import BadInput
from ledger.core.revoked import Revoked, from_json
from ledger.core.revoked import to_json as revoked_json

FORMAT = "kernel-ledger-receipt/v1"
FILE_NAME = "ledger-receipt.json"
MAX_RECEIPT_BYTES = 1 << 20
MAX_PROOF = 64


@dataclass(frozen=True)
class Included:
    index: int
    entry: bytes
    inclusion: tuple[bytes, ...]


@dataclass(frozen=True)
class Receipt:
    origin: str
    item: Included
    checkpoint: bytes
    signer: Included | None
    revocation: Included | None = None
    # the ``tlog_proof`` text as read (None: written by this program, or absent in the file)
    tlog_text: str | None = None
    # the checkpoint's revoked-key list (None: an older receipt, status not proven)
    revoked: tuple[Revoked, ...] | None = None

    def problem(self, origin: str) -> str | None:
        """What makes the receipt disagree with itself, or with the log ``origin`` it is checked
        against; None when nothing does. A receipt says what it proves twice: its members (what
        ``verify`` checks) and the ``tlog_proof`` text other C2SP clients read, derived from
        them; an edit to either breaks that agreement, and a receipt whose two halves say
        different things must not pass as verified."""
        if self.origin != origin:
            return f"the receipt names origin {self.origin!r}, not the trusted log's {origin!r}"
        want = tlog_proof(self.item.index, self.item.inclusion, self.checkpoint)
        if self.tlog_text is not None and self.tlog_text != want:
            return ("the receipt's tlog_proof does not repeat its index, inclusion proof and "
                    "checkpoint: the receipt was altered")
        return None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "format": FORMAT,
            "origin": self.origin,
            "index": self.item.index,
            "entry": b64_encode(self.item.entry),
            "inclusion": [b64_encode(h) for h in self.item.inclusion],
            "checkpoint": self.checkpoint.decode("utf-8"),
            "tlog_proof": tlog_proof(self.item.index, self.item.inclusion, self.checkpoint),
        }
        if self.signer is not None:
            obj["signer"] = {
                "index": self.signer.index,
                "entry": b64_encode(self.signer.entry),
                "inclusion": [b64_encode(h) for h in self.signer.inclusion],
            }
        if self.revocation is not None:
            obj["revocation"] = {
                "index": self.revocation.index,
                "entry": b64_encode(self.revocation.entry),
                "inclusion": [b64_encode(h) for h in self.revocation.inclusion],
            }
        if self.revoked is not None:
            obj["revoked_keys"] = revoked_json(self.revoked)
        return obj

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=1) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Receipt:
        if len(data) > MAX_RECEIPT_BYTES:
            raise BadInput(f"receipt is larger than {MAX_RECEIPT_BYTES} bytes")
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: int digits
            raise BadInput("receipt is not JSON (or nests too deeply)") from e
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise BadInput(f"not a receipt (format is not {FORMAT!r})")
        try:
            item = _included(obj)
            signer = _included(obj["signer"]) if "signer" in obj else None
            revocation = _included(obj["revocation"]) if "revocation" in obj else None
            if not isinstance(obj["checkpoint"], str) or not isinstance(obj["origin"], str):
                raise BadInput("receipt checkpoint and origin must be strings")
            checkpoint = obj["checkpoint"].encode("utf-8")
            origin = obj["origin"]
            revoked = from_json(obj["revoked_keys"]) if "revoked_keys" in obj else None
            tlog_text = obj.get("tlog_proof")
            if tlog_text is not None and not isinstance(tlog_text, str):
                raise BadInput("receipt tlog_proof must be a string")
        except (KeyError, TypeError, ValueError, UnicodeEncodeError) as e:
            raise BadInput(f"receipt is malformed ({type(e).__name__}: {str(e)[:80]})") from e
        return cls(origin, item, checkpoint, signer, revocation, tlog_text, revoked)


def _included(obj: Any) -> Included:
    if not isinstance(obj, dict):
        raise BadInput("receipt item is not an object")
    index = obj["index"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1 << 63:
        raise BadInput("receipt index is not a non-negative integer")
    proof = obj["inclusion"]
    if not isinstance(proof, list) or len(proof) > MAX_PROOF:
        raise BadInput("receipt inclusion proof is not a list of at most 64 hashes")
    if not isinstance(obj["entry"], str) or not all(isinstance(h, str) for h in proof):
        raise BadInput("receipt entry and proof hashes must be base64 strings")
    return Included(
        index,
        b64_decode(obj["entry"], what="receipt entry"),
        tuple(b64_decode(h, 32, "proof hash") for h in proof),
    )


def tlog_proof(index: int, proof: tuple[bytes, ...], checkpoint: bytes) -> str:
    lines = ["c2sp.org/tlog-proof@v1", f"index {index}"]
    lines += [b64_encode(h) for h in proof]
    return "\n".join(lines) + "\n\n" + checkpoint.decode("utf-8")
