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
import socket
import socketserver
import threading
import time
from collections.abc import Sequence

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


class HostileServer:
    def __init__(
        self, mode: str, target: Sequence[str] = ("/",), upstream: str | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.target = tuple(target)
        self.upstream = upstream
        self.hits = 0
        self.url = ""
        self._server: socketserver.ThreadingTCPServer | None = None

    def __enter__(self) -> HostileServer:
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(MAX_SECONDS)
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

    # -- one connection ----------------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        while True:
            head = b""
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
                self._read_body(sock, headers, rest)
                if not self._hostile(sock, path, bare):
                    return
                continue
            body = self._read_body(sock, headers, rest)
            sock.sendall(self._relay(method, path, headers, body))

    @staticmethod
    def _read_body(sock: socket.socket, headers: dict[str, str], rest: bytes) -> bytes:
        n = int(headers.get("content-length", "0") or 0)
        body = rest
        while len(body) < n:
            got = sock.recv(min(1 << 20, n - len(body)))
            if not got:
                break
            body += got
        return body

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
