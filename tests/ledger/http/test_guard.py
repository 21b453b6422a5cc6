"""``ledger.http.guard``: the connection limits around uvicorn's protocol (issue 30), on a real
server (``server_config`` under uvicorn on loopback) with a tiny ASGI app: a connection whose
request the app is running is busy and is not the one closed to make room; when every connection
is busy the newcomer is; the guard finds a request's connection by the socket's peer, which
``X-Forwarded-For`` does not change."""

from __future__ import annotations

import asyncio
import json
import socket
import time

from starlette.types import Receive, Scope, Send

from tests.campaigns.test_hostile_clients_of_server import closed_by_server as closed
from tests.helpers.server import BackgroundServer

SLOW = 1.5  # seconds /slow keeps its connection busy


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(SLOW)
    host, port = scope["client"]
    body = json.dumps({"host": host, "port": port}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def get(s: socket.socket, path: str, extra: bytes = b"") -> bytes:
    """The body of the answer to ``GET path`` on ``s`` (b"" when the server closed it)."""
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
    out = b""
    while b"\r\n\r\n" not in out or len(out) < out.index(b"\r\n\r\n") + 4 + _length(out):
        chunk = s.recv(65536)
        if not chunk:
            return b""
        out += chunk
    return out.split(b"\r\n\r\n", 1)[1]


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_the_idle_connection_makes_room_not_the_busy_one() -> None:
    with BackgroundServer(app, max_connections=2, idle_timeout=10.0) as srv:
        busy, idle = connect(srv.url), connect(srv.url)
        busy.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)  # the app has begun /slow
        with connect(srv.url) as third:
            assert closed(idle, 5)  # made room (uvicorn counts it until it is gone: 503 before)
            assert json.loads(get(third, "/"))["host"] == "127.0.0.1"
            busy.settimeout(10)
            assert b"\r\n\r\n" in busy.recv(65536)  # /slow answered in full, not cut off
        busy.close()
        idle.close()


def test_a_newcomer_over_a_cap_of_busy_connections_is_closed() -> None:
    with BackgroundServer(app, max_connections=1, idle_timeout=10.0) as srv:
        with connect(srv.url) as busy:
            busy.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.3)
            with connect(srv.url) as late:
                assert closed(late, 5)
            busy.settimeout(10)
            assert busy.recv(65536).startswith(b"HTTP/1.1 200")
        with connect(srv.url) as after:  # the busy one idle again: room for the next
            assert get(after, "/") != b""


def test_the_client_is_the_sockets_peer() -> None:
    with BackgroundServer(app) as srv, connect(srv.url) as s:
        seen = json.loads(get(s, "/", b"X-Forwarded-For: 203.0.113.9\r\n"))
        assert seen == {"host": "127.0.0.1", "port": s.getsockname()[1]}
