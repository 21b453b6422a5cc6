"""The public mirror over HTTP (SPEC 9; SPEC 6 for the tiles and the proof JSON).

``make_app(home)`` builds a Starlette ASGI app over the ledger at ``home``; ``serve`` runs it under
uvicorn. Everything served is read from the store and bounded:

* ``GET /checkpoint``: the latest signed checkpoint note, with the witness cosignatures the log has
  collected for that very checkpoint (``ledger.witness``);
* ``GET /tile/<L>/<N>[.p/<W>]`` and ``GET /tile/entries/<N>[.p/<W>]``: C2SP tlog-tiles for the tree
  of the latest checkpoint; full tiles are immutable and cached forever, partial tiles briefly, and
  a tile beyond that tree is 404;
* ``GET /api/v1/...``: entries, hash lookup, inclusion and consistency proofs (SPEC 6 JSON), bundle
  files and blobs by BLAKE3 digest (never by a file-system path), and the OpenAPI description;
* the HTML pages of ``ledger.http.web.pages``; ``POST /api/v1/submit`` (``ledger.http.submit``) only
  with ``accept_submissions``.

Hostile input gets a 4xx answer: ``BadInput`` -> 400, ``UnknownHash`` and anything outside the tree
-> 404. A last-resort handler logs and answers 500 (the tests assert it never fires).
"""

from __future__ import annotations

import hashlib
import logging
import socket
import struct
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.core import merkle
from ledger.core.bundle import parse_manifest
from ledger.core.canonical import loads_canonical
from ledger.core.encoding import b64_encode, hex_decode, hex_encode
from ledger.core.entries import decode_entry
from ledger.core.errors import BadInput, LedgerError, UnknownHash
from ledger.http import cosigners, guard
from ledger.http.state import (  # re-exported: the per-request layer below the handlers
    MAX_PARAM_DIGITS,
    TILE_CACHE_BYTES,
    Served,
    View,
    int_param,
    json_response,
    resolve,
    served,
    tile_bytes,
    tree_index,
)
from ledger.http.submit import submit_endpoint
from ledger.http.web import attestations, compress, download, feed, pages, receipts
from ledger.http.web import search as web_search
from ledger.kernels import is_name_ref, kernel_of, split_ref
from ledger.store import Store, open_store

log = logging.getLogger("ledger.http.server")

FULL_TILE_CACHE = "public, max-age=31536000, immutable"
PARTIAL_TILE_CACHE = "public, max-age=5"
CHECKPOINT_CACHE = "no-cache"
MAX_BATCH_BLOBS = 64  # digests per GET /api/v1/blobs?d=...
MAX_KERNEL_ENTRIES = 64  # entries GET /api/v1/lookup/NAME@VERSION lists at most
MAX_BATCH_BYTES = 32 << 20  # a batch answer stops after this many bytes (X-Blob-Count says where)

_OPENAPI = Path(__file__).parent / "templates" / "openapi.json"
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
    ),
]


# Read-only data any web page may fetch (C2SP logs are public): CORS for GET/HEAD on these
_CORS_PREFIXES = ("/checkpoint", "/tile/", "/api/v1/", "/feed.atom")
_CORS_HEADERS = [(b"access-control-allow-origin", b"*"),
                 (b"access-control-expose-headers", b"*")]


# --- checkpoint and tiles --------------------------------------------------------------------


async def get_checkpoint(request: Request) -> Response:
    body = served(request).published()
    return Response(
        body,
        media_type="text/plain; charset=utf-8",
        headers={"Cache-Control": CHECKPOINT_CACHE},
    )


async def get_tile(request: Request) -> Response:
    s = served(request)
    path = "tile/" + request.path_params["rest"]
    raw = request.scope.get("raw_path")
    if raw is not None and raw != b"/" + path.encode("utf-8", "replace"):
        # a percent-escape is another spelling (%2f is not even "/"): C2SP has one per tile
        raise BadInput(f"{raw.decode('latin-1')[:200]!r} is not a C2SP tile path (no %-escapes)")
    data, full = tile_bytes(s, s.view(), path)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Cache-Control": FULL_TILE_CACHE if full else PARTIAL_TILE_CACHE},
    )


# --- JSON API ---------------------------------------------------------------------------------


def entry_json(store: Store, index: int) -> dict[str, Any]:
    data = store.entry(index)
    try:
        parsed: Any = loads_canonical(data)
    except BadInput:
        parsed = None
    return {
        "index": index,
        "leaf_hash": hex_encode(merkle.leaf_hash(data)),
        "entry": parsed,
        "entry_b64": b64_encode(data),
    }


async def api_entry(request: Request) -> Response:
    s = served(request)
    index = tree_index(s.view(), request.path_params["index"])
    return json_response(entry_json(s.store, index))


async def api_lookup(request: Request) -> Response:
    s = served(request)
    view = s.view()
    if is_name_ref(request.path_params["hash"]):
        return lookup_kernel(s, view.size, request.path_params["hash"])
    index = resolve(s, view, request.path_params["hash"])
    out = entry_json(s.store, index)
    digest = out["entry"].get("bundle_digest") if isinstance(out["entry"], dict) else None
    return json_response(
        {"index": index, "leaf_hash": out["leaf_hash"], "bundle_digest": digest}
    )


def lookup_kernel(s: Served, size: int, ref: str) -> Response:
    """``GET /api/v1/lookup/NAME@VERSION`` (like sumdb's ``/lookup/M@V``): every bundle entry
    of the latest tree sealing it, oldest first (at most ``MAX_KERNEL_ENTRIES``)."""
    name, version = split_ref(ref)
    # candidates from the app's in-memory index (kept up to date incrementally, as search is),
    # never a scan of every entry per request; each is then read and matched exactly
    rows = web_search.index_of(s, size).by_ref(name, version)
    found = sorted(r.index for r in rows if r.index < size
                   and kernel_of(s.store.entry(r.index)) == (name, version))
    if not found:
        raise UnknownHash(f"no entry of the latest tree seals {name}@{version}")
    items = []
    for index in found[:MAX_KERNEL_ENTRIES]:
        data = s.store.entry(index)
        entry = decode_entry(data)
        items.append({"index": index, "leaf_hash": hex_encode(merkle.leaf_hash(data)),
                      "bundle_digest": entry.bundle_digest, "signer": entry.signer})
    return json_response({"name": name, "version": version, "entries": items})


def inclusion_json(store: Store, index: int, size: int) -> dict[str, Any]:
    leaf = merkle.leaf_hash(store.entry(index))
    return {
        "index": index,
        "tree_size": size,
        "leaf_hash": b64_encode(leaf),
        "hashes": [b64_encode(h) for h in store.inclusion_proof(index, size)],
    }


async def api_inclusion(request: Request) -> Response:
    s = served(request)
    view = s.view()
    size = int_param(request, "size", view.size)
    index = int_param(request, "index")
    if size > view.size:
        raise HTTPException(404, f"size {size} is beyond the tree of size {view.size}")
    if index >= size:
        raise BadInput(f"index {index} is not below size {size}")
    obj = inclusion_json(s.store, index, size)
    # beside SPEC 6's fields: what the proof is against (the root of that tree and, for the
    # latest tree, its signed checkpoint note with any witness cosignatures)
    obj["root"] = b64_encode(s.store.root(size))
    obj["checkpoint"] = (
        s.published().decode("utf-8") if size == view.size else None
    )
    return json_response(obj)


async def api_consistency(request: Request) -> Response:
    s = served(request)
    view = s.view()
    new = int_param(request, "new", view.size)
    old = int_param(request, "old")
    if new > view.size:
        raise HTTPException(404, f"size {new} is beyond the tree of size {view.size}")
    if old > new:
        raise BadInput(f"old size {old} is larger than new size {new}")
    hashes = s.store.consistency_proof(old, new) if 0 < old < new else []
    return json_response(
        {"old_size": old, "new_size": new, "hashes": [b64_encode(h) for h in hashes]}
    )


def blob_response(data: bytes, digest: bytes) -> Response:
    try:
        data.decode("utf-8")
        media = "text/plain; charset=utf-8"
    except UnicodeDecodeError:
        media = "application/octet-stream"
    return Response(
        data,
        media_type=media,
        headers={
            "Cache-Control": FULL_TILE_CACHE,
            "X-Content-BLAKE3": hex_encode(digest),
            "Content-Security-Policy": "sandbox",
        },
    )


async def api_bundle_file(request: Request) -> Response:
    s = served(request)
    index = tree_index(s.view(), request.path_params["index"])
    path = request.path_params["path"]
    entry = loads_canonical(s.store.entry(index))
    if not isinstance(entry, dict) or entry.get("type") != "bundle":
        raise HTTPException(404, f"entry {index} is not a bundle entry")
    for rel, digest in parse_manifest(str(entry["manifest"]).encode("utf-8")):
        if rel == path:
            data = s.store.blob(digest, index)
            if data is None:
                raise HTTPException(404, f"{path}: file content is not stored here")
            return blob_response(data, digest)
    raise HTTPException(404, f"entry {index} has no file {path[:200]!r}")


async def api_blob(request: Request) -> Response:
    s = served(request)
    digest = hex_decode(request.path_params["digest"], 32, "blob digest")
    data = s.store.blob(digest)
    if data is None:
        raise HTTPException(404, f"no blob {hex_encode(digest)}")
    return blob_response(data, digest)


async def api_blobs(request: Request) -> Response:
    """Several blobs in one answer: each as a 4-byte big-endian length then the bytes.

    ``X-Blob-Count`` says how many of the requested digests the body holds (it stops early past
    ``MAX_BATCH_BYTES``); the client asks again for the rest.
    """
    s = served(request)
    wanted = request.query_params.getlist("d")
    if not wanted or len(wanted) > MAX_BATCH_BLOBS:
        raise BadInput(f"give 1 to {MAX_BATCH_BLOBS} digests as d=<hex>")
    digests = [hex_decode(d, 32, "blob digest") for d in wanted]
    # two queries for the whole batch (the lengths, then the bytes of those that fit) where a
    # query per blob listed the log's parts and cost ~11 µs a blob (docs/benchmarks.md)
    lengths = s.store.blob_lengths(digests)
    take: list[bytes] = []
    total = 0
    for digest in digests:
        if take and total > MAX_BATCH_BYTES:
            break
        if digest not in lengths:
            raise HTTPException(404, f"no blob {hex_encode(digest)}")
        take.append(digest)
        total += lengths[digest]
    found = s.store.blobs_anywhere(take)
    parts: list[bytes] = []
    for digest in take:
        data = found.get(digest)
        if data is None:  # not there any more: cannot be (append-only), but never a short answer
            raise HTTPException(404, f"no blob {hex_encode(digest)}")
        parts.append(struct.pack(">I", len(data)) + data)
    return Response(
        b"".join(parts),
        media_type="application/octet-stream",
        headers={"X-Blob-Count": str(len(parts)), "Cache-Control": FULL_TILE_CACHE},
    )


async def api_openapi(request: Request) -> Response:
    return Response(_OPENAPI.read_bytes(), media_type="application/json")


# --- the app ------------------------------------------------------------------------------------


def _etag(body: bytes) -> bytes:
    return b'"' + hex_encode(hashlib.sha256(body).digest())[:32].encode() + b'"'


def _etag_matches(wanted: bytes, tag: bytes) -> bool:
    return tag in [t.strip() for t in wanted.split(b",")] or wanted.strip() == b"*"


_OCTETS = b"application/octet-stream"
_ANSWER_OVERHEAD = 1024  # what an _Answer holds beside its body, for the cache bound
_TEXT = b"text/plain; charset=utf-8"


class _Answer:
    """A prebuilt 200 answer: the header list ``SecurityHeaders`` would send (security, CORS,
    ETag) and the body; ``not_modified`` the 304 for a matching ``If-None-Match``; ``wire`` the
    header lines and body as bytes on the wire after the status and default (date) lines."""

    __slots__ = ("body", "headers", "not_modified", "tag", "wire")

    def __init__(self, body: bytes, content_type: bytes, cache: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
        self.body = body
        self.tag = _etag(body)
        common = [(b"cache-control", cache.encode()), *(extra or [])]
        tail = [(b"etag", self.tag), *_SECURITY_HEADERS, *_CORS_HEADERS]
        self.headers = [
            *common,
            (b"content-length", str(len(body)).encode()),
            (b"content-type", content_type),
            *tail,
        ]
        self.not_modified = [*common, *tail]
        self.wire = b"".join(k + b": " + v + b"\r\n" for k, v in self.headers) + b"\r\n" + body

    async def send(self, scope: Scope, send: Send) -> None:
        for k, v in scope["headers"]:
            if k == b"if-none-match" and _etag_matches(v, self.tag):
                await send({"type": "http.response.start", "status": 304,
                            "headers": self.not_modified})
                await send({"type": "http.response.body", "body": b""})
                return
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


class Answers:
    """The prebuilt answers of ``GET /tile/...`` and ``GET /checkpoint`` (issue 12: the tiles are
    what mirrors and clients fetch in bulk), with the very headers and bodies the routed
    handlers and ``SecurityHeaders`` send.

    Full tiles are immutable: their answers are kept (LRU, ``TILE_CACHE_BYTES``) and a hit costs
    a dict lookup, without reading the view. The checkpoint's answer and the partial tiles' are
    kept until the store changes (``Served.view``). ``get`` returns None for anything else and
    for any request these paths answer with an error (bad path, beyond the tree, no checkpoint):
    the routed handlers answer those, as before."""

    def __init__(self, state: Served) -> None:
        self.state = state
        self.tiles: OrderedDict[str, _Answer] = OrderedDict()
        self.tile_bytes = 0
        self.checkpoint: tuple[bytes, _Answer] | None = None
        self.partial: tuple[View | None, dict[str, _Answer]] = (None, {})

    def get(self, path: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> _Answer | None:
        if path.startswith("/tile/") and "#" not in path:  # "#": the cache keys' suffix
            key = compress.tile_key(path, headers)  # an entry bundle: gzip when accepted
            return self.tiles.get(key) or self.tile(path, key)
        if path == "/checkpoint":
            return self.published()
        return None

    def tile(self, path: str, key: str) -> _Answer | None:
        s = self.state
        try:
            view = s.view()
            view_of, partial = self.partial
            if view_of is view and key in partial:
                return partial[key]
            data, full = tile_bytes(s, view, path[1:])
        except Exception:  # the routed handler answers it (400, 404) exactly as before
            return None
        data, extra = compress.encode(path, key, data)
        if not full:
            if view_of is not view:
                partial = {}
                self.partial = (view, partial)
            answer = _Answer(data, _OCTETS, PARTIAL_TILE_CACHE, extra)
            if len(partial) < 64:  # a tree has one partial tile per level (two forms of bundles)
                partial[key] = answer
            return answer
        answer = _Answer(data, _OCTETS, FULL_TILE_CACHE, extra)
        self.tiles[key] = answer
        self.tile_bytes += 2 * len(data) + _ANSWER_OVERHEAD
        while self.tile_bytes > TILE_CACHE_BYTES and self.tiles:
            _, old = self.tiles.popitem(last=False)
            self.tile_bytes -= 2 * len(old.body) + _ANSWER_OVERHEAD
        return answer

    def published(self) -> _Answer | None:
        try:
            body = self.state.published()
        except Exception:
            return None
        if self.checkpoint is None or self.checkpoint[0] is not body:
            self.checkpoint = (body, _Answer(body, _TEXT, CHECKPOINT_CACHE))
        return self.checkpoint[1]


class FastReads:
    """``GET /tile/...`` and ``GET /checkpoint`` answered from ``Answers`` in front of the
    router and the middleware; anything else goes to the app unchanged."""

    def __init__(self, app: ASGIApp, answers: Answers) -> None:
        self.app = app
        self.answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and (
            b"%" not in scope.get("raw_path", b"")  # another spelling: get_tile refuses it
        ):
            answer = self.answers.get(scope["path"], scope["headers"])
            if answer is not None:
                await answer.send(scope, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """Pure ASGI middleware adding the same defensive headers to every response, and CORS
    (any origin) to the read-only GETs of public data."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        add = list(_SECURITY_HEADERS)
        path = scope.get("path", "")
        if scope.get("method") in ("GET", "HEAD") and path.startswith(_CORS_PREFIXES) and not (
            path.startswith("/api/v1/submit")
        ):
            add += _CORS_HEADERS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                have = {k for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in add if k not in have]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        if _CORS_HEADERS[0] in add and scope.get("method") == "GET":
            await self.app(scope, receive, _with_etag(scope, send_with_headers))
            return
        await self.app(scope, receive, send_with_headers)


def _with_etag(scope: Scope, send: Send) -> Send:
    """For a 200 answer sent in one body message: an ``ETag`` (SHA-256 of the body, 128 bits)
    and, when the request's ``If-None-Match`` names it, 304 with no body. A streamed answer
    passes through unchanged."""
    wanted = next((v for k, v in scope.get("headers", []) if k == b"if-none-match"), b"")
    start: Message | None = None

    async def send_tagged(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start" and message.get("status") == 200:
            start = message
            return
        if start is None or message["type"] != "http.response.body":
            await send(message)
            return
        first, start = start, None
        body = message.get("body", b"")
        if message.get("more_body", False):  # streamed: no tag
            await send(first)
            await send(message)
            return
        tag = _etag(body)
        headers = [*first.get("headers", []), (b"etag", tag)]
        if _etag_matches(wanted, tag):
            keep = [(k, v) for k, v in headers if k not in (b"content-length", b"content-type")]
            await send({**first, "status": 304, "headers": keep})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({**first, "headers": headers})
        await send(message)

    return send_tagged


def _error(request: Request, status: int, message: str) -> Response:
    wants_html = "html" in request.headers.get("accept", "")
    if request.url.path.startswith(("/api/", "/tile/", "/checkpoint")) or not wants_html:
        return json_response({"error": message}, status)
    return pages.error_page(status, message)


async def on_ledger_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LedgerError)
    return _error(request, exc.http_status, str(exc))


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers) if exc.headers else None
    resp = _error(request, exc.status_code, str(exc.detail))
    if headers:
        resp.headers.update(headers)
    return resp


async def on_crash(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return json_response({"error": "internal error"}, 500)


class UIntConvertor(Convertor[int]):
    """A path integer of 1 to 19 decimal digits (below 2**63): a longer one matches no route
    (404), so ``int()`` never sees the 4,300-digit strings it refuses with ValueError."""

    regex = "[0-9]{1," + str(MAX_PARAM_DIGITS) + "}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("uint", UIntConvertor())


def routes(accept_submissions: bool) -> list[BaseRoute]:
    out: list[BaseRoute] = [
        Route("/checkpoint", get_checkpoint, methods=["GET"]),
        Route("/tile/{rest:path}", get_tile, methods=["GET"]),
        Route("/api/v1/entries/{index:uint}", api_entry, methods=["GET"]),
        Route("/api/v1/lookup/{hash}", api_lookup, methods=["GET"]),
        Route("/api/v1/proof/inclusion", api_inclusion, methods=["GET"]),
        Route("/api/v1/proof/consistency", api_consistency, methods=["GET"]),
        Route("/api/v1/bundles/{index:uint}/files/{path:path}", api_bundle_file, methods=["GET"]),
        Route("/api/v1/blobs/{digest}", api_blob, methods=["GET"]),
        Route("/api/v1/blobs", api_blobs, methods=["GET"]),
        Route("/api/v1/openapi.json", api_openapi, methods=["GET"]),
        Route("/", pages.home, methods=["GET"]),
        Route("/entry/{index:uint}", pages.entry, methods=["GET"]),
        Route("/search", web_search.search, methods=["GET"]),
        Route("/kernel/{ref:path}", web_search.kernel_page, methods=["GET"]),
        Route("/api/v1/bundles/{index:uint}/bundle.tar.gz", download.api_bundle_archive,
              methods=["GET"]),
        Route("/key/{key_id}", pages.key_page, methods=["GET"]),
        Route("/keys", pages.keys_page, methods=["GET"]),
        Route("/api/v1/entries/{index:uint}/receipt", receipts.api_receipt, methods=["GET"]),
        Route("/api/v1/entries/{index:uint}/attestation", attestations.api_attestation,
              methods=["GET"]),
        Route("/api/v1/revoked", receipts.api_revoked, methods=["GET"]),
        Route("/feed.atom", feed.atom_feed, methods=["GET"]),
        Route("/api/v1/witnesses", cosigners.api_witnesses, methods=["GET"]),  # issue 34
    ]
    if accept_submissions:
        out.append(Route("/api/v1/submit", submit_endpoint, methods=["POST"]))
    return out


def make_app(
    home: Path, accept_submissions: bool = False, public_url: str | None = None
) -> Starlette:
    """The mirror's ASGI app over the ledger at ``home`` (opened when the app starts); its pages
    link to ``public_url``, else to the address it listens on (``httpstate.base_url``)."""
    state = Served(home, accept_submissions, public_url)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.store  # noqa: B018  (open now, in the event loop's thread; fail early)
        cosigners.start(app, home)  # issue 34: witnesses asked to cosign each new checkpoint
        try:
            yield
        finally:
            cosigners.stop(app)
            state.close()

    app = Starlette(
        routes=routes(accept_submissions),
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers={
            HTTPException: on_http_error,
            LedgerError: on_ledger_error,
            Exception: on_crash,
        },
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # no 307 to another spelling of a path: 404 instead
    app.state.served = state
    answers = Answers(state)
    app.add_middleware(FastReads, answers=answers)  # outermost: in front of SecurityHeaders
    app.state.answers = answers  # server_config hands it to the protocol's fast path
    return app


# --- connection limits ----------------------------------------------------------------------------

MAX_CONNECTIONS = 4096  # open connections at once (fewer when the file-descriptor limit is low)
IDLE_TIMEOUT = 10.0  # seconds a connection may stay without a complete request head
KEEP_ALIVE = 5.0  # seconds an idle keep-alive connection is kept after an answer
UVICORN_KEEP_ALIVE = 3600  # uvicorn's own timer, never the first to fire (server_config)
REQUEST_TIMEOUT = 120.0  # seconds one request may take, from its head to the end of its answer
MAX_HEAD_BYTES = 16 << 10  # request line and headers
MAX_BACKLOG = 1024  # listen queue; also how many connections asyncio accepts per wake-up


def _soft_file_limit() -> int | None:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def listen_backlog() -> int:
    """The listen queue: ``MAX_BACKLOG``, smaller under a low open-file limit (asyncio accepts up
    to this many connections per wake-up, before the protocol can close any surplus)."""
    soft = _soft_file_limit()
    return MAX_BACKLOG if soft is None else max(16, min(MAX_BACKLOG, soft // 8))


def connection_cap(limit: int = MAX_CONNECTIONS) -> int:
    """``limit``, lowered to leave room under the process's open-file limit: asyncio accepts up
    to ``listen_backlog()`` connections per wake-up before the protocol can close the surplus, a
    few wake-ups may pass, and the process needs some descriptors of its own (database, logs)."""
    soft = _soft_file_limit()
    if soft is None:
        return limit
    return max(8, min(limit, soft - 3 * listen_backlog() - 64))


def raise_file_limit(want: int = 16384) -> None:
    """Raise the soft open-file limit towards ``want`` (never above the hard limit)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def http_parser() -> str:
    """The HTTP/1.1 implementation the server runs: ``httptools`` (llhttp, C) when installed
    (a dependency; 2x+ the requests per second of h11 on tiles), else ``h11`` (pure Python)."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


def event_loop() -> str:
    """The event loop uvicorn's ``loop="auto"`` picks: ``uvloop`` when installed, else
    ``asyncio``."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def server_config(
    app: ASGIApp,
    host: str = "127.0.0.1",
    port: int = 8080,
    access_log: bool = False,
    max_connections: int | None = None,
    idle_timeout: float = IDLE_TIMEOUT,
    request_timeout: float = REQUEST_TIMEOUT,
) -> Any:
    """The uvicorn configuration of every server of the ledger (``serve``, ``witness serve``,
    the tests' ``BackgroundServer``): uvicorn's HTTP protocol behind ``ledger.http.guard``'s
    connection limits (the app wrapped in its ``Tracker``), head limits, keep-alive.

    Proxy headers are off: a request's ``client`` is the socket's peer (the guard finds its
    connection by it; nothing here reads ``X-Forwarded-For``). uvicorn's own keep-alive timer is
    set long, since the guard closes a connection idle after an answer (``KEEP_ALIVE``) and
    answers some requests uvicorn never sees."""
    import uvicorn

    cap = connection_cap() if max_connections is None else max_connections
    answers = getattr(getattr(app, "state", None), "answers", None)
    parser = http_parser()
    limits = guard.Limits(
        max_connections=cap, idle_timeout=idle_timeout, request_timeout=request_timeout,
        keep_alive=KEEP_ALIVE, head_bytes=MAX_HEAD_BYTES if parser == "httptools" else None,
        answers=answers if isinstance(answers, Answers) else None, access_log=access_log,
    )
    protocol = guard.guarded(limits, parser)
    return uvicorn.Config(
        guard.Tracker(app, protocol.guards),
        host=host,
        port=port,
        log_level="warning",
        access_log=access_log,
        server_header=False,
        proxy_headers=False,
        lifespan="on",
        http=protocol,
        loop="auto",  # uvloop when installed (event_loop())
        timeout_keep_alive=UVICORN_KEEP_ALIVE,
        limit_concurrency=cap + 1,  # busy requests over the cap are answered 503
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        backlog=listen_backlog(),
    )


def listen_socket(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that an address in use or a bad host is one error
    line and exit 2 (uvicorn would log it on its own and exit 3)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, UnicodeError) as e:
        why = getattr(e, "strerror", None) or e
        raise BadInput(f"cannot listen on {host}:{port}: {why}") from e
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(listen_backlog())
    except OSError as e:
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    return sock


def run_server(config: Any, announce: str | None = None) -> None:
    """Bind, print ``announce`` (once listening), and serve until interrupted."""
    import uvicorn

    raise_file_limit()
    sock = listen_socket(config.host, config.port)
    if announce:
        sys.stderr.write(f"{announce} ({event_loop()}, {http_parser()})\n")
        sys.stderr.flush()
    uvicorn.Server(config).run(sockets=[sock])


def serve(
    home: Path,
    host: str = "127.0.0.1",
    port: int = 8080,
    accept_submissions: bool = False,
    access_log: bool = False,
    announce: str | None = None,
    public_url: str | None = None,
) -> None:
    """Run the mirror under uvicorn until interrupted."""
    open_store(home, read_only=True).close()
    raise_file_limit()
    config = server_config(make_app(home, accept_submissions, public_url), host, port,
                           access_log)
    run_server(config, announce)
