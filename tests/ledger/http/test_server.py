"""The public mirror over HTTP (SPEC 6, 9): a real uvicorn server on 127.0.0.1 serving a real
ledger; checkpoint, tiles, JSON API, HTML, static export, hostile requests (zero 5xx), and Go's
sumdb/note + sumdb/tlog reading the served tiles."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.bundle import Bundle, blake3_digest
from ledger.core.note import open_note, parse_checkpoint, parse_vkey
from ledger.core.tiles import parse_entry_bundle
from ledger.export import export_tiles
from ledger.http.server import make_app
from ledger.log import Log
from ledger.store import Store, open_store
from tests.helpers.ledgers import REPO, add_node, new_ledger
from tests.helpers.server import BackgroundServer

SIZE = 300  # bundles; with the key registration the tree has 301 entries (two entry tiles)
EVIL = "<script>alert('x')</script>&"
GOCODE = Path("/usr/share/gocode")


def bundle_files(i: int) -> dict[str, bytes]:
    return {
        "contract.yaml": b"name: k\nversion: '1'\n",
        f"k{i}.ptx": f"// ptx {i}\n".encode(),
        "proof.lean": b"theorem t : 1 = 1 := rfl\n",
        "spec.fut": b"-- spec\n",
        "docs/<b>.txt": EVIL.encode(),
    }


def fields(i: int) -> dict[str, Any]:
    return {
        "kernel": {"name": f"kern{i} {EVIL}", "version": "1.0.0"},
        "obligations": [{"obligation": "PO1", "theorem": EVIL, "property": "p"}],
        "checks": [
            {"id": "lean.scan", "status": "passed", "detail": EVIL, "tool": "t", "version": "1"}
        ],
    }


def build_ledger(home: Path, count: int, start: int = 0) -> Log:
    log = new_ledger(home)
    sk = add_node(log)
    seal_range(log, sk, start, start + count)
    return log


def seal_range(log: Log, sk: Any, start: int, end: int) -> None:
    log.seal_many([(Bundle.from_files(bundle_files(i)), fields(i)) for i in range(start, end)], sk)


@pytest.fixture(scope="module")
def ledger_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("srv") / "home"
    build_ledger(home, SIZE).close()
    return home


@pytest.fixture(scope="module")
def server(ledger_home: Path) -> Iterator[BackgroundServer]:
    with BackgroundServer(make_app(ledger_home)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def store(ledger_home: Path) -> Iterator[Store]:
    s = open_store(ledger_home)
    yield s
    s.close()


def test_checkpoint_is_the_signed_note(client: httpx.Client, store: Store) -> None:
    r = client.get("/checkpoint")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.content == store.checkpoint()
    cp = parse_checkpoint(open_note(r.content, [parse_vkey(str(store.meta("vkey")))]).text)
    assert cp.size == SIZE + 1 and cp.root == store.root()
    assert r.headers["x-content-type-options"] == "nosniff"


def test_full_and_partial_hash_tiles(client: httpx.Client, store: Store) -> None:
    full = client.get("/tile/0/000")
    assert full.status_code == 200
    assert full.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert full.content == b"".join(store.stored_hash(0, i) for i in range(256))
    part = client.get("/tile/0/001.p/45")
    assert part.status_code == 200 and "immutable" not in part.headers["cache-control"]
    assert part.content == b"".join(store.stored_hash(0, 256 + i) for i in range(45))
    smaller = client.get("/tile/0/001.p/3")  # any width the tree has reached
    assert smaller.content == part.content[: 3 * 32]
    top = client.get("/tile/1/000.p/1")
    assert top.content == store.stored_hash(8, 0)
    for beyond in ("/tile/0/001", "/tile/0/001.p/46", "/tile/1/000", "/tile/2/000.p/1",
                   "/tile/0/x001/000", "/tile/entries/002.p/1"):
        assert client.get(beyond).status_code == 404, beyond


def test_entry_tiles(client: httpx.Client, store: Store) -> None:
    r = client.get("/tile/entries/000")
    assert r.status_code == 200 and "immutable" in r.headers["cache-control"]
    assert parse_entry_bundle(r.content) == list(store.entries(0, 256))
    last = parse_entry_bundle(client.get("/tile/entries/001.p/45").content)
    assert last == list(store.entries(256, 301))


def test_entry_and_lookup(client: httpx.Client, store: Store) -> None:
    r = client.get("/api/v1/entries/7").json()
    data = store.entry(7)
    assert r["index"] == 7 and base64.b64decode(r["entry_b64"]) == data
    assert r["leaf_hash"] == merkle.leaf_hash(data).hex()
    assert r["entry"]["kernel"]["name"] == f"kern6 {EVIL}"
    digest = r["entry"]["bundle_digest"]
    for q in (digest, digest[:12], r["leaf_hash"], r["leaf_hash"][:10], "7"):
        found = client.get(f"/api/v1/lookup/{q}")
        assert found.status_code == 200, q
        assert found.json() == {"index": 7, "leaf_hash": r["leaf_hash"], "bundle_digest": digest}
    assert client.get("/api/v1/lookup/" + "0" * 64).status_code == 404
    assert client.get("/api/v1/entries/301").status_code == 404


def test_proofs_verify(client: httpx.Client, store: Store) -> None:
    root = store.root()
    for index, size in ((0, 301), (255, 301), (300, 301), (5, 17)):
        p = client.get("/api/v1/proof/inclusion", params={"index": index, "size": size}).json()
        # SPEC 6's fields, plus the root and (latest tree only) the checkpoint proved against
        assert set(p) == {"index", "tree_size", "leaf_hash", "hashes", "root", "checkpoint"}
        hashes = [base64.b64decode(h) for h in p["hashes"]]
        leaf = base64.b64decode(p["leaf_hash"])
        merkle.verify_inclusion(leaf, index, size, hashes, base64.b64decode(p["root"]))
        assert base64.b64decode(p["root"]) == store.root(size)
        assert (p["checkpoint"] is not None) == (size == store.size())
    default = client.get("/api/v1/proof/inclusion?index=3").json()
    assert default["tree_size"] == 301
    for old in (1, 7, 256, 300, 301):
        p = client.get(f"/api/v1/proof/consistency?old={old}&new=301").json()
        assert set(p) == {"old_size", "new_size", "hashes"}
        hashes = [base64.b64decode(h) for h in p["hashes"]]
        merkle.verify_consistency(old, 301, store.root(old), root, hashes)


def test_bundle_files_and_blobs(client: httpx.Client, store: Store) -> None:
    files = bundle_files(4)
    r = client.get("/api/v1/bundles/5/files/k4.ptx")
    assert r.status_code == 200 and r.content == files["k4.ptx"]
    assert r.headers["x-content-blake3"] == blake3_digest(files["k4.ptx"]).hex()
    assert r.headers["content-security-policy"] == "sandbox"
    nested = client.get("/api/v1/bundles/5/files/docs/%3Cb%3E.txt")
    assert nested.content == EVIL.encode()
    assert client.get("/api/v1/bundles/5/files/k3.ptx").status_code == 404
    assert client.get("/api/v1/bundles/0/files/k4.ptx").status_code == 404  # key entry
    d1, d2 = blake3_digest(files["k4.ptx"]), blake3_digest(files["spec.fut"])
    assert client.get(f"/api/v1/blobs/{d1.hex()}").content == files["k4.ptx"]
    batch = client.get("/api/v1/blobs", params=[("d", d1.hex()), ("d", d2.hex())])
    assert batch.headers["x-blob-count"] == "2"
    n1 = int.from_bytes(batch.content[:4], "big")
    assert batch.content[4 : 4 + n1] == files["k4.ptx"]
    assert batch.content[8 + n1 :] == files["spec.fut"]
    # a digest asked twice comes twice, in the order asked; one the store lacks is 404
    framed = len(files["spec.fut"]).to_bytes(4, "big") + files["spec.fut"]
    twice = client.get("/api/v1/blobs", params=[("d", d2.hex()), ("d", d2.hex())])
    assert twice.headers["x-blob-count"] == "2" and twice.content == framed * 2
    lacking = client.get("/api/v1/blobs", params=[("d", d1.hex()), ("d", "00" * 32)])
    assert lacking.status_code == 404


def test_a_blob_batch_stops_past_its_byte_cap(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``MAX_BATCH_BYTES`` the answer stops (``X-Blob-Count``), whatever comes after,
    a digest the store lacks included: the client asks again for the rest."""
    import ledger.http.server

    files = bundle_files(4)
    d1, d2 = blake3_digest(files["k4.ptx"]), blake3_digest(files["spec.fut"])
    monkeypatch.setattr(ledger.http.server, "MAX_BATCH_BYTES", 1)
    r = client.get("/api/v1/blobs", params=[("d", d1.hex()), ("d", d2.hex()), ("d", "00" * 32)])
    assert r.status_code == 200 and r.headers["x-blob-count"] == "1"
    assert r.content == len(files["k4.ptx"]).to_bytes(4, "big") + files["k4.ptx"]


def test_html_pages_escape_everything(client: httpx.Client, store: Store) -> None:
    home = client.get("/")
    assert home.status_code == 200 and "text/html" in home.headers["content-type"]
    assert "<script>" not in home.text and "kern299 &lt;script&gt;" in home.text
    assert 'href="/?before=' in home.text
    page = client.get("/entry/5")
    assert page.status_code == 200 and "<script>" not in page.text
    assert "k4.ptx" in page.text and "lean.scan" in page.text
    assert "/api/v1/bundles/5/files/docs/%3Cb%3E.txt" in page.text
    proof = store.inclusion_proof(5, 301)
    assert base64.b64encode(proof[0]).decode() in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    digest = json.loads(store.entry(5))["bundle_digest"]
    found = client.get("/search", params={"q": digest[:10]})
    assert found.status_code == 303 and found.headers["location"] == "/entry/5"
    missing = client.get("/search", params={"q": "f" * 20}, headers={"accept": "text/html"})
    assert missing.status_code == 404 and "<html" in missing.text


def test_openapi_lists_every_route(client: httpx.Client) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    for path in ("/checkpoint", "/api/v1/entries/{index}", "/api/v1/proof/inclusion",
                 "/api/v1/proof/consistency", "/api/v1/lookup/{hash}", "/api/v1/blobs/{digest}",
                 "/api/v1/bundles/{index}/files/{path}", "/entry/{index}", "/search"):
        assert path in spec["paths"], path


# --- hostile requests ---------------------------------------------------------------------------


def raw_status(
    url: str, target: str, method: str = "GET", body: bytes = b"", length: int | None = None
) -> int:
    """Send a request line exactly as given (no client-side path normalisation); ``length``
    overrides the Content-Length header (a client that lies about its body)."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        head = (f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
                ).encode("latin-1")
        s.sendall(head + body)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


HOSTILE = [
    "/tile/../ledger.db", "/tile/0/../../ledger.db", "/tile/%2e%2e/%2e%2e/ledger.db",
    "/api/v1/bundles/5/files/../../../etc/passwd", "/api/v1/bundles/5/files/%2e%2e/ledger.db",
    "/api/v1/bundles/5/files//etc/passwd", "/api/v1/blobs/../../ledger.db",
    "/tile/0/000.p/0", "/tile/0/000.p/257", "/tile/0/000.p/256", "/tile/0/0000", "/tile/0/x000/000",
    "/tile/0/-01", "/tile/-1/000", "/tile/99999999999999999999/000", "/tile/64/000",
    "/tile/entries/x999/x999/x999/x999/x999/x999/999", "/tile/entries/000.p/", "/tile/0/000.p/1/2",
    "/tile/", "/tile/0", "/tile/0/", "/tile/ent/000", "/tile/0/abc", "/tile/0/1e3",
    "/api/v1/entries/-1", "/api/v1/entries/99999999999999999999999999999999",
    "/api/v1/entries/1e9", "/api/v1/lookup/" + "a" * 65, "/api/v1/lookup/%00%00%00%00%00%00%00%00",
    "/api/v1/lookup/zzzzzzzz", "/api/v1/lookup/" + "ff" * 4,
    "/api/v1/proof/inclusion", "/api/v1/proof/inclusion?index=301",
    "/api/v1/proof/inclusion?index=0&size=0", "/api/v1/proof/inclusion?index=0&size=99999999999",
    "/api/v1/proof/inclusion?index=-1", "/api/v1/proof/inclusion?index=1&index=2",
    "/api/v1/proof/inclusion?index=" + "9" * 400, "/api/v1/proof/inclusion?index=%F0%9F%98%80",
    "/api/v1/proof/consistency?old=302",
    "/api/v1/proof/consistency?old=5&new=4", "/api/v1/proof/consistency?old=1&new=9999999999999",
    "/api/v1/blobs?" + "&".join(["d=" + "0" * 64] * 65), "/api/v1/blobs?d=", "/api/v1/blobs",
    "/api/v1/blobs/" + "A" * 64, "/api/v1/blobs/" + "0" * 63, "/api/v1/openapi.json/x",
    "/?before=-1", "/?before=abc", "/?before=" + "9" * 30, "/entry/-1", "/entry/301",
    "/entry/" + "9" * 40, "/search", "/search?q=", "/search?q=" + "x" * 5000, "/search?q=%00",
    "/search?q=<script>zz", "/%00", "/checkpoint/../tile/0/000", "/" + "a" * 8000,
]


def test_hostile_requests_never_5xx(server: BackgroundServer) -> None:
    statuses = {}
    for target in HOSTILE:
        statuses[target] = raw_status(server.url, target)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for target in ("/checkpoint", "/tile/0/000", "/api/v1/entries/1", "/api/v1/submit"):
            statuses[f"{method} {target}"] = raw_status(server.url, target, method, b"x" * 100)
    assert all(400 <= s < 500 for s in statuses.values()), {
        k: v for k, v in statuses.items() if not 400 <= v < 500
    }
    # the kernel names hold "<script>": the whole-log search finds them (issue 34), escaped
    assert raw_status(server.url, "/search?q=<script>") == 200
    # the traversal attempts found nothing; a forged tile width is refused
    assert statuses["/tile/../ledger.db"] in (400, 404)
    assert statuses["/api/v1/bundles/5/files/../../../etc/passwd"] == 404
    assert statuses["/tile/0/000.p/256"] == 400  # a full tile has no .p/ form
    assert statuses["POST /api/v1/submit"] == 404  # submissions are off by default
    print(f"hostile requests tried: {len(statuses)}, 5xx: 0")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    prefix=st.sampled_from(["/tile/", "/tile/entries/", "/api/v1/lookup/", "/api/v1/entries/",
                            "/entry/", "/api/v1/bundles/5/files/", "/api/v1/blobs/", "/search?q=",
                            "/api/v1/proof/inclusion?index=", "/api/v1/proof/consistency?old="]),
    tail=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF), max_size=80),
)
def test_fuzzed_paths_never_5xx(server: BackgroundServer, prefix: str, tail: str) -> None:
    from urllib.parse import quote

    target = prefix + quote(tail, safe="/.?=&%")
    status = raw_status(server.url, target)
    assert status < 500, target


# --- static export and the independent Go clients -----------------------------------------------


def test_export_tiles_matches_the_server(
    ledger_home: Path, client: httpx.Client, tmp_path: Path
) -> None:
    size, written = export_tiles(ledger_home, tmp_path / "out")
    assert size == 301 and written > 0
    assert (tmp_path / "out" / "checkpoint").read_bytes() == client.get("/checkpoint").content
    files = sorted(p for p in (tmp_path / "out" / "tile").rglob("*") if p.is_file())
    assert len(files) == written - 1
    for p in files:
        rel = p.relative_to(tmp_path / "out").as_posix()
        assert p.read_bytes() == client.get("/" + rel).content, rel
    again = export_tiles(ledger_home, tmp_path / "out")[1]
    assert again < written  # full tiles are immutable: not rewritten


def _go_env(tmp: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "GO111MODULE": "off",
        "GOPATH": f"{GOCODE}:{tmp / 'gopath'}",
        "GOCACHE": str(tmp / "cache"),
        "GOFLAGS": "",
        "GOTOOLCHAIN": "local",
    }


def _go_build(tmp: Path, source: Path, name: str) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain ('go') on PATH")
    if not (GOCODE / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        pytest.skip("golang.org/x/mod not in /usr/share/gocode (golang-golang-x-mod-dev)")
    exe = tmp / name
    subprocess.run([go, "build", "-o", str(exe), str(source)], env=_go_env(tmp), check=True,
                   timeout=300, capture_output=True)
    return exe


@pytest.fixture(scope="module")
def httptiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("go")
    return _go_build(tmp, REPO / "tests" / "go_tiles" / "httptiles.go", "httptiles")


def test_go_reads_the_served_tiles(
    server: BackgroundServer, store: Store, httptiles: Path
) -> None:
    exe = httptiles
    res = subprocess.run([str(exe), server.url, str(store.meta("vkey"))], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "ok note test.example/log size 301"
    assert "ok tiles authenticate root of size 301" in lines
    assert "ok entries 301" in lines
    assert lines[-1] == "ok consistency 4"


def test_go_rejects_a_wrong_key(
    server: BackgroundServer, tmp_path: Path, httptiles: Path
) -> None:
    exe = httptiles
    other = new_ledger(tmp_path / "other")
    res = subprocess.run([str(exe), server.url, str(other.store.meta("vkey"))],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "checkpoint note" in res.stderr


def test_go_ledgercheck_accepts_the_export(
    ledger_home: Path, store: Store, tmp_path: Path
) -> None:
    exe = _go_build(tmp_path, REPO / "tests" / "go" / "ledgercheck.go", "ledgercheck")
    export_tiles(ledger_home, tmp_path / "out")
    size = store.size()
    request = {
        "vkey": store.meta("vkey"),
        "checkpoint": (tmp_path / "out" / "checkpoint").read_text(),
        "tiles_dir": str(tmp_path / "out"),
        "inclusion": [
            {"index": i, "tree_size": size,
             "leaf_hash": base64.b64encode(merkle.leaf_hash(store.entry(i))).decode(),
             "hashes": [base64.b64encode(h).decode() for h in store.inclusion_proof(i, size)]}
            for i in (0, 255, 256, size - 1)
        ],
        "consistency": [],
    }
    res = subprocess.run([str(exe)], input=json.dumps(request), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == f"ok entries {size}"


def test_cli_serve_runs_and_answers(ledger_home: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LEDGER_HOME": str(ledger_home)}
    proc = subprocess.Popen([sys.executable, "-m", "ledger_cli", "serve", "--port", str(port)],
                            cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    try:
        body = b""
        for _ in range(200):
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/checkpoint", timeout=5).content
                break
            except httpx.TransportError:
                import time

                time.sleep(0.05)
        assert body.startswith(b"test.example/log\n301\n")
    finally:
        proc.terminate()
        proc.wait(30)


def test_cli_export_tiles(ledger_home: Path, tmp_path: Path) -> None:
    from tests.helpers.ledgers import run_cli

    res = run_cli("export-tiles", str(tmp_path / "static"), "--json", home=ledger_home)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["tree_size"] == 301 and out["files"] > 4
    assert (tmp_path / "static" / "tile" / "entries" / "001.p" / "45").is_file()
    missing = run_cli("export-tiles", str(tmp_path / "x"), home=tmp_path / "nothing")
    assert missing.returncode == 2 and missing.stderr.startswith("ledger: error: ")
