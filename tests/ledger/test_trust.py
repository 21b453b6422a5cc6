"""Issue 14: verifiers that a lying log cannot fool.

An equivocating log: one log key, two databases forked after ``init`` (A registers node "alice",
B registers node "bob"), so two different, validly signed checkpoints of the same size exist.
Three witnesses: w1 and w2 saw history A, w3 saw only history B.

* checkpoint memory: one verifier (one cache) that sees A then B fails with exit 1 and keeps both
  signed notes as evidence;
* witness quorum: a verifier requiring 2 of {w1, w2, w3} accepts A and refuses B (only w3), naming
  the missing witnesses and keeping B's note;
* cosigned receipts: a receipt refreshed from the server carries the new checkpoint with the
  witnesses' cosignatures and a consistency proof, and verifies offline with nothing but the log's
  and the witnesses' verifier keys; the refreshed proof advances an offline verifier's memory.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger import trust
from ledger.core.errors import BadInput
from ledger.core.note import note_text, open_note, parse_vkey
from ledger.http.server import make_app
from ledger.http.witness import make_witness_app
from ledger.log import Log
from ledger.witness import Witness, request_cosignature
from ledger_cli.wiring import write_receipt
from tests.helpers.ledgers import add_node, run_cli
from tests.helpers.server import BackgroundServer

ORIGIN = "fork.example/log"


@dataclass
class Fork:
    root: Path
    a: Path
    b: Path
    vkey: str
    witnesses: dict[str, Witness]
    index: int  # the last entry, present in both histories at different content


def _cosign(home: Path, w: Witness) -> bytes:
    with BackgroundServer(make_witness_app(w.home)) as srv:
        return request_cosignature(home, srv.url, w.vkey, timeout=30)


@pytest.fixture(scope="module")
def fork(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fork]:
    root = tmp_path_factory.mktemp("fork")
    a, b = root / "A", root / "B"
    log = Log.init(a, ORIGIN)
    add_node(log, "common")  # a shared prefix, then the fork
    log.close()
    shutil.copytree(a, b)
    for home, name in ((a, "alice"), (b, "bob")):
        log = Log.open(home)
        add_node(log, name)
        index = log.store.size() - 1
        log.close()
    vkey = (a / "log.vkey").read_text().strip()
    ws = {}
    for name in ("w1", "w2", "w3"):
        w = Witness.init(root / name, f"{name}.example")
        w.add_log(vkey)
        ws[name] = w
    _cosign(a, ws["w1"])
    _cosign(a, ws["w2"])
    _cosign(b, ws["w3"])
    yield Fork(root, a, b, vkey, ws, index)


def _run(*args: str, cache: Path, home: Path | None = None) -> tuple[int, str, str]:
    """The CLI as a subprocess with its own checkpoint cache and no user policy."""
    old = dict(os.environ)
    os.environ.update({"LEDGER_CACHE_DIR": str(cache), "XDG_CONFIG_HOME": str(cache / "cfg")})
    os.environ.pop("LEDGER_POLICY", None)
    try:
        r = run_cli(*args, home=home, timeout=120)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return r.returncode, r.stdout, r.stderr


def test_the_fork_is_two_validly_signed_checkpoints_of_one_size(fork: Fork) -> None:
    vk = parse_vkey(fork.vkey)
    notes = [Log.open(h).store.checkpoint() for h in (fork.a, fork.b)]
    cps = [trust.parse_checkpoint(open_note(n, [vk]).text) for n in notes]
    assert cps[0].size == cps[1].size and cps[0].root != cps[1].root
    # the witnesses that saw A refuse B's checkpoint at the same size (never two cosignatures)
    with pytest.raises(Exception, match=r"409|refused"):
        _cosign(fork.b, fork.witnesses["w1"])


def test_checkpoint_memory_catches_a_log_showing_two_histories(fork: Fork, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    idx = str(fork.index)
    code, _out, err = _run("verify", idx, "--home", str(fork.a), cache=cache)
    assert code == 0, err
    code, out, err = _run("verify", idx, "--home", str(fork.b), "--vkey", fork.vkey, cache=cache)
    assert code == 1, (out, err)
    assert "equivocates" in err and "two roots for tree size" in err
    evidence = sorted((cache / "evidence").iterdir())
    assert [p.name.split("-", 1)[1] for p in evidence] == [
        "presented.checkpoint",
        "remembered.checkpoint",
    ]
    vk = parse_vkey(fork.vkey)
    roots = {trust.parse_checkpoint(open_note(p.read_bytes(), [vk]).text).root for p in evidence}
    assert len(roots) == 2  # both signed checkpoints, both valid under the log key
    # the memory still holds A's checkpoint: A keeps verifying
    code, _out, err = _run("verify", idx, "--home", str(fork.a), cache=cache)
    assert code == 0, err


def test_a_2_of_3_witness_quorum_refuses_the_history_the_witnesses_did_not_see(
    fork: Fork, tmp_path: Path
) -> None:
    wargs = [a for w in fork.witnesses.values() for a in ("--witness", w.vkey)]
    idx = str(fork.index)
    # a fresh verifier (empty memory) given history B: only w3 cosigned it
    code, out, err = _run(
        "verify", idx, "--home", str(fork.b), "--vkey", fork.vkey, *wargs, "--quorum", "2",
        "--json", cache=tmp_path / "c1",
    )
    assert code == 1, (out, err)
    assert "1 of the 2 required witness cosignatures" in err
    w1 = fork.witnesses["w1"].vkey
    missing = err.split("missing: ", 1)[1]
    assert "w1.example+" + w1.split("+")[1] in missing and "w2.example+" in missing
    assert "w3.example" not in missing
    report = json.loads(out)
    assert report["verdict"] == "failed"
    [cp] = [c for c in report["checks"] if c["id"] == "integrity.checkpoint"]
    assert cp["status"] == "failed" and "missing" in cp["detail"]
    kept = [p.name for p in (tmp_path / "c1" / "evidence").iterdir()]
    assert any(n.endswith("unwitnessed.checkpoint") for n in kept)
    # history A carries w1 and w2: the quorum holds
    code, out, err = _run(
        "verify", idx, "--home", str(fork.a), *wargs, "--quorum", "2", cache=tmp_path / "c2"
    )
    assert code == 0, err
    # the default quorum is every witness given: A lacks w3
    code, _out, err = _run("verify", idx, "--home", str(fork.a), *wargs, cache=tmp_path / "c3")
    assert code == 1 and "w3.example" in err.split("missing: ", 1)[1]


def test_trust_policy_file_applies_the_quorum(fork: Fork, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "log": fork.vkey,
                "witnesses": [w.vkey for w in fork.witnesses.values()],
                "quorum": 2,
            }
        )
    )
    idx = str(fork.index)
    code, _o, err = _run("verify", idx, "--home", str(fork.b), "--policy", str(policy),
                         cache=tmp_path / "c")
    assert code == 1 and "missing" in err
    code, _o, err = _run("verify", idx, "--home", str(fork.a), "--policy", str(policy),
                         cache=tmp_path / "c")
    assert code == 0, err
    policy.write_text('{"witnesses": ["not a key"]}')
    code, _o, err = _run("verify", idx, "--home", str(fork.a), "--policy", str(policy),
                         cache=tmp_path / "c")
    assert code == 2 and len(err.strip().splitlines()) == 1


def _signed(log: Log, size: int, root: bytes) -> bytes:
    """A checkpoint of any tree, validly signed with the log key (what a lying operator can do)."""
    from ledger.core.note import Checkpoint, format_checkpoint, sign_note

    assert log.signer is not None
    return sign_note(format_checkpoint(Checkpoint(ORIGIN, size, root, ())), [log.signer])


def test_memory_rules_in_process(fork: Fork, tmp_path: Path) -> None:
    """Every row of docs/threat-model.md's table, in order."""
    vk = parse_vkey(fork.vkey)
    mem = trust.CheckpointMemory(tmp_path / "m")
    la = Log.open(fork.a)

    def prove(a: int, b: int) -> list[bytes]:
        return la.store.consistency_proof(a, b)

    def evidence() -> list[str]:
        folder = tmp_path / "m" / "evidence"
        return sorted(p.name.split("-", 1)[1] for p in folder.iterdir()) if folder.exists() else []

    try:
        note = la.store.checkpoint()
        small = next(n for s, n in la.store.checkpoints() if 0 < s < la.store.size())
        assert "first" in mem.observe(small, vk)
        # same size, same root: passes; another root for it: equivocation, both notes kept
        assert "same as" in mem.observe(small, vk)
        other_small = _signed(la, 1, b"\x07" * 32)
        with pytest.raises(trust.Equivocation, match="two roots for tree size 1"):
            mem.observe(other_small, vk)
        assert evidence() == ["presented.checkpoint", "remembered.checkpoint"]
        # larger, no proof (offline): accepted, not remembered
        assert "not remembered" in mem.observe(note, vk, None)
        assert mem.remembered(vk) == small
        # larger, a wrong proof: an inconsistency, with the proof kept too
        with pytest.raises(trust.Equivocation, match="no consistency"):
            mem.observe(note, vk, lambda a, b: [b"\x00" * 32])
        assert "consistency.proof" in evidence()
        # larger, proven: remembered (and the smaller one kept as a proven prefix of it)
        assert "now remembering" in mem.observe(note, vk, prove)
        assert mem.remembered(vk) == note and set(mem.seen(vk)) == {1, 2}
        # smaller, verified before as a prefix: passes without a proof; another root for that
        # size than the one proven a prefix is an equivocation
        assert "verified before as a prefix" in mem.observe(small, vk, None)
        with pytest.raises(trust.Equivocation, match="another root for size 1"):
            mem.observe(other_small, vk, None)
    finally:
        la.close()
    # smaller, never seen here and no proof: fails (exit 1) with both checkpoints kept and the
    # way to fix it on the one line
    fresh = trust.CheckpointMemory(tmp_path / "m2")
    fresh.observe(note, vk)
    with pytest.raises(trust.Unproven) as caught:
        fresh.observe(small, vk, None, fix="run the fix")
    line = str(caught.value)
    assert caught.value.exit_code == 1 and "\n" not in line
    assert "older than the size 2" in line
    assert "nothing here proves it a prefix: run the fix (" in line
    kept = sorted((tmp_path / "m2" / "evidence").iterdir())
    assert [p.read_bytes() for p in kept] == [small, note]  # presented, remembered
    assert fresh.remembered(vk) == note  # the memory is unchanged
    # the default advice names receipt refresh
    with pytest.raises(trust.Unproven, match=r"ledger receipt refresh FILE --server URL"):
        fresh.observe(small, vk, None)
    # smaller, proven a prefix: passes and is recorded; a bad proof is evidence
    la = Log.open(fork.a)
    try:
        with pytest.raises(trust.Equivocation):
            fresh.observe(small, vk, lambda a, b: [b"\x02" * 32])
        assert "a proven prefix" in fresh.observe(small, vk, prove)
    finally:
        la.close()
    assert 1 in fresh.seen(vk)
    assert "verified before" in fresh.observe(small, vk, None)
    # a damaged record only loses what it let pass: the older checkpoint is unproven again
    (fresh.path(vk).parent / (fresh.path(vk).name + ".seen")).write_text("garbage\n")
    with pytest.raises(trust.Unproven):
        fresh.observe(small, vk, None)


def test_memory_keeps_only_the_lines_it_checked(fork: Fork, tmp_path: Path) -> None:
    """Issue 33 item 5: the checkpoint memory keeps the note text, the log's line and the
    cosignatures of the witnesses it was given that verify, never other lines; the same
    checkpoint with other junk is not written again; a cosignature it lacks is added; the
    evidence of a missing quorum holds no junk either."""
    import base64

    from ledger.core.cosigned import COSIGNED_META
    from ledger.core.note import signature_keys

    vk = parse_vkey(fork.vkey)
    w1, w2, w3 = (parse_vkey(w.vkey) for w in fork.witnesses.values())
    la = Log.open(fork.a)
    try:
        note = la.store.checkpoint()
        cosigned = trust.with_cosignatures(note, la.store.meta(COSIGNED_META))
    finally:
        la.close()
    assert len(signature_keys(cosigned)) == 3  # the log, w1, w2

    def junk(tag: str) -> bytes:
        return b"".join(f"\u2014 {tag}{i} {base64.b64encode(os.urandom(900)).decode()}\n"
                        .encode() for i in range(40))

    mem = trust.CheckpointMemory(tmp_path / "m")
    assert "first" in mem.observe(cosigned + junk("a"), vk, witnesses=[w1])
    kept = mem.remembered(vk)
    assert kept is not None and note_text(kept) == note_text(note)
    assert signature_keys(kept) == {(vk.name, vk.key_id), (w1.name, w1.key_id)}
    stamp = mem.path(vk).stat().st_mtime_ns
    assert "same as" in mem.observe(cosigned + junk("b"), vk, witnesses=[w1])
    assert mem.remembered(vk) == kept and mem.path(vk).stat().st_mtime_ns == stamp
    assert "same as" in mem.observe(cosigned + junk("c"), vk, witnesses=[w1, w2])
    grown = mem.remembered(vk)
    assert grown is not None and len(signature_keys(grown)) == 3 and b"c0 " not in grown
    with pytest.raises(trust.QuorumMissing, match="kept in"):
        trust.guard(cosigned + junk("d"), vk, [w1, w3], 2, mem, None)
    evidence = list((tmp_path / "m" / "evidence").glob("*-unwitnessed.checkpoint"))
    assert len(evidence) == 1 and b"d0 " not in evidence[0].read_bytes()
    assert signature_keys(evidence[0].read_bytes()) == signature_keys(kept)


def test_bad_trust_options_are_bad_input(fork: Fork, tmp_path: Path) -> None:
    w = [w.vkey for w in fork.witnesses.values()]
    with pytest.raises(BadInput, match="quorum"):
        trust.resolve(None, w, 4)
    with pytest.raises(BadInput, match="cosignature/v1"):
        trust.resolve(None, [fork.vkey], None)  # a log key is not a witness key
    with pytest.raises(BadInput, match="distinct"):
        trust.check_quorum(b"", [parse_vkey(w[0])] * 2, 2)
    (tmp_path / "p.json").write_text('{"witnesses": [], "quorum": 1}')
    with pytest.raises(BadInput, match="quorum"):
        trust.load_policy(tmp_path / "p.json")
    (tmp_path / "p.json").write_text('{"extra": 1}')
    with pytest.raises(BadInput):
        trust.load_policy(tmp_path / "p.json")
    code, _o, err = _run("verify", str(fork.index), "--home", str(fork.a), "--witness", w[0],
                         "--quorum", "2", cache=tmp_path / "c")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_mirror_remembers_and_catches_the_other_fork(fork: Fork, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # the log key comes from the trust policy at its default place in the user's config
    (cache / "cfg" / "kernel-ledger").mkdir(parents=True)
    (cache / "cfg" / "kernel-ledger" / "policy.json").write_text(json.dumps({"log": fork.vkey}))
    with BackgroundServer(make_app(fork.a)) as sa, BackgroundServer(make_app(fork.b)) as sb:
        code, _o, err = _run("mirror", sa.url, "--home", str(tmp_path / "ma"), cache=cache)
        assert code == 0, err
        # another mirror directory, same user: the fork's checkpoint contradicts the memory
        code, _o, err = _run("mirror", sb.url, "--vkey", fork.vkey, "--home",
                             str(tmp_path / "mb"), cache=cache)
    assert code == 1 and "equivocates" in err, err
    assert len(list((cache / "evidence").glob("*.checkpoint"))) == 2
    # the memory is consulted before the checkpoint is stored: mb never serves the other fork
    assert run_cli("checkpoint", home=tmp_path / "mb").returncode != 0


def test_mirror_applies_the_policy_quorum_k_of_n(fork: Fork, tmp_path: Path) -> None:
    """A policy's 2 of {w1, w2, w3} on `mirror` (not every witness): history A (w1, w2) is
    mirrored; history B (w3 only), shown to a verifier with no memory of A, is refused by the
    quorum before its checkpoint is stored, and kept."""
    policy = json.dumps(
        {"log": fork.vkey, "witnesses": [w.vkey for w in fork.witnesses.values()], "quorum": 2}
    )
    caches = []
    for name in ("c1", "c2"):  # two users, the same policy at its default place
        (tmp_path / name / "cfg" / "kernel-ledger").mkdir(parents=True)
        (tmp_path / name / "cfg" / "kernel-ledger" / "policy.json").write_text(policy)
        caches.append(tmp_path / name)
    with BackgroundServer(make_app(fork.a)) as sa, BackgroundServer(make_app(fork.b)) as sb:
        code, _o, err = _run("mirror", sa.url, "--home", str(tmp_path / "ma"), cache=caches[0])
        assert code == 0, err
        code, _o, err = _run("mirror", sb.url, "--home", str(tmp_path / "mb"), cache=caches[1])
    assert code == 1 and "1 of the 2 required witness cosignatures" in err, err
    missing = err.split("missing: ", 1)[1].split(";")[0]
    assert "w1.example" in missing and "w2.example" in missing and "w3.example" not in missing
    assert list((caches[1] / "evidence").glob("*-unwitnessed.checkpoint"))
    assert run_cli("checkpoint", home=tmp_path / "mb").returncode != 0  # never stored


def test_refresh_against_the_other_fork_is_evidence_not_a_new_receipt(
    fork: Fork, tmp_path: Path
) -> None:
    from ledger.refresh import refresh_receipt

    la = Log.open(fork.a)
    try:
        path = write_receipt(la, fork.index, tmp_path)
    finally:
        la.close()
    before = path.read_bytes()
    mem = trust.CheckpointMemory(tmp_path / "cache")
    with BackgroundServer(make_app(fork.b)) as sb, pytest.raises(trust.Equivocation):
        refresh_receipt(path, sb.url, parse_vkey(fork.vkey), memory=mem, timeout=30)
    assert path.read_bytes() == before  # the receipt is untouched
    assert len(list((tmp_path / "cache" / "evidence").glob("*.checkpoint"))) == 2


def test_an_unusable_cache_is_said_not_fatal_and_never_hides_a_fork(
    fork: Fork, tmp_path: Path
) -> None:
    vk = parse_vkey(fork.vkey)
    la = Log.open(fork.a)
    lb = Log.open(fork.b)
    try:
        blocked = tmp_path / "file"
        blocked.write_text("not a directory")
        account = trust.guard(la.store.checkpoint(), vk, (), 0, trust.CheckpointMemory(blocked),
                              None)
        assert account.startswith("checkpoint memory not used")
        # a memory whose evidence folder cannot be written still fails the fork
        mem = trust.CheckpointMemory(tmp_path / "m")
        mem.observe(la.store.checkpoint(), vk)
        (tmp_path / "m" / "evidence").write_text("in the way")
        with pytest.raises(trust.Equivocation, match="evidence was not written"):
            trust.guard(lb.store.checkpoint(), vk, (), 0, mem, None)
    finally:
        la.close()
        lb.close()


def test_a_forged_or_foreign_cosignature_does_not_count(fork: Fork) -> None:
    from ledger.core.note import NoteSignature

    la = Log.open(fork.a)
    try:
        kept = la.store.meta("witness.cosigned_note")
        note = trust.with_cosignatures(la.store.checkpoint(), kept)
    finally:
        la.close()
    ws = [parse_vkey(w.vkey) for w in fork.witnesses.values()]
    good, bad = trust.check_quorum(note, ws, 2)
    assert len(good) == 2 and len(bad) == 1
    # w3's name and key id on a line whose signature is garbage: still missing
    w3 = ws[2]
    forged = NoteSignature(w3.name, w3.key_id, (1).to_bytes(8, "big") + b"\x00" * 64).line()
    with pytest.raises(trust.QuorumMissing, match=r"w3\.example"):
        trust.check_quorum(note + forged, ws, 3)


def test_cosigned_receipt_refresh_and_offline_verification(fork: Fork, tmp_path: Path) -> None:
    """Runs last in this module: it grows history A by one entry."""
    out = tmp_path / "r"
    out.mkdir()
    la = Log.open(fork.a)
    path = write_receipt(la, fork.index, out)
    first = json.loads(path.read_text())
    # `receipt write` puts in the cosignatures the log collected for its latest checkpoint
    assert "— w1.example" in first["checkpoint"] and "— w2.example" in first["checkpoint"]
    assert "— w1.example" in first["tlog_proof"]
    cache = tmp_path / "cache"
    wargs = [a for w in fork.witnesses.values() for a in ("--witness", w.vkey)]
    empty = tmp_path / "nohome"
    # an offline verifier remembers the receipt's (uncosigned) checkpoint
    code, _o, err = _run("verify", str(fork.index), "--receipt", str(path), "--vkey", fork.vkey,
                         "--home", str(empty), cache=cache)
    assert code == 0, err
    add_node(la, "carol")  # the log grows
    la.close()
    _cosign(fork.a, fork.witnesses["w1"])
    _cosign(fork.a, fork.witnesses["w2"])
    with BackgroundServer(make_app(fork.a)) as srv:
        code, o, err = _run("receipt", "refresh", str(path), "--server", srv.url, "--vkey",
                            fork.vkey, *wargs, "--quorum", "2", "--json", cache=tmp_path / "cr")
    assert code == 0, err
    assert json.loads(o)["new_size"] == json.loads(o)["old_size"] + 1
    fresh = json.loads(path.read_text())
    assert "— w1.example" in fresh["checkpoint"] and "— w2.example" in fresh["checkpoint"]
    assert fresh["tlog_proof"].startswith("c2sp.org/tlog-proof@v1\nindex ")
    assert "— w2.example" in fresh["tlog_proof"]
    assert fresh["consistency"]["old_checkpoint"] == first["checkpoint"]
    # offline: only the log's key and the witnesses' keys, no ledger, quorum 2 of 3
    cache2 = tmp_path / "cache2"
    code, o, err = _run("verify", str(fork.index), "--receipt", str(path), "--vkey", fork.vkey,
                        *wargs, "--quorum", "2", "--home", str(empty), "--json", cache=cache2)
    assert code == 0, err
    [cp] = [c for c in json.loads(o)["checks"] if c["id"] == "integrity.checkpoint"]
    assert "2 of 3 witnesses cosigned" in cp["detail"]
    # the receipt's consistency proof advances the memory that held its old checkpoint
    code, o, err = _run("verify", str(fork.index), "--receipt", str(path), "--vkey", fork.vkey,
                        "--home", str(empty), "--json", cache=cache)
    assert code == 0, err
    [cp] = [c for c in json.loads(o)["checks"] if c["id"] == "integrity.checkpoint"]
    assert "now remembering" in cp["detail"], cp
    assert not empty.exists()
    vk = parse_vkey(fork.vkey)
    kept = trust.CheckpointMemory(cache).remembered(vk)
    assert kept is not None and note_text(kept) == note_text(
        fresh["checkpoint"].encode()
    )


def test_an_older_checkpoint_fails_closed_until_brought_forward(tmp_path: Path) -> None:
    """Issue 14: a checkpoint smaller than the remembered one that nothing at hand proves a prefix
    fails (exit 1), both checkpoints kept, one line naming the fix, on every path that meets it
    (an offline receipt, an online ledger, receipt refresh and mirror against a server that is
    behind); once the receipt is refreshed it passes."""
    log = Log.init(tmp_path / "log", "older.example/log")
    add_node(log, "n1")
    vkey = log.verifier.vkey
    (tmp_path / "r").mkdir()
    receipt = write_receipt(log, 0, tmp_path / "r")  # at size 1
    log.close()
    shutil.copytree(tmp_path / "log", tmp_path / "stale")  # a replica that stops at size 1
    log = Log.open(tmp_path / "log")
    add_node(log, "n2")
    add_node(log, "n3")
    log.close()
    cache = tmp_path / "cache"
    empty = tmp_path / "nohome"
    code, _o, err = _run("verify", "2", "--home", str(tmp_path / "log"), cache=cache)
    assert code == 0, err  # remembers size 3

    def one_line(err: str) -> str:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

    def evidence() -> int:
        return len(list((cache / "evidence").glob("*.checkpoint")))

    before = receipt.read_bytes()
    code, _o, err = _run("verify", "0", "--receipt", str(receipt), "--vkey", vkey, "--home",
                         str(empty), cache=cache)
    line = one_line(err)
    assert code == 1 and "older than the size 3" in line, err
    assert f"ledger receipt refresh {receipt} --server URL" in line
    assert evidence() == 2
    # online, a ledger that holds only the older tree
    code, _o, err = _run("verify", "0", "--home", str(tmp_path / "stale"), "--vkey", vkey,
                         cache=cache)
    line = one_line(err)
    assert code == 1 and "ledger mirror URL --home" in line and evidence() == 4
    with BackgroundServer(make_app(tmp_path / "stale")) as stale, \
            BackgroundServer(make_app(tmp_path / "log")) as srv:
        # refresh from a server that is behind: refused, the receipt untouched
        code, _o, err = _run("receipt", "refresh", str(receipt), "--server", stale.url,
                             "--vkey", vkey, cache=cache)
        assert code == 1 and "is behind that tree" in one_line(err)
        assert receipt.read_bytes() == before and evidence() == 6
        # a mirror of that server: refused before its checkpoint is stored
        code, _o, err = _run("mirror", stale.url, "--vkey", vkey, "--home",
                             str(tmp_path / "m"), cache=cache)
        assert code == 1 and "serves an older tree" in one_line(err)
        assert run_cli("checkpoint", home=tmp_path / "m").returncode != 0
        # the fix: refresh from the log's server, then the receipt verifies offline
        code, out, err = _run("receipt", "refresh", str(receipt), "--server", srv.url,
                              "--vkey", vkey, "--json", cache=cache)
        assert code == 0, err
        assert (json.loads(out)["old_size"], json.loads(out)["new_size"]) == (1, 3)
    code, _o, err = _run("verify", "0", "--receipt", str(receipt), "--vkey", vkey, "--home",
                         str(empty), cache=cache)
    assert code == 0, err
    # a refreshed receipt also passes a memory that is at its old size (its proof advances it)
    other = tmp_path / "cache2"
    trust.CheckpointMemory(other).observe(
        json.loads(receipt.read_text())["consistency"]["old_checkpoint"].encode(),
        parse_vkey(vkey),
    )
    code, out, err = _run("verify", "0", "--receipt", str(receipt), "--vkey", vkey, "--home",
                          str(empty), "--json", cache=other)
    assert code == 0, err
    [cp] = [c for c in json.loads(out)["checks"] if c["id"] == "integrity.checkpoint"]
    assert "now remembering 3" in cp["detail"]
    # a fresh verifier that saw the tree of size 3: the old receipt verifies offline beside this
    # log's own ledger (the prefix proven from the entries it holds, checked against both signed
    # roots), not beside a replica that stops before that tree nor beside another log's ledger
    (tmp_path / "old").mkdir()
    old_receipt = tmp_path / "old" / receipt.name
    old_receipt.write_bytes(before)
    fresh = tmp_path / "cache3"
    assert _run("verify", "2", "--home", str(tmp_path / "log"), cache=fresh)[0] == 0
    Log.init(tmp_path / "other", "older.example/log").close()
    for home, want in (("stale", 1), ("other", 1), ("log", 0)):
        code, _o, err = _run("verify", "0", "--receipt", str(old_receipt), "--vkey", vkey,
                             "--home", str(tmp_path / home), cache=fresh)
        assert code == want, (home, err)
        assert want == 0 or "older than the size 3" in one_line(err)


def test_submit_to_a_server_behind_the_memory_is_refused_before_signing(tmp_path: Path) -> None:
    """`submit` shows the server's checkpoint to the memory first: a server that serves an older
    tree than this verifier has seen is refused (Unproven, the fix said) and nothing is sent."""
    from ledger.core.bundle import Bundle
    from ledger.submit import submit_bundle
    from tests.helpers.ledgers import fake_fields, write_bundle

    log = Log.init(tmp_path / "log", "submit.example/log")
    sk = add_node(log, "n1")
    log.close()
    shutil.copytree(tmp_path / "log", tmp_path / "stale")
    log = Log.open(tmp_path / "log")
    add_node(log, "n2")
    mem = trust.CheckpointMemory(tmp_path / "cache")
    mem.observe(log.store.checkpoint(), log.verifier)  # this verifier has seen size 2
    vk = log.verifier
    log.close()
    bundle = Bundle.from_dir(write_bundle(tmp_path, "b", "x"))
    with BackgroundServer(make_app(tmp_path / "stale", accept_submissions=True)) as stale, \
            pytest.raises(trust.Unproven, match="serves an older tree: submit to a server"):
        submit_bundle(stale.url, bundle, fake_fields("x"), sk, vk, memory=mem, timeout=30)
    st = Log.open(tmp_path / "stale")
    try:
        assert st.store.size() == 1  # nothing was appended
    finally:
        st.close()
    assert len(list((tmp_path / "cache" / "evidence").glob("*.checkpoint"))) == 2


def test_the_threat_model_names_tests_that_exist() -> None:
    """docs/threat-model.md says which test shows each guarantee: every `tests/x.py::name` (and
    each `::name` after it, which names a test in the file named last) exists."""
    import ast
    import re

    from tests.helpers.ledgers import REPO

    doc = (REPO / "docs" / "threat-model.md").read_text(encoding="utf-8")
    current: Path | None = None
    cited: list[str] = []
    missing: list[str] = []
    for m in re.finditer(r"`((?:tests/)?(?:\w+/)*test_\w+\.py)?(?:::(\w+))?`", doc):
        if m.group(1):
            named = m.group(1)
            found = [REPO / named] if named.startswith("tests/") else sorted(
                (REPO / "tests").rglob(Path(named).name))
            current = found[0] if found else REPO / "tests" / named
            if not current.is_file():
                missing.append(m.group(1))
                continue
        if m.group(2):
            assert current is not None, m.group(0)
            names = {n.name for n in ast.walk(ast.parse(current.read_text(encoding="utf-8")))
                     if isinstance(n, ast.FunctionDef)}
            cited.append(m.group(2))
            if m.group(2) not in names:
                missing.append(f"{current.name}::{m.group(2)}")
    assert missing == []
    assert len(cited) >= 20  # the scan sees the citations
