"""Red-team regressions for the network surfaces (``ledger serve``, ``ledger mirror`` and the one
bounded client every command shares), each against real servers on 127.0.0.1:

* a compressed answer is decoded within the client's size limit, one layer only: ``Content-Encoding:
  gzip, gzip`` (3 KB that httpx inflated to 2 GiB in one call, a MemoryError in ``ledger
  mirror``) and a single-layer bomb cost no more memory than an honest answer;
* ``/feed.atom`` is well-formed XML whatever the log holds or the request asks (a kernel name
  with control characters made it unreadable to every feed reader);
* a repeated text query parameter is 400, as a repeated integer one is;
* a ``Host`` header that is not a host and port is never printed into a link (Starlette's
  URL parsing holds it; a guard, no defect was found);
* a tile path with %-escapes (``/tile/0%2f000``) is not a tile path;
* the mirror refuses a validly signed checkpoint whose origin line is not the pinned key's.
"""

from __future__ import annotations

import logging
import socket
import tracemalloc
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput, CannotCheck, VerificationFailed
from ledger.core.note import Checkpoint, format_checkpoint, note_text, parse_checkpoint, sign_note
from ledger.http.server import make_app
from ledger.http.state import check_public_url
from ledger.log import Log
from ledger.mirror import MAX_CHECKPOINT_BYTES, Mirror, Remote
from ledger.net.client import TEXT, HttpClient
from ledger.store import open_store
from tests.helpers.hostile import LoopbackServer
from tests.helpers.ledgers import add_node, assert_one_error_line, new_ledger, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import bundle_files

KERNEL = "k\x00\x01\x1b\ufffe<&>"  # control characters XML 1.0 cannot hold, and markup


def gzip_bytes(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


class Origin(LoopbackServer):
    """A hostile origin: a raw HTTP/1.1 server on 127.0.0.1 that answers a request whose path
    starts with a key of ``canned`` with those exact bytes (status line, headers, body), and
    relays every other GET to ``upstream`` (plain bytes, no Content-Encoding)."""

    timeout = 10.0

    def __init__(self, upstream: str, canned: dict[str, bytes]) -> None:
        super().__init__()
        self.upstream = upstream
        self.canned = canned

    def _serve(self, sock: socket.socket) -> None:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                got = sock.recv(65536)
                if not got or len(buf) > 1 << 16:
                    return
                buf += got
            head, _, buf = buf.partition(b"\r\n\r\n")
            path = head.split(b" ")[1].decode("latin-1")
            hit = next((v for k, v in self.canned.items() if path.startswith(k)), None)
            if hit is None:
                r = httpx.get(self.upstream + path, headers={"Accept-Encoding": "identity"},
                              timeout=10)
                ctype = r.headers.get("content-type", "application/octet-stream")
                extra = "".join(f"{k}: {v}\r\n" for k, v in r.headers.items()
                                if k.lower() == "x-blob-count")
                hit = (f"HTTP/1.1 {r.status_code} X\r\nContent-Type: {ctype}\r\n{extra}"
                       f"Content-Length: {len(r.content)}\r\n\r\n").encode() + r.content
            sock.sendall(hit)


def answer(body: bytes, encoding: str, status: str = "200 OK",
           ctype: str = "text/plain; charset=utf-8") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Encoding: {encoding}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Log]:
    """A log of a key registration and three bundles, one of a kernel named ``KERNEL``."""
    lg = new_ledger(tmp_path_factory.mktemp("redteam") / "log")
    sk = add_node(lg)
    items = []
    for i in range(3):
        name = KERNEL if i == 1 else f"kern{i}"
        items.append((Bundle.from_files(bundle_files(i)), {
            "kernel": {"name": name, "version": "1.0.0"},
            "obligations": [],
            "checks": [{"id": "lean.scan", "status": "passed", "detail": "d", "tool": "t",
                        "version": "1"}],
        }))
    lg.seal_many(items, sk)
    yield lg
    lg.close()


@pytest.fixture(scope="module")
def server(log: Log) -> Iterator[BackgroundServer]:
    with BackgroundServer(make_app(log.home)) as srv:
        yield srv


@pytest.fixture()
def no_crash(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The server logs no traceback and its last-resort handler never fires."""
    caplog.set_level(logging.WARNING)
    yield
    bad = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()
           or r.name == "ledger.http.server"]
    assert not bad, [r.getMessage() for r in bad]


def raw_get(url: str, target: str, host: str = "x") -> tuple[int, bytes]:
    """``GET target`` sent exactly as given, with ``host`` as the Host header."""
    hostport = url.removeprefix("http://").split(":")
    with socket.create_connection((hostport[0], int(hostport[1])), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                  .encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


# -- the bounded client: compressed answers ----------------------------------------------------


def peak_while(fn: object) -> tuple[object, int]:
    """(what ``fn()`` returned or raised, the peak of traced Python memory while it ran)."""
    assert callable(fn)
    tracemalloc.start()
    try:
        try:
            out: object = fn()
        except Exception as e:  # the test judges it
            out = e
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_compressed_answers_are_decoded_within_the_limit(server: BackgroundServer) -> None:
    bomb = gzip_bytes(bytes(64 << 20))  # 64 KB that inflate to 64 MiB
    nested = gzip_bytes(gzip_bytes(bytes(16 << 20)))  # 300 bytes, 16 MiB two layers down
    note = httpx.get(server.url + "/checkpoint", timeout=10).content
    canned = {
        "/bomb": answer(bomb, "gzip"),
        "/nested": answer(nested, "gzip, gzip"),
        "/twice": answer(nested, "gzip").replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip"
                                                 b"\r\n\r\n", 1),
        "/brotli": answer(note, "br"),
        "/truncated": answer(gzip_bytes(note)[:-8], "gzip"),
        "/gzip": answer(gzip_bytes(note), "gzip"),
        "/deflate": answer(zlib.compress(note), "deflate"),
        "/rawdeflate": answer(zlib.compress(note)[2:-4], "deflate"),
        "/error": answer(nested, "gzip, br", "503 Busy"),
    }
    with Origin(server.url, canned) as origin:
        http = HttpClient(origin.url, "the origin", timeout=30)
        try:
            for path, why in (("bomb", "over the 1048576-byte limit"),
                              ("nested", "only one layer of gzip or deflate"),
                              ("twice", "only one layer of gzip or deflate"),
                              ("brotli", "only one layer of gzip or deflate"),
                              ("truncated", "truncated")):
                got, peak = peak_while(
                    lambda p=path: http.get(p, MAX_CHECKPOINT_BYTES, types=TEXT))
                assert isinstance(got, CannotCheck) and why in str(got), (path, got)
                assert "\n" not in str(got)
                # main: httpx inflated each network read whole, and stacked layers in one call
                assert peak < 8 * MAX_CHECKPOINT_BYTES, (path, peak)
            for path in ("gzip", "deflate", "rawdeflate"):  # honest encodings still work
                assert http.get(path, MAX_CHECKPOINT_BYTES, types=TEXT).body == note
            # an error answer is an answer: its status, whatever its encoding
            assert http.get("error", MAX_CHECKPOINT_BYTES, types=TEXT).status == 503
            # the client asks for gzip only
            assert http.client.headers["accept-encoding"] == "gzip"
        finally:
            http.close()


def test_mirror_cli_against_a_compression_bomb(
    log: Log, server: BackgroundServer, tmp_path: Path
) -> None:
    """End to end: ``ledger mirror`` of an origin whose entry tile is ``gzip, gzip`` (main:
    "internal error (MemoryError ...)" under a memory limit, 2 GiB without)."""
    nested = gzip_bytes(gzip_bytes(bytes(16 << 20)))
    canned = {"/tile/entries/": answer(nested, "gzip, gzip", ctype="application/octet-stream")}
    with Origin(server.url, canned) as origin:
        res = run_cli("mirror", origin.url, "--vkey", str(log.store.meta("vkey")),
                      "--timeout", "30", home=tmp_path / "m")
    line = assert_one_error_line(res, 3)
    assert "Content-Encoding 'gzip, gzip'" in line
    s = open_store(tmp_path / "m")
    try:
        assert s.size() == 0 and list(s.checkpoints()) == []  # nothing stored as verified
    finally:
        s.close()


def test_mirror_refuses_a_signed_checkpoint_of_another_origin(
    log: Log, server: BackgroundServer, tmp_path: Path
) -> None:
    """The log key signed a checkpoint whose origin line is not the key's name: exit 1."""
    cp = parse_checkpoint(note_text(log.store.checkpoint()))
    other = Checkpoint("other.example/log", cp.size, cp.root, ())
    assert log.signer is not None
    note = sign_note(format_checkpoint(other), [log.signer])
    canned = {"/checkpoint": answer(note, "identity")}
    with Origin(server.url, canned) as origin:
        remote = Remote(origin.url, timeout=30)
        try:
            with pytest.raises(VerificationFailed, match="not the pinned key's name"):
                Mirror(tmp_path / "m", remote, str(log.store.meta("vkey"))).sync()
        finally:
            remote.close()
    assert not (tmp_path / "m" / "ledger.db").exists()


# -- the server ----------------------------------------------------------------------------------


def test_feed_is_well_formed_xml_whatever_the_log_holds(
    server: BackgroundServer, no_crash: None
) -> None:
    from urllib.parse import quote

    for target in ("/feed.atom", f"/feed.atom?kernel={quote(KERNEL)}", "/feed.atom?kernel=%00%01",
                   "/feed.atom?kernel=%ef%bf%bf%0b"):
        status, body = raw_get(server.url, target)
        assert status == 200, target
        feed = ET.fromstring(body)  # main: "not well-formed (invalid token)"
        titles = [t.text or "" for t in feed.iter("{http://www.w3.org/2005/Atom}title")]
        assert not any(c in t for t in titles for c in "\x00\x01\x1b\ufffe")
    status, body = raw_get(server.url, f"/feed.atom?kernel={quote(KERNEL)}")
    entries = list(ET.fromstring(body).iter("{http://www.w3.org/2005/Atom}entry"))
    assert len(entries) == 1  # the filter still finds the kernel by its exact name


def test_repeated_text_parameters_are_400(server: BackgroundServer, no_crash: None) -> None:
    for target in ("/feed.atom?kernel=a&kernel=b", "/search?q=1&q=2"):
        status, body = raw_get(server.url, target)
        assert status == 400 and b"more than once" in body, (target, status)


@pytest.mark.parametrize("host", ["evil.example", "evil.example/x?y#", "user@evil.example",
                                  'a" b=', "a b", ""])
def test_the_host_header_is_never_printed(
    server: BackgroundServer, host: str, no_crash: None
) -> None:
    """Links in the feed and the pages name the server's own address (or ``--public-url``),
    never what a client put in ``Host``: a well-formed ``Host: evil.example`` printed into
    ``ledger mirror http://evil.example ...`` would reach every reader of a shared cache's copy."""
    feed = "/feed.atom?kernel=kern0"  # its entries are plain text: only the host is at stake
    status, body = raw_get(server.url, feed, host)
    assert status in (200, 400)
    if status == 200:
        feed_id = ET.fromstring(body).findtext("{http://www.w3.org/2005/Atom}id")
        assert feed_id == server.url + feed  # the server's own address instead
        status, page = raw_get(server.url, "/entry/1", host)
        assert status == 200 and b"evil" not in page and server.url.encode() in page


def test_links_name_the_public_url_when_given(log: Log, no_crash: None) -> None:
    public = check_public_url("https://ledger.example/kernels/")
    assert public == "https://ledger.example/kernels"
    with BackgroundServer(make_app(log.home, public_url=public)) as srv:
        feed = "/feed.atom?kernel=kern0"
        status, body = raw_get(srv.url, feed, "evil.example")
        assert status == 200
        assert ET.fromstring(body).findtext("{http://www.w3.org/2005/Atom}id") == public + feed
        status, page = raw_get(srv.url, "/entry/1", "evil.example")
        assert status == 200 and b"evil" not in page
        assert b"ledger mirror https://ledger.example/kernels --vkey" in page


@pytest.mark.parametrize("url", ["ftp://x.example", "https://", "https://u:p@x.example",
                                 "https://x.example/?q=1", "https://x.example/#f",
                                 "https://x.example:notaport", "https://x .example"])
def test_a_public_url_that_is_not_one_is_bad_input(url: str) -> None:
    with pytest.raises(BadInput, match="--public-url"):
        check_public_url(url)


def test_tile_paths_with_escapes_are_not_tiles(server: BackgroundServer, no_crash: None) -> None:
    """C2SP has one spelling per tile: ``%2f`` is not ``/`` (RFC 3986), and an escaped digit or
    dot is another spelling, which caches would keep apart (main: 200, the tile's bytes)."""
    plain = raw_get(server.url, "/tile/0/000.p/4")
    assert plain[0] == 200 and len(plain[1]) == 4 * 32
    for target in ("/tile/0%2f000.p/4", "/tile/%30/000.p/4", "/tile/0/000%2ep/4",
                   "/tile/entries%2f000.p/4", "/tile/0/000.p%2f4"):
        status, body = raw_get(server.url, target)
        assert status == 400 and b"not a C2SP tile path" in body, (target, status)
