"""The Atom feed (issue 11): newest entries first, a per-kernel feed, every ledger value escaped,
served by the real server."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import httpx

from ledger.bundle import Bundle
from ledger.server import make_app
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
