"""HTML pages of the public mirror (SPEC 9, "HTML pages for people"; issue 11, pages for auditors).

* ``/``: recent entries and the search box;
* ``/entry/{index}``: one entry; for a bundle, at the top, the verdict at seal time, the signer's
  name and status (linking its key page), the proof obligations with their status, and a "verify
  it yourself" box (the log's verifier key, the exact offline command, the receipt to download);
  then the fields, kernel, bundle files, checks, inclusion proof and checkpoint;
* ``/key/{key_id}``: one node key (registered when and by which entry, revoked when and why, the
  entries it signed) and ``/keys``: every node key;
* ``/search?q=`` and ``/kernel/{name}@{version}``: ``ledger.http.web.search`` (issue 34: an
  index of the whole log, not a scan of the newest entries); lists show each entry's verdict and
  signer.

The handlers only gather values; the templates under ``ledger/http/templates``
(``ledger.http.web.render``,
Jinja2 with automatic escaping) print them. The pages need no JavaScript, and the server's
Content-Security-Policy forbids scripts anyway.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ledger.core import merkle
from ledger.core.bundle import parse_manifest
from ledger.core.canonical import loads_canonical
from ledger.core.cosigned import published_note
from ledger.core.encoding import b64_encode, hex_encode
from ledger.core.errors import BadInput
from ledger.core.verdict import obligation_states, partial_line
from ledger.http.state import (
    Served,
    base_url,
    int_param,
    served,
    tree_index,
)
from ledger.http.web import download, explain, search
from ledger.http.web.render import render
from ledger.search import row_of, verdict_of

PAGE_ENTRIES = 25
MAX_FOUND = 100  # entries a key page lists at most


def error_page(status: int, message: str) -> HTMLResponse:
    return render("error.html", {"title": str(status), "status": status, "message": message},
                  status)


def _parse(data: bytes) -> Any:
    try:
        return loads_canonical(data)
    except BadInput:
        return None


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


def _text(entry: Any, key: str) -> str:
    value = entry.get(key, "") if isinstance(entry, dict) else ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


# --- node keys --------------------------------------------------------------------------------


def _keys(s: Served, size: int) -> list[dict[str, Any]]:
    """The node keys registered inside the tree of ``size`` entries, in registration order, each
    with its revocation when that too is inside the tree (the store's key index)."""
    out = []
    for key in s.store.key_rows():
        if key.registered_at >= size:
            continue
        rev = key.revoked_at
        revoked = rev if rev is not None and rev < size else None
        out.append({
            "id": hex_encode(key.key_id), "name": key.name, "public_key": b64_encode(key.public),
            "registered": key.registered_at, "revoked": revoked,
            "reason": key.revoke_reason if revoked is not None else "",
            "status": "revoked" if revoked is not None else "active",
        })
    return out


def _rows(s: Served, size: int, indices: list[int]) -> list[dict[str, Any]]:
    """The list rows (verdict, signer, ...) of entries ``indices``, read from the store (a page of
    recent entries needs no whole-log index)."""
    names = search.key_names(s, size)
    return [search.row_view(row_of(i, s.store.entry(i)), names) for i in indices]


# --- pages --------------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    s = served(request)
    view = s.view()
    end = min(int_param(request, "before", view.size), view.size)
    start = max(0, end - PAGE_ENTRIES)
    rows = _rows(s, view.size, list(range(end - 1, start - 1, -1)))
    return render("home.html", {
        "title": "recent entries", "origin": view.checkpoint.origin, "size": view.size,
        "root": b64_encode(view.checkpoint.root), "rows": rows,
        "older": start if start > 0 else None,
    })


_KEY_ID = re.compile(r"[0-9a-f]{16}")


async def key_page(request: Request) -> Response:
    s = served(request)
    view = s.view()
    kid = request.path_params["key_id"]
    if not _KEY_ID.fullmatch(kid):
        raise BadInput("a node key id is 16 lowercase hex digits")
    key = next((k for k in _keys(s, view.size) if k["id"] == kid), None)
    if key is None:
        raise HTTPException(404, f"no node key {kid} in the tree of the latest checkpoint")
    key["registered_time"] = _text(_parse(s.store.entry(key["registered"])), "time")
    key["revoked_time"] = (
        _text(_parse(s.store.entry(key["revoked"])), "time") if key["revoked"] is not None else ""
    )
    index = search.index_of(s, view.size)
    signed = [i for i in index.by_signers([kid]) if index.rows[i].type == "bundle"]
    return render("key.html", {"title": f"node key {key['name']}", "key": key,
                               "rows": [search.row_view(index.rows[i], {kid: key["name"]})
                                        for i in signed[:MAX_FOUND]],
                               "count": len(signed), "limit": MAX_FOUND})


async def keys_page(request: Request) -> Response:
    s = served(request)
    return render("keys.html", {"title": "node keys", "keys": _keys(s, s.view().size)})


# --- one entry ----------------------------------------------------------------------------------


def _checks(entry: dict[str, Any]) -> list[dict[str, str]]:
    checks = entry.get("checks")
    return [
        {"id": _text(c, "id"), "status": _text(c, "status"), "detail": _text(c, "detail"),
         "tool": " ".join(_text(c, k) for k in ("tool", "version")).strip()}
        for c in (checks if isinstance(checks, list) else []) if isinstance(c, dict)
    ]


def _obligations(entry: dict[str, Any], checks: list[dict[str, str]]) -> list[dict[str, str]]:
    """The claimed obligations, each with the status the ``certificate`` check recorded for it at
    seal time ("not judged" when the certificate names none: it could not run), then each of
    PO1-PO8 the bundle does not claim ("not claimed"), every row with its words."""
    cert = next((c for c in checks if c["id"] == "certificate"), None)
    judged = {po: status for po, status, _ in obligation_states(cert["detail"] if cert else "")}
    claims = entry.get("obligations")
    rows = [
        {"obligation": _text(c, "obligation"), "theorem": _text(c, "theorem"),
         "property": _text(c, "property"), "words": explain.words(_text(c, "obligation")),
         "status": judged.get(_text(c, "obligation"), "not judged")}
        for c in (claims if isinstance(claims, list) else []) if isinstance(c, dict)
    ]
    claimed = {r["obligation"] for r in rows}
    return rows + [
        {"obligation": po, "theorem": "", "property": "", "words": words,
         "status": "not claimed"}
        for po, words in explain.OBLIGATION_WORDS.items() if po not in claimed
    ]


def _files(index: int, entry: dict[str, Any]) -> tuple[list[dict[str, str]], str]:
    try:
        rows = parse_manifest(str(entry.get("manifest", "")).encode("utf-8"))
    except BadInput as e:
        return [], str(e)
    return [
        {"path": rel, "digest": hex_encode(digest),
         "url": f"/api/v1/bundles/{index}/files/{quote(rel)}"}
        for rel, digest in rows
    ], ""


def _signer(s: Served, size: int, signer: str) -> dict[str, str]:
    key = next((k for k in _keys(s, size) if k["id"] == signer), None)
    if key is None:
        return {"id": signer, "name": "?", "status": "unknown",
                "status_text": "not registered in this tree"}
    def when(index: int) -> str:
        return _text(_parse(s.store.entry(index)), "time")

    status_text = f"registered by entry {key['registered']} ({when(key['registered'])})"
    if key["revoked"] is not None:
        status_text += (f", revoked by entry {key['revoked']} ({when(key['revoked'])}): "
                        f"{key['reason']}")
    else:
        status_text += ", not revoked"
    return {"id": signer, "name": key["name"], "status": key["status"],
            "status_text": status_text}


def _glance(s: Served, size: int, entry: dict[str, Any], checks: list[dict[str, str]],
            base: str, vkey: str) -> dict[str, Any]:
    """The top of a bundle entry for an auditor."""
    digest = _text(entry, "bundle_digest")
    cert = next((c for c in checks if c["id"] == "certificate"), None)
    obligations = _obligations(entry, checks)
    verdict = verdict_of(entry)
    return {
        "verdict": verdict,
        "reasons": explain.partial_reasons(checks, obligations) if verdict == "partial" else [],
        "backing": explain.BACKING,
        "partial": partial_line((c["id"], c["status"], c["detail"]) for c in checks),
        "kernel": _summary(entry),
        "digest": digest,
        "time": _text(entry, "time"),
        "signer": _signer(s, size, _text(entry, "signer")),
        "obligations": obligations,
        "certificate": cert,
        "command": verify_command(digest, vkey),
        "mirror_commands": (
            f"ledger mirror {shlex.quote(base)} --vkey {shlex.quote(vkey)} --home ./mirror\n"
            f"ledger verify {digest} --home ./mirror"
        ),
    }


def verify_command(name: str, vkey: str) -> str:
    """The offline check an entry page shows: the receipt beside the bundle's files."""
    return (f"ledger verify {shlex.quote(name)} --receipt ledger-receipt.json "
            f"--vkey {shlex.quote(vkey)}")


async def entry(request: Request) -> Response:
    s = served(request)
    view = s.view()
    index = tree_index(view, request.path_params["index"])
    data = s.store.entry(index)
    obj = _parse(data)
    vkey = str(s.store.meta("vkey") or "")
    ctx: dict[str, Any] = {
        "title": f"entry {index}", "index": index, "summary": _summary(obj),
        "leaf_hash": hex_encode(merkle.leaf_hash(data)), "vkey": vkey,
        "receipt_url": f"/api/v1/entries/{index}/receipt",
        "attestation_url": f"/api/v1/entries/{index}/attestation",
        "command": verify_command(str(index), vkey),
        "glance": None, "fields": None, "kernel": None, "kernel_name": "", "kernel_ref": "",
        "files": None, "files_error": "", "checks": None, "key_id": "", "archive": None,
        "tree_size": view.size, "root": b64_encode(view.checkpoint.root),
        "proof": [b64_encode(h) for h in s.store.inclusion_proof(index, view.size)],
        "checkpoint": published_note(s.store, view.note).decode("utf-8", "replace"),
    }
    if isinstance(obj, dict):
        skip = {"manifest", "checks", "obligations", "kernel"}
        ctx["fields"] = [(k, _text(obj, k)) for k in sorted(obj) if k not in skip]
        if obj.get("type") != "bundle" and _KEY_ID.fullmatch(_text(obj, "key_id")):
            ctx["key_id"] = _text(obj, "key_id")
    if isinstance(obj, dict) and obj.get("type") == "bundle":
        checks = _checks(obj)
        base = base_url(request)
        ctx["glance"] = _glance(s, view.size, obj, checks, base, vkey)
        ctx["checks"] = checks
        kernel = obj.get("kernel")
        if isinstance(kernel, dict) and kernel:
            ctx["kernel"] = [(k, _text(kernel, k)) for k in sorted(kernel)]
            ctx["kernel_name"] = _text(kernel, "name")
            if _text(kernel, "name") and _text(kernel, "version"):
                ctx["kernel_ref"] = f"{_text(kernel, 'name')}@{_text(kernel, 'version')}"
        ctx["files"], ctx["files_error"] = _files(index, obj)
        ctx["archive"] = {"url": f"/api/v1/bundles/{index}/bundle.tar.gz",
                          "name": download.archive_name(index),
                          "sha256": download.archive_digest(s, index)}
    return render("entry.html", ctx)
