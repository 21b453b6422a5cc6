"""The revoked-key commitment of a checkpoint (issue 33 item 1; SPEC 10 "What a receipt proves").

Each checkpoint the log signs carries one C2SP extension line after its root hash line:

    kernel-ledger/revoked <count> <base64 SHA-256 of the list>

where the list is every node key revoked by an entry inside the checkpoint's tree, as
``(key id, index of the key-revocation entry)``, sorted by key id, and hashed as

    SHA-256("kernel-ledger/revoked/v1\\n" || "<16 hex key id> <decimal index>\\n" ...)

The log's signature on the note then vouches for the whole set, so the list itself (carried in a
receipt, or answered by ``GET /api/v1/revoked?size=N``) proves a key's status at that size: absent
(not revoked in that tree) or present with the index of its revocation. Go's ``sumdb/tlog``
ignores lines after the root hash, and ``sumdb/note`` and witnesses sign the whole text.

``key_status`` is the one answer to "status of key K in tree N": online and offline verify,
receipt write and refresh, the submit endpoint and the mirror all call it. A checkpoint without
the line (written before it existed) proves nothing about revocation: ``proven`` is False.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.encoding import b64_decode, b64_encode, hex_decode, hex_encode
from ledger.core.errors import BadInput, VerificationFailed
from ledger.core.note import Checkpoint

EXTENSION = "kernel-ledger/revoked"
_DOMAIN = b"kernel-ledger/revoked/v1\n"
MAX_REVOKED = 8192  # keys in one list (a receipt stays well under its 1 MiB limit)
MAX_ANSWER_BYTES = 1 << 20  # a ``GET /api/v1/revoked`` answer, read at most
_LINE = re.compile(r"kernel-ledger/revoked (0|[1-9][0-9]{0,8}) ([A-Za-z0-9+/]{43}=)")


@dataclass(frozen=True, slots=True)
class Revoked:
    key_id: bytes  # 8 bytes (ledger.core.entries.node_key_id)
    index: int  # the key-revocation entry


@dataclass(frozen=True)
class KeyStatus:
    """A key's status in the tree of one checkpoint. ``proven``: the checkpoint commits to a
    revoked-key list and the list given matches it; then ``revoked_at`` (None: not revoked in
    that tree) is what the log signed. Not proven: ``revoked_at`` is None and says nothing."""

    proven: bool
    revoked_at: int | None
    size: int

    def describe(self) -> str:
        if not self.proven:
            return (f"revocation status not proven (no revoked-key list that the checkpoint of "
                    f"size {self.size} commits to: an older checkpoint or receipt)")
        where = "(the checkpoint's revoked-key list)"
        if self.revoked_at is None:
            return f"not revoked in the tree of size {self.size} {where}"
        return f"revoked at entry {self.revoked_at} {where}"


def canonical(items: Iterable[Revoked]) -> tuple[Revoked, ...]:
    """The list in its one order (by key id); BadInput on a repeated key or a bad item."""
    out = tuple(sorted(items, key=lambda r: r.key_id))
    for a, b in itertools.pairwise(out):
        if a.key_id == b.key_id:
            raise BadInput(f"revoked-key list names key {hex_encode(a.key_id)} twice")
    for r in out:
        if len(r.key_id) != 8 or not 0 <= r.index < 1 << 63:
            raise BadInput("revoked-key list item is not an 8-byte key id and an entry index")
    return out


def digest(items: Sequence[Revoked]) -> bytes:
    body = "".join(f"{hex_encode(r.key_id)} {r.index}\n" for r in canonical(items))
    return hashlib.sha256(_DOMAIN + body.encode("ascii")).digest()


def extension_line(items: Sequence[Revoked]) -> str:
    """The checkpoint extension line committing to ``items``."""
    return f"{EXTENSION} {len(items)} {b64_encode(digest(items))}"


def commitment(cp: Checkpoint) -> tuple[int, bytes] | None:
    """The (count, digest) a checkpoint commits to; None when it carries no such line.
    BadInput when a line names the extension but is malformed or repeated."""
    found = [e for e in cp.extensions if e.split(" ", 1)[0] == EXTENSION]
    if not found:
        return None
    if len(found) > 1:
        raise BadInput("checkpoint carries more than one revoked-key line")
    m = _LINE.fullmatch(found[0])
    if m is None:
        raise BadInput(f"checkpoint's revoked-key line is malformed: {found[0][:80]!r}")
    return int(m.group(1)), b64_decode(m.group(2), 32, "revoked-key digest")


def check_list(cp: Checkpoint, items: Sequence[Revoked] | None) -> bool:
    """Whether ``items`` proves the revoked keys of ``cp``'s tree (``cp``: a checkpoint already
    verified under the log key). False, nothing proven, when the checkpoint commits to no list (an
    older one: an older receipt); VerificationFailed when it does and the list is missing (a
    receipt stripped of it), does not hash to the commitment or names an entry outside the
    tree."""
    want = commitment(cp)
    if want is None:
        return False
    if items is None:
        raise VerificationFailed(
            f"the checkpoint of size {cp.size} commits to a revoked-key list, but it was not "
            "given (a receipt stripped of it, or written by an older client: write or refresh "
            "it again)"
        )
    listed = canonical(items)
    if (len(listed), digest(listed)) != want:
        raise VerificationFailed(
            f"the revoked-key list ({len(listed)} keys) does not match the checkpoint's "
            f"commitment ({want[0]} keys) at size {cp.size}"
        )
    if any(r.index >= cp.size for r in listed):
        raise VerificationFailed(f"the revoked-key list names an entry outside the tree {cp.size}")
    return True


def key_status(key_id: bytes, cp: Checkpoint, items: Sequence[Revoked] | None) -> KeyStatus:
    """Status of ``key_id`` in the tree of ``cp`` (verified under the log key), from the
    revoked-key list ``items`` for that tree (``check_list``'s rules and errors)."""
    if not check_list(cp, items):
        return KeyStatus(False, None, cp.size)
    at = next((r.index for r in items or () if r.key_id == key_id), None)
    return KeyStatus(True, at, cp.size)


def to_json(items: Sequence[Revoked]) -> list[dict[str, Any]]:
    return [{"key_id": hex_encode(r.key_id), "index": r.index} for r in canonical(items)]


def from_json(obj: Any) -> tuple[Revoked, ...]:
    """Parse ``[{"key_id": hex, "index": int}, ...]`` (untrusted: bounded, strict)."""
    if not isinstance(obj, list) or len(obj) > MAX_REVOKED:
        raise BadInput(f"revoked-key list is not a list of at most {MAX_REVOKED} items")
    out: list[Revoked] = []
    for item in obj:
        if not isinstance(item, dict) or set(item) != {"key_id", "index"}:
            raise BadInput("revoked-key list item must be {\"key_id\", \"index\"}")
        kid, idx = item["key_id"], item["index"]
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < 1 << 63:
            raise BadInput("revoked-key list index is not a non-negative integer")
        out.append(Revoked(hex_decode(kid, 8, "revoked-key list key_id"), idx))
    return canonical(out)


def parse_answer(body: bytes, size: int) -> tuple[Revoked, ...]:
    """The ``GET /api/v1/revoked?size=N`` answer ``{"tree_size": N, "revoked": [...]}``."""
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadInput("revoked-key answer is not JSON") from e
    if not isinstance(obj, dict) or obj.get("tree_size") != size:
        raise BadInput(f"revoked-key answer is not for the tree of size {size}")
    return from_json(obj.get("revoked"))
