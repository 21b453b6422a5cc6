"""Issue 9, network items 11, 15 and 16 on the server side: idle and trickling sockets cannot
starve real clients; a submission is authenticated from its head before its body is read or
parsed; no HTTP 500 and no traceback for 4,300-digit path integers or uploads cut short (the log
server and the witness)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nacl.signing
import pytest

from ledger.core import submission as submit_mod
from ledger.core.entries import node_key_id
from ledger.http.server import make_app
from ledger.http.witness import make_witness_app
from ledger.log import Log
from ledger.witness import Witness
from tests.helpers.ledgers import REPO
from tests.helpers.server import BackgroundServer
from tests.ledger.test_mirror import make_origin, node_key, vkey_of


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Log, BackgroundServer]]:
    log = make_origin(tmp_path_factory.mktemp("hs") / "origin", 3)
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        yield log, srv
    log.close()


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def raw(url: str, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh socket and return what comes back until the server closes or
    stops sending."""
    with socket.create_connection(host_port(url), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out and len(out) > 4096:
                    break
        except TimeoutError:
            pass
        return out


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


# -- item 11: idle and trickling connections ---------------------------------------------------


def test_idle_sockets_cannot_starve_clients(origin: tuple[Log, BackgroundServer]) -> None:
    log, _ = origin
    with BackgroundServer(make_app(log.home), max_connections=40, idle_timeout=0.5) as srv:
        addr = host_port(srv.url)
        idle = [socket.create_connection(addr, timeout=5) for _ in range(150)]
        for i, s in enumerate(idle):
            if i % 3 == 0:
                s.sendall(b"GET /checkpoint HTTP/1.1\r\n")  # a head that never ends
        with httpx.Client(timeout=10) as c:
            assert c.get(srv.url + "/checkpoint").status_code == 200
        trickler = socket.create_connection(addr, timeout=5)
        t0 = time.monotonic()
        gone = False
        for b in b"GET /checkpoint HTTP/1.1\r\nX-Slow: " + b"a" * 200:
            try:
                trickler.sendall(bytes([b]))
            except OSError:
                gone = True
                break
            if closed_by_server(trickler, 0.05):
                gone = True
                break
        assert gone, "a trickled head kept its connection"
        assert time.monotonic() - t0 < 8  # idle_timeout 0.5 s; uvicorn alone never closed it
        # every idle socket was closed by the server: over the cap at once, the rest when idle
        assert all(closed_by_server(s, 3) for s in idle)
        for s in [*idle, trickler]:
            s.close()
        with httpx.Client(timeout=10) as c:
            assert c.get(srv.url + "/checkpoint").status_code == 200


def test_ledger_serve_under_a_low_file_limit(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    """The real `ledger serve` with 600 file descriptors and 700 idle sockets: a real request is
    answered, and the server prints no traceback (main: "Too many open files" and starvation)."""
    log, _ = origin
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "LEDGER_HOME": str(log.home)}
    cmd = f"ulimit -n 600; exec {sys.executable} -m ledger_cli serve --port {port}"
    errf = (tmp_path / "err").open("w+")
    p = subprocess.Popen(["sh", "-c", cmd], cwd=REPO, env=env, stderr=errf)
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and p.poll() is None
                time.sleep(0.1)
        for _ in range(700):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        with httpx.Client(timeout=10) as c:
            r = c.get(f"http://127.0.0.1:{port}/checkpoint")
        assert r.status_code == 200
    finally:
        for s in socks:
            s.close()
        p.terminate()
        p.wait(30)
    errf.seek(0)
    err = errf.read()
    errf.close()
    assert "Traceback" not in err and "Too many open files" not in err, err[-2000:]


# -- item 15: authenticate before reading or parsing --------------------------------------------


def test_unauthenticated_40_mib_submission_is_refused_from_its_head(
    origin: tuple[Log, BackgroundServer],
) -> None:
    log, srv = origin
    at_limit = (b"POST /api/v1/submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 41943040\r\n")
    # 40 MiB, within the cap, and no body sent: the answer must come from the head alone (main
    # waited for the 40 MiB, then parsed them, before looking at the signer)
    assert raw(srv.url, at_limit + b"\r\n").startswith(b"HTTP/1.1 401")
    head = at_limit.replace(b"41943040", b"41943041")
    kid = node_key_id(bytes(node_key(log).verify_key)).hex()
    stranger = "00" * 8
    for signer, want in ((stranger, b"HTTP/1.1 403"), (kid, b"HTTP/1.1 413")):
        auth = f"X-Ledger-Signer: {signer}\r\nX-Ledger-Signature: {'A' * 86}==\r\n".encode()
        assert raw(srv.url, head + auth + b"\r\n").startswith(want)
    # a registered key id with a wrong body signature: read (capped), never parsed
    body = b"[" * 100_000
    r = httpx.post(srv.url + "/api/v1/submit", content=body, timeout=30, headers={
        "X-Ledger-Signer": kid,
        "X-Ledger-Signature": submit_mod.body_signature(nacl.signing.SigningKey.generate(), body)})
    assert r.status_code == 403 and "does not verify" in r.text


# -- item 16: no 500, no traceback -----------------------------------------------------------------


@pytest.fixture()
def crash_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.WARNING)
    yield caplog
    bad = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()
           or "Exception in ASGI" in r.getMessage() or r.name == "ledger.http.server"]
    assert not bad, [r.getMessage() for r in bad]


def test_huge_path_integers_are_404_not_500(
    origin: tuple[Log, BackgroundServer], crash_log: pytest.LogCaptureFixture
) -> None:
    _, srv = origin
    n = "9" * 5000
    with httpx.Client(timeout=10) as c:
        for path in (f"/api/v1/entries/{n}", f"/entry/{n}", f"/api/v1/bundles/{n}/files/x",
                     f"/api/v1/proof/inclusion?index={n}", f"/?before={n}",
                     f"/api/v1/lookup/{n}", f"/search?q={n}", f"/tile/{n}/000",
                     f"/tile/0/000.p/{n}", f"/tile/entries/000.p/{n}"):
            r = c.get(srv.url + path)
            assert 400 <= r.status_code < 500, (path, r.status_code)
    got = raw(srv.url, b"POST /api/v1/submit HTTP/1.1\r\nHost: x\r\nContent-Length: "
              + b"9" * 5000 + b"\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 4"), got[:80]


def test_witness_refuses_a_huge_checkpoint_size(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, crash_log: pytest.LogCaptureFixture
) -> None:
    log, _ = origin
    Witness.init(tmp_path / "w", "witness.example").add_log(vkey_of(log))
    note = log.store.checkpoint()
    lines = note.split(b"\n")
    lines[1] = b"9" * 5000  # the size line of the checkpoint
    with BackgroundServer(make_witness_app(tmp_path / "w")) as ws:
        r = httpx.post(ws.url + "/add-checkpoint", content=b"old 0\n\n" + b"\n".join(lines),
                       timeout=10)
    assert r.status_code == 400, r.text


def test_uploads_cut_short_leave_no_traceback(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, crash_log: pytest.LogCaptureFixture
) -> None:
    log, srv = origin
    kid = node_key_id(bytes(node_key(log).verify_key)).hex()
    Witness.init(tmp_path / "w", "witness.example").add_log(vkey_of(log))
    with BackgroundServer(make_witness_app(tmp_path / "w")) as wsrv:
        for url, path, extra in (
            (srv.url, "/api/v1/submit",
             f"X-Ledger-Signer: {kid}\r\nX-Ledger-Signature: {'A' * 86}==\r\n"),
            (wsrv.url, "/add-checkpoint", ""),
        ):
            for _ in range(3):
                with socket.create_connection(host_port(url), timeout=5) as s:
                    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n"
                              f"{extra}\r\n".encode() + b"x" * 1000)
                    time.sleep(0.05)
            with httpx.Client(timeout=10) as c:  # and the servers still answer
                assert c.get(url + "/").status_code == 200
        time.sleep(0.3)  # let the servers notice the disconnects


def test_slow_upload_is_cut_off(
    origin: tuple[Log, BackgroundServer], crash_log: pytest.LogCaptureFixture
) -> None:
    """An authenticated-looking upload trickled one byte per 50 ms holds its connection for at
    most the request deadline (0.6 s here, 120 s by default), not for as long as it trickles."""
    log, _ = origin
    kid = node_key_id(bytes(node_key(log).verify_key)).hex()
    app = make_app(log.home, accept_submissions=True)
    with BackgroundServer(app, idle_timeout=0.3, request_timeout=0.6) as srv:
        with socket.create_connection(host_port(srv.url), timeout=5) as s:
            s.sendall(f"POST /api/v1/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
                      f"X-Ledger-Signer: {kid}\r\nX-Ledger-Signature: {'A' * 86}==\r\n\r\n"
                      .encode())
            t0 = time.monotonic()
            gone = False
            while time.monotonic() - t0 < 8:
                try:
                    s.sendall(b"[")
                except OSError:
                    gone = True
                    break
                if closed_by_server(s, 0.05):
                    gone = True
                    break
            assert gone and time.monotonic() - t0 < 8
        with httpx.Client(timeout=10) as c:
            assert c.get(srv.url + "/checkpoint").status_code == 200
