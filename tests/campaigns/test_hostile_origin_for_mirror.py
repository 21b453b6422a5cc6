"""Issue 9, network items 10, 13 and 14 for ``ledger mirror``: an overall deadline that a
trickling server cannot stretch; bad tiles from an intermediary are bad data (exit 1, retried),
never fork evidence; ``--follow`` survives maintenance pages and errors, ``--rounds`` is checked
and reports when no poll succeeded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger import mirror as mirror_mod
from ledger.core.errors import CannotCheck, VerificationFailed
from ledger.http.server import make_app
from ledger.log import Log
from ledger.mirror import Mirror, Remote, SyncResult, follow
from ledger.net.client import BadAnswer
from ledger.store import open_store
from tests.helpers.hostile import HostileServer
from tests.helpers.ledgers import assert_one_error_line, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import seal_range
from tests.ledger.test_mirror import Proxy, make_origin, node_key, vkey_of


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Log, BackgroundServer]]:
    log = make_origin(tmp_path_factory.mktemp("hn") / "origin", 300)
    with BackgroundServer(make_app(log.home)) as srv:
        yield log, srv
    log.close()


_OPEN: list[Remote] = []


def remote(url: str, **kw: object) -> Remote:
    r = Remote(url, **kw)  # type: ignore[arg-type]
    _OPEN.append(r)
    return r


@pytest.fixture(autouse=True)
def _close_remotes() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def store_size(home: Path) -> int:
    if not (home / "ledger.db").exists():
        return 0
    s = open_store(home)
    try:
        return s.size()
    finally:
        s.close()


# -- item 10: deadlines ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["trickle_head", "trickle_body"])
def test_trickling_server_cannot_hold_the_mirror(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, mode: str
) -> None:
    log, srv = origin
    with HostileServer(mode, ("/checkpoint",), srv.url) as bad:
        rem = remote(bad.url, timeout=1.5)
        t0 = time.monotonic()
        with pytest.raises(CannotCheck, match="no complete answer in time"):
            Mirror(tmp_path / "m", rem, vkey_of(log)).sync()
    # the hostile server would trickle for 30 s (main waited for all of it)
    assert time.monotonic() - t0 < 10
    assert store_size(tmp_path / "m") == 0


def test_cli_timeout_and_option_checks(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin
    with HostileServer("trickle_body", ("/tile/",), srv.url) as bad:
        res = run_cli("mirror", bad.url, "--vkey", vkey_of(log), "--timeout", "2",
                      home=tmp_path / "m")
    assert "no complete answer in time" in assert_one_error_line(res, 3)
    for args in (["--timeout", "0"], ["--timeout", "nan"], ["--interval", "inf"],
                 ["--follow", "--rounds", "-1"], ["--follow", "--rounds", "0"],
                 ["--rounds", "2"]):
        code, err = cli_in_process("mirror", srv.url, "--vkey", vkey_of(log), *args,
                                   "--home", str(tmp_path / "x"))
        assert code == 2 and err.startswith("ledger: error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()


def cli_in_process(*args: str) -> tuple[int, str]:
    """The CLI in this process (its entry point, which maps errors to exit codes): exit code and
    stderr, for quick option checks."""
    import contextlib
    import io

    from ledger_cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(list(args))
    code = done.value.code
    return (code if isinstance(code, int) else 0), err.getvalue()


# -- item 13: bad tiles are not a fork -------------------------------------------------------------


def test_bad_hash_tile_after_growth_is_bad_data_not_a_fork(tmp_path: Path) -> None:
    """The scenario of the issue: the mirror holds a verified checkpoint; the log grows; an
    intermediary serves one bad hash tile. The two signed checkpoints are consistent: no evidence,
    nothing stored, exit 1 naming the tile; a clean answer then syncs."""
    log = make_origin(tmp_path / "o", 300)
    home = tmp_path / "m"
    with BackgroundServer(make_app(log.home)) as srv:
        Mirror(home, remote(srv.url), vkey_of(log)).sync()
        seal_range(log, node_key(log), 300, 320)

        def flip(request: httpx.Request, resp: httpx.Response) -> httpx.Response:
            body = resp.content
            if request.url.path.startswith("/tile/0/"):
                body = bytes([body[0] ^ 1]) + body[1:]
            return httpx.Response(resp.status_code, headers=resp.headers, content=body)

        bad = remote(srv.url, client=httpx.Client(transport=Proxy(flip)))
        with pytest.raises(BadAnswer, match="tile does not match the signed checkpoint"):
            Mirror(home, bad, vkey_of(log)).sync()
        bad.close()
        assert not (home / "evidence").exists()
        assert store_size(home) == 301
        with HostileServer("garbage", ("/tile/1/",), srv.url) as hs:
            res = run_cli("mirror", hs.url, "--vkey", vkey_of(log), home=home)
        assert "does not match the signed checkpoint" in assert_one_error_line(res, 1)
        assert not (home / "evidence").exists()
        r = Mirror(home, remote(srv.url), vkey_of(log)).sync()
        assert (r.old_size, r.new_size) == (301, 321)
    log.close()


# -- item 14: --follow survives transient failures -------------------------------------------------


def test_follow_survives_maintenance_pages_and_errors(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin
    answers = ["html200", "503", "garbage", "ok", "html200", "ok"]

    class Flaky(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.path == "/checkpoint":
                kind = answers.pop(0)
                page = b"<html><body>Down for maintenance</body></html>"
                if kind == "html200":
                    return httpx.Response(200, content=page, headers={"content-type": "text/html"})
                if kind == "503":
                    return httpx.Response(503, content=page, headers={"content-type": "text/html"})
                if kind == "garbage":
                    return httpx.Response(200, content=page, headers={"content-type": "text/plain"})
            return super().handle_request(request)

    seen: list[int] = []
    errors: list[tuple[str, float]] = []
    m = Mirror(tmp_path / "m", remote(srv.url, client=httpx.Client(transport=Flaky())),
               vkey_of(log))

    def report(r: SyncResult) -> None:
        seen.append(r.new_size)

    follow(m, 0.001, report, lambda e, d: errors.append((type(e).__name__, d)), rounds=6,
           jitter=lambda: 1.0)
    m.remote.close()
    assert seen == [301, 301]
    assert [k for k, _ in errors] == ["CannotCheck", "CannotCheck", "BadAnswer", "CannotCheck"]
    assert [d for _, d in errors] == [0.002, 0.004, 0.008, 0.002]  # reset after a success


def test_rounds_all_failed_exits_3(origin: tuple[Log, BackgroundServer], tmp_path: Path) -> None:
    log, srv = origin
    with HostileServer("html_503", ("/checkpoint",), srv.url) as bad:
        res = run_cli("mirror", bad.url, "--vkey", vkey_of(log), "--follow", "--rounds", "2",
                      "--interval", "0.01", home=tmp_path / "m")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 3 and all(ln.startswith("ledger: error: ") for ln in lines)
    assert "no poll of 2 succeeded" in lines[-1] and "HTTP 503" in lines[-1]


def test_jitter_spreads_the_backoff(tmp_path: Path, origin: tuple[Log, BackgroundServer]) -> None:
    log, _ = origin
    delays: list[float] = []
    dead = Mirror(tmp_path / "m", remote("http://127.0.0.1:9"), vkey_of(log))
    with pytest.raises(CannotCheck):
        follow(dead, 0.001, lambda r: None, lambda e, d: delays.append(d), rounds=4)
    dead.remote.close()
    for k, d in enumerate(delays, 1):
        assert 0.75 * 0.001 * 2**k <= d <= 1.25 * 0.001 * 2**k
    assert mirror_mod.follow is follow


def test_mirror_refuses_an_entry_shape_no_log_writes(tmp_path: Path) -> None:
    """Item 8's shape rules on the mirror: a log that appended an odd-shaped (but validly signed
    and chained) entry is refused, nothing of the batch is stored, and it is not a fork."""
    from ledger.core.bundle import Bundle
    from ledger.core.entries import node_key_id, sign_entry
    from ledger.core.note import (
        Checkpoint,
        format_checkpoint,
        open_note,
        parse_checkpoint,
        sign_note,
    )
    from ledger.log import utc_now
    from ledger.submit import chained_fields
    from tests.ledger.http.test_server import bundle_files, fields

    log = make_origin(tmp_path / "o", 2)
    sk = node_key(log)
    bundle = Bundle.from_files(bundle_files(70))
    cp = parse_checkpoint(open_note(log.store.checkpoint(), [log.verifier]).text)
    odd = {**fields(70), "checks": [{"id": "x", "status": "maybe", "detail": ""}]}
    entry = sign_entry(
        chained_fields(bundle, odd, cp, node_key_id(bytes(sk.verify_key)), utc_now()), sk
    )
    assert log.signer is not None
    with log.store.writer() as w:  # as a log without the shape check would have appended it
        w.put_blobs((f.digest, f.data) for f in bundle.files)
        w.append(entry, "bundle", bundle.digest)
        note = sign_note(format_checkpoint(Checkpoint(log.origin, w.size, w.root(), ())),
                         [log.signer])
        w.put_checkpoint(note, w.size)
    with BackgroundServer(make_app(log.home)) as srv:
        with pytest.raises(VerificationFailed, match="remote entry 3 has a shape no log writes"):
            Mirror(tmp_path / "m", remote(srv.url), vkey_of(log)).sync()
    assert store_size(tmp_path / "m") == 0 and not (tmp_path / "m" / "evidence").exists()
    log.close()


# -- issue 33 item 5: only verified bytes kept ---------------------------------------------------


class JunkLines(HostileServer):
    """A host (CDN, on-path attacker) that relays the log but adds about 1 MiB of signature
    lines to every answer of ``/checkpoint``, other lines each time: keys nobody checks, one of
    them under the log's own name."""

    def __init__(self, upstream: str) -> None:
        super().__init__("garbage", ("/checkpoint",), upstream)

    def _hostile(self, sock: object, path: str, bare: str) -> bool:
        import base64
        import os
        import socket

        assert isinstance(sock, socket.socket) and self.upstream is not None
        with httpx.Client() as c:
            note = c.get(self.upstream + "/checkpoint").content
        lines = [f"— junk{self.hits}.{i} {base64.b64encode(os.urandom(8000)).decode()}\n"
                 for i in range(90)]
        lines.append(f"— test.example/log {base64.b64encode(os.urandom(68)).decode()}\n")
        body = note + "".join(lines).encode()
        assert len(body) < mirror_mod.MAX_CHECKPOINT_BYTES
        head = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        sock.sendall(head.encode() + body)
        return True


def checkpoint_rows(home: Path) -> list[tuple[int, bytes]]:
    s = open_store(home, read_only=True)
    try:
        return [(size, bytes(note)) for size, note in s.checkpoints()]
    finally:
        s.close()


def test_mirror_keeps_only_the_lines_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host adding ~1 MiB of other signature lines to each /checkpoint answer: the mirror keeps
    the note text, the log's signature and the cosignature of the witness it requires (nothing
    else), stores no new row while the tree and those signatures stand (five polls, one row, the
    database a few KiB larger at most), and its own serve and publish pass on no junk; the log
    growing adds exactly one row. (Main kept every line and a ~1 MiB row per poll.)"""
    from ledger.core.note import note_text, signature_keys
    from ledger.http.witness import make_witness_app
    from ledger.publish import DirTarget, publish
    from ledger.witness import Witness, request_cosignature

    monkeypatch.setenv("LEDGER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("LEDGER_POLICY", raising=False)
    log = make_origin(tmp_path / "o", 20)
    w = Witness.init(tmp_path / "w", "witness.test")
    w.add_log(vkey_of(log))
    with BackgroundServer(make_witness_app(w.home)) as ws:
        request_cosignature(log.home, ws.url, w.vkey)
    home = tmp_path / "m"
    with BackgroundServer(make_app(log.home)) as srv, JunkLines(srv.url) as junk:
        with httpx.Client() as c:
            served = c.get(srv.url + "/checkpoint").content  # the log's line, the witness's
            assert len(c.get(junk.url + "/checkpoint").content) > 900_000
        res = run_cli("mirror", junk.url, "--vkey", vkey_of(log), "--witness", w.vkey,
                      home=home)
        assert res.returncode == 0, res.stderr
        first = (home / "ledger.db").stat().st_size
        res = run_cli("mirror", junk.url, "--vkey", vkey_of(log), "--witness", w.vkey,
                      "--follow", "--rounds", "4", "--interval", "0.01", home=home)
        assert res.returncode == 0, res.stderr
        assert junk.hits >= 5
        rows = checkpoint_rows(home)
        assert rows == [(21, served)]  # exactly the verified lines, one row for five polls
        assert len(signature_keys(served)) == 2
        assert (home / "ledger.db").stat().st_size - first < 64 << 10
        remembered = list((tmp_path / "cache" / "checkpoints").glob("[0-9a-f]*[0-9a-f]"))
        # the checkpoint memory keeps what it checked itself: the text and the log's line
        log_line = served[: served.index(b"\n", len(note_text(served)) + 1) + 1]
        assert [p.read_bytes() for p in remembered] == [log_line]
        with BackgroundServer(make_app(home)) as mine, httpx.Client() as c:
            assert c.get(mine.url + "/checkpoint").content == served
        publish(home, DirTarget(tmp_path / "www"))
        assert (tmp_path / "www" / "checkpoint").read_bytes() == served
        # the log grows: exactly one more row, again only the log's verified line (the
        # witness has not cosigned the new tree: a mirror that requires none takes it)
        seal_range(log, node_key(log), 100, 101)
        r = Mirror(home, remote(junk.url), vkey_of(log)).sync()
        assert r.new_size == 22
        rows = checkpoint_rows(home)
        assert len(rows) == 2 and rows[-1][0] == 22
        assert note_text(rows[-1][1]) == note_text(log.store.checkpoint())
        assert len(signature_keys(rows[-1][1])) == 1
    log.close()
