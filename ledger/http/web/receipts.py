"""``GET /api/v1/entries/{index}/receipt``: the offline receipt of one entry
(``ledger.core.receipt``),
the file ``ledger receipt write`` writes, as a download (``ledger-receipt.json``).

It proves the entry in the tree of the latest checkpoint (with the witness cosignatures the log
collected for that checkpoint) and carries, for a bundle entry, the signer's registration and,
when the key was revoked inside that tree, its revocation, each with its inclusion proof, and the
tree's revoked-key list (``ledger.core.revoked``: what proves the signer's status). The
CLI finds the registration and revocation by replaying every entry; a server cannot afford that
per request and takes their indexes from the store's key index, which seal and mirror keep; both
give the same receipt unless the store was altered behind the log's back (``ledger audit`` finds
that, and the verifier re-checks every byte of a receipt anyway).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ledger.core.cosigned import COSIGNED_META, with_cosignatures
from ledger.core.encoding import hex_decode
from ledger.core.entries import decode_entry
from ledger.core.errors import LedgerError
from ledger.core.receipt import FILE_NAME, Included, Receipt
from ledger.core.revoked import key_status
from ledger.core.revoked import to_json as revoked_json
from ledger.http.state import (
    Served,
    View,
    int_param,
    json_response,
    served,
    tree_index,
)
from ledger.revocation import revoked_list


def receipt_for(s: Served, view: View, index: int) -> Receipt:
    store = s.store
    size = view.size

    def included(i: int) -> Included:
        return Included(i, store.entry(i), tuple(store.inclusion_proof(i, size)))

    signer = revocation = None
    listed = revoked_list(store, size)
    try:
        signer_id = decode_entry(store.entry(index)).signer
    except LedgerError:
        signer_id = None
    if signer_id is not None:  # a bundle entry
        kid = hex_decode(signer_id)
        row = store.key_row(kid)
        if row is not None and row.registered_at < size:
            signer = included(row.registered_at)
        at = key_status(kid, view.checkpoint, listed).revoked_at if signer else None
        if at is None and row is not None and row.revoked_at is not None:  # an older checkpoint
            at = row.revoked_at if row.revoked_at < size else None
        if at is not None:
            revocation = included(at)
    note = with_cosignatures(view.note, store.meta(COSIGNED_META))
    return Receipt(store.origin, included(index), note, signer, revocation, revoked=listed)


async def api_revoked(request: Request) -> Response:
    """``GET /api/v1/revoked?size=N`` (default: the latest tree): ``{"tree_size": N, "revoked":
    [{"key_id": hex, "index": V}, ...]}``, the keys revoked inside the tree of size N, sorted by
    key id: the list that tree's checkpoint commits to (``ledger.core.revoked``), for
    ``ledger receipt refresh``."""
    s = served(request)
    view = s.view()
    size = int_param(request, "size", view.size)
    if size > view.size:
        raise HTTPException(404, f"size {size} is beyond the tree of size {view.size}")
    listed = revoked_list(s.store, size)
    return json_response({"tree_size": size, "revoked": revoked_json(listed)})


async def api_receipt(request: Request) -> Response:
    s = served(request)
    view = s.view()
    index = tree_index(view, request.path_params["index"])
    return Response(
        receipt_for(s, view, index).to_bytes(),
        media_type="application/json",
        headers={
            "Content-Disposition": f'attachment; filename="{FILE_NAME}"',
            "Cache-Control": "no-cache",  # it names the latest checkpoint, which moves on
        },
    )
