"""``GET /api/v1/entries/{index}/attestation``: the unsigned in-toto Statement v1 of a bundle entry
(predicate ``https://kernel-ledger.dev/certificate/v1``, docs/attestations.md) as a download.

The server holds no node key, so it cannot sign: it serves the Statement the sealing node's
``ledger attest`` signs into a DSSE envelope, with the same subjects and predicate (its ``log``
is the entry's receipt against the latest checkpoint, ``ledger.http.web.receipts``). A consumer
who wants the signature asks the node for the envelope; the statement's ``log`` lets anyone
check the inclusion against the log's key without trusting this server.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ledger.core import intoto
from ledger.core.attestation import certificate_predicate
from ledger.core.bundle import parse_manifest
from ledger.core.entries import decode_entry
from ledger.core.errors import LedgerError
from ledger.core.note import parse_vkey
from ledger.http.state import served, tree_index
from ledger.http.web.receipts import receipt_for


async def api_attestation(request: Request) -> Response:
    s = served(request)
    view = s.view()
    index = tree_index(view, request.path_params["index"])
    rec = receipt_for(s, view, index)
    try:
        vkey = str(s.store.meta("vkey") or "")
        name = parse_vkey(vkey).name if vkey else rec.origin
        predicate = certificate_predicate(rec, name)
        manifest = str(decode_entry(rec.item.entry).manifest).encode("utf-8")
        rows = parse_manifest(manifest)
    except LedgerError as e:
        raise HTTPException(404, f"entry {index} has no attestation: {e}") from e
    files: dict[str, bytes] = {}
    for rel, digest in rows:
        data = s.store.blob(digest, index)
        if data is None:
            raise HTTPException(404, f"{rel}: file content is not stored here")
        files[rel] = data
    statement = intoto.statement(intoto.subjects(files), intoto.CERTIFICATE_V1, predicate)
    return Response(
        (json.dumps(statement, indent=1) + "\n").encode("utf-8"),
        media_type="application/json",
        headers={
            "Content-Disposition": f'attachment; filename="attestation-{index}.intoto.json"',
            "Cache-Control": "no-cache",  # its log object names the latest checkpoint
        },
    )
