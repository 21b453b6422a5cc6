"""Pipelined HTTP/1.1 GETs of many answers from one host: ``ledger mirror``'s bundle files from
a static location (``ledger publish`` output behind nginx or an S3 gateway: one file per blob),
and its entry tiles and blob batches from any host.

One request at a time, each answer awaited before the next request is written, costs a Python
client most of its CPU in the round trip: with one file per entry fetched through
``http.client`` on eight threads, the mirror spent 382-393 µs of CPU per entry, against 100-106
pipelined; from ``ledger serve`` httpx's answers were ~24% of the mirror's GIL-holding samples.
Pipelining (RFC 9112, section 9.3.2) writes the requests ahead of the answers on a few
kept-alive connections, and reads the answers, which a server must send in the order of the
requests, from one buffer per connection: one thread, non-blocking sockets, 11-14 µs of CPU per
small file in a measurement of the fetch alone (docs/benchmarks.md).

``PipelinedGet.get_many(paths, limit, deadline, check, encodings)`` returns one item per path:
the body of a ``200`` answer, or ``None`` for a path the caller must ask again through the
one-request client, which then says what is wrong; ``check`` judges each body as it arrives,
with its header fields. The bounds are ``HttpClient``'s (whose deadline, per-request timeout and
request count the caller shares), whatever the peer does:

1. **time**: every answer must be complete within ``request_timeout`` of the moment the client
   began to wait for it (a peer that trickles bytes is cut off there), and everything by the
   overall deadline: ``CannotCheck``;
2. **size**: a head over ``MAX_HEAD_BYTES`` and a ``Content-Length`` over ``limit`` for a
   ``200`` answer are refused; the connection's bytes are framed by ``Content-Length`` only, so
   a body longer than announced is read as the head of the next answer, which cannot be framed
   (4., below);
3. **content**: a ``200`` answer whose media type is not one of ``BYTES``, or with a
   ``Content-Encoding`` not in ``encodings`` (default: only ``identity``; an encoding taken is
   handed over still encoded), and any other status, give ``None`` (asked again one by one);
4. **framing**: an answer it cannot frame (no ``Content-Length``, a ``Transfer-Encoding``, a
   malformed head, an interim ``1xx``, HTTP/1.0), an answer ``check`` refuses with ``HandBack``
   (it does not fit its request), a connection the server closes before it has answered
   anything, or a failed connect: pipelining is switched off until ``reset()`` (the mirror calls
   it once per sync) and every path not yet answered is ``None``;
5. **closing**: an answer with ``Connection: close``, or a connection the server closes or
   resets after answering some requests (a keep-alive request limit): the requests it did not
   answer in full are written again on a new connection, as often as each connection answers at
   least one (GETs are idempotent).

TLS is not handled here (every path is ``None``: the one-request client serves ``https``).
"""

from __future__ import annotations

import selectors
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from ledger.core.errors import CannotCheck
from ledger.net.client import BYTES as HTTP_BYTES

PIPELINE_CONNECTIONS = 2
PIPELINE_DEPTH = 128  # requests written ahead of their answers, per connection
MAX_HEAD_BYTES = 16 << 10
MAX_SKIPPED_BODY = 64 << 10  # the body of an answer handed back (not 200) read past, at most
RECV_BYTES = 1 << 18
BYTES = tuple(t.encode("ascii") for t in HTTP_BYTES)  # the media types HttpClient takes


# check(i, body, fields): judges the body of path i's answer as it arrives (raises to stop)
Check = Callable[[int, bytes, Mapping[bytes, bytes]], None]
_Taken = tuple[int, "Check | None", tuple[bytes, ...]]  # (limit, check, encodings taken)


class _Unframed(Exception):
    """An answer the pipeline cannot frame: pipelining is switched off."""


class HandBack(Exception):
    """Raised by a ``check``: this answer does not fit its request (a file that does not hash to
    its digest, say, as a middlebox that mixes up pipelined answers would give). Pipelining is
    switched off as for an answer it cannot frame, and this path and every one not answered yet
    are handed back: asked again one at a time, where the same answer is judged for what it is."""


class _Conn:
    """One connection: bytes to write, requests written and not answered yet (their indexes, in
    order), bytes received and not parsed yet."""

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.out = bytearray()
        self.waiting: deque[int] = deque()
        self.buf = bytearray()
        self.answered = 0
        self.closing = False  # the server said Connection: close: nothing more is written
        self.since = now  # when the client began to wait for the oldest unanswered request


class PipelinedGet:
    """Pipelined GETs to the host of ``base`` (see the module docstring)."""

    def __init__(
        self,
        base: str,
        what: str,
        request_timeout: float,
        connect_timeout: float,
        connections: int = PIPELINE_CONNECTIONS,
        depth: int = PIPELINE_DEPTH,
    ) -> None:
        parts = urlsplit(base)
        self.base = base.rstrip("/")
        self.what = what
        self.host = parts.hostname or ""
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        hostport = self.host if parts.port is None else f"{self.host}:{parts.port}"
        if ":" in self.host:  # an IPv6 literal
            hostport = f"[{self.host}]" if parts.port is None else f"[{self.host}]:{parts.port}"
        # a host or path that is not plain ASCII (an IDN, an unescaped space) is left to the
        # one-request client, which encodes it
        plain = (hostport + self.prefix).isascii() and not any(
            ch <= " " or ch == "\x7f" for ch in hostport + self.prefix)
        self.hostport = hostport.encode("ascii") if plain else b""
        self.usable = parts.scheme == "http" and bool(self.host) and plain
        self.on = self.usable
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.connections = max(1, connections)
        self.depth = max(1, depth)
        self.requests = 0  # requests written (the same request written again counts again)

    def reset(self) -> None:
        """Pipeline again after an answer that switched it off (a new sync: the host may have
        been restarted or reconfigured since)."""
        self.on = self.usable

    # -- the whole batch -------------------------------------------------------------------------

    def get_many(
        self,
        paths: Sequence[str],
        limit: int,
        deadline: float | None = None,
        check: Check | None = None,
        encodings: Sequence[bytes] = (b"identity",),
    ) -> list[bytes | None]:
        """The body of each path's ``200`` answer, or None: ask that path again one by one.
        ``check(i, body, fields)`` judges each body as it arrives, with its answer's header
        fields (lower-case names; the mirror: a file's BLAKE3 digest, a blob batch's count), so
        an exception it raises ends the batch at the first bad answer, before the others are
        held in memory. ``encodings``: the ``Content-Encoding`` values taken as they are (the
        body is handed over still encoded; the caller decodes it, within its own limits)."""
        out: list[bytes | None] = [None] * len(paths)
        if not self.on or not paths:
            return out
        todo: deque[int] = deque(range(len(paths)))
        sel = selectors.DefaultSelector()
        conns: list[_Conn] = []
        taken = (limit, check, tuple(e.lower() for e in encodings))
        try:
            try:
                self._run(paths, taken, deadline, todo, out, sel, conns)
            except (_Unframed, HandBack, OSError):
                self.on = False  # every path not answered yet stays None
        finally:
            for c in conns:
                self._drop(sel, c)
            sel.close()
        return out

    def _run(
        self,
        paths: Sequence[str],
        taken: _Taken,
        deadline: float | None,
        todo: deque[int],
        out: list[bytes | None],
        sel: selectors.BaseSelector,
        conns: list[_Conn],
    ) -> None:
        for _ in range(min(self.connections, len(paths))):
            conns.append(self._connect(sel, deadline))
        while todo or any(c.waiting for c in conns):
            if not conns:
                conns.append(self._connect(sel, deadline))
            for c in conns:
                self._write_ahead(c, paths, todo)
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0)
                sel.modify(c.sock, events, c)
            now = time.monotonic()
            at = min((c.since + self.request_timeout for c in conns if c.waiting),
                     default=now + self.request_timeout)
            if deadline is not None:
                at = min(at, deadline)
            if now >= at:
                raise CannotCheck(f"cannot reach {self.what} at {self.base}: no complete "
                                  "answer in time")
            for key, mask in sel.select(at - now):
                c = key.data
                if c not in conns:
                    continue  # replaced earlier in this round
                if mask & selectors.EVENT_WRITE and c.out:
                    try:
                        sent = c.sock.send(c.out)
                    except (BlockingIOError, InterruptedError):
                        sent = 0
                    except (BrokenPipeError, ConnectionResetError):
                        sent = len(c.out)  # closed: what it did not answer is asked again
                    del c.out[:sent]
                if mask & selectors.EVENT_READ:
                    try:
                        data = c.sock.recv(RECV_BYTES)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except ConnectionResetError:  # closed with requests unread: a reset
                        data = b""
                    if data:
                        c.buf += data
                        self._answers(c, paths, taken, out)
                    if not data or c.closing:
                        self._reopen(sel, conns, c, todo, deadline)

    def _write_ahead(self, c: _Conn, paths: Sequence[str], todo: deque[int]) -> None:
        if c.closing:
            return
        if not c.waiting:
            c.since = time.monotonic()
        while todo and len(c.waiting) < self.depth:
            i = todo.popleft()
            c.out += b"GET %s/%s HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: identity\r\n\r\n" % (
                self.prefix.encode("ascii"), paths[i].lstrip("/").encode("ascii"),
                self.hostport,
            )
            c.waiting.append(i)
            self.requests += 1

    # -- connections -----------------------------------------------------------------------------

    def _connect(self, sel: selectors.BaseSelector, deadline: float | None) -> _Conn:
        wait = self.connect_timeout
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        if wait <= 0:
            raise CannotCheck(f"cannot reach {self.what} at {self.base}: no complete answer "
                              "in time")
        sock = socket.create_connection((self.host, self.port), timeout=wait)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        c = _Conn(sock, time.monotonic())
        sel.register(sock, selectors.EVENT_READ, c)
        return c

    def _drop(self, sel: selectors.BaseSelector, c: _Conn) -> None:
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    def _reopen(
        self,
        sel: selectors.BaseSelector,
        conns: list[_Conn],
        c: _Conn,
        todo: deque[int],
        deadline: float | None,
    ) -> None:
        """The server closed ``c`` (perhaps inside an answer) or said it would: what
        it did not answer is written again on a new connection (none when nothing is left to
        ask), provided it answered something (a server that answers nothing on a connection is
        not retried)."""
        if c.waiting and c.answered == 0:
            raise _Unframed("the connection closed before any answer")
        todo.extendleft(reversed(c.waiting))
        self._drop(sel, c)
        conns.remove(c)
        if todo:
            conns.append(self._connect(sel, deadline))

    # -- answers ---------------------------------------------------------------------------------

    def _answers(self, c: _Conn, paths: Sequence[str], taken: _Taken,
                 out: list[bytes | None]) -> None:
        """Every complete answer in ``c.buf``, in the order of ``c.waiting``."""
        limit, check, encodings = taken
        while c.buf:
            if not c.waiting:
                raise _Unframed("bytes no request asked for")
            end = c.buf.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES)
            if end < 0:
                if len(c.buf) >= MAX_HEAD_BYTES:
                    raise _Unframed("an answer head over the limit")
                return
            status, length, fields = _head(bytes(c.buf[:end]))
            usable = status == 200 and fields.get(b"content-type", b"").split(b";", 1)[0] \
                .strip().lower() in BYTES \
                and fields.get(b"content-encoding", b"identity").lower() in encodings
            if usable and length > limit:
                raise CannotCheck(f"{self.base}/{paths[c.waiting[0]]}: {self.what} announced "
                                  f"{length} bytes, over the {limit}-byte limit")
            if not usable and length > MAX_SKIPPED_BODY:
                raise _Unframed("a long answer handed back")
            stop = end + 4 + length
            if len(c.buf) < stop:
                return
            i = c.waiting.popleft()
            if usable:
                body = bytes(c.buf[end + 4 : stop])
                if check is not None:
                    check(i, body, fields)
                out[i] = body
            del c.buf[:stop]
            c.answered += 1
            c.since = time.monotonic()
            if b"close" in fields.get(b"connection", b"").lower():
                c.closing = True
                if c.buf:
                    raise _Unframed("bytes after an answer that closes the connection")
                return


def _head(head: bytes) -> tuple[int, int, dict[bytes, bytes]]:
    """(status, Content-Length, the header fields: lower-case names, values stripped; a name
    given twice keeps its values joined by ``, ``)."""
    lines = head.split(b"\r\n")
    first = lines[0].split(b" ", 2)
    if len(first) < 2 or first[0] != b"HTTP/1.1" or len(first[1]) != 3 \
            or not first[1].isdigit():
        raise _Unframed("not an HTTP/1.1 status line")
    status = int(first[1])
    if status < 200:
        raise _Unframed("an interim answer")
    fields: dict[bytes, bytes] = {}
    length: int | None = None
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise _Unframed("a malformed header line")
        name = name.lower()
        value = value.strip()
        if name == b"content-length":
            if not value.isdigit() or len(value) > 19 or (
                    length is not None and int(value) != length):
                raise _Unframed("a malformed Content-Length")
            length = int(value)
        elif name == b"transfer-encoding":
            raise _Unframed("a Transfer-Encoding")
        fields[name] = fields[name] + b", " + value if name in fields else value
    if length is None:
        if status in (204, 304):
            length = 0
        else:
            raise _Unframed("an answer without Content-Length")
    return status, length, fields
