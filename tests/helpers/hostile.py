"""A hostile HTTP peer on 127.0.0.1 for the client campaign (tests/test_hardening_net*.py and
``scripts/hostile_campaign.py``).

``HostileServer(mode, target, upstream)`` listens on a free loopback port. A request whose path
starts with one of ``target`` gets the misbehaviour ``mode``; any other request is passed to the
real server at ``upstream`` (when given) and its answer relayed unchanged, so a client can be led
through a valid exchange up to the one answer that is hostile. Every loop the server runs is
bounded (``MAX_SECONDS`` per connection, ``MAX_BYTES`` per endless answer); only loopback
addresses are used.
"""

from __future__ import annotations

import os
import shutil
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

MAX_SECONDS = 30.0
MAX_BYTES = 1 << 30

MODES = (
    "trickle_head",  # the status line and headers, one byte at a time
    "trickle_body",  # complete headers, then the body one byte at a time
    "endless",  # 200 with no Content-Length, bytes until the client leaves
    "huge_length",  # Content-Length: 10^12
    "digits_length",  # Content-Length of 5,000 digits
    "short_body",  # Content-Length 4096, 100 bytes, then close (truncated)
    "long_body",  # Content-Length 8, then 4096 bytes
    "html_200",  # a maintenance page, status 200, text/html
    "html_503",  # a maintenance page, status 503, text/html
    "wrong_type",  # 200 with a content type the client does not expect
    "redirect_other",  # 302 to another loopback host
    "redirect_loop",  # 302 to the same URL, forever
    "garbage",  # 200, the expected content type, random bytes
    "not_http",  # random bytes instead of an HTTP answer
    "close",  # close the connection without an answer
    "stall",  # read the head, never answer, never read the body
)

_TYPES = {"/checkpoint": "text/plain; charset=utf-8", "/add-checkpoint": "text/plain"}


def _expected_type(path: str) -> str:
    for prefix, t in _TYPES.items():
        if path.startswith(prefix):
            return t
    if path.startswith("/api/v1/") and not path.startswith("/api/v1/blobs"):
        return "application/json"
    return "application/octet-stream"


def _wrong_type(path: str) -> str:
    return "text/html" if _expected_type(path) == "application/json" else "application/json"


class LoopbackServer:
    """A raw TCP server on 127.0.0.1 for the life of a ``with`` block, a thread per connection,
    each handed to ``_serve`` with ``timeout`` seconds per socket operation (subclasses write
    ``_serve``); ``url`` is its address once entered."""

    timeout = MAX_SECONDS

    def __init__(self) -> None:
        self.url = ""
        self._server: socketserver.ThreadingTCPServer | None = None

    def __enter__(self: _S) -> _S:
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(outer.timeout)
                try:
                    outer._serve(self.request)
                except OSError:
                    pass

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        self._server = srv
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        self.url = f"http://127.0.0.1:{srv.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _serve(self, sock: socket.socket) -> None:
        raise NotImplementedError


_S = TypeVar("_S", bound=LoopbackServer)


class HostileServer(LoopbackServer):
    def __init__(
        self, mode: str, target: Sequence[str] = ("/",), upstream: str | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        super().__init__()
        self.mode = mode
        self.target = tuple(target)
        self.upstream = upstream
        self.hits = 0

    # -- one connection ----------------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        rest = b""  # bytes after the last request read: the next ones, when pipelined
        while True:
            head = rest
            while b"\r\n\r\n" not in head:
                got = sock.recv(65536)
                if not got:
                    return
                head += got
                if len(head) > 1 << 16:
                    return
            raw, _, rest = head.partition(b"\r\n\r\n")
            lines = raw.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                headers[k.strip().lower()] = v.strip()
            bare = path.split("?", 1)[0]
            if bare.startswith(self.target):
                self.hits += 1
                if self.mode == "stall":
                    time.sleep(MAX_SECONDS)
                    return
                _, rest = self._read_body(sock, headers, rest)
                if not self._hostile(sock, path, bare):
                    return
                continue
            body, rest = self._read_body(sock, headers, rest)
            sock.sendall(self._relay(method, path, headers, body))

    @staticmethod
    def _read_body(
        sock: socket.socket, headers: dict[str, str], rest: bytes
    ) -> tuple[bytes, bytes]:
        """(the request's body, the bytes after it: pipelined requests are kept)."""
        n = int(headers.get("content-length", "0") or 0)
        body = rest
        while len(body) < n:
            got = sock.recv(min(1 << 20, n - len(body)))
            if not got:
                break
            body += got
        return body[:n], body[n:]

    def _relay(self, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
        if self.upstream is None:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        keep = {k: v for k, v in headers.items() if k.startswith(("content-type", "x-ledger"))}
        with httpx.Client(timeout=MAX_SECONDS) as c:
            r = c.request(method, self.upstream + path, content=body, headers=keep)
        out = [f"HTTP/1.1 {r.status_code} {r.reason_phrase}"]
        for k, v in r.headers.items():
            if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                 "content-encoding"):
                out.append(f"{k}: {v}")
        out.append(f"Content-Length: {len(r.content)}")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + r.content

    def _hostile(self, sock: socket.socket, path: str, bare: str) -> bool:
        """Send the misbehaviour; True when the connection may serve another request."""
        mode, t0 = self.mode, time.monotonic()
        ctype = _expected_type(bare)

        def head(status: str, *hdrs: str) -> bytes:
            return ("\r\n".join([f"HTTP/1.1 {status}", *hdrs]) + "\r\n\r\n").encode()

        if mode == "trickle_head":
            for b in head("200 OK", f"Content-Type: {ctype}", "Content-Length: 4") + b"abcd":
                sock.sendall(bytes([b]))
                time.sleep(0.2)
                if time.monotonic() - t0 > MAX_SECONDS:
                    break
            return False
        if mode == "trickle_body":
            sock.sendall(head("200 OK", f"Content-Type: {ctype}", "Content-Length: 100000"))
            while time.monotonic() - t0 < MAX_SECONDS:
                sock.sendall(b"x")
                time.sleep(0.05)
            return False
        if mode == "endless":
            sock.sendall(head("200 OK", f"Content-Type: {ctype}", "Connection: close"))
            chunk, sent = os.urandom(1 << 16), 0
            while sent < MAX_BYTES and time.monotonic() - t0 < MAX_SECONDS:
                sock.sendall(chunk)
                sent += len(chunk)
            return False
        if mode == "huge_length":
            sock.sendall(head("200 OK", f"Content-Type: {ctype}", "Content-Length: 1000000000000"))
            sock.sendall(b"x" * 4096)
            return False
        if mode == "digits_length":
            sock.sendall(head("200 OK", f"Content-Type: {ctype}", "Content-Length: " + "9" * 5000))
            return False
        if mode == "short_body":
            sock.sendall(head("200 OK", f"Content-Type: {ctype}", "Content-Length: 4096"))
            sock.sendall(b"y" * 100)
            return False
        if mode == "long_body":
            sock.sendall(head("200 OK", f"Content-Type: {ctype}", "Content-Length: 8"))
            sock.sendall(b"z" * 4096)
            return False
        if mode in ("html_200", "html_503"):
            page = b"<html><body><h1>Down for maintenance</h1></body></html>\n"
            status = "200 OK" if mode == "html_200" else "503 Service Unavailable"
            sock.sendall(head(status, "Content-Type: text/html; charset=utf-8",
                              f"Content-Length: {len(page)}") + page)
            return True
        if mode == "wrong_type":
            body = b'{"ok": true}\n'
            sock.sendall(head("200 OK", f"Content-Type: {_wrong_type(bare)}",
                              f"Content-Length: {len(body)}") + body)
            return True
        if mode == "redirect_other":
            port = self.url.rsplit(":", 1)[1]
            sock.sendall(head("302 Found", f"Location: http://127.0.0.2:{port}{path}",
                              "Content-Length: 0"))
            return True
        if mode == "redirect_loop":
            sock.sendall(head("302 Found", f"Location: {path}", "Content-Length: 0"))
            return True
        if mode == "garbage":
            body = os.urandom(777)
            sock.sendall(head("200 OK", f"Content-Type: {ctype}",
                              f"Content-Length: {len(body)}") + body)
            return True
        if mode == "not_http":
            sock.sendall(os.urandom(512))
            return False
        return False  # close


# -- the campaign: every client against every misbehaviour ----------------------------------------


@dataclass
class Outcome:
    client: str
    target: str
    mode: str
    result: str  # "refused" (a LedgerError), "not reached", "ACCEPTED", "CRASH"
    exit_code: int | None
    message: str
    seconds: float
    wrote_nothing: bool

    @property
    def ok(self) -> bool:
        one_line = "\n" not in self.message and 0 < len(self.message) <= 600
        return (
            self.result in ("refused", "not reached")
            and self.wrote_nothing
            and (self.result == "not reached" or (one_line and self.exit_code in (1, 3)))
        )


def _attempt(client: str, target: str, mode: str, hs: HostileServer,
             call: Callable[[], object], unchanged: Callable[[], bool]) -> Outcome:
    from ledger.core.errors import LedgerError

    t0 = time.monotonic()
    try:
        call()
        result, code, msg = "ACCEPTED", 0, ""
    except LedgerError as e:
        result, code, msg = "refused", e.exit_code, str(e)
    except Exception as e:  # a crash is what the campaign looks for
        result, code, msg = "CRASH", None, f"{type(e).__name__}: {e}"
    if hs.hits == 0 and result == "ACCEPTED":
        result = "not reached"
    return Outcome(client, target, mode, result, code, msg, time.monotonic() - t0, unchanged())


def mirror_campaign(
    upstream: str, vkey: str, base: Path, work: Path, targets: Sequence[str],
    modes: Sequence[str] = MODES, timeout: float = 2.0,
) -> list[Outcome]:
    """``ledger mirror`` (``Mirror.sync``) from a copy of the mirror ``base`` (behind the
    upstream log, so a sync needs hash tiles, entry tiles and blobs) through a hostile server."""
    from ledger.mirror import Mirror, Remote
    from ledger.store import open_store

    def state(home: Path) -> tuple[int, bytes]:
        s = open_store(home)
        try:
            return s.size(), s.checkpoint()
        finally:
            s.close()

    before = state(base)
    out = []
    for target in targets:
        for mode in modes:
            home = work / f"m-{len(out)}"
            shutil.copytree(base, home)
            with HostileServer(mode, (target,), upstream) as hs:
                remote = Remote(hs.url, timeout=timeout, request_timeout=timeout / 2)
                try:
                    out.append(_attempt(
                        "mirror", target, mode, hs,
                        lambda h=home, r=remote: Mirror(h, r, vkey).sync(),
                        lambda h=home: state(h) == before and not (h / "evidence").exists()))
                finally:
                    remote.close()
            shutil.rmtree(home, ignore_errors=True)
    return out


def witness_campaign(
    log_home: Path, witness_vkey: str, upstream: str | None, targets: Sequence[str] = ("/",),
    modes: Sequence[str] = MODES, timeout: float = 2.0,
) -> list[Outcome]:
    """``ledger witness add-checkpoint`` against a hostile witness."""
    from ledger.core.cosigned import COSIGNED_META
    from ledger.store import open_store
    from ledger.witness import request_cosignature

    def state(url: str = "") -> tuple[str | None, str | None]:
        s = open_store(log_home)
        try:
            return s.meta(COSIGNED_META), s.meta(f"witness.size {url}") if url else None
        finally:
            s.close()

    before = state()
    out = []
    for target in targets:
        for mode in modes:
            with HostileServer(mode, (target,), upstream) as hs:
                out.append(_attempt(
                    "witness add-checkpoint", target, mode, hs,
                    lambda: request_cosignature(log_home, hs.url, witness_vkey, timeout=timeout),
                    lambda: state(hs.url) == before))
    return out


_AFTER_POST = ("/api/v1/proof/inclusion", "/api/v1/lookup/")


def submit_campaign(
    log_home: Path, upstream: str, node: object, targets: Sequence[str],
    modes: Sequence[str] = MODES, timeout: float = 2.0,
) -> list[Outcome]:
    """``ledger submit`` (``submit_bundle``) through a hostile server in front of a real log
    server; targeted requests never reach the log, so nothing may be appended, except when the
    target comes after the POST (the inclusion proof): then the entry is appended once."""
    from ledger.core.bundle import Bundle
    from ledger.log import Log
    from ledger.submit import submit_bundle
    from tests.ledger.http.test_server import bundle_files, fields

    log = Log.open(log_home)
    try:
        size = log.store.size()
        out = []
        for target in targets:
            for mode in modes:
                i = 5000 + len(out)
                with HostileServer(mode, (target,), upstream) as hs:
                    out.append(_attempt(
                        "submit", target, mode, hs,
                        lambda i=i, hs=hs: submit_bundle(
                                              hs.url, Bundle.from_files(bundle_files(i)),
                                              fields(i), node,  # type: ignore[arg-type]
                                              log.verifier, timeout=timeout,
                                              sleep=lambda s: time.sleep(min(s, 0.05))),
                        # a POST relayed to the log may append its entry once (a hostile
                        # answer after it); never twice
                        lambda n=size, t=target: log.store.size() - n <= (t in _AFTER_POST)))
                size = log.store.size()
        return out
    finally:
        log.close()


def table(outcomes: Sequence[Outcome]) -> str:
    """A markdown summary: per client, inputs tried and how they ended."""
    rows = ["| client | targets x modes | refused (exit 1 / 3) | not reached | accepted or crashed "
            "| wrote nothing | slowest |", "|---|---:|---:|---:|---:|---:|---:|"]
    for client in dict.fromkeys(o.client for o in outcomes):
        mine = [o for o in outcomes if o.client == client]
        refused = [o for o in mine if o.result == "refused"]
        e1 = sum(o.exit_code == 1 for o in refused)
        e3 = sum(o.exit_code == 3 for o in refused)
        bad = sum(o.result in ("ACCEPTED", "CRASH") or (o.result == "refused" and not o.ok)
                  for o in mine)
        rows.append(
            f"| {client} | {len(mine)} | {len(refused)} ({e1} / {e3}) | "
            f"{sum(o.result == 'not reached' for o in mine)} | {bad} | "
            f"{sum(o.wrote_nothing for o in mine)}/{len(mine)} | "
            f"{max(o.seconds for o in mine):.1f} s |"
        )
    return "\n".join(rows)
