"""A test harness: the real server (``ledger.http.server.server_config``, uvicorn) on a free
loopback
port in a daemon thread, so tests and benchmarks exercise a real socket."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from starlette.types import ASGIApp

from ledger.core.errors import CannotCheck
from ledger.http.server import make_app, server_config

__all__ = ["BackgroundServer", "make_app"]


class BackgroundServer:
    """Run an ASGI app under uvicorn on a free loopback port in a daemon thread.

    ``with BackgroundServer(make_app(home)) as srv: httpx.get(srv.url + "/checkpoint")`` - used by
    the tests and the benchmarks, so both exercise the real server and a real socket.
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", **limits: Any) -> None:
        self.app = app
        self.host = host
        self.limits = limits
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BackgroundServer:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        port = sock.getsockname()[1]
        config = server_config(self.app, self.host, port, **self.limits)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise CannotCheck("the background server did not start")
            time.sleep(0.01)
        self.url = f"http://{self.host}:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)
