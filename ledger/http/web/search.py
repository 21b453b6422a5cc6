"""The auditor's search (issue 34): ``/search?q=`` over the whole log through the in-memory
``ledger.search.Index`` the server keeps (refreshed from the store before each answer, reading
only the entries appended since), and ``/kernel/{name}@{version}`` (or ``/kernel/{name}``): every
entry of a kernel with its verdict and signer.

A search that is an index in the tree, or a bundle digest or leaf hash (8+ hex digits) naming one
entry, redirects to that entry; ``NAME@VERSION`` redirects to that kernel version's page;
anything else lists the matches (kernel name prefix, substring or ``*`` wildcard, signer name or
key id, digest prefix: ``ledger.search``), case-insensitive, with the query kept in the box; no
match is a 404 page that still shows the query.
"""

from __future__ import annotations

import weakref
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ledger.core.errors import BadInput
from ledger.http.state import Served, resolve, served, text_param
from ledger.search import Index, Row, parse_ref

MAX_QUERY = 200
MAX_FOUND = 200  # rows a search or a kernel page lists at most (newest first)

# each app's index, for as long as the app's state lives
_indexes: weakref.WeakKeyDictionary[Served, Index] = weakref.WeakKeyDictionary()


def index_of(s: Served, size: int) -> Index:
    """The index of the app ``s`` serves, brought up to ``size`` entries."""
    index = _indexes.get(s)
    if index is None:
        index = _indexes[s] = Index()
    index.refresh(s.store, size)
    return index


def key_names(s: Served, size: int) -> dict[str, str]:
    """Node key id (hex) -> registered name, for keys registered inside the tree."""
    from ledger.core.encoding import hex_encode

    return {hex_encode(k.key_id): k.name for k in s.store.key_rows() if k.registered_at < size}


def row_view(r: Row, names: dict[str, str]) -> dict[str, Any]:
    """What a list shows of one entry (``_entries.html``)."""
    what = f"{r.name} {r.version}".strip() if r.type == "bundle" else f"{r.type} {r.name}".strip()
    return {"index": r.index, "type": r.type, "what": what or "(unreadable entry)",
            "ref": r.ref, "verdict": r.verdict, "signer": r.signer,
            "signer_name": names.get(r.signer, ""), "time": r.time, "digest": r.digest}


def _error(status: int, message: str, query: str) -> Response:
    from ledger.http.web.render import render

    return render("error.html", {"title": str(status), "status": status, "message": message,
                                 "query": query}, status)


async def search(request: Request) -> Response:
    from ledger.http.web.render import render

    s = served(request)
    q = (text_param(request, "q") or "").strip()
    if not q or len(q) > MAX_QUERY:
        raise BadInput("give an index, a bundle digest or leaf hash (or a prefix of one), a "
                       "kernel name (prefix, part or * wildcard) or a signer (key name or id)")
    view = s.view()
    if "@" in q and "*" not in q:  # NAME@VERSION: that kernel version's page (sum.golang.org)
        name, version = parse_ref(q)
        return RedirectResponse(f"/kernel/{quote(name)}@{quote(version or '')}", status_code=303)
    try:
        return RedirectResponse(f"/entry/{resolve(s, view, q.lower())}", status_code=303)
    except BadInput:  # not one entry's index or hash: search the index
        pass
    index = index_of(s, view.size)
    names = key_names(s, view.size)
    rows = index.search(q, names, MAX_FOUND + 1)
    if not rows:
        return _error(404, f"nothing in the {view.size} entries matches {q!r} (kernel name, "
                           "signer, digest prefix or index)", q)
    low = q.lower()
    keys = [{"id": kid, "name": n} for kid, n in names.items()
            if n.lower() == low or (len(low) >= 4 and kid.startswith(low))]
    refs = sorted({r.ref for r in rows if r.ref})
    kernels = sorted({r.name for r in rows if r.type == "bundle" and r.name})
    return render("search.html", {
        "title": f"search {q}", "query": q, "size": view.size,
        "rows": [row_view(r, names) for r in rows[:MAX_FOUND]],
        "more": len(rows) > MAX_FOUND, "limit": MAX_FOUND, "keys": keys, "refs": refs,
        "kernel_feed": q if q in kernels else "",
    })


async def kernel_page(request: Request) -> Response:
    from ledger.http.web.render import render

    s = served(request)
    ref = request.path_params["ref"]
    if len(ref) > MAX_QUERY:
        raise BadInput(f"a kernel ref is at most {MAX_QUERY} characters")
    name, version = parse_ref(ref)
    view = s.view()
    index = index_of(s, view.size)
    rows = index.by_ref(name, version)
    if not rows:
        return _error(404, f"no bundle of kernel {ref!r} in the {view.size} entries", ref)
    names = key_names(s, view.size)
    verdicts = {v: sum(r.verdict == v for r in rows) for v in ("verified", "partial", "failed")}
    return render("kernel.html", {
        "title": f"kernel {ref}", "query": ref, "ref": ref, "name": rows[0].name,
        "version": version, "rows": [row_view(r, names) for r in rows[:MAX_FOUND]],
        "count": len(rows), "limit": MAX_FOUND, "verdicts": verdicts,
        "versions": sorted({r.version for r in index.by_ref(name, None)}),
    })
