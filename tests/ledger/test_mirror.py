"""``ledger mirror`` (SPEC 9): follow a live server, verify everything, resume after a fault,
refuse tampering, and detect a rewritten (forked) history with both checkpoints kept."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import nacl.signing
import pytest

from ledger import mirror as mirror_mod
from ledger.core.bundle import Bundle
from ledger.core.encoding import b64_decode
from ledger.core.entries import node_key_id
from ledger.core.errors import CannotCheck, RewriteDetected, SignatureError, TamperDetected
from ledger.core.note import note_text, open_note, parse_checkpoint, parse_vkey
from ledger.http.server import make_app
from ledger.log import Log
from ledger.mirror import BLOBS_PER_REQUEST, Mirror, Remote, follow
from ledger.net.client import BadAnswer
from ledger.store import Store, open_store
from tests.helpers.ledgers import add_node, new_ledger, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import seal_range

Handler = Callable[[httpx.Request, httpx.Response], httpx.Response]


def make_origin(home: Path, count: int) -> Log:
    log = new_ledger(home)
    sk = add_node(log, "node")
    seal_range(log, sk, 0, count)
    return log


def node_key(log: Log) -> nacl.signing.SigningKey:
    from ledger.keys import load_node_secret

    return load_node_secret(log.keydir, "node")[0]


def same_ledger(a: Path, b: Path) -> None:
    sa, sb = open_store(a), open_store(b)
    try:
        assert sa.size() == sb.size()
        assert list(sa.entries(0, sa.size())) == list(sb.entries(0, sb.size()))
        assert sa.root() == sb.root()
        assert sorted(sa.blobs()) == sorted(sb.blobs())
        assert sa.key_rows() == sb.key_rows()
        assert sa.checkpoint() == sb.checkpoint()
    finally:
        sa.close()
        sb.close()


class Proxy(httpx.BaseTransport):
    """A real HTTP transport to the server with a fault hook (the only mock: injected faults)."""

    def __init__(self, hook: Handler | None = None, fail_on: str | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.hook = hook
        self.fail_on = fail_on

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.fail_on is not None and request.url.path.startswith(self.fail_on):
            raise httpx.ConnectError("injected: connection refused", request=request)
        resp = self.inner.handle_request(request)
        if self.hook is None:
            return resp
        resp.read()
        # the hook sees (and may change) the decoded body: hand it on without the encoding that
        # body no longer has (entry bundles come gzip-compressed, C2SP tlog-tiles)
        headers = [(k, v) for k, v in resp.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length")]
        return self.hook(request, httpx.Response(resp.status_code, headers=headers,
                                                 content=resp.content))

    def close(self) -> None:
        self.inner.close()


_OPEN: list[Remote] = []


@pytest.fixture(autouse=True)
def _close_remotes() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def remote(url: str, transport: httpx.BaseTransport | None = None) -> Remote:
    r = Remote(url, httpx.Client(transport=transport or httpx.HTTPTransport(), timeout=30))
    _OPEN.append(r)
    return r


@pytest.fixture()
def origin(tmp_path: Path) -> Iterator[tuple[Log, BackgroundServer]]:
    log = make_origin(tmp_path / "origin", 300)
    with BackgroundServer(make_app(log.home)) as srv:
        yield log, srv
    log.close()


def vkey_of(log: Log) -> str:
    return str(log.store.meta("vkey"))


def test_mirror_copies_and_verifies_everything(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin
    m = Mirror(tmp_path / "m", remote(srv.url), vkey_of(log))
    r = m.sync()
    assert (r.old_size, r.new_size, r.entries) == (0, 301, 301)
    assert r.blobs == 304  # 300 distinct .ptx files and 4 files every bundle shares
    same_ledger(log.home, tmp_path / "m")
    again = m.sync()
    assert again.entries == 0 and again.requests == 1
    # the mirror is a ledger: `ledger checkpoint` prints the verified note, audit passes
    res = run_cli("checkpoint", home=tmp_path / "m")
    assert res.returncode == 0 and res.stdout.encode() == log.store.checkpoint()
    audit = run_cli("audit", home=tmp_path / "m")
    assert audit.returncode == 0, audit.stderr


@pytest.mark.parametrize("batch_bytes", [32 << 20, 1])
def test_mirror_pipelines_tiles_and_blob_batches_from_ledger_serve(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, batch_bytes: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a client handed in, the mirror asks the entry tiles and the blob batches of
    ``ledger serve`` pipelined (``ledger.net.pipeline``), and the server answers them in order. With
    the server's batch cap at one byte every batch answer holds one blob (``X-Blob-Count: 1``):
    the rest of each batch is asked again one request at a time, and nothing is missing."""
    import ledger.http.server

    monkeypatch.setattr(ledger.http.server, "MAX_BATCH_BYTES", batch_bytes)
    log, srv = origin
    r = Remote(srv.url)
    _OPEN.append(r)
    result = Mirror(tmp_path / "m", r, vkey_of(log)).sync()
    assert r.batch is True and r.pipe is not None and r.pipe.on
    assert r.pipe.requests >= 2 + (304 - BLOBS_PER_REQUEST) // BLOBS_PER_REQUEST  # tiles, batches
    assert (result.entries, result.blobs) == (301, 304)
    if batch_bytes == 1:  # one request per blob beyond each batch's first
        assert result.requests > 304
    same_ledger(log.home, tmp_path / "m")


def test_mirror_follows_growth_and_serves_it(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin
    m = Mirror(tmp_path / "m", remote(srv.url), vkey_of(log))
    m.sync()
    seal_range(log, node_key(log), 300, 600)
    r = m.sync()
    assert (r.old_size, r.new_size) == (301, 601)
    same_ledger(log.home, tmp_path / "m")
    with BackgroundServer(make_app(tmp_path / "m")) as mirror_srv:
        with httpx.Client() as c:
            a = c.get(srv.url + "/tile/entries/002.p/89").content
            b = c.get(mirror_srv.url + "/tile/entries/002.p/89").content
            assert a == b
            assert c.get(mirror_srv.url + "/checkpoint").content == log.store.checkpoint()
        # a mirror of the mirror verifies against the same pinned key
        m2 = Mirror(tmp_path / "m2", remote(mirror_srv.url), vkey_of(log))
        assert m2.sync().new_size == 601


def test_mirror_resumes_after_a_fault(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, srv = origin
    monkeypatch.setattr(mirror_mod, "BATCH_TILES", 1)
    seal_range(log, node_key(log), 300, 700)  # 701 entries: three batches
    flaky = Proxy(fail_on="/tile/entries/002")  # the network fails in the third batch
    with pytest.raises(CannotCheck, match="injected"):
        Mirror(tmp_path / "m", remote(srv.url, flaky), vkey_of(log)).sync()
    partial = open_store(tmp_path / "m")
    assert partial.size() == 512  # two verified batches were kept, no checkpoint yet
    assert partial.meta(mirror_mod.PENDING_META)
    partial.close()
    r = Mirror(tmp_path / "m", remote(srv.url), vkey_of(log)).sync()
    assert (r.old_size, r.new_size, r.entries) == (512, 701, 189)
    same_ledger(log.home, tmp_path / "m")


def test_tampered_entry_is_refused(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin

    def flip(request: httpx.Request, resp: httpx.Response) -> httpx.Response:
        body = resp.content
        if "/tile/entries/" in request.url.path:
            body = body.replace(b"kern17 ", b"kern71 ", 1)
        return httpx.Response(resp.status_code, headers=resp.headers, content=body)

    # the changed entry no longer hashes to the signed root: bad data from whoever served the
    # tile (issue 9 item 13), refused before any entry is judged, and no fork evidence
    with pytest.raises(BadAnswer, match="does not match the signed checkpoint"):
        Mirror(tmp_path / "m", remote(srv.url, Proxy(flip)), vkey_of(log)).sync()
    assert not (tmp_path / "m" / "evidence").exists()
    s = open_store(tmp_path / "m")
    assert s.size() == 0  # nothing of the bad batch was stored
    s.close()


def test_tampered_hash_tile_is_refused(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, srv = origin
    monkeypatch.setattr(mirror_mod, "BATCH_TILES", 1)

    def flip(request: httpx.Request, resp: httpx.Response) -> httpx.Response:
        body = resp.content
        if request.url.path.startswith("/tile/0/001"):
            body = bytes([body[0] ^ 1]) + body[1:]
        return httpx.Response(resp.status_code, headers=resp.headers, content=body)

    with pytest.raises(BadAnswer, match="does not match the signed checkpoint"):
        Mirror(tmp_path / "m", remote(srv.url, Proxy(flip)), vkey_of(log)).sync()
    assert not (tmp_path / "m" / "evidence").exists()  # bad tiles are not a fork


def test_wrong_key_exits_1(origin: tuple[Log, BackgroundServer], tmp_path: Path) -> None:
    log, srv = origin
    other = new_ledger(tmp_path / "other", "test.example/log")
    with pytest.raises(SignatureError):
        Mirror(tmp_path / "m", remote(srv.url), vkey_of(other)).sync()
    res = run_cli("mirror", srv.url, "--vkey", vkey_of(other), home=tmp_path / "m2")
    assert res.returncode == 1 and res.stderr.startswith("ledger: error: ")
    unreachable = run_cli("mirror", "http://127.0.0.1:9", "--vkey", vkey_of(log),
                          home=tmp_path / "m3")
    assert unreachable.returncode == 3


def test_forked_history_is_detected_and_kept_as_evidence(tmp_path: Path) -> None:
    a = make_origin(tmp_path / "a", 300)
    a.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # same log key, same first 301 entries
    a, b = Log.open(tmp_path / "a"), Log.open(tmp_path / "b")
    seal_range(a, node_key(a), 1000, 1001)
    seal_range(b, node_key(b), 2000, 2002)  # a different history under the same log key
    vkey = vkey_of(a)
    assert vkey == vkey_of(b)
    home = tmp_path / "m"
    with BackgroundServer(make_app(a.home)) as srv_a:
        res = run_cli("mirror", srv_a.url, "--vkey", vkey, "--json", home=home)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["new_size"] == 302
    with BackgroundServer(make_app(b.home)) as srv_b:
        res = run_cli("mirror", srv_b.url, "--vkey", vkey, home=home)
    assert res.returncode == 1, res.stderr
    assert "rewritten" in res.stderr and str(home / "evidence") in res.stderr
    kept = sorted((home / "evidence").glob("*.checkpoint"))
    assert len(kept) == 2
    notes = {p.name.rsplit("-", 1)[1]: p.read_bytes() for p in kept}
    # the authenticated consistency path: it leads to b's signed root, and from the same hashes
    # to another root at a's size than a's signed root
    [proof] = (home / "evidence").glob("*-consistency.proof")
    _head, old_line, new_line, *hashes = proof.read_text().splitlines()
    old_size, got = int(old_line.split()[1]), b64_decode(old_line.split()[2], 32, "root")
    new_size = int(new_line.split()[1])
    path = [b64_decode(h, 32, "hash") for h in hashes]
    roots = mirror_mod._consistency_roots(old_size, new_size, path)
    a_cp = parse_checkpoint(note_text(a.store.checkpoint()))
    b_cp = parse_checkpoint(note_text(b.store.checkpoint()))
    assert roots == (got, b_cp.root) and got != a_cp.root and old_size == a_cp.size
    assert notes["verified.checkpoint"] == a.store.checkpoint()
    assert notes["remote.checkpoint"] == b.store.checkpoint()
    for note in notes.values():  # both are validly signed by the same log key: proof of a fork
        open_note(note, [parse_vkey(vkey)])
    s = open_store(home)
    assert s.size() == 302 and s.checkpoint() == a.store.checkpoint()  # the mirror kept its copy
    s.close()
    a.close()
    b.close()


def test_same_size_fork_and_shrink_are_rewrites(tmp_path: Path) -> None:
    a = make_origin(tmp_path / "a", 10)
    a.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.copytree(tmp_path / "a", tmp_path / "old")  # an older copy of the same log
    shutil.copytree(tmp_path / "a", tmp_path / "c")
    a, b, c = Log.open(tmp_path / "a"), Log.open(tmp_path / "b"), Log.open(tmp_path / "c")
    seal_range(a, node_key(a), 100, 102)
    seal_range(b, node_key(b), 200, 202)
    seal_range(c, node_key(c), 300, 301)  # size 12, another entry 11 than a's
    vkey = vkey_of(a)
    with BackgroundServer(make_app(a.home)) as srv:
        Mirror(tmp_path / "m", remote(srv.url), vkey).sync()
    with BackgroundServer(make_app(b.home)) as srv:
        with pytest.raises(RewriteDetected, match="two roots for size 13"):
            Mirror(tmp_path / "m", remote(srv.url), vkey).sync()
    with BackgroundServer(make_app(c.home)) as srv:
        with pytest.raises(RewriteDetected, match="shrank from 13 to 12 with another root"):
            Mirror(tmp_path / "m", remote(srv.url), vkey).sync()
    assert len(list((tmp_path / "m" / "evidence").iterdir())) == 4
    # an older checkpoint of the same history is a stale copy, not a fork: no evidence
    with BackgroundServer(make_app(tmp_path / "old")) as srv:
        with pytest.raises(CannotCheck, match=r"older .* consistent with it"):
            Mirror(tmp_path / "m", remote(srv.url), vkey).sync()
    assert len(list((tmp_path / "m" / "evidence").iterdir())) == 4
    a.close()
    b.close()
    c.close()


def test_follow_polls_and_backs_off(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin
    m = Mirror(tmp_path / "m", remote(srv.url), vkey_of(log))
    seen: list[int] = []
    errors: list[float] = []

    def report(r: mirror_mod.SyncResult) -> None:
        seen.append(r.new_size)
        if len(seen) == 1:
            seal_range(log, node_key(log), 300, 310)

    follow(m, 0.01, report, lambda e, d: errors.append(d), rounds=2)
    assert seen == [301, 311]
    dead = Mirror(tmp_path / "m", remote("http://127.0.0.1:9"), vkey_of(log))
    with pytest.raises(CannotCheck, match="no poll of 3 succeeded"):
        follow(dead, 0.01, report, lambda e, d: errors.append(d), rounds=3, jitter=lambda: 1.0)
    assert errors == [0.02, 0.04, 0.08]  # exponential backoff while unreachable


def test_batches_in_threads_verify_a_key_rotation(
    origin: tuple[Log, BackgroundServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 256 (every one but the first a perfect subtree, hashed level by level), the
    signatures of each verified on several threads: a node key registered and another revoked
    in the middle of a sync are judged in log order, and the copy is the origin's."""
    log, srv = origin
    monkeypatch.setattr(mirror_mod, "BATCH_TILES", 1)
    monkeypatch.setattr(mirror_mod, "VERIFY_THREADS", 3)
    first = node_key(log)
    seal_range(log, first, 300, 700)  # indices 301..700
    second = add_node(log, "node2")  # registered at 701
    log.revoke(node_key_id(bytes(first.verify_key)), "rotated")
    seal_range(log, second, 700, 800)

    def flip(request: httpx.Request, resp: httpx.Response) -> httpx.Response:
        body = resp.content
        if request.url.path.startswith("/tile/entries/002"):
            body = body.replace(b"kern600 ", b"kern060 ", 1)  # entry 601, signed by node
        return httpx.Response(resp.status_code, headers=resp.headers, content=body)

    with pytest.raises(BadAnswer, match="up to 768 do not match the signed checkpoint"):
        Mirror(tmp_path / "bad", remote(srv.url, Proxy(flip)), vkey_of(log)).sync()
    r = Mirror(tmp_path / "m", remote(srv.url), vkey_of(log)).sync()
    assert r.new_size == 803
    same_ledger(log.home, tmp_path / "m")


def _append_raw(log: Log, entries: list[tuple[bytes, Bundle]]) -> None:
    """Append entries as a log without any checks would, with a signed checkpoint."""
    from ledger.core.note import Checkpoint, format_checkpoint, sign_note

    assert log.signer is not None
    with log.store.writer() as w:
        for entry, bundle in entries:
            w.put_blobs((f.digest, f.data) for f in bundle.files)
            w.append(entry, "bundle", bundle.digest)
        note = sign_note(format_checkpoint(Checkpoint(log.origin, w.size, w.root(), ())),
                         [log.signer])
        w.put_checkpoint(note, w.size)


def _forged(log: Log, i: int, *, key: nacl.signing.SigningKey | None = None,
            link: tuple[int, bytes] | None = None) -> tuple[bytes, Bundle]:
    """Bundle entry ``i`` as node ``node`` would make it at the end of the log, but signed by
    ``key`` (another key than its signer id names) or chained to ``link`` (size, root)."""
    from ledger.core.entries import bundle_fields, chain_link, sign_entry
    from ledger.log import utc_now
    from tests.ledger.http.test_server import bundle_files, fields

    node = node_key(log)
    bundle = Bundle.from_files(bundle_files(i))
    size, root = link or (log.store.size(), log.store.root())
    chain = {"origin": log.origin, "time": utc_now(), **chain_link(size, root)}
    obj = bundle_fields(chain, bundle, fields(i), node_key_id(bytes(node.verify_key)))
    return sign_entry(obj, key or node), bundle


@pytest.mark.parametrize("case", ["signature", "signature-then-link", "link-then-signature"])
def test_the_first_bad_entry_of_a_batch_fails_the_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Signatures are verified after the other rules, for the whole batch at once; the sync
    still fails at the first entry with a problem of either kind, with that entry's error."""
    monkeypatch.setattr(mirror_mod, "BATCH_TILES", 1)
    log = make_origin(tmp_path / "o", 600)
    stranger = nacl.signing.SigningKey.generate()
    bad_sig = _forged(log, 9001, key=stranger)
    if case == "signature":
        _append_raw(log, [bad_sig])
        want: type[Exception] = SignatureError
        at = 601
    elif case == "signature-then-link":
        _append_raw(log, [bad_sig])
        _append_raw(log, [_forged(log, 9002, link=(3, log.store.root(4)))])
        want, at = SignatureError, 601
    else:
        _append_raw(log, [_forged(log, 9002, link=(3, log.store.root(4)))])
        _append_raw(log, [_forged(log, 9001, key=stranger)])
        want, at = TamperDetected, 601
    seal_range(log, node_key(log), 700, 760)  # more good entries after them, same batch
    with BackgroundServer(make_app(log.home)) as srv:
        with pytest.raises(want, match=f"remote entry {at}"):
            Mirror(tmp_path / "m", remote(srv.url), vkey_of(log)).sync()
    m = open_store(tmp_path / "m")
    try:
        assert m.size() == 512  # the two full batches before it, verified and stored
    finally:
        m.close()
    log.close()


def test_cli_follow_prints_one_json_line_per_poll(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    log, srv = origin
    res = run_cli("mirror", srv.url, "--vkey", vkey_of(log), "--follow", "--rounds", "2",
                  "--interval", "0.01", "--json", home=tmp_path / "m")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [(x["old_size"], x["new_size"]) for x in lines] == [(0, 301), (301, 301)]
    bad = run_cli("mirror", srv.url, "--vkey", "not a key", home=tmp_path / "m2")
    assert bad.returncode == 2


def test_before_store_keeps_a_refused_checkpoint_out(
    origin: tuple[Log, BackgroundServer], tmp_path: Path
) -> None:
    """The hook the CLI gives the checkpoint memory (issue 14): it sees every entry stored and
    the signed note before it is stored; when it raises, the checkpoint is not stored (the
    mirror serves nothing of that tree) and the next sync checks the same tree again."""
    log, srv = origin
    seen: list[tuple[int, bytes]] = []

    def refuse(store: Store, note: bytes) -> None:
        seen.append((store.size(), note))
        raise RewriteDetected("refused by the test's memory")

    m = Mirror(tmp_path / "m", remote(srv.url), vkey_of(log), before_store=refuse)
    with pytest.raises(RewriteDetected):
        m.sync()
    assert seen == [(301, log.store.checkpoint())]
    s = open_store(tmp_path / "m")
    try:
        assert s.size() == 301 and list(s.checkpoints()) == []
    finally:
        s.close()
    m.before_store = None
    assert m.sync().new_size == 301
    same_ledger(log.home, tmp_path / "m")
