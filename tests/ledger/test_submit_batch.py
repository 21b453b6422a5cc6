"""Issue 13, "Shared sealing without contention": v2 entries name a verified checkpoint (a prefix
of the log), the server assigns indices and integrates submissions in batches, and an
acknowledged submission survives a kill -9 of the server.

Small versions of the issue's campaign (16 submitters over 4 keys, 96 submissions here); the full
one (64 submitters, 8 keys, 2,000 submissions) is ``bench/bench_submit.py``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nacl.signing
import pytest

from ledger import audit as audit_mod
from ledger.core.bundle import Bundle
from ledger.core.entries import (
    ENTRY_V2,
    bundle_fields,
    chain_link,
    decode_entry,
    node_key_id,
    sign_entry,
)
from ledger.core.errors import BadInput
from ledger.core.note import Checkpoint, format_checkpoint, sign_note
from ledger.core.receipt import Receipt
from ledger.http.server import make_app
from ledger.keys import load_node_secret
from ledger.log import Log, utc_now
from ledger.mirror import Mirror, Remote
from ledger.submit import Submitted, submit_bundle
from tests.helpers.ledgers import REPO, add_node
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import bundle_files, fields
from tests.ledger.test_mirror import make_origin, node_key, vkey_of


def raw_append(log: Log, sk: nacl.signing.SigningKey, i: int, size: int, root: bytes,
               v2: bool = True) -> None:
    """Append a bundle entry naming the tree ``size``/``root`` as a log without checks would."""
    bundle = Bundle.from_files(bundle_files(i))
    link = chain_link(size, root) if v2 else {"prev_size": size, "prev_root": root.hex()}
    chain = {"origin": log.origin, "time": utc_now(), **link}
    entry = sign_entry(bundle_fields(chain, bundle, fields(i), node_key_id(
        bytes(sk.verify_key))), sk)
    assert log.signer is not None
    with log.store.writer() as w:
        w.put_blobs((f.digest, f.data) for f in bundle.files)
        w.append(entry, "bundle", bundle.digest)
        w.put_checkpoint(sign_note(format_checkpoint(Checkpoint(log.origin, w.size, w.root(),
                                                                ())), [log.signer]), w.size)


def test_v2_prefix_links_pass_audit_and_mirror_and_broken_ones_do_not(tmp_path: Path) -> None:
    log = make_origin(tmp_path / "log", 4)  # entries 0..4: a registration, 4 seals
    sk = node_key(log)
    assert all(decode_entry(log.store.entry(i)).v == ENTRY_V2 for i in range(5))
    raw_append(log, sk, 50, 2, log.store.root(2))  # entry 5 names the tree of size 2: a prefix
    raw_append(log, sk, 51, 6, log.store.root(6))  # entry 6 names the tree just before it
    res = audit_mod.audit(log.store, log.verifier)
    assert res.ok, res.problems
    with BackgroundServer(make_app(log.home)) as srv:
        remote = Remote(srv.url)
        try:
            assert Mirror(tmp_path / "m", remote, vkey_of(log)).sync().new_size == 7
        finally:
            remote.close()
    log.close()
    cases = [((3, 2), True, "not a prefix"), ((99, 2), True, "beyond its own index"),
             ((2, 2), False, "not the tree before")]
    for n, ((size, root_size), v2, why) in enumerate(cases):
        log = make_origin(tmp_path / f"log{n}", 4)
        sk = node_key(log)
        raw_append(log, sk, 50, 2, log.store.root(2))
        raw_append(log, sk, 52, size, log.store.root(root_size), v2=v2)
        res = audit_mod.audit(log.store, log.verifier)
        assert [(i, why in p) for i, p in res.problems][:1] == [(6, True)], res.problems
        with pytest.raises(BadInput, match="unknown entry format version"):
            decode_entry(log.store.entry(5).replace(b'"v":2', b'"v":3'))
        log.close()


def check_receipt(done: Submitted, log: Log, files: dict[str, bytes]) -> None:
    """The receipt verifies offline: entry, signer and checkpoint with the log key alone."""
    from verify.integrity import Evidence, check_evidence

    rec = Receipt.from_bytes(done.receipt().to_bytes())
    checks, entry = check_evidence(
        Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False,
                 revoked=rec.revoked), log.verifier, files
    )
    assert entry is not None and all(c.status == "passed" for c in checks), checks


@pytest.fixture()
def fast_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_SUBMIT_RATE", "1000/1000")  # the campaign measures contention


def test_concurrent_submitters_all_get_in_contiguously(tmp_path: Path, fast_limits: None) -> None:
    """16 submitters over 4 keys, 96 submissions: 0 failures, contiguous indices, one entry
    each, every receipt verifies, fewer checkpoints than entries (batches), audit clean. The
    submitters share one checkpoint memory, as `ledger submit` runs on one node do."""
    from ledger.trust import CheckpointMemory

    memory = CheckpointMemory(tmp_path / "cache")
    log = make_origin(tmp_path / "log", 2)
    keys = [node_key(log)] + [add_node(log, f"n{k}") for k in range(3)]
    base = log.store.size()
    cps_before = sum(1 for _ in log.store.checkpoints())
    results: dict[int, Submitted] = {}
    errors: list[BaseException] = []
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:

        def worker(w: int) -> None:
            with httpx.Client(timeout=60) as c:
                for j in range(6):
                    i = 1000 + w * 6 + j
                    try:
                        results[i] = submit_bundle(
                            srv.url, Bundle.from_files(bundle_files(i)), fields(i), keys[w % 4],
                            log.verifier, client=c, timeout=120, memory=memory,
                        )
                    except BaseException as e:  # counted below
                        errors.append(e)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    assert not errors, errors[:3]
    assert sorted(d.index for d in results.values()) == list(range(base, base + 96))
    assert log.store.size() == base + 96
    for i, done in results.items():
        assert log.store.entry(done.index) == done.entry
        check_receipt(done, log, bundle_files(i))
    batches = sum(1 for _ in log.store.checkpoints()) - cps_before
    assert batches < 96  # one checkpoint per batch, not per entry
    assert all(d.signed == 1 for d in results.values())  # nobody had to sign again
    retried = [w for d in results.values() for w in d.retried]
    assert not retried, retried
    assert audit_mod.audit(log.store, log.verifier).ok
    log.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """``ledger serve --accept-submissions`` as its own process (so it can be killed -9)."""

    def __init__(self, home: Path, port: int) -> None:
        self.home, self.port = home, port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "LEDGER_HOME": str(self.home), "LEDGER_SUBMIT_RATE": "1000/1000"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ledger_cli", "serve", "--accept-submissions", "--port",
             str(self.port)], cwd=REPO, env=env, stderr=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/checkpoint", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("ledger serve did not start")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


@pytest.fixture()
def serve_process(tmp_path: Path) -> Iterator[tuple[Log, ServeProcess]]:
    log = make_origin(tmp_path / "log", 2)
    add_node(log, "n2")
    sp = ServeProcess(log.home, free_port())
    try:
        yield log, sp
    finally:
        sp.stop()
        log.close()


def test_kill_9_mid_batch_loses_no_acknowledged_submission(
    serve_process: tuple[Log, ServeProcess],
) -> None:
    """8 submitters, 40 submissions; the server is killed -9 while submissions are in flight
    and restarted; every acknowledged submission is in the log at its index, none twice."""
    log, sp = serve_process
    kill_mid_batch(log, sp, [node_key(log), load_node_secret(log.keydir, "n2")[0]])


def kill_mid_batch(log: Log, sp: ServeProcess, keys: list[nacl.signing.SigningKey]) -> None:
    """The kill -9 campaign against ``sp`` (not started yet) serving ``log`` (also run on
    PostgreSQL by tests/ledger/store/test_postgres.py)."""
    base = log.store.size()
    url = f"http://127.0.0.1:{sp.port}"
    acked: dict[int, Submitted] = {}
    errors: list[BaseException] = []
    sp.start()

    def worker(w: int) -> None:
        with httpx.Client(timeout=30) as c:
            for j in range(5):
                i = 3000 + w * 5 + j
                try:
                    acked[i] = submit_bundle(
                        url, Bundle.from_files(bundle_files(i)), fields(i), keys[w % len(keys)],
                        log.verifier, client=c, timeout=120,
                        sleep=lambda s: time.sleep(min(s, 0.2)),
                    )
                except BaseException as e:  # counted below
                    errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while len(acked) < 12 and time.monotonic() < deadline:
        time.sleep(0.005)
    at_kill = dict(acked)
    sp.kill9()
    in_flight = 40 - len(at_kill)
    time.sleep(0.3)
    sp.start()
    for t in threads:
        t.join(300)
    assert 12 <= len(at_kill) < 40 and in_flight > 0  # killed with submissions in flight
    assert not errors, errors[:3]
    size = log.store.size()
    leaves = [log.store.leaf_hash(i) for i in range(size)]
    assert len(set(leaves)) == size  # none twice
    digests = [json.loads(log.store.entry(i))["bundle_digest"] for i in range(base, size)]
    assert len(set(digests)) == len(digests) == 40  # each bundle once, though some were resent
    for done in at_kill.values():  # acknowledged before the kill: there, at its index
        assert log.store.entry(done.index) == done.entry
    for done in acked.values():  # and every later acknowledgement too
        assert log.store.entry(done.index) == done.entry
    assert sorted(d.index for d in acked.values()) == list(range(base, base + 40))
    assert audit_mod.audit(log.store, log.verifier).ok


def test_submit_receipt_is_cosigned_when_the_witnesses_have_cosigned(
    tmp_path: Path, fast_limits: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 14 on submit: with a trust policy naming a witness, the receipt is brought to the
    cosigned checkpoint when the server has one, and says why not when it has none yet."""
    from ledger.http.witness import make_witness_app
    from ledger.submit import cosign_receipt
    from ledger.trust import check_quorum, parse_witness
    from ledger.witness import Witness, request_cosignature

    log = make_origin(tmp_path / "log", 2)
    w = Witness.init(tmp_path / "witness", "witness.test")
    w.add_log(vkey_of(log))
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"log": vkey_of(log), "witnesses": [w.vkey]}))
    monkeypatch.setenv("LEDGER_POLICY", str(policy))
    receipt = tmp_path / "ledger-receipt.json"
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv, \
            BackgroundServer(make_witness_app(tmp_path / "witness")) as wsrv:
        done = submit_bundle(srv.url, Bundle.from_files(bundle_files(77)), fields(77),
                             node_key(log), log.verifier)
        receipt.write_bytes(done.receipt().to_bytes())
        ok, why = cosign_receipt(receipt, srv.url, log.verifier)
        assert ok is False and "not cosigned" in why and "ledger receipt refresh" in why
        assert Receipt.from_bytes(receipt.read_bytes()).checkpoint == done.checkpoint  # as written
        request_cosignature(log.home, wsrv.url, w.vkey)  # the log asks its witness
        ok, why = cosign_receipt(receipt, srv.url, log.verifier)
        assert ok is True and "1 cosignature" in why, why
    rec = Receipt.from_bytes(receipt.read_bytes())
    good, _bad = check_quorum(rec.checkpoint, [parse_witness(w.vkey)], 1)
    assert len(good) == 1
    check_receipt(Submitted(rec.item.index, done.leaf_hash, rec.item.entry, rec.checkpoint, 1,
                            rec.origin, rec.item.inclusion, rec.signer, revoked=rec.revoked), log,
                  bundle_files(77))
    log.close()
