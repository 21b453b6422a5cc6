"""The Atom feed (issue 11): newest entries first, a per-kernel feed, every ledger value escaped,
served by the real server."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx

from ledger.core.bundle import Bundle
from ledger.http.server import make_app
from tests.helpers.ledgers import add_node, fake_fields, new_ledger, write_bundle
from tests.helpers.server import BackgroundServer

ATOM = "{http://www.w3.org/2005/Atom}"


def test_feed_lists_new_entries_and_filters_by_kernel(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    names = ["saxpy", "gemm", "saxpy", "<b>&'x"]
    for i, name in enumerate(names):
        fields = fake_fields(str(i))
        fields["kernel"] = {"name": name, "version": "1.0.0"}
        log.seal(Bundle.from_dir(write_bundle(tmp_path / "b", f"b{i}", str(i))), fields, sk)
    with BackgroundServer(make_app(log.home)) as srv:
        r = httpx.get(srv.url + "/feed.atom", timeout=30)
        assert r.status_code == 200 and r.headers["content-type"].startswith(
            "application/atom+xml")
        feed = ET.fromstring(r.content)
        titles = [e.findtext(f"{ATOM}title") for e in feed.iter(f"{ATOM}entry")]
        assert titles == [f"sealed {n} 1.0.0" for n in reversed(names)] + ["key-registration"]
        links = [e.find(f"{ATOM}link").get("href") for e in feed.iter(f"{ATOM}entry")]  # type: ignore[union-attr]
        assert links[0] == srv.url + "/entry/4"
        only = ET.fromstring(httpx.get(srv.url + "/feed.atom?kernel=saxpy", timeout=30).content)
        assert [e.findtext(f"{ATOM}id") for e in only.iter(f"{ATOM}entry")] == [
            srv.url + "/entry/3", srv.url + "/entry/1"]
        assert httpx.get(srv.url + "/feed.atom?kernel=", timeout=30).status_code == 400


def test_cors_on_public_reads_only(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    add_node(log)
    with BackgroundServer(make_app(log.home)) as srv:
        for path in ("/checkpoint", "/api/v1/entries/0", "/feed.atom", "/tile/0/000.p/1"):
            r = httpx.get(srv.url + path, timeout=30)
            assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*", path
        page = httpx.get(srv.url + "/", timeout=30)
        assert "access-control-allow-origin" not in page.headers


def test_search_by_kernel_name_and_by_signer(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log, "alice")
    for i, name in enumerate(["saxpy", "gemm", "saxpy"]):
        fields = fake_fields(str(i))
        fields["kernel"] = {"name": name, "version": "1.0.0"}
        log.seal(Bundle.from_dir(write_bundle(tmp_path / "b", f"b{i}", str(i))), fields, sk)
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=30) as c:
        page = c.get(srv.url + "/search", params={"q": "saxpy"})
        assert page.status_code == 200
        assert '<a href="/entry/3">3</a>' in page.text and '<a href="/entry/1">1</a>' in page.text
        assert '<a href="/entry/2">' not in page.text
        by_name = c.get(srv.url + "/search", params={"q": "alice"})
        assert by_name.status_code == 200
        assert all(f'<a href="/entry/{i}">' in by_name.text for i in range(4))  # key + 3 seals
        nothing = c.get(srv.url + "/search", params={"q": "<nope>"},
                        headers={"accept": "text/html"})
        assert nothing.status_code == 404 and "&lt;nope&gt;" in nothing.text
        assert c.get(srv.url + "/search", params={"q": "2"}).status_code == 303  # an index


def test_entry_page_tells_an_auditor_the_verdict_signer_and_how_to_check(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log, "alice")
    log.seal(Bundle.from_dir(write_bundle(tmp_path / "b", "b0", "0")), fake_fields("0"), sk)
    with BackgroundServer(make_app(log.home)) as srv:
        text = httpx.get(srv.url + "/entry/1", timeout=30).text
    assert "Verdict at seal time: verified" in text
    assert "alice (<code class=\"h\"" in text
    words = re.sub(r"<[^>]+>", "", text)  # the words, the spans that keep each on a line aside
    assert "registered by entry 0 (" in words and "Z), not revoked" in words
    assert "Verify it yourself" in text and f"ledger mirror {srv.url} --vkey" in text
    assert 'name="viewport"' in text


def test_etag_and_304_on_public_reads(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    add_node(log)
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=30) as c:
        for path in ("/checkpoint", "/api/v1/entries/0", "/tile/0/000.p/1"):
            first = c.get(srv.url + path)
            tag = first.headers["etag"]
            assert first.status_code == 200 and tag.startswith('"') and len(tag) == 34
            again = c.get(srv.url + path, headers={"if-none-match": tag})
            assert again.status_code == 304 and again.content == b"", path
            other = c.get(srv.url + path, headers={"if-none-match": '"nope"'})
            assert other.status_code == 200 and other.content == first.content
        assert "etag" not in c.get(srv.url + "/").headers
