"""Issue 33 item 8: sealing is idempotent. Re-sealing a bundle this key already sealed answers
with the existing entry, writes its receipt and exits 0 ("already sealed as entry N"), in the
CLI, the library (``Log.seal``) and ``ledger submit`` (the server answers a re-submission with the
existing entry). The campaign: ``ledger seal`` killed with SIGKILL at every point of a seal
(``LEDGER_FAULT_KILL_AT``, ``ledger.core.faults``), then a plain re-run, leaves exactly one entry
and a receipt that verifies offline. Real parts: the CLI as a subprocess, a real example bundle,
a real SQLite file, ``serve --accept-submissions`` under uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from ledger.core.entries import decode_entry
from ledger.core.faults import KILL_ENV, POINTS
from ledger.http.server import make_app
from ledger.log import Log
from ledger.store import open_store
from ledger.submit import submit_bundle
from tests.helpers.ledgers import REPO, add_node, fake_fields, new_ledger, write_bundle
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import bundle_files, fields
from tests.ledger.test_mirror import make_origin, node_key

GOOD = REPO / "bundles" / "vector_add"


def _cli(*args: str, home: Path, env: dict[str, str] | None = None,
         cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, LEDGER_HOME=str(home), **(env or {}))
    for k in ("LEDGER_DEBUG", KILL_ENV, "LEDGER_POLICY"):
        if k not in (env or {}):
            full.pop(k, None)
    if cache is not None:
        full.update(LEDGER_CACHE_DIR=str(cache), XDG_CONFIG_HOME=str(cache / "cfg"))
    return subprocess.run([sys.executable, "-m", "ledger_cli", *args], cwd=REPO, env=full,
                          capture_output=True, text=True, timeout=600, check=False)


def _entries_of(home: Path, digest: bytes) -> list[int]:
    store = open_store(home)
    try:
        return store.indices_for_digest(digest)
    finally:
        store.close()


@pytest.fixture()
def sealer(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    log = new_ledger(home)
    add_node(log, "alice")
    log.close()
    d = tmp_path / "bundle"
    shutil.copytree(GOOD, d, ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    return home, d


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_every_point_then_a_plain_rerun_leaves_one_entry_and_a_receipt(
    sealer: tuple[Path, Path], point: str, tmp_path: Path
) -> None:
    home, d = sealer
    digest = Bundle.from_dir(d).digest
    killed = _cli("seal", str(d), "--key", "alice", home=home, env={KILL_ENV: point})
    assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
    again = _cli("seal", str(d), "--key", "alice", "--json", home=home)
    assert again.returncode == 0, (point, again.stderr)
    [item] = json.loads(again.stdout)["entries"]
    assert _entries_of(home, digest) == [item["index"]], point
    committed = POINTS.index(point) >= POINTS.index("seal.committed")
    assert item["already_sealed"] is committed, point
    vkey = (home / "log.vkey").read_text().strip()
    rep = _cli("verify", item["bundle_digest"], "--receipt", str(d / "ledger-receipt.json"),
               "--vkey", vkey, "--home", str(tmp_path / "nohome"), "--json", home=home,
               cache=tmp_path / "cache")
    assert rep.returncode == 0, (point, rep.stderr)
    assert json.loads(rep.stdout)["index"] == item["index"]


def test_reseal_says_already_sealed_and_refreshes_the_receipt(sealer: tuple[Path, Path]) -> None:
    home, d = sealer
    first = _cli("seal", str(d), "--key", "alice", home=home)
    assert first.returncode == 0, first.stderr
    (d / "ledger-receipt.json").unlink()
    log = Log.open(home)
    add_node(log, "bob")  # the log grows: the new receipt names the newer checkpoint
    size = log.store.size()
    log.close()
    again = _cli("seal", str(d), "--key", "alice", home=home)
    assert again.returncode == 0, again.stderr
    # piped output folds at 80 columns between words (issue 34), never inside one
    assert f"already sealed {d} as entry 1" in " ".join(again.stdout.split())
    rec = json.loads((d / "ledger-receipt.json").read_text())
    assert rec["index"] == 1 and rec["checkpoint"].split("\n")[1] == str(size)
    assert _entries_of(home, Bundle.from_dir(d).digest) == [1]


def test_library_seal_answers_with_the_existing_entry(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    try:
        sk = add_node(log)
        bundle = Bundle.from_dir(write_bundle(tmp_path / "b", "x", "x"))
        first = log.seal(bundle, fake_fields("x"), sk)
        size = log.store.size()
        again = log.seal(bundle, fake_fields("other fields"), sk)
        assert (first.already, again.already) == (False, True)
        assert (again.index, again.leaf_hash, again.entry) == (
            first.index, first.leaf_hash, first.entry)
        assert log.store.size() == size
        other = add_node(log, "other")  # another key sealing the same bundle is its own claim
        assert not log.seal(bundle, fake_fields("x"), other).already
    finally:
        log.close()


def test_resubmission_is_answered_with_the_existing_entry(tmp_path: Path) -> None:
    log = make_origin(tmp_path / "log", 1)
    bundle = Bundle.from_files(bundle_files(501))
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        first = submit_bundle(srv.url, bundle, fields(501), node_key(log), log.verifier)
        again = submit_bundle(srv.url, bundle, fields(501), node_key(log), log.verifier)
    assert (first.already, again.already) == (False, True)
    assert again.index == first.index and again.entry == first.entry
    assert log.store.indices_for_digest(bundle.digest) == [first.index]
    assert decode_entry(again.receipt().item.entry).bundle_digest == bundle.digest.hex()
    log.close()


def test_submit_refuses_a_held_entry_that_is_not_its_own_seal(tmp_path: Path) -> None:
    """A server answering a submission with some other entry as "already sealed" (another
    bundle's, a key registration, one that names this key and bundle but another key signed)
    gets no receipt: the client checks it is its own key's signed seal of the same bundle."""
    import httpx
    import nacl.signing

    from ledger.core.encoding import b64_encode
    from ledger.core.entries import sign_entry
    from ledger.core.errors import VerificationFailed
    from ledger.core.note import note_text, parse_checkpoint
    from ledger.log import utc_now
    from ledger.submit import chained_fields

    log = make_origin(tmp_path / "log", 2)
    cp = parse_checkpoint(note_text(log.store.checkpoint()))
    kid = bytes.fromhex(str(decode_entry(log.store.entry(1)).signer))

    def forged(i: int) -> bytes:  # this key and bundle named, another key's signature
        bundle = Bundle.from_files(bundle_files(i))
        return sign_entry(chained_fields(bundle, fields(i), cp, kid, utc_now()),
                          nacl.signing.SigningKey.generate())

    class Lying(httpx.HTTPTransport):
        def __init__(self, held: bytes) -> None:
            super().__init__()
            self.held = held

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            resp = super().handle_request(request)
            if request.url.path == "/api/v1/submit" and resp.status_code == 200:
                resp.read()
                obj = json.loads(resp.content)
                obj.update(entry_b64=b64_encode(self.held), already_sealed=True)
                return httpx.Response(200, json=obj)
            return resp

    size = log.store.size()
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        for i, held in ((600, log.store.entry(1)), (601, log.store.entry(0)), (602, forged(602))):
            with httpx.Client(transport=Lying(held), timeout=60) as c, \
                    pytest.raises(VerificationFailed):
                submit_bundle(srv.url, Bundle.from_files(bundle_files(i)), fields(i),
                              node_key(log), log.verifier, client=c, timeout=30)
    assert log.store.size() == size + 3  # the server took each; the client kept no receipt
    log.close()
