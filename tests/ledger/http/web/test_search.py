"""The auditor's pages over a real server (issue 34): search by kernel name prefix, part and
wildcard, signer, digest prefix and index, any case, over the whole log, the query kept in the
box (also when nothing matches); a page per ``name@version``; verdict and signer columns; PO1-PO8
in words and the ``partial`` reasons as a list; the whole bundle as one reproducible
``.tar.gz`` whose SHA-256 the entry page shows."""

from __future__ import annotations

import gzip
import hashlib
import html
import io
import re
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.core.bundle import Bundle, blake3_digest, parse_manifest
from ledger.core.canonical import loads_canonical
from ledger.http.server import make_app
from ledger.log import Log
from tests.helpers.ledgers import add_node, fake_fields, new_ledger, write_bundle
from tests.helpers.server import BackgroundServer


def seal(log: Log, sk: Any, root: Path, name: str, version: str, status: str = "passed",
         obligations: list[dict[str, str]] | None = None) -> int:
    fields = fake_fields(f"{name}{version}")
    fields["kernel"] = {"name": name, "version": version}
    fields["checks"][0]["status"] = status
    if status == "skipped":
        fields["checks"][0]["detail"] = "no Lean toolchain on PATH; more words after"
    if obligations:
        fields["obligations"] = obligations
        fields["checks"].append({"id": "certificate", "status": "skipped", "tool": "",
                                 "version": "", "detail": "partial: PO1 partial (T.a); PO7 ok "
                                 "(T.b)"})
    d = write_bundle(root, f"{name}-{version}", f"{name}{version}",
                     {"src/deep/file.cu": f"// {name}\n".encode()})
    return log.seal(Bundle.from_dir(d), fields, sk).index


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("websearch")
    log = new_ledger(root / "home")
    alice, bob = add_node(log, "alice"), add_node(log, "bob")
    claims = [{"obligation": "PO1", "theorem": "T.a", "property": "coverage"},
              {"obligation": "PO7", "theorem": "T.b", "property": "race_free"}]
    at = {
        "f16": seal(log, alice, root, "GEMM_f16", "1.0.0"),
        "f32": seal(log, bob, root, "gemm_f32", "2.0", "skipped", claims),
        "f32b": seal(log, alice, root, "gemm_f32", "2.1", "failed"),
        "s": seal(log, alice, root, "sgemm", "0.1"),
    }
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=60) as c:
        yield {"url": srv.url, "c": c, "log": log, "at": at, "root": root}
    log.close()


def listed(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr><td><a href="/entry/(\d+)">', page)]


def text_of(fragment: str) -> str:
    """The text of an HTML fragment, its runs of spaces made one."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def box(page: str) -> str:
    m = re.search(r'<input name="q" value="([^"]*)"', page)
    assert m, page[:500]
    return html.unescape(m.group(1))


@pytest.mark.parametrize("q, want", [
    ("gemm", ["f32b", "f32", "f16", "s"]),  # prefix matches first (newest first), then inside
    ("GEMM_F", ["f32b", "f32", "f16"]),
    ("emm_f3", ["f32b", "f32"]),
    ("*16", ["f16"]),
    ("SGEMM", ["s"]),
])
def test_search_by_kernel_name_any_case_keeps_the_query(site: Any, q: str,
                                                        want: list[str]) -> None:
    page = site["c"].get(site["url"] + "/search", params={"q": q})
    assert page.status_code == 200
    got = listed(page.text)
    assert sorted(got, reverse=True) == sorted((site["at"][w] for w in want), reverse=True)
    assert box(page.text) == q


def test_search_by_signer_and_digest_prefix(site: Any) -> None:
    c, url, log, at = site["c"], site["url"], site["log"], site["at"]
    bob = next(k.key_id.hex() for k in log.store.key_rows() if k.name == "bob")
    by_name = c.get(url + "/search", params={"q": "BOB"}).text
    assert listed(by_name) == [at["f32"], 1] and f'href="/key/{bob}"' in by_name
    assert listed(c.get(url + "/search", params={"q": bob[:5]}).text) == [at["f32"], 1]
    digest = loads_canonical(log.store.entry(at["s"]))["bundle_digest"]
    page = c.get(url + "/search", params={"q": digest[:6].upper()})
    assert listed(page.text) == [at["s"]] and box(page.text) == digest[:6].upper()
    one = c.get(url + "/search", params={"q": str(at["s"])}, follow_redirects=False)
    assert one.status_code == 303 and one.headers["location"] == f"/entry/{at['s']}"


def test_nothing_found_is_a_404_that_keeps_the_query(site: Any) -> None:
    page = site["c"].get(site["url"] + "/search", params={"q": "no-such <kernel>"},
                         headers={"accept": "text/html"})
    assert page.status_code == 404 and box(page.text) == "no-such <kernel>"
    assert "no-such &lt;kernel&gt;" in page.text  # escaped, never markup


def test_lists_show_verdict_and_signer(site: Any) -> None:
    c, url, at = site["c"], site["url"], site["at"]
    home = c.get(url + "/").text
    for key, verdict, signer in (("f16", "verified", "alice"), ("f32", "partial", "bob"),
                                 ("f32b", "failed", "alice")):
        row = re.search(rf'<tr><td><a href="/entry/{at[key]}">.*?</tr>', home, re.S)
        assert row, home
        assert f'class="verdict-cell {verdict}">{verdict}<' in row.group(0)
        assert f'<span class="t">{signer}</span>' in row.group(0)


def test_kernel_page_per_name_at_version(site: Any) -> None:
    c, url, at = site["c"], site["url"], site["at"]
    one = c.get(url + "/kernel/gemm_f32@2.0")
    assert one.status_code == 200 and listed(one.text) == [at["f32"]]
    assert "1 bundle entry" in one.text and ">partial<" in one.text
    every = c.get(url + "/kernel/GEMM_F32")  # every version, any case
    assert listed(every.text) == [at["f32b"], at["f32"]]
    assert 'href="/kernel/gemm_f32@2.1"' in every.text
    entry = c.get(url + f"/entry/{at['f32']}").text
    assert 'href="/kernel/gemm_f32@2.0"' in entry  # the entry links its name@version page
    ref = c.get(url + "/search", params={"q": "gemm_f32@2.0"}, follow_redirects=False)
    assert ref.status_code == 303 and ref.headers["location"] == "/kernel/gemm_f32@2.0"
    missing = c.get(url + "/kernel/gemm_f32@9.9", headers={"accept": "text/html"})
    assert missing.status_code == 404 and box(missing.text) == "gemm_f32@9.9"
    assert c.get(url + "/kernel/@1").status_code == 400


def test_obligations_in_words_and_partial_reasons_as_a_list(site: Any) -> None:
    page = site["c"].get(site["url"] + f"/entry/{site['at']['f32']}").text
    assert "Verdict at seal time: partial" in page
    rows = re.findall(r"<tr><td>(PO\d)</td><td class=\"([a-z-]+)\">[a-z ]+</td>"
                      r"<td class=\"words\">(.*?)</td>", page)
    unclaimed = ["PO2", "PO3", "PO4", "PO5", "PO6", "PO8"]
    assert [(po, status) for po, status, _ in rows] == [
        ("PO1", "partial"), ("PO7", "ok"), *((po, "not-claimed") for po in unclaimed)]
    assert "written exactly once" in text_of(rows[0][2])
    assert "between two barriers" in text_of(rows[1][2])
    # the obligations it does not claim are explained in words too
    said = {po: text_of(w) for po, _, w in rows}
    assert "reached by the whole block" in said["PO3"]
    assert "within the stated error bound" in said["PO4"]
    assert "reads shared memory before" in said["PO6"]
    assert "agree with the reference" in said["PO8"]
    assert "No proof obligations claimed." not in page
    reasons = re.search(r'<ul class="reasons" id="partial-reasons">(.*?)</ul>', page, re.S)
    assert reasons, page
    items = [text_of(li) for li in re.findall(r"<li>(.*?)</li>", reasons.group(1))]
    assert items[0] == "integrity.manifest skipped: no Lean toolchain on PATH"
    assert items[1].startswith("PO1 (coverage) partial") and len(items) == 2
    verified = site["c"].get(site["url"] + f"/entry/{site['at']['f16']}").text
    assert "partial-reasons" not in verified
    # a bundle that claims nothing says so, and still lists PO1-PO8 in words as not claimed
    assert "No proof obligations claimed." in verified
    rows = re.findall(r"<tr><td>(PO\d)</td><td class=\"not-claimed\">not claimed</td>"
                      r"<td class=\"words\">(.+?)</td>", verified)
    assert [po for po, _ in rows] == [f"PO{i}" for i in range(1, 9)]
    assert all(text_of(w) for _, w in rows)


def _members(data: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getmembers()


def test_whole_bundle_tar_gz_is_reproducible_and_its_digest_is_shown(site: Any,
                                                                     tmp_path: Path) -> None:
    c, url, log, at = site["c"], site["url"], site["log"], site["at"]
    index = at["f32"]
    got = c.get(url + f"/api/v1/bundles/{index}/bundle.tar.gz")
    assert got.status_code == 200 and got.headers["content-type"] == "application/gzip"
    assert f'filename="entry-{index}.tar.gz"' in got.headers["content-disposition"]
    sha = hashlib.sha256(got.content).hexdigest()
    page = c.get(url + f"/entry/{index}").text
    assert f'<pre id="bundle-sha256">{sha}</pre>' in page
    assert f'href="/api/v1/bundles/{index}/bundle.tar.gz"' in page
    # the same bytes again, and from a second server over the same log (a mirror's app)
    assert c.get(url + f"/api/v1/bundles/{index}/bundle.tar.gz").content == got.content
    with BackgroundServer(make_app(log.home)) as other:
        again = httpx.get(other.url + f"/api/v1/bundles/{index}/bundle.tar.gz", timeout=60)
        assert again.content == got.content
    assert got.content[4:8] == b"\0\0\0\0"  # gzip header: mtime 0
    assert gzip.decompress(got.content)[:100].rstrip(b"\0").startswith(b"entry-")
    members = _members(got.content)
    entry = loads_canonical(log.store.entry(index))
    manifest = parse_manifest(entry["manifest"].encode())
    assert [m.name for m in members] == [f"entry-{index}/{rel}" for rel, _ in manifest]
    assert all(m.isfile() and m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "root"
               and m.gname == "root" and m.mode == 0o644 for m in members)
    with tarfile.open(fileobj=io.BytesIO(got.content), mode="r:gz") as tar:
        for (rel, digest), m in zip(manifest, members, strict=True):
            f = tar.extractfile(m)
            assert f is not None and blake3_digest(f.read()) == digest, rel
    key_entry = c.get(url + "/api/v1/bundles/0/bundle.tar.gz")
    assert key_entry.status_code == 404


def test_the_index_follows_the_growing_log(tmp_path: Path) -> None:
    """Entries appended while the server runs are found by the next search (the server's index
    reads what is new), and the first entry stays findable."""
    log = new_ledger(tmp_path / "home")
    sk = add_node(log, "carol")
    first = seal(log, sk, tmp_path, "first_kernel", "1")
    with BackgroundServer(make_app(log.home)) as srv, httpx.Client(timeout=60) as c:
        assert listed(c.get(srv.url + "/search", params={"q": "kernel"}).text) == [first]
        later = [seal(log, sk, tmp_path, f"later_kernel_{i}", "1") for i in range(3)]
        page = c.get(srv.url + "/search", params={"q": "KERNEL"}).text
        assert listed(page) == [*reversed(later), first]
        assert listed(c.get(srv.url + "/kernel/later_kernel_2@1").text) == [later[2]]
    log.close()
