"""Cosigning by itself (issue 34, ``ledger.cosign``): a server whose trust policy names witnesses
with URLs asks them to cosign each new checkpoint in the background and serves the cosigned
checkpoint; a witness that is down or hangs never blocks an append and is retried with backoff;
``GET /api/v1/witnesses`` says why a cosignature is missing, and ``ledger receipt refresh``
passes that on (or names ``ledger witness add-checkpoint`` when the server asks no witness).
Real ledgers, real witnesses and servers on 127.0.0.1, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ledger import cosign
from ledger.core.cosigned import COSIGNED_META
from ledger.core.errors import LedgerError
from ledger.core.note import note_text, open_note, parse_checkpoint, parse_vkey
from ledger.http.server import make_app
from ledger.http.witness import make_witness_app
from ledger.log import Log
from ledger.store import open_store
from ledger.witness import Witness, merge_cosigned, request_cosignature
from tests.helpers.ledgers import REPO, run_cli
from tests.helpers.server import BackgroundServer
from tests.helpers.tcpserver import serving
from tests.ledger.http.test_server import bundle_files, fields
from tests.ledger.test_mirror import make_origin, node_key, vkey_of
from tests.ledger.test_witness_seal import _dead_url


@dataclass
class Setup:
    log: Log
    witnesses: list[Witness]
    tmp: Path

    def policy(self, entries: list[dict[str, str] | str], quorum: int) -> Path:
        path = self.tmp / "policy.json"
        path.write_text(json.dumps({"log": vkey_of(self.log), "witnesses": entries,
                                    "quorum": quorum}))
        return path


@pytest.fixture()
def setup(tmp_path: Path) -> Iterator[Setup]:
    log = make_origin(tmp_path / "log", 3)
    ws = []
    for name in ("w1", "w2", "w3"):
        w = Witness.init(tmp_path / name, f"{name}.example")
        w.add_log(vkey_of(log))
        ws.append(w)
    yield Setup(log, ws, tmp_path)
    log.close()


def wait_for(what: str, ok: Callable[[], object], seconds: float = 60.0) -> None:
    """Poll ``ok()`` until true (the cosigner works in the background)."""
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def served_note(url: str) -> bytes:
    return httpx.get(url + "/checkpoint", timeout=30).content


def cosigned_by(note: bytes, w: Witness) -> bool:
    try:
        open_note(note, [parse_vkey(w.vkey)])
    except LedgerError:  # a missing or bad line: not cosigned
        return False
    return True


def test_server_asks_its_witnesses_and_serves_the_cosigned_checkpoint(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = setup
    w1, w2, w3 = s.witnesses
    dead = _dead_url()
    with BackgroundServer(make_witness_app(w1.home)) as ws1, \
            BackgroundServer(make_witness_app(w2.home)) as ws2:
        policy = s.policy([{"vkey": w1.vkey, "url": ws1.url}, {"vkey": w2.vkey, "url": ws2.url},
                           {"vkey": w3.vkey, "url": dead}], 2)
        monkeypatch.setenv("LEDGER_POLICY", str(policy))
        with BackgroundServer(make_app(s.log.home, accept_submissions=True)) as srv:
            wait_for("w1 and w2 cosign the first checkpoint", lambda: all(
                cosigned_by(served_note(srv.url), w) for w in (w1, w2)))
            # a new checkpoint (an append by another writer of the same ledger): asked again
            from tests.helpers.ledgers import seal_fake

            seal_fake(s.log, node_key(s.log), s.tmp / "more", "x1")
            size = s.log.store.size()

            def both_at_size() -> bool:
                note = served_note(srv.url)
                cp = parse_checkpoint(note_text(note))
                return cp.size == size and all(cosigned_by(note, w) for w in (w1, w2))

            wait_for("w1 and w2 cosign the new checkpoint", both_at_size)
            note = served_note(srv.url)
            assert not cosigned_by(note, w3)
            status = httpx.get(srv.url + "/api/v1/witnesses", timeout=30).json()
            assert status["cosigning"] is True
            by = {i["witness"].split("+")[0]: i for i in status["witnesses"]}
            assert by["w1.example"]["error"] is None and by["w1.example"]["cosigned_size"] == size
            assert by["w3.example"]["url"] == dead
            assert "cannot reach" in by["w3.example"]["error"]
            assert by["w3.example"]["failures"] >= 1 and by["w3.example"]["retry_in"] is not None
    # what it served is what the store keeps: the log's line and the two cosignatures
    kept = str(s.log.store.meta(COSIGNED_META)).encode()
    assert parse_checkpoint(note_text(kept)).size == size
    assert cosigned_by(kept, w1) and cosigned_by(kept, w2)


def test_a_hanging_witness_never_blocks_an_append(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The witness accepts the connection and never answers: the submission is integrated and
    answered while the cosigner still waits on it (checked by the witness holding an unanswered
    request when the submission returns, not by a stopwatch)."""
    from ledger.core.bundle import Bundle
    from ledger.submit import submit_bundle

    s = setup
    held = threading.Event()
    release = threading.Event()

    def hang(sock: socket.socket) -> None:
        sock.recv(65536)
        held.set()
        release.wait(60)

    with serving(hang) as port:
        policy = s.policy([{"vkey": s.witnesses[0].vkey, "url": f"http://127.0.0.1:{port}"}], 1)
        monkeypatch.setenv("LEDGER_POLICY", str(policy))
        with BackgroundServer(make_app(s.log.home, accept_submissions=True)) as srv:
            wait_for("the cosigner asks the hanging witness", held.is_set)
            done = submit_bundle(srv.url, Bundle.from_files(bundle_files(901)), fields(901),
                                 node_key(s.log), s.log.verifier, timeout=60)
            assert not release.is_set()  # the witness still holds the cosigner's request
            assert done.index == 4 and s.log.store.size() == 5
            release.set()


def test_failures_back_off_and_are_said(tmp_path: Path) -> None:
    """Step 4: each failure in a row doubles the wait (times [0.5, 1.5)), capped; a success
    clears it. The injected exchange fails the way an unreachable witness does."""
    from ledger.core.errors import CannotCheck

    log = make_origin(tmp_path / "log", 1)
    w = Witness.init(tmp_path / "w", "w.example")
    calls: list[float] = []

    def refuse(home: Path, url: str, vkey: str, timeout: float) -> bytes:
        calls.append(time.monotonic())
        raise CannotCheck("cannot reach the witness at x: refused")

    c = cosign.Cosigner(log.home, [(parse_vkey(w.vkey), "http://127.0.0.1:9")], ask=refuse,
                        poll=0.01)
    v = parse_vkey(w.vkey)
    for k in range(8):
        c._failed(v, "x")
        [st] = c.status()
        want = min(cosign.BACKOFF_CAP, cosign.BACKOFF_BASE * 2 ** k)
        assert st.failures == k + 1 and st.error == "x"
        assert st.retry_in is not None and 0.5 * want - 0.1 <= st.retry_in <= 1.5 * want
    c._ok(v, 1)
    [st] = c.status()
    assert (st.failures, st.error, st.retry_in, st.cosigned_size) == (0, None, None, 1)
    # running: the first attempt at once, the next only after its backoff (>= 0.5 s)
    c.start()
    try:
        wait_for("a first attempt", lambda: len(calls) >= 1)
        time.sleep(0.3)
        assert len(calls) == 1
        [st] = c.status()
        assert st.failures == 1 and "refused" in str(st.error)
    finally:
        c.stop()
    log.close()


def test_a_late_answer_never_replaces_a_newer_cosigned_note(setup: Setup) -> None:
    s = setup
    w1 = s.witnesses[0]
    with BackgroundServer(make_witness_app(w1.home)) as ws1:
        old = s.log.store.checkpoint()
        from tests.helpers.ledgers import seal_fake

        seal_fake(s.log, node_key(s.log), s.tmp / "more", "y1")
        newer = request_cosignature(s.log.home, ws1.url, w1.vkey)
    store = open_store(s.log.home)
    try:
        back = merge_cosigned(store, old, b"")  # an answer about the older checkpoint
        assert back == old
        assert str(store.meta(COSIGNED_META)).encode() == newer
    finally:
        store.close()


def test_no_cosigner_for_a_mirror_or_another_logs_policy(setup: Setup,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    s = setup
    w = s.witnesses[0]
    policy = s.tmp / "other.json"
    other = make_origin(s.tmp / "other", 0)
    policy.write_text(json.dumps({"log": vkey_of(other),
                                  "witnesses": [{"vkey": w.vkey, "url": _dead_url()}]}))
    monkeypatch.setenv("LEDGER_POLICY", str(policy))
    asked, line = cosign.witnesses_to_ask(s.log.home)
    assert asked == [] and "for another log" in line
    mirror = s.tmp / "mirror"
    shutil.copytree(s.log.home, mirror)
    (mirror / "log.key").unlink()
    s.policy([{"vkey": w.vkey, "url": _dead_url()}], 1)
    monkeypatch.setenv("LEDGER_POLICY", str(s.tmp / "policy.json"))
    asked, line = cosign.witnesses_to_ask(mirror)
    assert asked == [] and "no log key" in line
    asked, line = cosign.witnesses_to_ask(s.log.home)
    assert [v.name for v, _ in asked] == ["w1.example"] and "asking witnesses" in line
    other.close()


def _receipt(s: Setup) -> Path:
    d = s.tmp / "rcpt"
    d.mkdir()
    res = run_cli("receipt", "write", "1", "--out", str(d), home=s.log.home)
    assert res.returncode == 0, res.stderr
    return d / "ledger-receipt.json"


def test_refresh_names_the_missing_witness_and_why(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = setup
    w1, w2 = s.witnesses[:2]
    receipt = _receipt(s)
    dead = _dead_url()
    with BackgroundServer(make_witness_app(w1.home)) as ws1:
        policy = s.policy([{"vkey": w1.vkey, "url": ws1.url}, {"vkey": w2.vkey, "url": dead}], 2)
        monkeypatch.setenv("LEDGER_POLICY", str(policy))
        with BackgroundServer(make_app(s.log.home)) as srv:
            wait_for("w1 cosigns", lambda: cosigned_by(served_note(srv.url), w1))
            wait_for("w2's failure is said", lambda: httpx.get(
                srv.url + "/api/v1/witnesses", timeout=30).json()["witnesses"][1]["error"])
            res = run_cli("receipt", "refresh", str(receipt), "--server", srv.url)
            assert res.returncode == 1, res.stderr
            lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1 and "Traceback" not in res.stderr
            assert "carries 1 of the 2 required" in lines[0]
            assert f"w2.example+{parse_vkey(w2.vkey).key_id.hex()} at {dead}" in lines[0]
            assert "cannot reach the witness" in lines[0] and "retrying in" in lines[0]
            # quorum 1: the cosigned checkpoint the server serves is enough, no manual step
            s.policy([{"vkey": w1.vkey, "url": ws1.url}, {"vkey": w2.vkey, "url": dead}], 1)
            res = run_cli("receipt", "refresh", str(receipt), "--server", srv.url)
            assert res.returncode == 0, res.stderr
    assert "\u2014 w1.example " in json.loads(receipt.read_text())["checkpoint"]


def test_refresh_says_how_to_ask_by_hand_when_the_server_asks_no_one(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = setup
    w1 = s.witnesses[0]
    receipt = _receipt(s)
    monkeypatch.delenv("LEDGER_POLICY", raising=False)
    with BackgroundServer(make_app(s.log.home)) as srv:  # started without a policy
        assert httpx.get(srv.url + "/api/v1/witnesses", timeout=30).json() == {
            "cosigning": False, "note": "", "witnesses": []}
        policy = s.policy([w1.vkey], 1)
        env = {"LEDGER_POLICY": str(policy)}
        old = dict(os.environ)
        os.environ.update(env)
        try:
            res = run_cli("receipt", "refresh", str(receipt), "--server", srv.url)
        finally:
            os.environ.clear()
            os.environ.update(old)
    assert res.returncode == 1
    assert "does not ask witnesses by itself" in res.stderr
    assert "ledger witness add-checkpoint" in res.stderr


def test_checkpoint_command_shows_the_cosignatures(setup: Setup) -> None:
    s = setup
    w1 = s.witnesses[0]
    with BackgroundServer(make_witness_app(w1.home)) as ws1:
        note = request_cosignature(s.log.home, ws1.url, w1.vkey)
    with BackgroundServer(make_app(s.log.home)) as srv:
        assert served_note(srv.url) == note
    res = run_cli("checkpoint", home=s.log.home)
    assert res.returncode == 0 and res.stdout.encode() == note
    obj = json.loads(run_cli("checkpoint", "--json", home=s.log.home).stdout)
    assert obj["note"].encode() == note
    [c] = obj["cosignatures"]
    assert c["name"] == "w1.example" and c["key_id"] == parse_vkey(w1.vkey).key_id.hex()
    assert isinstance(c["time"], int) and c["time"] > 1_700_000_000


def test_mirror_takes_quorum_and_policy(setup: Setup, tmp_path: Path) -> None:
    s = setup
    w1, w2, w3 = s.witnesses
    for w in (w1, w2):
        with BackgroundServer(make_witness_app(w.home)) as ws:
            request_cosignature(s.log.home, ws.url, w.vkey)
    wargs = [a for w in (w1, w2, w3) for a in ("--witness", w.vkey)]
    env_cache = {"LEDGER_CACHE_DIR": str(tmp_path / "cache")}
    old = dict(os.environ)
    os.environ.update(env_cache)
    try:
        with BackgroundServer(make_app(s.log.home)) as srv:
            every = run_cli("mirror", srv.url, "--vkey", vkey_of(s.log), *wargs,
                            home=tmp_path / "m0")
            assert every.returncode == 1 and "w3.example" in every.stderr  # each, as before
            two = run_cli("mirror", srv.url, "--vkey", vkey_of(s.log), *wargs, "--quorum", "2",
                          "--json", home=tmp_path / "m1")
            assert two.returncode == 0, two.stderr
            assert json.loads(two.stdout)["new_size"] == s.log.store.size()
            three = run_cli("mirror", srv.url, "--vkey", vkey_of(s.log), *wargs, "--quorum", "3",
                            home=tmp_path / "m2")
            assert three.returncode == 1 and "2 of the 3 required" in three.stderr
            bad = run_cli("mirror", srv.url, "--vkey", vkey_of(s.log), *wargs, "--quorum", "4",
                          home=tmp_path / "m3")
            assert bad.returncode == 2
            # a policy file (no --vkey either): its log key, witnesses and 2-of-3 quorum
            policy = s.policy([w1.vkey, w2.vkey, w3.vkey], 2)
            by_policy = run_cli("mirror", srv.url, "--policy", str(policy), home=tmp_path / "m4")
            assert by_policy.returncode == 0, by_policy.stderr
            strict = s.tmp / "strict.json"
            strict.write_text(json.dumps({"log": vkey_of(s.log),
                                          "witnesses": [w1.vkey, w2.vkey, w3.vkey]}))
            refused = run_cli("mirror", srv.url, "--policy", str(strict), home=tmp_path / "m5")
            assert refused.returncode == 1 and "w3.example" in refused.stderr
    finally:
        os.environ.clear()
        os.environ.update(old)
    # the mirror keeps the cosignatures it checked: its own `ledger checkpoint` shows them
    obj = json.loads(run_cli("checkpoint", "--json", home=tmp_path / "m1").stdout)
    assert sorted(c["name"] for c in obj["cosignatures"]) == ["w1.example", "w2.example"]


def test_submit_example_bundle_gets_a_cosigned_receipt(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``ledger submit`` right after the server integrated the entry: it waits for the server's
    cosigner and writes a receipt carrying the witness's cosignature, no manual step."""
    s = setup
    w1 = s.witnesses[0]
    bundle = tmp_path / "vector_add"
    shutil.copytree(REPO / "bundles" / "vector_add", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    with BackgroundServer(make_witness_app(w1.home)) as ws1:
        monkeypatch.setenv("LEDGER_POLICY",
                           str(s.policy([{"vkey": w1.vkey, "url": ws1.url}], 1)))
        with BackgroundServer(make_app(s.log.home, accept_submissions=True)) as srv:
            res = run_cli("submit", str(bundle), "--server", srv.url, "--key", "node", "--json",
                          home=s.log.home)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["cosigned"] is True and "receipt cosigned: 1" in out["cosign"]
    rec = json.loads((bundle / "ledger-receipt.json").read_text())
    assert cosigned_by(rec["checkpoint"].encode(), w1)
    assert parse_checkpoint(note_text(rec["checkpoint"].encode())).size == out["index"] + 1


def test_submit_not_cosigned_is_a_note_not_an_error(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A submission whose receipt the witnesses have not cosigned (the witness is down) is still
    a success (exit 0): ``submit`` says so in a ``note:`` line on stdout, never ``ledger: error``,
    and says how to cosign it later."""
    s = setup
    w1 = s.witnesses[0]
    bundle = tmp_path / "vector_add"
    shutil.copytree(REPO / "bundles" / "vector_add", bundle,
                    ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    monkeypatch.setenv("LEDGER_POLICY", str(s.policy([{"vkey": w1.vkey, "url": _dead_url()}], 1)))
    with BackgroundServer(make_app(s.log.home, accept_submissions=True)) as srv:
        res = run_cli("submit", str(bundle), "--server", srv.url, "--key", "node",
                      home=s.log.home)
    assert res.returncode == 0, res.stderr
    assert "error" not in res.stderr, res.stderr
    notes = [ln for ln in res.stdout.splitlines() if ln.startswith("  note: ")]
    assert len(notes) == 1, res.stdout
    assert notes[0].startswith("  note: receipt not cosigned (") and "ledger receipt refresh" in (
        notes[0])
    assert (bundle / "ledger-receipt.json").is_file()
