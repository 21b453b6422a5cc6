"""Reading an untrusted HTTP request body with a size bound (SPEC 9: every request is bounded).

A declared ``Content-Length`` over the limit is refused before a byte is read; a body without one
(or one that lies) is read in chunks and refused as soon as it passes the limit.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request


async def read_limited_body(
    request: Request, limit: int, too_large: Callable[[], Exception]
) -> bytes:
    """The body of ``request``, at most ``limit`` bytes; raise ``too_large()`` past that."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise too_large()
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise too_large()
    return bytes(buf)
