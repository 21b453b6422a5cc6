"""A threaded TCP server on a free 127.0.0.1 port whose every connection is handed to one
function (the scripted HTTP peers of tests/ledger/net/test_pipeline.py and
tests/ledger/test_publish.py)."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """Serve until the block ends; yields the port. ``handle(sock)`` runs on a thread of its own
    for each connection (an ``OSError`` it raises ends that connection quietly)."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(20)
            try:
                handle(self.request)
            except OSError:
                return

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        yield int(srv.server_address[1])
    finally:
        srv.shutdown()
        srv.server_close()
