"""``GET /api/v1/witnesses`` and the server's cosigner (issue 34, ``ledger.cosign``).

``start(app, home)`` runs when the app starts: it makes the cosigner the trust policy asks for
(or none) and says so on stderr; ``stop(app)`` ends it with the app. The route answers
``{"cosigning": bool, "note": str, "witnesses": [WitnessStatus JSON, ...]}``: what each witness
last answered, so that a client can say why a cosignature is missing."""

from __future__ import annotations

import sys
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from ledger.cosign import Cosigner, from_policy
from ledger.http.state import json_response


def start(app: Starlette, home: Path) -> None:
    cosigner, line = from_policy(home)
    app.state.cosigner = cosigner
    app.state.cosign_note = line
    if line:
        sys.stderr.write(f"ledger: {line}\n")
        sys.stderr.flush()


def stop(app: Starlette) -> None:
    cosigner: Cosigner | None = getattr(app.state, "cosigner", None)
    if cosigner is not None:
        cosigner.stop()
        app.state.cosigner = None


async def api_witnesses(request: Request) -> Response:
    cosigner: Cosigner | None = getattr(request.app.state, "cosigner", None)
    note = str(getattr(request.app.state, "cosign_note", "") or "")
    items = [s.to_json() for s in cosigner.status()] if cosigner is not None else []
    return json_response(
        {"cosigning": cosigner is not None, "note": note, "witnesses": items},
        headers={"Cache-Control": "no-cache"},
    )
