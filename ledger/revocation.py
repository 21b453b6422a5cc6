"""Revoked keys as a ledger's store knows them (issue 33 item 1): the list a checkpoint commits
to, the checkpoint text that carries it, and a node key's status in a store's latest tree. The
rule itself (the extension line, its hash, "status of key K in tree N") is
``ledger.core.revoked``; this module only feeds it from a ``Store``.
"""

from __future__ import annotations

from ledger.core.errors import LedgerError
from ledger.core.note import Checkpoint, format_checkpoint
from ledger.core.receipt import Included
from ledger.core.revoked import Revoked, extension_line, key_status
from ledger.store import Store
from ledger.store.common import checkpoint_of


def revoked_list(store: Store, size: int) -> tuple[Revoked, ...]:
    """The keys revoked inside the tree of ``size`` (what its checkpoint commits to)."""
    return tuple(Revoked(k, i) for k, i in store.revoked(size))


def checkpoint_body(store: Store, size: int, root: bytes) -> bytes:
    """The text of the log's checkpoint of the tree (``size``, ``root``): origin, size, root and
    the revoked-key line, inside the transaction that grew the tree."""
    line = extension_line(revoked_list(store, size))
    return format_checkpoint(Checkpoint(store.origin, size, root, (line,)))


def revoked_at(store: Store, key_id: bytes) -> int | None:
    """Where ``key_id`` was revoked in the store's latest tree (None: not revoked), by
    ``key_status`` on the latest checkpoint; a checkpoint that commits to no list (an older
    one) leaves the answer to the key index."""
    cp = checkpoint_of(store.checkpoint())
    status = key_status(key_id, cp, revoked_list(store, cp.size))
    if status.proven:
        return status.revoked_at
    row = store.key_row(key_id)
    return None if row is None else row.revoked_at


def later_evidence(
    store: Store, key_id: bytes
) -> tuple[bytes, tuple[Revoked, ...], Included | None] | None:
    """What the log's own ledger at hand says about ``key_id`` for an offline verification: its
    latest checkpoint, that tree's revoked-key list and the key's revocation entry with its
    inclusion proof, if any (``verify.integrity.Later``, which re-checks all of it). None when
    the ledger cannot give it (empty, or damaged: the verification goes on from the receipt)."""
    try:
        note = store.checkpoint()
        cp = checkpoint_of(note)
        size = min(cp.size, store.size())
        items = revoked_list(store, size)
        at = next((r.index for r in items if r.key_id == key_id), None)
        rev = None
        if at is not None:
            rev = Included(at, store.entry(at), tuple(store.inclusion_proof(at, size)))
    except LedgerError:
        return None
    return note, items, rev
