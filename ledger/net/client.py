"""The one bounded HTTP client of the ledger: every outgoing request goes through ``HttpClient``
(``ledger mirror``, ``ledger witness add-checkpoint``, ``ledger submit``, ``ledger receipt
refresh``), or through ``LeanGet``, its lean path for plain GETs of static files (``ledger
mirror`` from a static location, for what its pipelined client, ``ledger.net.pipeline``, hands
back), which shares the client's deadline and request count and hands anything unusual back to
it.

Each request is bounded four ways, whatever the peer does:

* **time**: an overall deadline for the whole operation (``timeout``, set again with
  ``restart``) and a deadline per request (``request_timeout``); every socket operation (connect,
  each read, each write) waits at most until the nearer of the two, so a server that trickles
  bytes (headers or body) is cut off at the deadline, not kept alive by each new byte;
* **size**: a ``Content-Length`` over the limit is refused before the body is read, and the body
  is counted while it streams (an endless answer is cut at the limit); an error answer (any status
  not asked for) is read for at most ``MAX_ERROR_BODY`` bytes, for the message. The limit holds
  for the decoded body: the client asks for ``gzip`` only and decodes one ``gzip`` or ``deflate``
  layer itself, never more than the limit allows (``_Decoded``), so a compression bomb costs no
  more memory than an honest answer; stacked or unknown encodings are refused;
* **content type**: a successful answer must have one of the media types the caller names (an
  HTML maintenance page served with status 200 is refused, not parsed);
* **redirects**: a GET follows at most ``MAX_REDIRECTS`` redirects, and only to the same scheme,
  host and port; a redirect anywhere else, or any redirect of a POST, is refused.

Every failure is ``CannotCheck`` (exit 3: the peer could not be used) with one printable line
naming the URL; judging the bytes of a successful answer is the caller's job.
"""

from __future__ import annotations

import http.client as http_client
import os
import socket
import threading
import time
import typing
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from ledger.core.errors import BadInput, CannotCheck, VerificationFailed

if typing.TYPE_CHECKING:
    import ssl

MAX_ERROR_BODY = 4096
MAX_LEAN_ERROR_BODY = 4096  # what LeanGet reads of an answer it hands back to HttpClient
MAX_REDIRECTS = 3
DEFAULT_TIMEOUT = 900.0  # seconds for one whole operation (a mirror sync, a submission)
REQUEST_TIMEOUT = 60.0  # seconds for one request, from connect to the last byte of the answer
CONNECT_TIMEOUT = 10.0

# media types accepted for a 200 answer ("" is an answer without Content-Type)
BYTES = ("application/octet-stream", "binary/octet-stream", "text/plain", "")
TEXT = ("text/plain", "")
JSON = ("application/json",)

_REDIRECTS = (301, 302, 303, 307, 308)
ACCEPT_ENCODING = "gzip"  # what every request asks for; _Decoded decodes it within the limit
_ZLIB_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 15}  # the encodings _Decoded takes


class BadAnswer(VerificationFailed):
    """An answer received in full whose bytes do not match what the peer signed or promised (a
    tile that does not match the signed checkpoint, a malformed note): exit 1 for that data. It is
    never evidence against the log itself (only two signed checkpoints that disagree are)."""


class _Deadline(threading.local):
    at: float | None = None


_deadline = _Deadline()


def _remaining(timeout: float | None) -> float | None:
    """``timeout`` shortened to what is left before this thread's deadline."""
    at = _deadline.at
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _remaining(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # one write call may send a large body: send it in pieces, each under the deadline
        view = memoryview(buffer)
        for i in range(0, len(view), 1 << 16):
            self.inner.write(bytes(view[i : i + (1 << 16)]), _remaining(timeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: typing.Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self.inner.start_tls(ssl_context, server_hostname, _remaining(timeout)))

    def get_extra_info(self, info: str) -> typing.Any:
        return self.inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's socket backend with every operation bounded by the thread's deadline."""

    def __init__(self) -> None:
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self.inner.connect_tcp(
            host, port, _remaining(timeout), local_address, socket_options
        )
        return _Stream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


_TLS: dict[tuple[str, str], ssl.SSLContext] = {}
_TLS_LOCK = threading.Lock()


def shared_tls_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context, made once per process (per ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``): loading the CA bundle costs 10-60 ms of CPU, which every new client paid
    (a third of a `submit`'s client CPU on loopback, issue 13's campaign)."""
    key = (os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))
    with _TLS_LOCK:
        ctx = _TLS.get(key)
        if ctx is None:
            ctx = _TLS[key] = httpx.create_ssl_context()
        return ctx


def bounded_transport(max_connections: int = 8) -> httpx.BaseTransport:
    """An httpx transport whose sockets obey the per-thread deadline of ``HttpClient``: an
    httpcore pool over ``_Backend``, behind ``PoolTransport``."""
    return PoolTransport(httpcore.ConnectionPool(
        ssl_context=shared_tls_context(),
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        network_backend=_Backend(),
    ))


class PoolTransport(httpx.BaseTransport):
    """What ``httpx.HTTPTransport`` does over an httpcore pool of our own (httpx has no public
    way to give its transport a network backend), on both libraries' public API only (issue
    30): each request handed to ``pool`` as an httpcore request, each of httpcore's errors
    raised as httpx's of the same name (``httpx_errors``)."""

    def __init__(self, pool: httpcore.ConnectionPool) -> None:
        self.pool = pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port,
                             target=url.raw_path),
            headers=request.headers.raw,
            content=typing.cast(Iterable[bytes], request.stream),
            extensions=request.extensions,
        )
        with httpx_errors():
            resp = self.pool.handle_request(req)
        body = typing.cast(Iterable[bytes], resp.stream)  # a sync pool's answers are sync
        return httpx.Response(status_code=resp.status, headers=resp.headers,
                              stream=_Body(body), extensions=resp.extensions)

    def close(self) -> None:
        self.pool.close()


class _Body(httpx.SyncByteStream):
    """An httpcore answer's body as httpx reads it, errors mapped as ``httpx_errors``."""

    def __init__(self, stream: Iterable[bytes]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with httpx_errors():
            yield from self.stream

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


@contextmanager
def httpx_errors() -> Iterator[None]:
    """httpcore's exceptions raised as httpx's of the same name (``ReadTimeout``,
    ``ConnectError``, ...), the nearest class of its ancestry that httpx has, as
    ``httpx.HTTPTransport`` maps them; anything else unchanged."""
    try:
        yield
    except Exception as e:
        for cls in type(e).__mro__:
            mapped = getattr(httpx, cls.__name__, None) if cls.__module__.startswith(
                "httpcore") else None
            if isinstance(mapped, type) and issubclass(mapped, httpx.HTTPError):
                raise mapped(str(e)) from e
        raise


def oneline(text: str, limit: int = 200) -> str:
    """``text`` as one printable line of at most ``limit`` characters (for error messages)."""
    clean = "".join(c if c.isprintable() else " " for c in text)
    clean = " ".join(clean.split())
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


def media_type(headers: httpx.Headers) -> str:
    value: str = headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


@dataclass(frozen=True)
class Answer:
    url: str
    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def media_type(self) -> str:
        return media_type(self.headers)

    def snippet(self) -> str:
        """The start of the body as one printable line (for error messages)."""
        return oneline(self.body[:300].decode("utf-8", "replace"))


def check_base_url(url: str, what: str) -> str:
    """``url`` without a trailing slash; BadInput unless it is http(s)://host[:port][/path]."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as e:
        raise BadInput(f"{what} URL {oneline(url)!r} is malformed: {e}") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{what} URL must start with http:// or https:// and name a host, got "
                       f"{oneline(url)!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise BadInput(f"{what} URL must not carry a query, fragment or credentials")
    return url.rstrip("/")


def _origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    port = p.port or (443 if p.scheme == "https" else 80)
    return p.scheme, (p.hostname or "").lower(), port


class _Decoded:
    """The body of an answer as its ``Content-Encoding`` says, decoded a chunk at a time and
    never past ``cap + 1`` bytes however well the chunk compresses (httpx's own decoders inflate
    a whole network read at once, and stack: 3 KB of ``gzip, gzip`` are 2 GiB in one call).
    Takes no encoding, ``identity``, or one ``gzip`` / ``x-gzip`` / ``deflate`` layer (a
    ``deflate`` body with or without its zlib header); anything else is ``CannotCheck``."""

    def __init__(self, header: str, where: str) -> None:
        codings = [c.strip().lower() for c in header.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self.where = where
        self.raw_deflate = False
        self.inflate: typing.Any = None
        if not codings:
            return
        if len(codings) > 1 or codings[0] not in _ZLIB_WBITS:
            raise CannotCheck(f"{where} sent Content-Encoding {oneline(header, 60)!r}; only "
                              f"one layer of gzip or deflate is taken")
        self.raw_deflate = codings[0] == "deflate"
        self.inflate = zlib.decompressobj(_ZLIB_WBITS[codings[0]])

    def feed(self, chunk: bytes, room: int) -> bytes:
        """At most ``room`` (>= 1) decoded bytes of ``chunk``; more than that left undecoded
        means the body is over the caller's limit, which the caller sees by the length."""
        if self.inflate is None:
            return chunk
        try:
            out: bytes = self.inflate.decompress(chunk, room)
        except zlib.error as e:
            if not self.raw_deflate:
                raise CannotCheck(f"{self.where} sent a body that does not decode ({e})") from e
            # "deflate" as some servers send it: raw DEFLATE without the zlib header
            self.raw_deflate = False
            self.inflate = zlib.decompressobj(-15)
            return self.feed(chunk, room)
        self.raw_deflate = False  # the header was there: no second guess later
        return out

    def finish(self) -> None:
        """The encoded body ended: it must have ended the compressed stream, with nothing
        after it."""
        if self.inflate is not None and (not self.inflate.eof or self.inflate.unused_data):
            raise CannotCheck(f"{self.where} sent a compressed body that is truncated or "
                              "followed by other bytes")


class HttpClient:
    """Bounded requests to one server (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        what: str = "the server",
        timeout: float | None = DEFAULT_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        client: httpx.Client | None = None,
        max_connections: int = 8,
    ) -> None:
        self.base = check_base_url(base_url, what)
        self.what = what
        self.timeout = timeout
        self.request_timeout = request_timeout
        self.own = client is None
        self.client = client or httpx.Client(
            transport=bounded_transport(max_connections),
            timeout=httpx.Timeout(request_timeout, connect=CONNECT_TIMEOUT),
            follow_redirects=False,
            headers={"Accept-Encoding": ACCEPT_ENCODING},
        )
        self.requests = 0
        self.deadline: float | None = None
        self.restart()

    def restart(self, timeout: float | None = None) -> None:
        """Start a new overall deadline (``timeout`` seconds, default the constructor's)."""
        t = self.timeout if timeout is None else timeout
        self.deadline = None if t is None else time.monotonic() + t

    def close(self) -> None:
        if self.own:
            self.client.close()

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    # -- requests --------------------------------------------------------------------------------

    def get(
        self,
        path: str,
        limit: int,
        params: Sequence[tuple[str, str]] | None = None,
        types: Sequence[str] = BYTES,
        ok: Iterable[int] = (200,),
    ) -> Answer:
        return self.request("GET", path, limit, params=params, types=types, ok=ok)

    def post(
        self,
        path: str,
        content: bytes,
        limit: int,
        headers: Mapping[str, str] | None = None,
        types: Sequence[str] = BYTES,
        ok: Iterable[int] = (200,),
    ) -> Answer:
        return self.request(
            "POST", path, limit, content=content, headers=headers, types=types, ok=ok
        )

    def get_ok(
        self,
        path: str,
        limit: int,
        params: Sequence[tuple[str, str]] | None = None,
        types: Sequence[str] = BYTES,
    ) -> Answer:
        """GET that must answer 200 (anything else is ``CannotCheck`` naming the status)."""
        a = self.get(path, limit, params, types)
        if a.status != 200:
            raise self.status_error(a)
        return a

    def status_error(self, a: Answer) -> CannotCheck:
        what = f" ({a.media_type}: {a.snippet()})" if a.body else ""
        return CannotCheck(f"{a.url}: {self.what} answered HTTP {a.status}{what}")

    def request(
        self,
        method: str,
        path: str,
        limit: int,
        params: Sequence[tuple[str, str]] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        types: Sequence[str] = BYTES,
        ok: Iterable[int] = (200,),
    ) -> Answer:
        """One request; the answer of any status (``ok`` ones type-checked and read up to
        ``limit`` bytes, the others up to ``MAX_ERROR_BODY``)."""
        url = self.url(path)
        wanted = set(ok)
        for _hop in range(MAX_REDIRECTS + 1):
            a = self._once(method, url, limit, params, content, headers, types, wanted)
            if a.status not in _REDIRECTS or a.status in wanted:
                return a
            url = self._redirect(method, url, a)
            params = None  # the Location carries its own query
        raise CannotCheck(f"{url}: {self.what} redirected more than {MAX_REDIRECTS} times")

    def _redirect(self, method: str, url: str, a: Answer) -> str:
        loc = a.headers.get("location")
        if not loc:
            raise CannotCheck(f"{url}: {self.what} answered HTTP {a.status} without a Location")
        target: str = urljoin(url, loc)
        if method != "GET":
            raise CannotCheck(f"{url}: {self.what} redirected a {method} to "
                              f"{oneline(target)!r}: refused")
        try:
            same = _origin(target) == _origin(url)
        except ValueError:
            same = False
        if not same:
            raise CannotCheck(
                f"{url}: {self.what} redirected to another host ({oneline(target)!r}): refused"
            )
        return target

    @contextmanager
    def _bounded(self) -> Iterator[float]:
        now = time.monotonic()
        at = now + self.request_timeout
        if self.deadline is not None:
            at = min(at, self.deadline)
        if at <= now:
            raise CannotCheck(f"{self.what}: the {self.timeout:g} s deadline has passed")
        saved = _deadline.at
        _deadline.at = at
        try:
            yield at
        finally:
            _deadline.at = saved

    def _once(
        self,
        method: str,
        url: str,
        limit: int,
        params: Sequence[tuple[str, str]] | None,
        content: bytes | None,
        headers: Mapping[str, str] | None,
        types: Sequence[str],
        ok: set[int],
    ) -> Answer:
        self.requests += 1
        with self._bounded() as at:
            left = max(0.001, at - time.monotonic())
            timeout = httpx.Timeout(min(left, self.request_timeout),
                                    connect=min(left, CONNECT_TIMEOUT))
            try:
                req = self.client.build_request(
                    method, url, params=list(params or []), content=content,
                    headers={"Accept-Encoding": ACCEPT_ENCODING, **(headers or {})},
                    timeout=timeout,
                )
                try:
                    r = self.client.send(req, stream=True)
                except httpx.RemoteProtocolError:
                    if method != "GET":
                        raise
                    # a kept-alive connection the server closed while idle: once more, on a
                    # fresh connection (a GET is idempotent)
                    r = self.client.send(req, stream=True)
                try:
                    return self._read(r, url, limit, types, ok, at)
                finally:
                    r.close()
            except httpx.TimeoutException as e:
                raise CannotCheck(f"cannot reach {self.what} at {url}: no complete answer in "
                                  f"time ({oneline(type(e).__name__)})") from e
            except httpx.HTTPError as e:
                raise CannotCheck(f"cannot reach {self.what} at {url}: "
                                  f"{oneline(str(e) or type(e).__name__)}") from e
            except httpcore.TimeoutException as e:  # raised by our backend outside httpx's map
                raise CannotCheck(f"cannot reach {self.what} at {url}: no complete answer in "
                                  "time") from e
            except (httpcore.NetworkError, httpcore.ProtocolError, OSError) as e:
                raise CannotCheck(f"cannot reach {self.what} at {url}: "
                                  f"{oneline(str(e) or type(e).__name__)}") from e

    def _read(
        self,
        r: httpx.Response,
        url: str,
        limit: int,
        types: Sequence[str],
        ok: set[int],
        at: float,
    ) -> Answer:
        good = r.status_code in ok
        cap = limit if good else MAX_ERROR_BODY
        if good:
            mt = media_type(r.headers)
            if mt not in types:
                raise CannotCheck(
                    f"{url}: {self.what} answered {mt or 'no content type'} where "
                    f"{' or '.join(t for t in types if t) or 'no content type'} was expected"
                )
            length = r.headers.get("content-length", "")
            if length and (not length.isascii() or not length.isdigit()):
                raise CannotCheck(f"{url}: {self.what} sent a malformed Content-Length")
            if length and (len(length) > 19 or int(length) > limit):
                raise CannotCheck(
                    f"{url}: {self.what} announced {oneline(length, 24)} bytes, over the "
                    f"{limit}-byte limit"
                )
        # the raw bytes, decoded here within the cap (httpx's decoders are not bounded); an
        # answer built in memory (an injected transport's) comes read and decoded already
        encoding = "" if r.is_stream_consumed else r.headers.get("content-encoding", "")
        try:
            decoded = _Decoded(encoding, f"{url}: {self.what}")
        except CannotCheck:
            if good:
                raise
            return Answer(url, r.status_code, r.headers, b"")  # the status says enough
        buf = bytearray()
        for chunk in [r.content] if r.is_stream_consumed else r.iter_raw():
            try:
                buf += decoded.feed(chunk, cap + 1 - len(buf))
            except CannotCheck:
                if good:
                    raise
                break  # an error answer's message: what decoded
            if len(buf) > cap:
                if not good:
                    del buf[cap:]
                    break
                raise CannotCheck(f"{url}: {self.what}'s answer is over the {limit}-byte limit")
            if time.monotonic() > at:
                raise CannotCheck(f"cannot reach {self.what} at {url}: no complete answer in "
                                  "time")
        if good:
            decoded.finish()
        return Answer(url, r.status_code, r.headers, bytes(buf))


class _DeadlineSocket(socket.socket):
    """A socket whose every read waits at most until ``deadline`` (``time.monotonic``), so a
    peer that trickles bytes cannot stretch one request past it."""

    deadline = float("inf")

    def recv_into(self, buffer: typing.Any, nbytes: int = 0, flags: int = 0) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete answer in time")
        self.settimeout(left)
        return super().recv_into(buffer, nbytes, flags)


class _LeanConnection(http_client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        self.sock = _DeadlineSocket(fileno=self.sock.detach())


class LeanGet:
    """Plain GETs of static files over ``http.client`` keep-alive connections (one per thread),
    for the one-request-per-blob path: about a fifth of httpx's CPU per request, which is what a
    static location's tens of thousands of small files cost. The same bounds as ``HttpClient``
    (whose deadline and request count it shares): the overall deadline and ``REQUEST_TIMEOUT``
    per request, checked between reads; ``Content-Length`` and the body capped at ``limit``;
    a 200 answer's content type one of ``BYTES``. Anything it does not handle itself (a status
    other than 200, a redirect, a ``Content-Encoding``) returns None: the caller asks again
    through ``HttpClient``, which says what is wrong."""

    def __init__(self, http: HttpClient) -> None:
        parts = urlsplit(http.base)
        self.http = http
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self._local = threading.local()
        self._all: list[http_client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _lost(self, url: str, e: BaseException) -> CannotCheck:
        """The error for a request that failed on the wire; the connection is not reused."""
        self._conn(fresh=True)
        if isinstance(e, TimeoutError):
            return CannotCheck(f"cannot reach {self.http.what} at {url}: no complete answer "
                               "in time")
        return CannotCheck(f"cannot reach {self.http.what} at {url}: "
                           f"{oneline(str(e) or type(e).__name__)}")

    def _conn(self, fresh: bool = False) -> http_client.HTTPConnection:
        conn: http_client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn
        if conn is not None:
            conn.close()
        conn = _LeanConnection(self.host, self.port, timeout=CONNECT_TIMEOUT)
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()

    def get(self, path: str, limit: int) -> bytes | None:
        if self.https:
            return None  # TLS: through HttpClient (its sockets obey the deadline)
        url = f"{self.http.base}/{path}"
        now = time.monotonic()
        at = now + self.http.request_timeout
        if self.http.deadline is not None:
            at = min(at, self.http.deadline)
        if at <= now:
            raise CannotCheck(f"{self.http.what}: the {self.http.timeout:g} s deadline has passed")
        self.http.requests += 1
        for attempt in (1, 2):
            conn = self._conn(fresh=attempt == 2)
            try:
                conn.timeout = max(0.001, min(at - time.monotonic(), CONNECT_TIMEOUT))
                if conn.sock is None:
                    conn.connect()
                assert isinstance(conn.sock, _DeadlineSocket)
                conn.sock.deadline = at
                conn.sock.settimeout(max(0.001, at - time.monotonic()))
                conn.request("GET", f"{self.prefix}/{path}",
                             headers={"Accept-Encoding": "identity"})
                r = conn.getresponse()
            except (http_client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                if attempt == 1:
                    continue  # a kept-alive connection the server closed while idle
                raise CannotCheck(f"cannot reach {self.http.what} at {url}: the connection "
                                  "was closed") from None
            except (OSError, http_client.HTTPException) as e:  # TimeoutError is an OSError
                raise self._lost(url, e) from e
            try:
                return self._body(r, url, limit, at)
            except (OSError, http_client.HTTPException) as e:
                raise self._lost(url, e) from e
            except CannotCheck:
                self._conn(fresh=True)
                raise
            finally:
                r.close()
        return None  # not reached

    def _body(
        self, r: http_client.HTTPResponse, url: str, limit: int, at: float
    ) -> bytes | None:
        mt = (r.getheader("content-type") or "").split(";", 1)[0].strip().lower()
        encoding = (r.getheader("content-encoding") or "identity").strip().lower()
        if r.status != 200 or mt not in BYTES or encoding != "identity":
            r.read(MAX_LEAN_ERROR_BODY)
            if not r.isclosed():
                r.close()
                self._conn(fresh=True)  # do not read the rest of an unwanted answer
            return None
        length = r.getheader("content-length") or ""
        if length and (not length.isascii() or not length.isdigit() or len(length) > 19):
            raise CannotCheck(f"{url}: {self.http.what} sent a malformed Content-Length")
        if length and int(length) > limit:
            raise CannotCheck(f"{url}: {self.http.what} announced {length} bytes, over the "
                              f"{limit}-byte limit")
        buf = bytearray()
        while True:
            chunk = r.read1(1 << 16)
            if not chunk:
                break
            buf += chunk
            if len(buf) > limit:
                raise CannotCheck(f"{url}: {self.http.what}'s answer is over the {limit}-byte "
                                  "limit")
            if time.monotonic() > at:
                raise CannotCheck(f"cannot reach {self.http.what} at {url}: no complete "
                                  "answer in time")
        if length and len(buf) != int(length):
            raise CannotCheck(f"cannot reach {self.http.what} at {url}: the answer ended "
                              f"after {len(buf)} of {length} bytes")
        r.close()  # read in full: the connection serves the next request
        return bytes(buf)


def directory_client(root: Path) -> httpx.Client:
    """An HTTP client whose answers are the files of a ``ledger publish`` directory (the same
    URL space, headers as a static web server configured per docs/scale-out.md sends them): no
    request leaves the machine, so a static mirror on disk is read by the code that reads one over
    HTTP (``ledger.library.logs.MirrorLog``)."""
    from ledger.core.errors import BadInput

    if not (root / "checkpoint").is_file():
        raise BadInput(f"{root}: no static mirror here (no checkpoint file)")
    base = root.resolve()

    def answer(request: httpx.Request) -> httpx.Response:
        rel = request.url.path.lstrip("/")
        path = (base / rel).resolve()
        if base not in path.parents or not path.is_file():
            return httpx.Response(404, headers={"Content-Type": "text/plain"}, content=b"")
        headers = {"Content-Type": "text/plain; charset=utf-8" if rel == "checkpoint"
                   else "application/octet-stream"}
        if rel.startswith("tile/entries/"):
            headers["Content-Encoding"] = "gzip"
        return httpx.Response(200, headers=headers, content=path.read_bytes())

    return httpx.Client(transport=httpx.MockTransport(answer), follow_redirects=False)
