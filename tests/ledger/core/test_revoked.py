"""Issue 33 item 1: each checkpoint commits to the revoked keys of its tree
(``ledger.core.revoked``), and a receipt carries the list, so offline ``verify --receipt`` proves
the signer's status at the receipt's checkpoint. Real parts: the CLI as a subprocess, a real
sealed example bundle, ``ledger serve`` under uvicorn on 127.0.0.1 for ``receipt refresh`` and
``mirror``.

Each CLI test here fails on the commit before the feature (7de7b8a): a receipt refreshed past the
signer's revocation verified offline (exit 0), with and without the log's own ledger at hand, and
an older receipt passed ``integrity.signer`` instead of saying its status was not proven.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.core import revoked
from ledger.core.errors import BadInput, VerificationFailed
from ledger.core.note import (
    Checkpoint,
    format_checkpoint,
    note_text,
    open_note,
    parse_checkpoint,
    sign_note,
)
from ledger.core.receipt import Receipt
from ledger.core.revoked import Revoked
from ledger.http.server import make_app
from ledger.log import Log
from tests.helpers.ledgers import REPO, add_node, cli_json, new_ledger, run_cli, seal_fake
from tests.helpers.server import BackgroundServer

ROOT = bytes(range(32))
K1, K2 = bytes.fromhex("0102030405060708"), bytes.fromhex("f0f1f2f3f4f5f6f7")


def _cp(size: int, *ext: str) -> Checkpoint:
    return parse_checkpoint(format_checkpoint(Checkpoint("o.example/log", size, ROOT, ext)))


# -- the commitment -------------------------------------------------------------------------------


def test_line_commits_to_the_set_in_any_order() -> None:
    items = [Revoked(K2, 5), Revoked(K1, 3)]
    line = revoked.extension_line(items)
    assert line.startswith("kernel-ledger/revoked 2 ")
    assert line == revoked.extension_line(list(reversed(items)))
    assert line != revoked.extension_line([Revoked(K2, 5), Revoked(K1, 4)])
    assert line != revoked.extension_line([Revoked(K2, 5)])
    assert revoked.commitment(_cp(9, line)) == (2, revoked.digest(items))


def test_key_status_absent_present_and_unproven() -> None:
    items = [Revoked(K1, 3)]
    cp = _cp(9, revoked.extension_line(items))
    assert revoked.key_status(K1, cp, items) == revoked.KeyStatus(True, 3, 9)
    assert revoked.key_status(K2, cp, items) == revoked.KeyStatus(True, None, 9)
    older = _cp(9)  # no line: written before the commitment existed
    assert not revoked.key_status(K1, older, None).proven
    assert "not proven" in revoked.key_status(K1, older, items).describe()


@pytest.mark.parametrize(
    "given",
    [
        None,  # stripped from a receipt whose checkpoint commits to a list
        [],  # the revocation hidden
        [Revoked(K1, 4)],  # another index
        [Revoked(K1, 3), Revoked(K2, 1)],  # one added
    ],
)
def test_a_list_that_is_not_the_committed_one_fails(given: list[Revoked] | None) -> None:
    cp = _cp(9, revoked.extension_line([Revoked(K1, 3)]))
    with pytest.raises(VerificationFailed):
        revoked.key_status(K2, cp, given)


def test_a_list_naming_an_entry_outside_the_tree_fails() -> None:
    items = [Revoked(K1, 9)]
    with pytest.raises(VerificationFailed, match="outside the tree"):
        revoked.key_status(K2, _cp(9, revoked.extension_line(items)), items)


@pytest.mark.parametrize(
    "ext",
    [
        ("kernel-ledger/revoked 1",),
        ("kernel-ledger/revoked x " + "A" * 43 + "=",),
        ("kernel-ledger/revoked 01 " + "A" * 43 + "=",),
        (revoked.extension_line([]), revoked.extension_line([])),
    ],
)
def test_malformed_or_repeated_lines_are_bad_input(ext: tuple[str, ...]) -> None:
    with pytest.raises(BadInput):
        revoked.commitment(_cp(9, *ext))


@pytest.mark.parametrize(
    "obj",
    [
        "x",
        [{"key_id": "0102030405060708"}],
        [{"key_id": "01020304050607", "index": 1}],
        [{"key_id": "0102030405060708", "index": -1}],
        [{"key_id": "0102030405060708", "index": True}],
        [{"key_id": "0102030405060708", "index": 1, "x": 0}],
        [{"key_id": "0102030405060708", "index": 1}, {"key_id": "0102030405060708", "index": 2}],
        [{"key_id": "0102030405060708", "index": 1}] * (revoked.MAX_REVOKED + 1),
    ],
)
def test_untrusted_lists_are_parsed_strictly(obj: Any) -> None:
    with pytest.raises(BadInput):
        revoked.from_json(obj)


def test_other_extension_lines_are_left_alone() -> None:
    cp = _cp(9, "other.example/ext 1", revoked.extension_line([]))
    assert revoked.key_status(K1, cp, []).proven


# -- the log's checkpoints ------------------------------------------------------------------------


def _go_parse_tree(text: bytes) -> tuple[int, bytes]:
    """Go's ``sumdb/tlog.ParseTree`` after its origin check: lines 2 and 3, the rest ignored."""
    lines = text.decode().split("\n", 3)
    assert len(lines) == 4
    return int(lines[1]), __import__("base64").b64decode(lines[2])


def test_every_checkpoint_commits_to_the_revocations_of_its_tree(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    try:
        sk = add_node(log)
        seal_fake(log, sk, tmp_path / "b", "0")
        kid = log.store.key_rows()[0].key_id
        before = parse_checkpoint(note_text(log.store.checkpoint()))
        assert revoked.key_status(kid, before, []) == revoked.KeyStatus(True, None, 2)
        log.revoke(kid, "lost")
        note = log.store.checkpoint()
        after = parse_checkpoint(open_note(note, [log.verifier]).text)
        assert revoked.key_status(kid, after, [Revoked(kid, 2)]) == revoked.KeyStatus(True, 2, 3)
        assert _go_parse_tree(note_text(note)) == (after.size, after.root)
        with pytest.raises(VerificationFailed):
            revoked.key_status(kid, after, [])
    finally:
        log.close()


# -- receipts, offline: the CLI -------------------------------------------------------------------


@dataclass
class Sealed:
    home: Path
    vkey: str
    digest: str
    before: Path  # the bundle with the receipt written at seal time (before the revocation)
    after: Path  # the same bundle with that receipt refreshed past the revocation
    older: Path  # the bundle with an older-format receipt (a checkpoint with no revoked line)
    refresh_out: dict[str, Any]


def _older_receipt(log: Log, rec: Receipt) -> Receipt:
    """``rec`` as the commit before the commitment wrote it: its checkpoint with no revoked-key
    line (signed by the log key, as that log did) and no ``revoked_keys``."""
    cp = parse_checkpoint(note_text(rec.checkpoint))
    assert log.signer is not None
    old = sign_note(format_checkpoint(Checkpoint(cp.origin, cp.size, cp.root)), [log.signer])
    return Receipt(rec.origin, rec.item, old, rec.signer, rec.revocation)


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sealed]:
    root = tmp_path_factory.mktemp("revoked")
    home = root / "home"
    log = new_ledger(home)
    add_node(log, "alice")
    kid = log.store.key_rows()[0].key_id
    log.close()
    before = root / "before"
    shutil.copytree(REPO / "bundles" / "vector_add", before,
                    ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    out = cli_json("seal", str(before), "--key", "alice", home=home)
    digest = out["entries"][0]["bundle_digest"]
    after, older = root / "after", root / "older"
    shutil.copytree(before, after)
    shutil.copytree(before, older)
    log = Log.open(home)
    rec = Receipt.from_bytes((before / "ledger-receipt.json").read_bytes())
    (older / "ledger-receipt.json").write_bytes(_older_receipt(log, rec).to_bytes())
    log.revoke(kid, "key leaked")
    log.close()
    env = {"LEDGER_CACHE_DIR": str(root / "refresh-cache")}
    vkey = (home / "log.vkey").read_text().strip()
    with BackgroundServer(make_app(home)) as srv, pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("LEDGER_POLICY", raising=False)
        res = run_cli("receipt", "refresh", str(after / "ledger-receipt.json"), "--server",
                      srv.url, "--vkey", vkey, "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    yield Sealed(home, vkey, digest, before, after, older, json.loads(res.stdout))


def _verify(s: Sealed, bundle: Path, home: Path, tmp: Path,
            mp: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    mp.setenv("LEDGER_CACHE_DIR", str(tmp / "cache"))
    mp.setenv("XDG_CONFIG_HOME", str(tmp / "cfg"))
    mp.delenv("LEDGER_POLICY", raising=False)
    res = run_cli("verify", s.digest, "--receipt", str(bundle / "ledger-receipt.json"), "--vkey",
                  s.vkey, "--home", str(home), "--json", timeout=300)
    assert "Traceback" not in res.stderr
    return res.returncode, json.loads(res.stdout)


def _signer(rep: dict[str, Any]) -> dict[str, Any]:
    [c] = [c for c in rep["checks"] if c["id"] == "integrity.signer"]
    return dict(c)


def test_refresh_carries_the_new_trees_revocation(sealed: Sealed) -> None:
    fresh = json.loads((sealed.after / "ledger-receipt.json").read_text())
    assert sealed.refresh_out["new_size"] == 3
    assert fresh["revocation"]["index"] == 2
    assert [r["index"] for r in fresh["revoked_keys"]] == [2]
    assert "\nkernel-ledger/revoked 1 " in fresh["checkpoint"]


def test_receipt_refreshed_past_revocation_fails_offline(
    sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, rep = _verify(sealed, sealed.after, tmp_path / "nohome", tmp_path, monkeypatch)
    assert code == 1 and rep["verdict"] == "failed"
    signer = _signer(rep)
    assert signer["status"] == "failed" and "revoked at entry 2" in signer["detail"]


def test_receipt_refreshed_past_revocation_fails_with_the_ledger_at_hand(
    sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, rep = _verify(sealed, sealed.after, sealed.home, tmp_path, monkeypatch)
    assert code == 1 and "revoked at entry 2" in _signer(rep)["detail"]


def test_stripped_refreshed_receipt_fails_offline(
    sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The revocation and the list cut out of the refreshed receipt: its checkpoint still
    commits to the list, so the receipt cannot pass as one that never had it."""
    stripped = tmp_path / "stripped"
    shutil.copytree(sealed.after, stripped)
    obj = json.loads((stripped / "ledger-receipt.json").read_text())
    del obj["revocation"], obj["revoked_keys"]
    (stripped / "ledger-receipt.json").write_text(json.dumps(obj))
    code, rep = _verify(sealed, stripped, tmp_path / "nohome", tmp_path, monkeypatch)
    assert code == 1 and "commits to a revoked-key list" in _signer(rep)["detail"]


def test_receipt_before_revocation_proves_its_own_tree_but_a_ledger_at_hand_fails_it(
    sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, rep = _verify(sealed, sealed.before, tmp_path / "nohome", tmp_path, monkeypatch)
    assert code == 0, rep
    signer = _signer(rep)
    assert signer["status"] == "passed" and "not revoked in the tree of size 2" in signer["detail"]
    code, rep = _verify(sealed, sealed.before, sealed.home, tmp_path / "2", monkeypatch)
    assert code == 1
    assert "revoked at entry 2: key leaked in the local ledger's newer tree of size 3" in \
        _signer(rep)["detail"]


def test_older_receipt_verifies_and_says_status_not_proven(
    sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, rep = _verify(sealed, sealed.older, tmp_path / "nohome", tmp_path, monkeypatch)
    assert code == 0 and rep["verdict"] == "partial"
    signer = _signer(rep)
    assert signer["status"] == "skipped" and "revocation status not proven" in signer["detail"]
    assert "registered at entry 0" in signer["detail"]


def test_receipt_write_carries_the_list(sealed: Sealed, tmp_path: Path) -> None:
    res = run_cli("receipt", "write", sealed.digest, "--out", str(tmp_path), home=sealed.home)
    assert res.returncode == 0, res.stderr
    obj = json.loads((tmp_path / "ledger-receipt.json").read_text())
    assert obj["revoked_keys"] == [{"key_id": obj["revoked_keys"][0]["key_id"], "index": 2}]
    assert obj["revocation"]["index"] == 2


# -- the server and the mirror --------------------------------------------------------------------


def test_server_answers_the_list_and_receipts_carry_it(sealed: Sealed) -> None:
    with BackgroundServer(make_app(sealed.home)) as srv, httpx.Client(base_url=srv.url) as c:
        now = c.get("/api/v1/revoked").json()
        then = c.get("/api/v1/revoked", params={"size": 2}).json()
        beyond = c.get("/api/v1/revoked", params={"size": 99})
        rec = Receipt.from_bytes(c.get("/api/v1/entries/1/receipt").content)
    assert now["tree_size"] == 3 and [r["index"] for r in now["revoked"]] == [2]
    assert then == {"tree_size": 2, "revoked": []}
    assert beyond.status_code == 404
    assert rec.revoked is not None and [r.index for r in rec.revoked] == [2]
    assert rec.revocation is not None and rec.revocation.index == 2


def test_mirror_refuses_a_checkpoint_hiding_a_revocation(tmp_path: Path) -> None:
    """A log that signs a list without its own revocation: the mirror, which replays every
    entry, refuses the checkpoint (exit 1) and keeps nothing of it."""
    log = new_ledger(tmp_path / "origin")
    sk = add_node(log)
    seal_fake(log, sk, tmp_path / "b", "0")
    log.revoke(log.store.key_rows()[0].key_id, "lost")
    cp = parse_checkpoint(note_text(log.store.checkpoint()))
    assert log.signer is not None
    lie = format_checkpoint(Checkpoint(cp.origin, cp.size, cp.root,
                                       (revoked.extension_line([]),)))
    with log.store.writer() as w:
        w.put_checkpoint(sign_note(lie, [log.signer]), cp.size)
    vkey = log.verifier.vkey
    log.close()
    with BackgroundServer(make_app(tmp_path / "origin")) as srv:
        res = run_cli("mirror", srv.url, "--vkey", vkey, home=tmp_path / "mirror")
    assert res.returncode == 1, res.stderr
    assert "revoked-key list" in res.stderr and "Traceback" not in res.stderr


class _Rewrite(httpx.HTTPTransport):
    """The real server, the JSON answers of one path rewritten by ``change`` (the lie)."""

    def __init__(self, path: str, change: Any) -> None:
        super().__init__()
        self.path, self.change = path, change

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = super().handle_request(request)
        if request.url.path == self.path and resp.status_code == 200:
            resp.read()
            obj = json.loads(resp.content)
            self.change(obj)
            return httpx.Response(200, json=obj)
        return resp


def _origin_revoking_in_its_list_only(tmp: Path) -> tuple[str, bytes]:
    """A log whose node key signs entries 1 and 2 and whose checkpoint of size 3 commits to a
    list revoking that key at entry 1, though no entry of the tree revokes it (the log's own
    signature over a list its entries do not hold); its vkey and the key id."""
    log = new_ledger(tmp / "origin")
    sk = add_node(log)
    seal_fake(log, sk, tmp / "b", "1")
    seal_fake(log, sk, tmp / "b", "2")
    kid = log.store.key_rows()[0].key_id
    cp = parse_checkpoint(note_text(log.store.checkpoint()))
    assert log.signer is not None and cp.size == 3
    listed = format_checkpoint(Checkpoint(cp.origin, cp.size, cp.root,
                                          (revoked.extension_line([Revoked(kid, 1)]),)))
    with log.store.writer() as w:
        w.put_checkpoint(sign_note(listed, [log.signer]), cp.size)
    vkey = log.verifier.vkey
    log.close()
    return vkey, kid


def _mirror_through(url: str, home: Path, vkey: str, change: Any) -> Any:
    from ledger.mirror import Mirror, Remote

    client = httpx.Client(transport=_Rewrite("/api/v1/revoked", change), timeout=60)
    remote = Remote(url, client=client)
    try:
        return Mirror(home, remote, vkey).sync()
    finally:
        remote.close()


def test_mirror_refuses_an_entry_whose_signer_the_committed_list_revokes(tmp_path: Path) -> None:
    """The signer's status in the mirror comes from ``key_status`` over the committed list (as in
    verify, refresh and submit): entry 2, signed by a key the checkpoint's list revokes at entry
    1, is refused before anything of the batch is stored. Before, the mirror judged signers by
    its replay alone, stored entries 0-2 and only then found the list did not match."""
    from ledger.core.encoding import hex_encode
    from ledger.store import open_store

    vkey, kid = _origin_revoking_in_its_list_only(tmp_path)
    served = [{"key_id": hex_encode(kid), "index": 1}]  # the list the checkpoint commits to
    with BackgroundServer(make_app(tmp_path / "origin")) as srv:
        with pytest.raises(VerificationFailed,
                           match=r"of entry 2 was revoked at entry 1 \(the checkpoint's revoked"):
            _mirror_through(srv.url, tmp_path / "m", vkey, lambda o: o.update(revoked=served))
    store = open_store(tmp_path / "m")
    try:
        assert store.size() == 0  # the batch never committed
    finally:
        store.close()


def test_mirror_refuses_a_served_list_that_is_not_the_committed_one(
    sealed: Sealed, tmp_path: Path
) -> None:
    """A host (or anything on the path) answering another list than the checkpoint commits to:
    ``BadAnswer`` before any entry is judged, nothing stored."""
    from ledger.net.client import BadAnswer
    from ledger.store import open_store

    with BackgroundServer(make_app(sealed.home)) as srv:
        with pytest.raises(BadAnswer, match="does not match the checkpoint's commitment"):
            _mirror_through(srv.url, tmp_path / "m", sealed.vkey,
                            lambda o: o.update(revoked=[]))
    store = open_store(tmp_path / "m")
    try:
        assert store.size() == 0
    finally:
        store.close()


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o.update(revoked=[]),  # the revocation hidden
        lambda o: o["revoked"][0].update(index=1),  # moved before the entry it would revoke
        lambda o: o.update(tree_size=o["tree_size"] - 1),  # a list for another tree
        lambda o: o.update(revoked="junk"),
    ],
)
def test_refresh_refuses_a_server_that_lies_about_the_list(
    sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any
) -> None:
    """A server (or anything on the path) that answers another list than the one the new
    checkpoint commits to gets no receipt written: the old one stays as it was."""
    from ledger.core.errors import LedgerError
    from ledger.core.note import parse_vkey
    from ledger.refresh import refresh_receipt

    path = tmp_path / "ledger-receipt.json"
    shutil.copy(sealed.before / "ledger-receipt.json", path)
    before = path.read_bytes()
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(tmp_path / "cache"))
    with BackgroundServer(make_app(sealed.home)) as srv, \
            httpx.Client(transport=_Rewrite("/api/v1/revoked", change), timeout=60) as c:
        with pytest.raises(LedgerError):
            refresh_receipt(path, srv.url, parse_vkey(sealed.vkey), client=c)
    assert path.read_bytes() == before
