"""The one bounded HTTP client of the ledger: every outgoing request goes through ``HttpClient``
(``ledger mirror``, ``ledger witness add-checkpoint``, ``ledger submit``).

Each request is bounded four ways, whatever the peer does:

* **time**: an overall deadline for the whole operation (``timeout``, set again with
  ``restart``) and a deadline per request (``request_timeout``); every socket operation (connect,
  each read, each write) waits at most until the nearer of the two, so a server that trickles
  bytes (headers or body) is cut off at the deadline, not kept alive by each new byte;
* **size**: a ``Content-Length`` over the limit is refused before the body is read, and the body
  is counted while it streams (an endless answer is cut at the limit); an error answer (any status
  not asked for) is read for at most ``MAX_ERROR_BODY`` bytes, for the message;
* **content type**: a successful answer must have one of the media types the caller names (an
  HTML maintenance page served with status 200 is refused, not parsed);
* **redirects**: a GET follows at most ``MAX_REDIRECTS`` redirects, and only to the same scheme,
  host and port; a redirect anywhere else, or any redirect of a POST, is refused.

Every failure is ``CannotCheck`` (exit 3: the peer could not be used) with one printable line
naming the URL; judging the bytes of a successful answer is the caller's job.
"""

from __future__ import annotations

import os
import threading
import time
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from ledger.errors import BadInput, CannotCheck, VerificationFailed

if typing.TYPE_CHECKING:
    import ssl

MAX_ERROR_BODY = 4096
MAX_REDIRECTS = 3
DEFAULT_TIMEOUT = 900.0  # seconds for one whole operation (a mirror sync, a submission)
REQUEST_TIMEOUT = 60.0  # seconds for one request, from connect to the last byte of the answer
CONNECT_TIMEOUT = 10.0

# media types accepted for a 200 answer ("" is an answer without Content-Type)
BYTES = ("application/octet-stream", "binary/octet-stream", "text/plain", "")
TEXT = ("text/plain", "")
JSON = ("application/json",)

_REDIRECTS = (301, 302, 303, 307, 308)


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


def bounded_transport(max_connections: int = 8) -> httpx.HTTPTransport:
    """An httpx transport whose sockets obey the per-thread deadline of ``HttpClient``."""
    t = httpx.HTTPTransport(
        verify=shared_tls_context(), limits=httpx.Limits(max_connections=max_connections)
    )
    old = t._pool
    t._pool = httpcore.ConnectionPool(
        ssl_context=old._ssl_context,
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        network_backend=_Backend(),
    )
    old.close()
    return t


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
                    headers=dict(headers or {}), timeout=timeout,
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
        buf = bytearray()
        for chunk in r.iter_bytes():
            buf += chunk
            if len(buf) > cap:
                if not good:
                    del buf[cap:]
                    break
                raise CannotCheck(f"{url}: {self.what}'s answer is over the {limit}-byte limit")
            if time.monotonic() > at:
                raise CannotCheck(f"cannot reach {self.what} at {url}: no complete answer in "
                                  "time")
        return Answer(url, r.status_code, r.headers, bytes(buf))
