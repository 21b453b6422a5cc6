"""The bottom of the HTTP side: per-request state and the small helpers every handler uses
(``ledger.http.server``'s read API, ``ledger.http.submit``'s endpoint,
``ledger.http.web.pages``). It imports none of them; they import it.

``Served`` is the per-app state (the store opened in the event loop's thread, the tree view, a
tile cache, the submission intake); ``served(request)`` finds it."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ledger.core.cosigned import published_note
from ledger.core.errors import BadInput, LedgerError, UnknownHash
from ledger.core.note import Checkpoint, note_text, parse_checkpoint
from ledger.core.tiles import TILE_WIDTH, entry_bundle, hash_tile, parse_tile_path
from ledger.store import Store, open_store

MAX_PARAM_DIGITS = 19  # decimal query parameters: below 2**63
TILE_CACHE_BYTES = 64 << 20


@dataclass(frozen=True)
class View:
    """The tree a request is answered from: the latest checkpoint the store holds."""

    note: bytes
    checkpoint: Checkpoint

    @property
    def size(self) -> int:
        return self.checkpoint.size


class Served:
    """Per-app state: the store (opened in the event loop's thread) and a small tile cache."""

    def __init__(
        self, home: Path, accept_submissions: bool = False, public_url: str | None = None
    ) -> None:
        self.home = home
        self.accept_submissions = accept_submissions
        self.public_url = public_url  # what pages and the feed link to (``base_url``)
        self._store: Store | None = None
        self._view: View | None = None
        self._stamp: tuple[int, int] | None = None  # Store.version() when _view was read
        self._published: bytes | None = None
        self._tiles: OrderedDict[str, bytes] = OrderedDict()
        self._tile_bytes = 0
        # submission state, set once by ``ledger.http.submit`` (the log, its rate limiter, ...)
        self.intake: object | None = None  # a ledger.http.submit.Intake, made there

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.home, read_only=True)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self._view = self._published = self._stamp = None

    def view(self) -> View:
        """The latest checkpoint's view, read again only when the store's committed state has
        changed since (``Store.version``: one cheap pragma per request instead of two queries
        and a parse)."""
        store = self.store
        stamp = store.version()
        if self._view is not None and stamp == self._stamp:
            return self._view
        try:
            note = store.checkpoint()
        except LedgerError as e:
            raise HTTPException(404, f"this ledger has no checkpoint yet ({e})") from e
        if self._view is None or self._view.note != note:
            self._view = View(note, parse_checkpoint(note_text(note)))
        self._published = None
        self._stamp = stamp
        return self._view

    def published(self) -> bytes:
        """The latest checkpoint note as ``GET /checkpoint`` serves it (``published_note``),
        kept until the store changes."""
        view = self.view()
        if self._published is None:
            self._published = published_note(self.store, view.note)
        return self._published

    def cached_tile(self, key: str, make: Callable[[], bytes]) -> bytes:
        hit = self._tiles.get(key)
        if hit is not None:
            self._tiles.move_to_end(key)
            return hit
        data = make()
        self._tiles[key] = data
        self._tile_bytes += len(data)
        while self._tile_bytes > TILE_CACHE_BYTES and self._tiles:
            _, old = self._tiles.popitem(last=False)
            self._tile_bytes -= len(old)
        return data


def served(request: Request) -> Served:
    state: Served = request.app.state.served
    return state


def int_param(request: Request, name: str, default: int | None = None) -> int:
    """A non-negative decimal query parameter; BadInput when absent (without default) or bad."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise BadInput(f"query parameter {name!r} is given more than once")
    raw = values[0] if values else None
    if raw is None:
        if default is None:
            raise BadInput(f"query parameter {name!r} is required")
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_PARAM_DIGITS:
        raise BadInput(f"query parameter {name!r} must be a non-negative decimal integer")
    return int(raw)


def text_param(request: Request, name: str, default: str | None = None) -> str | None:
    """A query parameter as text (``default`` when absent); BadInput when it is given more than
    once, as for ``int_param`` (which of two values a handler used would be a guess)."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise BadInput(f"query parameter {name!r} is given more than once")
    return values[0] if values else default


def check_public_url(url: str) -> str:
    """``ledger serve --public-url``: an ``http``/``https`` URL with a host and nothing after its
    path (no query, fragment or credentials), without its trailing ``/``; BadInput otherwise."""
    from urllib.parse import urlsplit

    if len(url) > 2000 or any(c.isspace() or ord(c) < 0x20 for c in url):
        raise BadInput("--public-url must be one URL of at most 2000 characters, no spaces")
    try:
        p = urlsplit(url)
        p.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError as e:
        raise BadInput(f"--public-url {url!r} is not a URL ({e})") from None
    if p.scheme not in ("http", "https") or not p.hostname or p.query or p.fragment or (
        p.username is not None or "@" in p.netloc
    ):
        raise BadInput(f"--public-url {url!r}: give http(s)://HOST[:PORT][/PATH], nothing more")
    return url.rstrip("/")


def base_url(request: Request) -> str:
    """The URL the pages and the feed link to: ``--public-url`` when the server was given one,
    else the address it listens on. Never the request's ``Host`` header: a client could put any
    name there and have it printed into links (and into a shared cache's copy of the page)."""
    s = served(request)
    if s.public_url is not None:
        return s.public_url
    server = request.scope.get("server") or ("127.0.0.1", 80)
    host, port = str(server[0]), server[1]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}" if port in (None, 80) else f"http://{host}:{port}"


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return Response(body, status, headers=headers, media_type="application/json")


def tree_index(view: View, index: int) -> int:
    if index >= view.size:
        raise HTTPException(404, f"no entry {index}: the tree has {view.size} entries")
    return index


def resolve(s: Served, view: View, text: str) -> int:
    if len(text) > 64 or not text.isascii() or not text.isalnum():
        raise BadInput("a hash is a bundle digest or leaf hash (hex, >= 8 digits) or an index")
    index = s.store.resolve(text)
    if index >= view.size:
        raise UnknownHash(f"{text}: not in the tree of the latest checkpoint")
    return index


def tile_bytes(s: Served, view: View, path: str) -> tuple[bytes, bool]:
    """The tile at ``path`` (``tile/...``) of the view's tree and whether it is a full tile."""
    kind, level, n, width = parse_tile_path(path)
    avail = view.size if kind == "entries" else view.size >> (8 * level)
    start = n * TILE_WIDTH
    if start + width > avail:
        raise HTTPException(404, f"{path}: beyond the tree of size {view.size}")
    full = width == TILE_WIDTH
    if kind == "entries":

        def make() -> bytes:
            return entry_bundle(list(s.store.entries(start, start + width)))

    else:

        def make() -> bytes:
            return hash_tile(level, n, width, s.store.stored_hash)

    if full:
        return s.cached_tile(path, make), True
    return make(), False
