"""The witness's HTTP app (C2SP tlog-witness): ``POST /add-checkpoint`` and ``GET /`` (its
verifier key), served by ``ledger witness serve``.

The server half of ``ledger.witness``: the request is read here with its size bound and handed to
``Witness.add_checkpoint`` (parsing, checks and the state file are the use case's); a refusal
becomes its status and body, a 409 with the size exactly ``text/x.tlog.size``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger.http.body import ClientGone, read_limited_body
from ledger.witness import MAX_BODY, SIZE_MEDIA, Witness, WitnessReject


async def _read_body(request: Request, limit: int) -> bytes:
    return await read_limited_body(
        request, limit, lambda: WitnessReject(413, f"request over {limit} bytes")
    )


def make_witness_app(home: Path) -> Starlette:
    """The witness's HTTP app: ``POST /add-checkpoint`` and ``GET /`` (its verifier key)."""
    witness = Witness(home)

    async def add_checkpoint(request: Request) -> Response:
        try:
            body = await _read_body(request, MAX_BODY)
            line = witness.add_checkpoint(body)
        except WitnessReject as e:
            if e.status == 409 and e.body[:1].isdigit():  # exactly text/x.tlog.size, no charset
                return Response(e.body, 409, headers={"Content-Type": SIZE_MEDIA})
            return Response(e.body, e.status, media_type="text/plain")
        except ClientGone:
            return Response(status_code=400)  # nobody is listening: no answer, no traceback
        return Response(line, 200, media_type="text/plain; charset=utf-8")

    async def info(request: Request) -> Response:
        return Response((witness.vkey + "\n").encode(), media_type="text/plain; charset=utf-8")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield

    return Starlette(
        routes=[
            Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
            Route("/", info, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
