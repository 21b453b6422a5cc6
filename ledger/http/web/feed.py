"""``GET /feed.atom``: an Atom feed (RFC 4287) of the newest entries, so people can watch a log
without mirroring it; ``?kernel=NAME`` keeps the entries sealing that kernel. Every value taken
from the ledger or the request is printed by ``_text``: XML-escaped, and a character XML 1.0
cannot hold (a control character, say, which a kernel name in an entry may carry) replaced by
U+FFFD, so the document stays well-formed whatever the log holds. The feed reads at most ``SCAN``
entries back from the newest."""

from __future__ import annotations

import re
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from starlette.requests import Request
from starlette.responses import Response

from ledger.core.canonical import loads_canonical
from ledger.core.errors import BadInput
from ledger.http.state import base_url, served, text_param

FEED_ENTRIES = 50
SCAN = 2000  # entries read back at most (a kernel filter stops there)
MAX_KERNEL = 200
# what XML 1.0 cannot hold (its Char production): C0 controls but tab, LF, CR; lone surrogates;
# U+FFFE and U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: str) -> str:
    """``value`` as XML character data: escaped, characters XML cannot hold replaced."""
    return escape(_NOT_XML.sub("\ufffd", value))


def _attr(value: str) -> str:
    """``value`` as a quoted XML attribute value, likewise."""
    return quoteattr(_NOT_XML.sub("\ufffd", value))


def _entry(data: bytes) -> dict[str, Any]:
    try:
        obj = loads_canonical(data)
    except BadInput:
        return {}
    return obj if isinstance(obj, dict) else {}


def _title(e: dict[str, Any]) -> str:
    kernel = e.get("kernel")
    if e.get("type") == "bundle" and isinstance(kernel, dict):
        return f"sealed {kernel.get('name', '?')} {kernel.get('version', '')}".strip()
    return str(e.get("type", "entry"))


async def atom_feed(request: Request) -> Response:
    s = served(request)
    view = s.view()
    kernel = text_param(request, "kernel")
    if kernel is not None and not (0 < len(kernel) <= MAX_KERNEL):
        raise BadInput(f"kernel must be a name of 1 to {MAX_KERNEL} characters")
    base = base_url(request)
    origin = view.checkpoint.origin
    items: list[str] = []
    newest = ""
    for i in range(view.size - 1, max(-1, view.size - 1 - SCAN), -1):
        e = _entry(s.store.entry(i))
        k = e.get("kernel")
        if kernel is not None and not (isinstance(k, dict) and k.get("name") == kernel):
            continue
        when = str(e.get("time", ""))
        newest = newest or when
        link = f"{base}/entry/{i}"
        summary = (f"entry {i} of {origin}: {e.get('type', '?')}, signer {e.get('signer', '-')},"
                   f" bundle digest {e.get('bundle_digest', '-')}")
        items.append(
            f"<entry><id>{_text(link)}</id><title>{_text(_title(e))}</title>"
            f"<updated>{_text(when)}</updated><link href={_attr(link)}/>"
            f"<summary>{_text(summary)}</summary></entry>"
        )
        if len(items) >= FEED_ENTRIES:
            break
    title = f"kernel ledger {origin}" + (f": {kernel}" if kernel is not None else "")
    query = request.scope.get("query_string", b"").decode("latin-1")
    self_link = base + request.url.path + (f"?{query}" if query else "")
    doc = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<feed xmlns="http://www.w3.org/2005/Atom">'
        f"<id>{_text(self_link)}</id><title>{_text(title)}</title>"
        f"<updated>{_text(newest or '1970-01-01T00:00:00Z')}</updated>"
        f"<link rel=\"self\" href={_attr(self_link)}/>"
        f"<author><name>{_text(origin)}</name></author>" + "".join(items) + "</feed>\n"
    )
    return Response(doc, 200, media_type="application/atom+xml",
                    headers={"Cache-Control": "public, max-age=5"})
