"""Issue 12, serving: `ledger serve` runs on uvloop and httptools when they are installed (and says
so), caches the view and the prebuilt tile and checkpoint answers per checkpoint, and drops them
when a new checkpoint appears; the httptools parser keeps the request-head limit h11 had."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from ledger.core.tiles import TILE_WIDTH
from ledger.http.server import MAX_HEAD_BYTES, event_loop, http_parser, make_app, server_config
from ledger.log import Log
from ledger.store import open_store
from tests.helpers.ledgers import REPO
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import seal_range
from tests.ledger.test_mirror import make_origin, node_key


def installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_serve_names_its_loop_and_parser_and_sees_new_checkpoints(tmp_path: Path) -> None:
    """The real `ledger serve` subprocess: its start line names the event loop and the HTTP
    parser (uvloop and httptools, dependencies, when installed); after it has answered (and cached)
    the checkpoint and the tiles, more entries are sealed by another process's connection: the
    next requests see the new checkpoint, its new full tile and its longer partial tile."""
    log = make_origin(tmp_path / "origin", TILE_WIDTH - 2)  # with the key entry: 255 entries
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "LEDGER_HOME": str(log.home)}
    errf = (tmp_path / "err").open("w+")
    p = subprocess.Popen([sys.executable, "-m", "ledger_cli", "serve", "--port", str(port)],
                         cwd=REPO, env=env, stderr=errf)
    try:
        deadline = time.monotonic() + 30
        with httpx.Client(timeout=10) as c:
            while True:
                try:
                    first = c.get(url + "/checkpoint")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and p.poll() is None
                    time.sleep(0.1)
            assert first.status_code == 200 and first.text.split("\n")[1] == "255"
            part = c.get(url + "/tile/0/000.p/255")
            assert part.status_code == 200 and len(part.content) == 255 * 32
            assert c.get(url + "/tile/0/000").status_code == 404  # not full yet
            assert c.get(url + "/checkpoint").content == first.content  # cached, same bytes

            seal_range(log, node_key(log), TILE_WIDTH - 2, TILE_WIDTH + 3)  # -> 260 entries
            again = c.get(url + "/checkpoint")
            assert again.status_code == 200 and again.text.split("\n")[1] == "260"
            assert again.headers["etag"] != first.headers["etag"]
            full = c.get(url + "/tile/0/000")
            assert full.status_code == 200 and full.content[: 255 * 32] == part.content
            assert "immutable" in full.headers["cache-control"]
            assert c.get(url + "/tile/0/001.p/4").status_code == 200
            store = open_store(log.home)
            try:
                assert full.content[255 * 32 :] == store.stored_hash(0, 255)
            finally:
                store.close()
            # a revalidation of the cached full tile: 304 with the same tag
            again_full = c.get(url + "/tile/0/000", headers={"If-None-Match": full.headers["etag"]})
            assert again_full.status_code == 304 and again_full.content == b""
    finally:
        p.terminate()
        p.wait(30)
        log.close()
    errf.seek(0)
    err = errf.read()
    errf.close()
    want_loop = "uvloop" if installed("uvloop") else "asyncio"
    want_parser = "httptools" if installed("httptools") else "h11"
    assert (want_loop, want_parser) == (event_loop(), http_parser())
    assert f"on {url}/ ({want_loop}, {want_parser})" in err, err


def test_background_server_runs_the_named_loop_and_parser() -> None:
    """What the start line names is what runs: the loop of a request's task and the protocol
    class answering it (one tiny ASGI app under the same ``server_config``)."""
    seen: dict[str, str] = {}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen["loop"] = type(asyncio.get_running_loop()).__module__
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    with BackgroundServer(app) as srv:
        assert httpx.get(srv.url + "/", timeout=10).content == b"ok"
        protocol = server_config(app).http
    assert seen["loop"].startswith("uvloop" if event_loop() == "uvloop" else "asyncio")
    base = {"httptools": "HttpToolsProtocol", "h11": "H11Protocol"}[http_parser()]
    assert protocol.inner_class.__name__ == base  # uvicorn's protocol, held by the guard


def test_request_head_limit(tmp_path: Path) -> None:
    """A request head over MAX_HEAD_BYTES is answered 400 and closed (h11 had it built in; the
    httptools parser would buffer a header without bound), in one piece or trickled in chunks;
    a head just under it is answered."""
    log: Log = make_origin(tmp_path / "o", 1)
    try:
        with BackgroundServer(make_app(log.home)) as srv:
            host, port = srv.url.removeprefix("http://").split(":")

            def ask(chunks: list[bytes]) -> bytes:
                with socket.create_connection((host, int(port)), timeout=10) as s:
                    try:
                        for c in chunks:
                            s.sendall(c)
                    except OSError:
                        pass
                    out = b""
                    try:
                        while data := s.recv(65536):
                            out += data
                    except OSError:
                        pass
                    return out

            start = b"GET /checkpoint HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            ok = ask([start + b"X-Pad: " + b"a" * (MAX_HEAD_BYTES - 200) + b"\r\n\r\n"])
            assert ok.startswith(b"HTTP/1.1 200"), ok[:200]
            big = b"X-Pad: " + b"a" * (MAX_HEAD_BYTES * 4)
            assert ask([start + big + b"\r\n\r\n"]).startswith(b"HTTP/1.1 400")
            chunks = [start] + [big[i : i + 4096] for i in range(0, len(big), 4096)]
            assert ask(chunks).startswith(b"HTTP/1.1 400")
            # still serving
            assert httpx.get(srv.url + "/checkpoint", timeout=10).status_code == 200
    finally:
        log.close()


def test_fast_path_answers_the_bytes_of_the_asgi_path(tmp_path: Path) -> None:
    """A keep-alive GET of a tile or the checkpoint is answered from the protocol's fast path;
    ``Connection: close`` (and a query) takes the ASGI path: the bytes are the same but for the
    date and the connection line, and two pipelined requests get two identical answers."""
    log = make_origin(tmp_path / "o", TILE_WIDTH + 10)
    try:
        with BackgroundServer(make_app(log.home)) as srv:
            host, port = srv.url.removeprefix("http://").split(":")

            def ask(data: bytes) -> bytes:
                with socket.create_connection((host, int(port)), timeout=10) as s:
                    s.sendall(data)
                    s.settimeout(0.5)
                    out = b""
                    try:
                        while chunk := s.recv(65536):
                            out += chunk
                    except TimeoutError:
                        pass
                    return re.sub(rb"date: [^\r]*\r\n", b"", out)

            for path in (b"/tile/0/000", b"/tile/0/001.p/11", b"/tile/1/000.p/1", b"/checkpoint"):
                get = b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n"
                asgi = ask(get + b"Connection: close\r\n\r\n")
                assert asgi.startswith(b"HTTP/1.1 200 OK\r\n") and b"etag: " in asgi
                assert asgi.replace(b"connection: close\r\n", b"") == ask(get + b"\r\n")
                assert ask(get + b"\r\n" + get + b"\r\n") == asgi.replace(
                    b"connection: close\r\n", b"") * 2
                query = ask(b"GET " + path + b"?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
                assert query == asgi.replace(b"connection: close\r\n", b"")
    finally:
        log.close()


@pytest.mark.parametrize("path", ["/tile/0/000", "/tile/x", "/tile/", "/tile/entries/000.p/1"])
def test_fast_paths_fall_back_on_errors(tmp_path: Path, path: str) -> None:
    """An empty ledger: the tile fast path hands what it cannot answer to the routed handler,
    which answers 404 / 400 in JSON as before (never 500)."""
    from tests.helpers.ledgers import new_ledger

    log = new_ledger(tmp_path / "empty")
    try:
        with BackgroundServer(make_app(log.home)) as srv:
            r = httpx.get(srv.url + path, timeout=10)
        assert r.status_code in (400, 404) and "error" in r.json()
    finally:
        log.close()


@pytest.mark.skipif(http_parser() != "httptools", reason="the fast path runs over httptools only")
def test_fast_path_skips_the_app_and_the_guard_sees_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ledger.http.guard``: a keep-alive GET of the checkpoint is answered without the app
    (the ``Tracker`` never tells the guard of a request); ``Connection: close`` and a query go
    through the app, and the guard is told of each (it is what marks a connection busy)."""
    from ledger.http import guard

    begun: list[int] = []
    original = guard.Guard.begin

    def counting(self: guard.Guard) -> None:
        begun.append(1)
        original(self)

    monkeypatch.setattr(guard.Guard, "begin", counting)
    log = make_origin(tmp_path / "o", 3)
    try:
        with BackgroundServer(make_app(log.home)) as srv:
            host, port = srv.url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port)), timeout=10) as s:
                for head, through_app in ((b"", 0), (b"?x=1", 1), (b"", 0)):
                    s.sendall(b"GET /checkpoint" + head + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                    got = b""
                    while b"\r\n\r\n" not in got or not got.endswith(b"\n"):
                        got += s.recv(65536)
                    assert got.startswith(b"HTTP/1.1 200 OK\r\ndate: ")
                    assert len(begun) == through_app, (head, begun)
                    begun.clear()
            r = httpx.get(srv.url + "/checkpoint", headers={"Connection": "close"}, timeout=10)
            assert r.status_code == 200 and len(begun) == 1
    finally:
        log.close()
