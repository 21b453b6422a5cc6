"""HTML pages of the public mirror (SPEC 9, "HTML pages for people").

``/`` lists recent entries with a search box, ``/entry/{index}`` shows one entry (its bundle files,
the checks recorded at seal time, the proof obligations, the inclusion proof and the checkpoint it
is proved against) and ``/search?q=`` resolves an index, bundle digest or leaf hash. Every value
taken from the ledger is escaped with ``html.escape``; the pages need no JavaScript, and the
server's Content-Security-Policy forbids scripts anyway.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ledger import merkle
from ledger.bundle import parse_manifest
from ledger.canonical import loads_canonical
from ledger.encoding import b64_encode
from ledger.errors import BadInput, UnknownHash
from ledger.httpstate import int_param, published_note, resolve, served, tree_index

PAGE_ENTRIES = 25
MAX_QUERY = 200

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;
text-align:left;vertical-align:top}code,pre{font-family:ui-monospace,monospace;font-size:.9em}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}.passed{color:#060}.failed{color:#a00}
.skipped{color:#850}header a{text-decoration:none;color:inherit}
code,pre,td{overflow-wrap:anywhere}pre{white-space:pre-wrap}input{max-width:100%}
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str, status: int = 200) -> HTMLResponse:
    doc = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        '<header><h1><a href="/">kernel ledger</a></h1>'
        '<form action="/search" method="get"><input name="q" size="70" '
        'placeholder="index, hash (8+ hex digits), kernel name or signer">'
        ' <button type="submit">Search</button></form></header>'
        f"<main>{body}</main></body></html>\n"
    )
    return HTMLResponse(doc, status)


def error_page(status: int, message: str) -> HTMLResponse:
    return page(f"{status}", f"<h2>{status}</h2><p>{esc(message)}</p>", status)


def _table(rows: Iterable[Sequence[str]], head: Sequence[str] | None = None) -> str:
    out = ["<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _summary(entry: Any) -> str:
    if not isinstance(entry, dict):
        return "(unreadable entry)"
    etype = entry.get("type")
    if etype == "bundle":
        kernel = entry.get("kernel")
        if isinstance(kernel, dict):
            return f"{kernel.get('name', '?')} {kernel.get('version', '')}".strip()
        return "bundle"
    if etype in ("key-registration", "key-revocation"):
        return f"{etype} {entry.get('name', entry.get('key_id', ''))}"
    return str(etype)


def _parse(data: bytes) -> Any:
    try:
        return loads_canonical(data)
    except BadInput:
        return None


async def home(request: Request) -> Response:
    s = served(request)
    view = s.view()
    end = min(int_param(request, "before", view.size), view.size)
    start = max(0, end - PAGE_ENTRIES)
    rows = []
    for i in range(end - 1, start - 1, -1):
        data = s.store.entry(i)
        entry = _parse(data)
        digest = entry.get("bundle_digest", "") if isinstance(entry, dict) else ""
        time = entry.get("time", "") if isinstance(entry, dict) else ""
        rows.append(
            (
                f'<a href="/entry/{i}">{i}</a>',
                esc(entry.get("type", "") if isinstance(entry, dict) else ""),
                esc(_summary(entry)),
                f"<code>{esc(str(digest)[:16])}</code>",
                esc(time),
            )
        )
    body = (
        f"<p>Origin <code>{esc(view.checkpoint.origin)}</code>, {view.size} entries, root "
        f"<code>{esc(b64_encode(view.checkpoint.root))}</code>. "
        '<a href="/checkpoint">checkpoint</a> · <a href="/api/v1/openapi.json">API</a></p>'
        "<h2>Recent entries</h2>" + _table(rows, ("index", "type", "what", "bundle digest", "time"))
    )
    if start > 0:
        body += f'<p><a href="/?before={start}">older entries</a></p>'
    return page("kernel ledger", body)


async def search(request: Request) -> Response:
    s = served(request)
    q = request.query_params.get("q", "").strip()
    if not q or len(q) > MAX_QUERY:
        raise BadInput("give an index, a bundle digest, a leaf hash (at least 8 hex digits), "
                       "a kernel name or a signer (node key name or id)")
    view = s.view()
    try:
        index = resolve(s, view, q.lower())
    except BadInput as e:  # not a hash or index of this tree: a kernel name or a signer?
        found = _search_names(s, view.size, q)
        if not found:
            why = str(e) if isinstance(e, UnknownHash) else "no such index or hash"
            return error_page(404, f"{why}; no kernel or signer named {q!r} in the newest "
                                   f"{SEARCH_SCAN} entries")
        rows = [(f'<a href="/entry/{i}">{i}</a>', esc(e.get("type", "")), esc(_summary(e)),
                 f"<code>{esc(e.get('signer', e.get('key_id', '')))}</code>",
                 esc(e.get("time", ""))) for i, e in found]
        return page(f"search {q}", f"<h2>Entries for {esc(q)}</h2>"
                    + _table(rows, ("index", "type", "what", "signer", "time")))
    return RedirectResponse(f"/entry/{index}", status_code=303)


SEARCH_SCAN = 5000  # entries a name search reads back at most, newest first


def _search_names(s: Any, size: int, q: str) -> list[tuple[int, dict[str, Any]]]:
    """Entries among the newest ``SEARCH_SCAN`` that seal kernel ``q``, or that a node key named
    ``q`` (or with key id ``q``) signed, registered or revoked; newest first, at most 100."""
    window = [(i, e) for i in range(size - 1, max(-1, size - 1 - SEARCH_SCAN), -1)
              if isinstance(e := _parse(s.store.entry(i)), dict)]
    keys = {q.lower()} | {str(e.get("key_id")) for _, e in window
                          if e.get("type") == "key-registration" and e.get("name") == q}
    out = []
    for i, e in window:
        kernel = e.get("kernel")
        if ((isinstance(kernel, dict) and kernel.get("name") == q) or e.get("signer") in keys
                or (e.get("type") != "bundle" and e.get("key_id") in keys)):
            out.append((i, e))
            if len(out) >= 100:
                break
    return out


def _checks(entry: dict[str, Any]) -> str:
    checks = entry.get("checks")
    if not isinstance(checks, list) or not checks:
        return "<p>No checks recorded.</p>"
    rows = []
    for c in checks:
        if not isinstance(c, dict):
            continue
        status = str(c.get("status", ""))
        rows.append(
            (
                f"<code>{esc(c.get('id', ''))}</code>",
                f'<span class="{esc(status)}">{esc(status)}</span>',
                esc(" ".join(str(c.get(k, "")) for k in ("tool", "version")).strip()),
                esc(c.get("detail", "")),
            )
        )
    return _table(rows, ("check", "status", "tool", "detail"))


def _obligations(entry: dict[str, Any]) -> str:
    """The claimed obligations, with the ``certificate`` check recorded at seal time."""
    claims = entry.get("obligations")
    if not isinstance(claims, list) or not claims:
        return "<p>No proof obligations claimed.</p>"
    rows = [
        (
            esc(c.get("obligation", "")),
            f"<code>{esc(c.get('theorem', ''))}</code>",
            esc(c.get("property", "")),
        )
        for c in claims
        if isinstance(c, dict)
    ]
    out = _table(rows, ("obligation", "theorem", "dynamic evidence (property)"))
    checks = entry.get("checks")
    cert = (
        next((c for c in checks if isinstance(c, dict) and c.get("id") == "certificate"), None)
        if isinstance(checks, list)
        else None
    )
    if cert is not None:
        status = str(cert.get("status", ""))
        out += (
            f'<p>certificate at seal time: <span class="{esc(status)}">{esc(status)}</span> '
            f"- {esc(cert.get('detail', ''))}</p>"
        )
    return out


def _files(index: int, entry: dict[str, Any]) -> str:
    try:
        rows = parse_manifest(str(entry.get("manifest", "")).encode("utf-8"))
    except BadInput as e:
        return f"<p>Manifest unreadable: {esc(e)}</p>"
    return _table(
        (
            (
                f'<a href="/api/v1/bundles/{index}/files/{quote(rel)}"><code>{esc(rel)}</code></a>',
                f"<code>{esc(digest.hex())}</code>",
            )
            for rel, digest in rows
        ),
        ("file", "BLAKE3"),
    )


def _fields(entry: dict[str, Any]) -> str:
    skip = {"manifest", "checks", "obligations", "kernel"}
    rows = []
    for k in sorted(entry):
        if k in skip:
            continue
        v = entry[k]
        text = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        rows.append((esc(k), f"<code>{esc(text)}</code>"))
    return _table(rows)


def _verdict(entry: dict[str, Any]) -> str:
    """The verdict the recorded checks give (SPEC 8): failed, partial or verified."""
    statuses = [c.get("status") for c in entry.get("checks") or [] if isinstance(c, dict)]
    if not statuses or "failed" in statuses:
        return "failed"
    return "partial" if "skipped" in statuses else "verified"


def _at_a_glance(s: Any, entry: dict[str, Any], index: int, base: str) -> str:
    """The top of a bundle entry for an auditor: the verdict at seal time, who signed it (name,
    registration, revocation) and how to check it yourself."""
    signer = str(entry.get("signer", ""))
    name, registered, revoked = "?", "not found", "no"
    try:
        row = s.store.key_row(bytes.fromhex(signer))
    except ValueError:
        row = None
    if row is not None:
        name = row.name
        registered = f"entry {row.registered_at}"
        revoked = f"yes, at entry {row.revoked_at}" if row.revoked_at is not None else "no"
    verdict = _verdict(entry)
    vkey = str(s.store.meta("vkey") or "")
    digest = str(entry.get("bundle_digest", ""))
    commands = (
        f"ledger mirror {base} --vkey '{vkey}' --home ./mirror\n"
        f"ledger verify {digest} --home ./mirror"
    )
    return (
        f'<p class="{esc(verdict)}"><strong>Verdict at seal time: {esc(verdict)}</strong></p>'
        + _table([
            ("signer", f"<code>{esc(signer)}</code> ({esc(name)}) · "
                       f'<a href="/search?q={quote(signer)}">all its entries</a>'),
            ("registered", esc(registered)), ("revoked", esc(revoked)),
        ])
        + "<h3>Verify it yourself</h3><p>The log's verifier key:</p>"
        + f"<pre>{esc(vkey)}</pre><p>Mirror the log (checking every checkpoint, tile and "
        "signature) and re-run every check of this bundle:</p>"
        + f"<pre>{esc(commands)}</pre>"
    )


async def entry(request: Request) -> Response:
    s = served(request)
    view = s.view()
    index = tree_index(view, request.path_params["index"])
    data = s.store.entry(index)
    obj = _parse(data)
    leaf = merkle.leaf_hash(data)
    proof = s.store.inclusion_proof(index, view.size)
    parts = [
        f"<h2>Entry {index}: {esc(_summary(obj))}</h2>",
        _table(
            [
                ("leaf hash", f"<code>{esc(leaf.hex())}</code>"),
                ("JSON", f'<a href="/api/v1/entries/{index}">/api/v1/entries/{index}</a>'),
            ]
        ),
    ]
    if isinstance(obj, dict) and obj.get("type") == "bundle":
        parts.append(_at_a_glance(s, obj, index, str(request.base_url).rstrip("/")))
    if isinstance(obj, dict):
        parts.append("<h3>Fields</h3>" + _fields(obj))
        if obj.get("type") == "bundle":
            kernel = obj.get("kernel")
            if isinstance(kernel, dict) and kernel:
                parts.append(
                    "<h3>Kernel</h3>" + _table((esc(k), esc(kernel[k])) for k in sorted(kernel))
                )
            parts.append("<h3>Bundle files</h3>" + _files(index, obj))
            parts.append("<h3>Checks recorded at seal time</h3>" + _checks(obj))
            parts.append("<h3>Certificate: proof obligations</h3>" + _obligations(obj))
    else:
        parts.append("<p>This entry is not canonical JSON.</p>")
    parts.append(
        f"<h3>Inclusion proof in the tree of size {view.size}</h3>"
        + _table(
            [(str(i), f"<code>{esc(b64_encode(h))}</code>") for i, h in enumerate(proof)],
            ("#", "hash (base64, sibling first)"),
        )
        + f"<p>Root <code>{esc(b64_encode(view.checkpoint.root))}</code></p>"
    )
    note = published_note(s.store, view.note)
    parts.append("<h3>Checkpoint</h3><pre>" + esc(note.decode("utf-8", "replace")) + "</pre>")
    return page(f"entry {index}", "".join(parts))
