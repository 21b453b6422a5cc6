"""The witness (C2SP tlog-witness, tlog-cosignature/v1): a live witness cosigns the log's
checkpoints after checking consistency, refuses forks, and `ledger mirror --witness` requires its
cosignature on what the server publishes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger.core.errors import CannotCheck, SignatureError
from ledger.core.note import ALG_COSIGNATURE_V1, note_text, open_note, parse_vkey
from ledger.http.server import make_app
from ledger.http.witness import make_witness_app
from ledger.log import Log
from ledger.mirror import Mirror, Remote
from ledger.witness import Witness, request_cosignature
from tests.helpers.ledgers import run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import seal_range
from tests.ledger.test_mirror import make_origin, node_key, vkey_of


@pytest.fixture()
def setup(tmp_path: Path) -> Iterator[tuple[Log, Witness, BackgroundServer]]:
    log = make_origin(tmp_path / "log", 20)
    w = Witness.init(tmp_path / "witness", "witness.test")
    w.add_log(vkey_of(log))
    with BackgroundServer(make_witness_app(tmp_path / "witness")) as srv:
        yield log, w, srv
    log.close()


def post(url: str, body: bytes) -> httpx.Response:
    with httpx.Client() as c:
        return c.post(url + "/add-checkpoint", content=body)


def sync(home: Path, url: str, vkey: str, witnesses: list[str]) -> int:
    remote = Remote(url)
    try:
        m = Mirror(home, remote, vkey, [parse_vkey(v) for v in witnesses])
        return m.sync().new_size
    finally:
        remote.close()


def test_cosignature_is_published_and_required_by_mirrors(
    setup: tuple[Log, Witness, BackgroundServer], tmp_path: Path
) -> None:
    log, w, wsrv = setup
    wv = parse_vkey(w.vkey)
    assert wv.alg == ALG_COSIGNATURE_V1
    with BackgroundServer(make_app(log.home)) as srv:
        # before the witness cosigned, a mirror that requires it refuses
        with pytest.raises(SignatureError, match=r"witness\.test"):
            sync(tmp_path / "m0", srv.url, vkey_of(log), [w.vkey])
        cosigned = request_cosignature(log.home, wsrv.url, w.vkey)
        opened = open_note(cosigned, [wv])
        assert opened.text == note_text(log.store.checkpoint())
        assert cosigned.startswith(log.store.checkpoint())  # the log's note plus one line
        with httpx.Client() as c:
            assert c.get(srv.url + "/checkpoint").content == cosigned
        assert sync(tmp_path / "m", srv.url, vkey_of(log), [w.vkey]) == 21
        other = Witness.init(tmp_path / "w2", "other.witness")
        with pytest.raises(SignatureError, match=r"other\.witness"):
            sync(tmp_path / "m2", srv.url, vkey_of(log), [other.vkey])
        res = run_cli("mirror", srv.url, "--vkey", vkey_of(log), "--witness", other.vkey,
                      home=tmp_path / "m3")
        assert res.returncode == 1 and "other.witness" in res.stderr
        res = run_cli("mirror", srv.url, "--vkey", vkey_of(log), "--witness", w.vkey,
                      home=tmp_path / "m4")
        assert res.returncode == 0, res.stderr


def test_witness_follows_growth_and_learns_sizes(
    setup: tuple[Log, Witness, BackgroundServer]
) -> None:
    log, w, wsrv = setup
    request_cosignature(log.home, wsrv.url, w.vkey)
    seal_range(log, node_key(log), 100, 140)
    note = request_cosignature(log.home, wsrv.url, w.vkey)  # old 21 + consistency proof
    assert b"\n61\n" in note
    assert w.latest("test.example/log") == log.store.checkpoint()
    # a log side that forgot the witness's size learns it from the 409 answer
    log.store.set_meta(f"witness.size {wsrv.url}", "0")
    seal_range(log, node_key(log), 200, 201)
    assert b"\n62\n" in request_cosignature(log.home, wsrv.url, w.vkey)


def test_witness_refuses_a_fork(
    setup: tuple[Log, Witness, BackgroundServer], tmp_path: Path
) -> None:
    log, w, wsrv = setup
    log.close()
    shutil.copytree(log.home, tmp_path / "fork")
    log = Log.open(log.home)
    fork = Log.open(tmp_path / "fork")
    seal_range(log, node_key(log), 100, 101)
    seal_range(fork, node_key(fork), 200, 203)
    request_cosignature(log.home, wsrv.url, w.vkey)
    fork.store.set_meta(f"witness.size {wsrv.url}", "22")
    with pytest.raises(CannotCheck, match="HTTP 422"):
        request_cosignature(fork.home, wsrv.url, w.vkey)
    fork.close()
    log.close()


def test_protocol_errors(setup: tuple[Log, Witness, BackgroundServer], tmp_path: Path) -> None:
    log, _w, wsrv = setup
    note = log.store.checkpoint()
    assert post(wsrv.url, b"old 0\n\n" + note).status_code == 200
    conflict = post(wsrv.url, b"old 0\n\n" + note)
    assert conflict.status_code == 409 and conflict.content == b"21\n"
    assert conflict.headers["content-type"].startswith("text/x.tlog.size")
    assert post(wsrv.url, b"old 21\n\n" + note).status_code == 200  # same tree again
    assert post(wsrv.url, b"garbage").status_code == 400
    assert post(wsrv.url, b"old 01\n\n" + note).status_code == 400
    assert post(wsrv.url, b"old 21\nnot-base64\n\n" + note).status_code == 400
    forged = note.replace(b"\n21\n", b"\n22\n")
    assert post(wsrv.url, b"old 21\n\n" + forged).status_code == 403
    stranger = make_origin(tmp_path / "stranger", 1)
    unknown = stranger.store.checkpoint().replace(b"test.example/log", b"other.example/log")
    assert post(wsrv.url, b"old 0\n\n" + unknown).status_code in (403, 404)
    assert post(wsrv.url, b"old 0\n\n" + b"x" * (2 << 20)).status_code == 413
    stranger.close()


def test_witness_state_keeps_only_the_log_line(
    setup: tuple[Log, Witness, BackgroundServer]
) -> None:
    """Issue 33 item 5: the witness stores the checkpoint it cosigned as the note text and the
    log's verified signature line, never the other lines the request carried."""
    import base64
    import os

    log, w, wsrv = setup
    note = log.store.checkpoint()
    junk = b"".join(
        f"\u2014 junk{i} {base64.b64encode(os.urandom(600)).decode()}\n".encode()
        for i in range(50)
    )
    assert post(wsrv.url, b"old 0\n\n" + note + junk).status_code == 200
    assert w.latest("test.example/log") == note


def test_witness_cli(tmp_path: Path) -> None:
    d = tmp_path / "w"
    res = run_cli("witness", "init", "--name", "cli.witness", "--dir", str(d))
    assert res.returncode == 0, res.stderr
    vkey = res.stdout.strip()
    assert parse_vkey(vkey).alg == ALG_COSIGNATURE_V1
    assert run_cli("witness", "vkey", "--dir", str(d)).stdout.strip() == vkey
    log = make_origin(tmp_path / "log", 1)
    res = run_cli("witness", "add-log", vkey_of(log), "--dir", str(d))
    assert res.returncode == 0 and "test.example/log" in res.stdout
    again = run_cli("witness", "init", "--name", "cli.witness", "--dir", str(d))
    assert again.returncode == 2
    with BackgroundServer(make_witness_app(d)) as wsrv:
        res = run_cli("witness", "add-checkpoint", wsrv.url, "--vkey", vkey, home=log.home)
    assert res.returncode == 0, res.stderr
    open_note(res.stdout.encode(), [parse_vkey(vkey)])
    log.close()


def test_the_log_keeps_only_the_witness_line_it_verified(
    setup: tuple[Log, Witness, BackgroundServer]
) -> None:
    """Issue 33 item 5, the log's side: a witness (or what is between) that answers its valid
    cosignature followed by other lines gets only its verified line into the note the log keeps
    and serves."""
    import base64
    import os
    import socket

    from ledger.core.note import signature_keys
    from tests.helpers.tcpserver import serving

    log, w, wsrv = setup

    def relay(sock: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n")
                          if ln.lower().startswith(b"content-length")))
        while len(body) < length:
            body += sock.recv(65536)
        answer = post(wsrv.url, body).content + b"".join(
            f"\u2014 extra{i} {base64.b64encode(os.urandom(60)).decode()}\n".encode()
            for i in range(20))
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                     + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)

    with serving(relay) as port:
        cosigned = request_cosignature(log.home, f"http://127.0.0.1:{port}", w.vkey)
    assert b"extra" not in cosigned
    assert len(signature_keys(cosigned)) == 2  # the log's line and the witness's
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client() as c:
        assert c.get(srv.url + "/checkpoint").content == cosigned
