"""Connection limits of the ledger's HTTP servers, on public APIs only (issue 30).

uvicorn runs whatever ``asyncio.Protocol`` class its ``Config(http=...)`` names. ``guarded``
makes one that *holds* uvicorn's own HTTP/1.1 protocol (httptools, else h11) and passes it every
call of asyncio's protocol interface, with limits hostile clients cannot exhaust around it:

* at most ``max_connections`` open: a new connection over the cap closes the oldest **idle** one
  (no request in progress), or itself when every connection is busy;
* a connection must complete a request head within ``idle_timeout`` seconds of opening, and
  within ``min(keep_alive, idle_timeout)`` of its last answer, however it trickles bytes;
* a request in progress for more than ``request_timeout`` seconds (a client that never reads its
  answer, or uploads forever) is closed;
* over httptools (which buffers a header without bound) a request head over ``head_bytes`` is
  answered 400 and the connection closed (h11 bounds it itself: ``h11_max_incomplete_event_size``).

What a connection is doing is read from two public sides: the bytes it sends, through a parser
of its own (``httptools.HttpRequestParser``, httptools' public API; ``Watch``), and the requests
the app runs for it, through ``Tracker``, a pure ASGI wrapper that finds the connection by the
``client`` address of the request's scope (``server_config`` turns uvicorn's proxy headers off, so
that address is the socket's peer). Nothing of uvicorn is read but the asyncio interface.

With ``answers`` (``make_app``'s prebuilt tile and checkpoint answers) and httptools, a chunk of
bytes that is exactly one plain keep-alive HTTP/1.1 ``GET`` of a path ``answers`` holds, on a
connection with no request in flight, is answered here in one write (the status and date lines
uvicorn writes, then the same header lines and body the ASGI app sends), without a task, the ASGI
layers or Starlette (issue 12); the inner protocol never sees that request. Everything else
(HEAD, ``If-None-Match``, a query, ``%``-escapes, pipelined requests, ``Connection: close``,
HTTP/1.0, the access log on, a client not reading) goes to uvicorn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any, ClassVar, Protocol, cast

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("ledger.http.guard")


class Answer(Protocol):
    wire: bytes  # header lines and body, after the status and date lines


class FastAnswers(Protocol):
    def get(self, path: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> Answer | None: ...


@dataclass(frozen=True)
class Limits:
    max_connections: int
    idle_timeout: float
    request_timeout: float
    keep_alive: float
    head_bytes: int | None  # counted here (httptools); None: the inner parser bounds heads
    answers: FastAnswers | None = None
    access_log: bool = False


def inner_protocol(parser: str) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol class for ``parser`` (``httptools`` or ``h11``), as its
    ``Config(http=parser)`` would run it."""
    if parser == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


class Guards:
    """The open connections of one server, oldest first, and each by its peer's address."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.open: dict[Guard, None] = {}
        self.by_peer: dict[tuple[str, int], Guard] = {}

    def admit(self, guard: Guard) -> bool:
        if len(self.open) >= self.limits.max_connections:
            victim = next((g for g in self.open if not g.busy()), None)
            if victim is None:
                return False
            victim.drop()
        self.open[guard] = None
        if guard.peer is not None:
            self.by_peer[guard.peer] = guard
        return True

    def forget(self, guard: Guard) -> None:
        self.open.pop(guard, None)
        if guard.peer is not None and self.by_peer.get(guard.peer) is guard:
            del self.by_peer[guard.peer]


class Tracker:
    """Pure ASGI: tells the connection's ``Guard`` when the app starts and ends a request."""

    def __init__(self, app: ASGIApp, guards: Guards) -> None:
        self.app = app
        self.guards = guards

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") if scope["type"] == "http" else None
        guard = self.guards.by_peer.get(client) if isinstance(client, tuple) else None
        if guard is None:
            await self.app(scope, receive, send)
            return
        guard.begin()
        try:
            await self.app(scope, receive, send)
        finally:
            guard.end()


class HeadTooLarge(Exception):
    pass


class Watch:
    """A second httptools parser over the bytes a connection sends: counts each request head
    (URL and headers parsed, and the bytes received while it is incomplete) against ``limit``
    and keeps what the fast path asks of the last request."""

    def __init__(self, limit: int) -> None:
        import httptools

        self.limit = limit
        self.parser = httptools.HttpRequestParser(self)
        self.errors = (httptools.HttpParserError,)
        self.off = False  # an upgrade or a malformed request: the inner protocol decides
        self.begun = self.done = 0  # messages begun and completed
        self.marks = 0  # heads and bodies completed
        self.in_body = False
        self.pending = 0  # bytes received while a head is incomplete
        self.seen = 0  # bytes of the current head's URL and headers
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.plain_get = False

    def feed(self, data: bytes) -> None:
        """Raises ``HeadTooLarge`` for a head over the limit."""
        if self.off:
            return
        marks = self.marks
        try:
            self.parser.feed_data(data)
        except self.errors as e:
            self.off = True
            if self.seen > self.limit or HeadTooLarge in (type(e.__cause__),
                                                          type(e.__context__)):
                raise HeadTooLarge from e
            return
        if self.marks != marks:  # a head or body ended in this chunk: count anew
            self.pending = 0
        elif not self.in_body:  # httptools holds a partial header unbounded
            self.pending += len(data)
            if self.pending > self.limit:
                raise HeadTooLarge

    def _count(self, n: int) -> None:
        self.seen += n
        if self.seen > self.limit:
            raise HeadTooLarge

    def on_message_begin(self) -> None:
        self.begun += 1
        self.seen = 0
        self.url = b""
        self.headers = []
        self.plain_get = False

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.marks += 1
        self.in_body = True
        p = self.parser
        self.plain_get = (
            p.get_method() == b"GET" and p.get_http_version() == "1.1"
            and p.should_keep_alive() and not p.should_upgrade()
        )

    def on_message_complete(self) -> None:
        self.marks += 1
        self.in_body = False
        self.done += 1


_DATE: list[Any] = [0, b""]  # the second and its date line


def status_and_date(status: bytes = b"200 OK") -> bytes:
    """The status line and the ``date`` line uvicorn writes first (the date cached per
    second); ``server_config`` turns its ``server`` line off."""
    now = int(time.time())
    if _DATE[0] != now:
        _DATE[1] = b"date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        _DATE[0] = now
    line: bytes = _DATE[1]
    return b"HTTP/1.1 " + status + b"\r\n" + line


TOO_LARGE = b"Request head too large."


class Guard(asyncio.Protocol):
    """One connection: uvicorn's protocol (``inner``) behind the limits of ``guards``."""

    guards: ClassVar[Guards]
    inner_class: ClassVar[type[asyncio.Protocol]]

    def __init__(self, **kwargs: Any) -> None:
        self.inner = self.inner_class(**kwargs)  # the arguments uvicorn gives its protocol
        limit = self.guards.limits.head_bytes
        self.watch = Watch(limit) if limit is not None else None
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.active = 0  # requests the app is running for this connection
        # requests handed to uvicorn, and app runs ended: the fast path waits until they agree
        # (a request uvicorn answers without the app, a 503 say, keeps it off: the safe side)
        self.forwarded = self.ended = 0
        self.busy_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's classes
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, (list, tuple)) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        self.inner.connection_made(transport)
        if not self.guards.admit(self):
            transport.close()
            return
        self.arm(self.guards.limits.idle_timeout)

    def data_received(self, data: bytes) -> None:
        watch = self.watch
        if watch is None:
            self.inner.data_received(data)
            return
        idle, begun, done = watch.begun == watch.done, watch.begun, watch.done
        try:
            watch.feed(data)
        except HeadTooLarge:
            self.refuse()
            return
        if idle and watch.begun == begun + 1 and watch.done == done + 1 and self.answer_fast():
            return
        self.forwarded += watch.done - done
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guards.forget(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def answer_fast(self) -> bool:
        """Answer the one request just read from ``answers``, when it is plain (see above)."""
        limits, watch, transport = self.guards.limits, self.watch, self.transport
        if (limits.answers is None or watch is None or transport is None or self.active
                or self.forwarded != self.ended):
            return False  # never ahead of an answer uvicorn still owes (pipelining)
        url = watch.url
        if (
            not watch.plain_get or limits.access_log
            or (url[:6] != b"/tile/" and url != b"/checkpoint")
            or b"%" in url or b"?" in url or b"#" in url
            or transport.is_closing() or transport.get_write_buffer_size()
            or any(k == b"if-none-match" for k, _ in watch.headers)
        ):
            return False
        try:
            answer = limits.answers.get(url.decode("ascii"), watch.headers)
        except Exception:  # the ASGI path answers (or reports) it
            return False
        if answer is None:
            return False
        transport.write(status_and_date() + answer.wire)
        self.arm(min(limits.keep_alive, limits.idle_timeout))
        return True

    def refuse(self) -> None:
        log.warning("Request head too large.")
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(
                status_and_date(b"400 Bad Request")
                + b"content-type: text/plain; charset=utf-8\r\n"
                + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(TOO_LARGE)
                + TOO_LARGE
            )
            self.transport.close()

    def begin(self) -> None:
        if not self.active:
            self.busy_since = time.monotonic()
        self.active += 1

    def end(self) -> None:
        self.active -= 1
        self.ended += 1
        if not self.active and self.transport is not None and not self.transport.is_closing():
            limits = self.guards.limits
            self.arm(min(limits.keep_alive, limits.idle_timeout))

    def busy(self) -> bool:
        return self.active > 0

    def drop(self) -> None:
        self.guards.forget(self)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def arm(self, delay: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(delay, self.check)

    def check(self) -> None:
        self.timer = None
        if self.transport is None or self.transport.is_closing():
            return
        if not self.busy():
            self.drop()  # no complete request head in time
            return
        limits = self.guards.limits
        if time.monotonic() - self.busy_since >= limits.request_timeout:
            self.drop()
            return
        self.arm(min(limits.idle_timeout, limits.request_timeout))


def guarded(limits: Limits, parser: str) -> type[Guard]:
    """A ``Guard`` class of its own (its connections, its limits) over uvicorn's protocol for
    ``parser``; ``Tracker(app, cls.guards)`` must wrap the app it serves."""
    return type("Guarded", (Guard,), {
        "guards": Guards(limits), "inner_class": inner_protocol(parser),
    })
