"""Issue 14 on ``ledger seal``: with witnesses configured (the trust policy names them with the
URL the log asks them at), a local seal asks each witness to cosign the checkpoint it made and
writes receipts that carry the cosignatures; when the quorum is not met it says exactly why, and
the receipts verify offline with nothing but the log's and the witnesses' keys once it is.

Real parts: the CLI as a subprocess, witnesses served by ``make_witness_app`` under uvicorn on
127.0.0.1, an unreachable witness on a loopback port nothing listens on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger.core.note import open_note, parse_vkey
from ledger.http.witness import make_witness_app
from ledger.log import Log
from ledger.witness import Witness
from tests.helpers.ledgers import REPO, add_node, run_cli
from tests.helpers.server import BackgroundServer

ORIGIN = "seal.example/log"
BUNDLE = REPO / "bundles" / "vector_add"


@dataclass
class Sealer:
    home: Path
    bundle: Path
    vkey: str
    witnesses: list[Witness]


def _dead_url() -> str:
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def sealer(tmp_path: Path) -> Iterator[Sealer]:
    log = Log.init(tmp_path / "home", ORIGIN)
    add_node(log, "alice")
    vkey = log.store.meta("vkey")
    log.close()
    assert isinstance(vkey, str)
    bundle = tmp_path / "vector_add"
    shutil.copytree(BUNDLE, bundle, ignore=shutil.ignore_patterns("ledger-receipt*.json"))
    ws = []
    for name in ("w1", "w2", "w3"):
        w = Witness.init(tmp_path / name, f"{name}.example")
        w.add_log(vkey)
        ws.append(w)
    yield Sealer(tmp_path / "home", bundle, vkey, ws)


def _tlog_proof_root(text: str, entry: bytes) -> tuple[int, bytes, bytes]:
    """Read a C2SP tlog-proof@v1 text as the spec lays it out (header, optional ``extra``,
    ``index``, base64 proof hashes, a blank line, the checkpoint note with its signature lines)
    and recompute the tree root from the entry with RFC 9162's inclusion algorithm, written here
    without the project's merkle code: (index, root, checkpoint note)."""
    head, note = text.split("\n\n", 1)
    lines = head.split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1"
    lines = lines[1:]
    if lines and lines[0].startswith("extra "):
        lines = lines[1:]
    assert lines[0].startswith("index ")
    index = int(lines[0].split(" ", 1)[1])
    proof = [base64.b64decode(h, validate=True) for h in lines[1:]]
    size = int(note.split("\n")[1])

    def node(a: bytes, b: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + a + b).digest()

    fn, sn, r = index, size - 1, hashlib.sha256(b"\x00" + entry).digest()
    for p in proof:
        assert sn != 0
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node(r, p)
        fn, sn = fn >> 1, sn >> 1
    assert sn == 0
    return index, r, note.encode()


def _policy(path: Path, log: str, witnesses: list[dict[str, str]], quorum: int) -> Path:
    path.write_text(json.dumps({"log": log, "witnesses": witnesses, "quorum": quorum}))
    return path


def _run(*args: str, policy: Path | None, home: Path) -> tuple[int, str, str]:
    old = dict(os.environ)
    if policy is not None:
        os.environ["LEDGER_POLICY"] = str(policy)
    try:
        r = run_cli(*args, home=home, timeout=300)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return r.returncode, r.stdout, r.stderr


def _verify_offline(s: Sealer, tmp: Path, quorum: int) -> tuple[int, str, str]:
    """Offline: the receipt, the bundle, the log's key and the witnesses' keys, nothing else."""
    receipt = s.bundle / "ledger-receipt.json"
    wargs = [a for w in s.witnesses for a in ("--witness", w.vkey)]
    index = json.loads(receipt.read_text())["index"]
    return _run("verify", str(index), "--receipt", str(receipt), "--vkey", s.vkey, *wargs,
                "--quorum", str(quorum), "--no-gpu", "--json", policy=None, home=tmp / "none")


def test_seal_writes_receipts_cosigned_by_the_policy_witnesses(
    sealer: Sealer, tmp_path: Path
) -> None:
    s = sealer
    dead = _dead_url()
    with BackgroundServer(make_witness_app(s.witnesses[0].home)) as w1, \
            BackgroundServer(make_witness_app(s.witnesses[1].home)) as w2:
        policy = _policy(tmp_path / "policy.json", s.vkey, [
            {"vkey": s.witnesses[0].vkey, "url": w1.url},
            {"vkey": s.witnesses[1].vkey, "url": w2.url},
            {"vkey": s.witnesses[2].vkey, "url": dead},
        ], 2)
        code, out, err = _run("seal", str(s.bundle), "--no-gpu", "--json", policy=policy,
                              home=s.home)
    assert code == 0, err
    obj = json.loads(out)
    assert obj["cosigned"] is True and "carries 2 of the 3" in obj["cosign"], obj["cosign"]
    answers = {a["witness"].split("+")[0]: a for a in obj["witnesses"]}
    assert answers["w1.example"]["cosigned"] and answers["w2.example"]["cosigned"]
    assert not answers["w3.example"]["cosigned"]
    assert answers["w3.example"]["url"] == dead and "cannot reach" in answers["w3.example"]["error"]
    assert "w3.example" in obj["cosign"]  # the line says who did not cosign, and why
    rec = json.loads((s.bundle / "ledger-receipt.json").read_text())
    for text in (rec["checkpoint"], rec["tlog_proof"]):  # the C2SP tlog-proof form carries them
        assert "— w1.example " in text and "— w2.example " in text and "w3.example" not in text
    # the tlog-proof alone: the entry's inclusion in the checkpoint's tree, and that checkpoint
    # signed by the log and cosigned by w1 and w2 (each line valid under its witness key)
    index, root, note = _tlog_proof_root(rec["tlog_proof"], base64.b64decode(rec["entry"]))
    assert index == rec["index"] and note == rec["checkpoint"].encode()
    assert base64.b64decode(note.split(b"\n")[2]) == root
    for w in s.witnesses[:2]:
        open_note(note, [parse_vkey(w.vkey)])
    open_note(note, [parse_vkey(s.vkey)])
    code, out, err = _verify_offline(s, tmp_path, 2)
    assert code == 0, err
    [cp] = [c for c in json.loads(out)["checks"] if c["id"] == "integrity.checkpoint"]
    assert "2 of 3 witnesses cosigned (quorum 2)" in cp["detail"], cp
    code, _out, err = _verify_offline(s, tmp_path, 3)  # all three: w3 never cosigned
    assert code == 1 and "w3.example" in err.split("missing: ", 1)[1]


def test_seal_says_why_the_receipt_is_not_cosigned_and_how_to_cosign_it_later(
    sealer: Sealer, tmp_path: Path
) -> None:
    s = sealer
    with BackgroundServer(make_witness_app(s.witnesses[0].home)) as w1:
        policy = _policy(tmp_path / "policy.json", s.vkey, [
            {"vkey": s.witnesses[0].vkey, "url": w1.url},
            {"vkey": s.witnesses[1].vkey},  # no URL: seal cannot ask it
            {"vkey": s.witnesses[2].vkey, "url": _dead_url()},
        ], 2)
        code, out, err = _run("seal", str(s.bundle), "--no-gpu", policy=policy, home=s.home)
    assert code == 0, err  # sealed all the same
    [note] = [ln for ln in out.splitlines() if ln.startswith("note: ")]
    assert "receipts not cosigned" in note and "carries 1 of the 2" in note
    assert "w2.example" in note and "no URL to ask it at" in note
    assert "w3.example" in note and "cannot reach" in note
    assert "ledger witness add-checkpoint" in note and "ledger receipt write" in note
    rec = json.loads((s.bundle / "ledger-receipt.json").read_text())
    assert "— w1.example " in rec["checkpoint"]  # what it did collect, it carries
    code, _out, err = _verify_offline(s, tmp_path, 2)
    assert code == 1 and "1 of the 2 required" in err
    # the fix the note names: the log asks w2, then writes the receipt again
    index = str(rec["index"])
    with BackgroundServer(make_witness_app(s.witnesses[1].home)) as w2:
        code, _out, err = _run("witness", "add-checkpoint", w2.url, "--vkey",
                               s.witnesses[1].vkey, policy=None, home=s.home)
    assert code == 0, err
    code, _out, err = _run("receipt", "write", index, "--out", str(s.bundle), policy=None,
                           home=s.home)
    assert code == 0, err
    code, out, err = _verify_offline(s, tmp_path, 2)
    assert code == 0, err


def test_seal_asks_no_witness_of_a_policy_for_another_log(sealer: Sealer, tmp_path: Path) -> None:
    s = sealer
    other = Log.init(tmp_path / "other", "other.example/log")
    other_vkey = other.store.meta("vkey")
    other.close()
    assert isinstance(other_vkey, str)
    policy = _policy(tmp_path / "policy.json", other_vkey,
                     [{"vkey": s.witnesses[0].vkey, "url": _dead_url()}], 1)
    code, out, err = _run("seal", str(s.bundle), "--no-gpu", "--json", policy=policy,
                          home=s.home)
    assert code == 0, err
    obj = json.loads(out)
    assert obj["cosigned"] is False and "for another log (other.example/log)" in obj["cosign"]
    assert obj["witnesses"] == []
