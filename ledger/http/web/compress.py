"""Entry bundles compressed at the HTTP layer, as C2SP tlog-tiles says they SHOULD be.

The spec lets a log send ``Content-Encoding: gzip`` with no negotiation, or any encoding the
client asks for with ``Accept-Encoding``. Here a client that accepts gzip (``gzip``, ``x-gzip``
or ``*`` with a non-zero q-value) gets it; any other (no ``Accept-Encoding``, ``identity`` only)
gets the plain bytes, so clients that send no ``Accept-Encoding`` keep working. ``Vary:
Accept-Encoding`` tells caches the two apart. The gzip stream is deterministic (no name, mtime
0), so a full bundle's ETag never changes. ``ledger.http.server.FastReads`` answers tiles in front
of
the router and keeps the two forms of a full bundle under two cache keys (``tile_key``).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable

GZIP_LEVEL = 6
GZIP_SUFFIX = "#gzip"  # the cache key of a bundle's gzip form: its path and this
ENTRIES = "/tile/entries/"


def accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` value admits gzip (RFC 9110 section 12.5.3)."""
    star = gz = None
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        coding = coding.strip().lower()
        q = 1.0
        for p in params.split(";"):
            name, _, value = p.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if coding in ("gzip", "x-gzip"):
            gz = q if gz is None else max(gz, q)
        elif coding == "*":
            star = q
    chosen = gz if gz is not None else star
    return chosen is not None and chosen > 0


def tile_key(path: str, headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The cache key of the answer to ``GET path``: the path, and for an entry bundle asked for
    by a client that accepts gzip, the path and ``GZIP_SUFFIX``."""
    if path.startswith(ENTRIES):
        for k, v in headers:
            if k == b"accept-encoding" and accepts_gzip(v.decode("latin-1")):
                return path + GZIP_SUFFIX
    return path


def encode(path: str, key: str, data: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The body and the extra headers of the answer cached under ``key`` for the tile ``data``
    at ``path``: entry bundles vary on Accept-Encoding and are gzip-compressed for a gzip key."""
    if not path.startswith(ENTRIES):
        return data, []
    vary = [(b"vary", b"Accept-Encoding")]
    if key.endswith(GZIP_SUFFIX):
        return gzip.compress(data, GZIP_LEVEL, mtime=0), [(b"content-encoding", b"gzip"), *vary]
    return data, vary
