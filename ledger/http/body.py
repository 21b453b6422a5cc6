"""Reading an untrusted HTTP request body with a size bound (SPEC 9: every request is bounded).

A declared ``Content-Length`` over the limit (or malformed, or longer than any limit could be) is
refused before a byte is read; a body without one (or one that lies) is read in chunks and
refused as soon as it passes the limit. A client that goes away mid-upload is ``ClientGone``:
the endpoint answers nothing useful and logs no traceback.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import ClientDisconnect, Request

MAX_LENGTH_DIGITS = 19  # a Content-Length is parsed only when it has at most this many digits


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


def declared_length(request: Request) -> int | None:
    """The request's ``Content-Length``, None when absent, -1 when unusable (malformed/huge)."""
    length = request.headers.get("content-length")
    if length is None:
        return None
    if not length.isascii() or not length.isdigit() or len(length) > MAX_LENGTH_DIGITS:
        return -1
    return int(length)


async def read_limited_body(
    request: Request, limit: int, too_large: Callable[[], Exception]
) -> bytes:
    """The body of ``request``, at most ``limit`` bytes; raise ``too_large()`` past that."""
    length = declared_length(request)
    if length is not None and (length < 0 or length > limit):
        raise too_large()
    buf = bytearray()
    try:
        async for chunk in request.stream():
            buf += chunk
            if len(buf) > limit:
                raise too_large()
    except ClientDisconnect as e:
        raise ClientGone("the client disconnected mid-upload") from e
    return bytes(buf)
