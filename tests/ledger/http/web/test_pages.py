"""The pages for auditors (issue 11) over the real server: the receipt download is the receipt
``ledger receipt write`` makes, the key pages, entry bundles gzip-compressed as C2SP tlog-tiles
says (and plain for a client that asks for nothing), and every field a bundle or an entry
controls printed as text on every page (markup injection)."""

from __future__ import annotations

import gzip
import re
import socket
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from ledger.core.bundle import Bundle
from ledger.core.tiles import entry_bundle
from ledger.http.server import make_app
from ledger.http.web.compress import accepts_gzip
from ledger.log import Log
from ledger_cli.wiring import make_receipt
from tests.helpers.ledgers import add_node, fake_fields, new_ledger, write_bundle
from tests.helpers.server import BackgroundServer


def hostile(field: str) -> str:
    """A value that would become an element (or break an attribute) if printed unescaped."""
    return f"<evil data-f=\"{field}\">'&amp;{field}</evil>"


# every text a bundle entry (or a revocation) carries that its author chooses; key names are
# refused unless letters, digits, '.', '_' or '-' (ledger.core.entries), so they cannot carry markup
FIELDS = ("kernel.name", "kernel.version", "check.id", "check.tool", "check.version",
          "check.detail", "obligation.obligation", "obligation.theorem", "obligation.property",
          "file.path", "revocation.reason")


def hostile_ledger(home: Path, bundles: Path) -> tuple[Log, str]:
    log = new_ledger(home)
    sk = add_node(log, "mallory")
    fields = fake_fields("x")
    fields["kernel"] = {"name": hostile("kernel.name"), "version": hostile("kernel.version")}
    fields["checks"] = [{"id": hostile("check.id"), "status": "passed",
                         "tool": hostile("check.tool"), "version": hostile("check.version"),
                         "detail": hostile("check.detail")},
                        {"id": "certificate", "status": "passed",
                         "detail": f"PO1 ok ({hostile('cert')})", "tool": "", "version": ""}]
    fields["obligations"] = [{"obligation": hostile("obligation.obligation"),
                              "theorem": hostile("obligation.theorem"),
                              "property": hostile("obligation.property")}]
    extra = {"docs/" + hostile("file.path").replace("/", "_") + ".txt": b"x"}
    log.seal(Bundle.from_dir(write_bundle(bundles, "b0", "0", extra)), fields, sk)
    kid = log.store.key_rows()[0].key_id
    log.revoke(kid, hostile("revocation.reason"))
    return log, kid.hex()


class Page(HTMLParser):
    """The elements and the text of a page, as a browser's parser sees them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.text.extend(v for k, v in attrs if k == "href" and v)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def words(page: str) -> str:
    """A page's text, its runs of spaces made one (free text is printed word by word, each word
    kept on one line: issue 34)."""
    return " ".join("".join(Page(page).text).split())


def test_markup_injection_on_every_page(tmp_path: Path) -> None:
    log, kid = hostile_ledger(tmp_path / "home", tmp_path / "b")
    pages = ["/", "/entry/0", "/entry/1", "/entry/2", f"/key/{kid}", "/keys",
             "/search?q=mallory", "/search"]
    shown: dict[str, str] = {}
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=30) as c:
        kernel = c.get(srv.url + "/search", params={"q": hostile("kernel.name")})
        assert kernel.status_code == 200
        shown["search-kernel"] = kernel.text
        nothing = c.get(srv.url + "/search", params={"q": hostile("query")},
                        headers={"accept": "text/html"})
        assert nothing.status_code == 404
        shown["error"] = nothing.text
        for path in pages:
            r = c.get(srv.url + path, headers={"accept": "text/html"})
            assert r.status_code in (200, 400, 404) and r.headers["content-type"].startswith(
                "text/html"), path
            shown[path] = r.text
    for path, text in shown.items():
        page = Page(text)
        assert "evil" not in page.tags, path  # no value became an element
        assert "<evil" not in text, path
    everything = "\n".join(words(t) for t in shown.values())
    for field in FIELDS:  # ... and each is shown, as text, somewhere
        value = hostile(field).replace("/", "_") if field == "file.path" else hostile(field)
        assert value in everything, field
    entry = words(shown["/entry/1"])
    for field in FIELDS[:-1]:
        assert field in entry, field  # the entry page shows every field of its entry
    assert hostile("revocation.reason") in words(shown[f"/key/{kid}"])
    assert repr(hostile("query")) in words(shown["error"])  # quoted with !r


def test_receipt_download_is_what_receipt_write_makes(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log, "alice")
    bob = add_node(log, "bob")
    for i in range(3):
        log.seal(Bundle.from_dir(write_bundle(tmp_path / "b", f"b{i}", str(i))),
                 fake_fields(str(i)), sk if i != 1 else bob)
    bob_id = log.store.key_rows()[1].key_id
    log.revoke(bob_id, "lost")
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=30) as c:
        for index in (0, 2, 3, 5):  # a registration, bundles of alice and of revoked bob
            r = c.get(f"{srv.url}/api/v1/entries/{index}/receipt")
            assert r.status_code == 200
            assert r.headers["content-disposition"] == 'attachment; filename="ledger-receipt.json"'
            assert r.content == make_receipt(log, index).to_bytes(), index
        assert '"revocation"' in c.get(f"{srv.url}/api/v1/entries/3/receipt").text
        assert c.get(f"{srv.url}/api/v1/entries/6/receipt").status_code == 404
        page = c.get(f"{srv.url}/entry/3").text
        assert 'href="/api/v1/entries/3/receipt"' in page
        assert f'href="/key/{bob_id.hex()}"' in page
        assert re.search(r"registered by entry 1 \(20\d\d-[0-9T:-]+Z\), revoked by entry 5 "
                         r"\(20\d\d-[0-9T:-]+Z\): lost", words(page))


def test_key_pages(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log, "alice")
    add_node(log, "bob")
    for i in range(2):
        log.seal(Bundle.from_dir(write_bundle(tmp_path / "b", f"b{i}", str(i))),
                 fake_fields(str(i)), sk)
    alice, bob = (row.key_id.hex() for row in log.store.key_rows())
    log.revoke(bytes.fromhex(bob), "retired")
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=30) as c:
        page = Page(c.get(f"{srv.url}/key/{alice}").text)
        text = " ".join(page.text)
        assert "Node key alice" in text and "/entry/0" in text and "active" in text
        assert "/entry/3" in text and "/entry/2" in text  # the entries it signed
        bob_page = " ".join(Page(c.get(f"{srv.url}/key/{bob}").text).text)
        assert "revoked" in bob_page and "/entry/4" in bob_page and "retired" in bob_page
        keys = c.get(f"{srv.url}/keys").text
        assert f'href="/key/{alice}"' in keys and f'href="/key/{bob}"' in keys
        found = c.get(f"{srv.url}/search", params={"q": "alice"}).text
        assert f'href="/key/{alice}"' in found  # search results link the signer's page
        assert c.get(f"{srv.url}/key/{'0' * 16}").status_code == 404
        assert c.get(f"{srv.url}/key/ALICE").status_code == 400


def raw_get(url: str, target: str) -> tuple[bytes, bytes]:
    """A GET with no Accept-Encoding header at all (httpx always sends one): head and body."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.lower(), body


def test_entry_bundles_gzip_when_accepted(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    log.seal_many([(Bundle.from_dir(write_bundle(tmp_path / "b", f"b{i}", str(i))),
                    fake_fields(str(i))) for i in range(256)], sk)
    full = entry_bundle(list(log.store.entries(0, 256)))
    part = entry_bundle(list(log.store.entries(256, 257)))
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=30) as c:
        for path, plain in (("/tile/entries/000", full), ("/tile/entries/001.p/1", part)):
            r = c.get(srv.url + path, headers={"accept-encoding": "gzip, identity"})
            assert r.headers["content-encoding"] == "gzip" and r.content == plain
            assert "accept-encoding" in r.headers["vary"].lower()
            raw = c.build_request("GET", srv.url + path, headers={"accept-encoding": "gzip"})
            stream = c.send(raw, stream=True)
            wire = b"".join(stream.iter_raw())
            assert gzip.decompress(wire) == plain and len(wire) < len(plain)
            head, body = raw_get(srv.url, path)  # no Accept-Encoding: the plain bytes
            assert body == plain and b"content-encoding" not in head, path
            ident = c.get(srv.url + path, headers={"accept-encoding": "identity"})
            assert "content-encoding" not in ident.headers and ident.content == plain
        tile = c.get(srv.url + "/tile/0/000", headers={"accept-encoding": "gzip"})
        assert "content-encoding" not in tile.headers  # hash tiles do not compress


@pytest.mark.parametrize(("header", "gz"), [
    ("gzip", True), ("gzip, deflate, br", True), ("identity", False), ("", False),
    ("gzip;q=0", False), ("*", True), ("*;q=0", False), ("br, *;q=0.1", True),
    ("GZIP ; q=0.5", True), ("x-gzip", True), ("gzip;q=0, *", False), ("gzip;q=bad", False),
])
def test_accept_encoding(header: str, gz: bool) -> None:
    assert accepts_gzip(header) is gz


def test_obligations_show_the_status_the_certificate_recorded(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    fields = fake_fields("0")
    fields["obligations"] = [{"obligation": po, "theorem": f"T.{po}", "property": "bounds"}
                             for po in ("PO1", "PO2", "PO3")]
    fields["checks"].append({"id": "certificate", "status": "failed", "tool": "", "version": "",
                             "detail": "partial: x - PO1 partial (T.PO1); PO2 FAILED (T.PO2: y)"})
    log.seal(Bundle.from_dir(write_bundle(tmp_path / "b", "b0", "0")), fields, sk)
    with BackgroundServer(make_app(log.home)) as srv:
        text = httpx.get(srv.url + "/entry/1", timeout=30).text
    assert "Verdict at seal time: failed" in text
    for po, status in (("PO1", "partial"), ("PO2", "failed"), ("PO3", "not judged")):
        assert f"<tr><td>{po}</td><td class=\"{status.replace(' ', '-')}\">{status}</td>" in text
