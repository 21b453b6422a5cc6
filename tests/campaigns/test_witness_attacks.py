"""Red team of the witness, the witness quorum and shared sealing (SPEC 7, 9; issues 13, 14).

A log operator who wants a witness to cosign a forked or impossible checkpoint, or a verifier's
``--witness ... --quorum K`` to pass on fewer than K real witnesses; a node or a lying server on
either side of ``POST /api/v1/submit``. Every refusal is the documented one; a witness never
cosigns two inconsistent checkpoints and never moves its state for one it refuses; the quorum
counts distinct witness keys. Real servers on 127.0.0.1 throughout; the lying submit server is
the real one with its answer rewritten in the client's transport (the fault injected)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nacl.signing
import pytest

from ledger import trust
from ledger.core import merkle
from ledger.core.bundle import Bundle
from ledger.core.canonical import canonical_json
from ledger.core.cosigned import COSIGNED_META
from ledger.core.encoding import b64_decode, b64_encode
from ledger.core.entries import chain_link, node_key_id, sign_entry
from ledger.core.errors import BadInput, SignatureError, VerificationFailed
from ledger.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    _parse_signature_line,
    cosign,
    format_checkpoint,
    key_id,
    open_note,
    parse_vkey,
    sign_note,
)
from ledger.http.server import make_app
from ledger.http.witness import make_witness_app
from ledger.log import Log, utc_now
from ledger.submit import auth_headers, chained_fields, submit_bundle
from ledger.witness import Witness, request_cosignature, require_cosignatures
from tests.helpers.ledgers import add_node, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import bundle_files, fields
from tests.ledger.test_mirror import make_origin, node_key, vkey_of


@pytest.fixture()
def witnessed(tmp_path: Path) -> Iterator[tuple[Log, Witness, BackgroundServer]]:
    log = make_origin(tmp_path / "log", 6)
    w = Witness.init(tmp_path / "w", "w.example")
    w.add_log(vkey_of(log))
    with BackgroundServer(make_witness_app(tmp_path / "w")) as srv:
        yield log, w, srv
    log.close()


def _note(log: Log, size: int, root: bytes, text: bytes | None = None) -> bytes:
    """A checkpoint note signed with the log's own key: whatever the operator wants to show."""
    assert log.signer is not None
    body = format_checkpoint(Checkpoint(log.origin, size, root)) if text is None else text
    return sign_note(body, [log.signer])


def _ask(url: str, old: int, proof: list[bytes], note: bytes) -> httpx.Response:
    body = f"old {old}\n".encode() + b"".join(b64_encode(h).encode() + b"\n" for h in proof)
    with httpx.Client(timeout=30) as c:
        return c.post(url + "/add-checkpoint", content=body + b"\n" + note)


# -- the witness ----------------------------------------------------------------------------------


def test_witness_refuses_an_impossible_empty_tree_and_stays_usable(
    witnessed: tuple[Log, Witness, BackgroundServer],
) -> None:
    """Found: a size-0 checkpoint with a root other than the empty tree's was cosigned, and the
    witness then refused every real checkpoint of that log (422 forever)."""
    log, w, srv = witnessed
    r = _ask(srv.url, 0, [], _note(log, 0, b"\x11" * 32))
    assert r.status_code == 422 and b"size 0" in r.content
    assert w.latest(log.origin) is None  # nothing remembered
    assert _ask(srv.url, 0, [], _note(log, 0, merkle.EMPTY_ROOT)).status_code == 200
    assert _ask(srv.url, 0, [], log.store.checkpoint()).status_code == 200


def test_witness_cosigns_only_the_text_the_log_signed(
    witnessed: tuple[Log, Witness, BackgroundServer],
) -> None:
    """Found: a note whose signed text holds a blank line was parsed up to the first blank line
    but signed up to the last; the witness stored it, then failed with a 500 and a traceback."""
    log, w, srv = witnessed
    text = format_checkpoint(Checkpoint(log.origin, 7, b"\x22" * 32)) + b"\nextension\n"
    r = _ask(srv.url, 0, [], _note(log, 0, b"", text))
    assert r.status_code == 400 and b"empty extension line" in r.content
    assert w.latest(log.origin) is None
    assert _ask(srv.url, 0, [], log.store.checkpoint()).status_code == 200


def test_witness_never_cosigns_two_inconsistent_checkpoints(
    witnessed: tuple[Log, Witness, BackgroundServer],
) -> None:
    """Each way an operator could get a second, inconsistent checkpoint cosigned, after the
    witness cosigned size 4 of the log: the status, and the witness's state never moves."""
    log, w, srv = witnessed
    st = log.store
    assert _ask(srv.url, 0, [], _note(log, 4, st.root(4))).status_code == 200
    kept = w.latest(log.origin)
    size = st.size()
    other = b"\x33" * 32
    good = st.consistency_proof(4, size)
    attempts: dict[str, tuple[int, list[bytes], bytes]] = {
        "same size, another root": (4, [], _note(log, 4, other)),
        "smaller size": (4, [], _note(log, 2, st.root(2))),
        "smaller size, old claims it": (2, [], _note(log, 2, st.root(2))),
        "replayed first request": (0, [], _note(log, 4, st.root(4))),
        "larger, another root": (4, good, _note(log, size, other)),
        "proof for other sizes": (4, st.consistency_proof(2, size), st.checkpoint()),
        "proof with a hash added": (4, [*good, other], st.checkpoint()),
        "a proof where none is due": (4, [other], _note(log, 4, st.root(4))),
        "huge size": (4, [other] * 64, _note(log, (1 << 64) - 1, other)),
        "old above 2^64": (1 << 70, [], _note(log, (1 << 64) - 1, other)),
        "another origin, same key": (4, [], _note(log, 0, b"", format_checkpoint(
            Checkpoint("other.example/log", 4, st.root(4))))),
    }
    got = {k: _ask(srv.url, *v).status_code for k, v in attempts.items()}
    assert got == {
        "same size, another root": 409,
        "smaller size": 400,
        "smaller size, old claims it": 409,
        "replayed first request": 409,
        "larger, another root": 422,
        "proof for other sizes": 422,
        "proof with a hash added": 422,
        "a proof where none is due": 422,
        "huge size": 422,
        "old above 2^64": 400,
        "another origin, same key": 404,
    }
    assert w.latest(log.origin) == kept
    ok = _ask(srv.url, 4, good, st.checkpoint())  # the honest extension still goes through
    assert ok.status_code == 200
    assert open_note(st.checkpoint() + ok.content, [parse_vkey(w.vkey)])


# -- the quorum -----------------------------------------------------------------------------------


def _alias(v: NoteVerifier, name: str) -> NoteVerifier:
    """The same witness key under another name."""
    return NoteVerifier(name, key_id(name, v.public, ALG_COSIGNATURE_V1), v.public,
                        ALG_COSIGNATURE_V1)


def _relabel(line: bytes, to: NoteVerifier) -> bytes:
    """A cosignature line moved to another name: a cosignature/v1 signs no name."""
    sig = _parse_signature_line(line.rstrip(b"\n"))
    return NoteSignature(to.name, to.key_id, sig.signature).line()


def _verify(log: Log, cache: Path, *witness: str, quorum: int | None = None) -> tuple[int, str]:
    args = ["verify", "0", "--home", str(log.home)]
    for w in witness:
        args += ["--witness", w]
    if quorum is not None:
        args += ["--quorum", str(quorum)]
    old = dict(os.environ)
    os.environ.update({"LEDGER_CACHE_DIR": str(cache), "XDG_CONFIG_HOME": str(cache / "cfg")})
    os.environ.pop("LEDGER_POLICY", None)
    try:
        r = run_cli(*args, timeout=120)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return r.returncode, r.stderr


def test_one_witness_key_under_two_names_is_one_witness(
    witnessed: tuple[Log, Witness, BackgroundServer], tmp_path: Path,
) -> None:
    """Found: the quorum counted (name, key id) pairs; a cosignature/v1 signs no name, so the
    operator relabelled one real cosignature under a second name of the same key and met a
    quorum of 2 with one witness."""
    log, w, srv = witnessed
    note = request_cosignature(log.home, srv.url, w.vkey)
    wv = parse_vkey(w.vkey)
    alias = _alias(wv, "w-again.example")
    line = note[len(log.store.checkpoint()):]
    forged = note + _relabel(line, alias)
    assert open_note(forged, [alias])  # the relabelled line does verify under the alias
    with pytest.raises(BadInput, match="distinct"):
        trust.check_quorum(forged, [wv, alias], 2)
    good, bad = trust.check_quorum(forged, [wv, alias], 1)
    assert (good, bad) == ([wv.label], [])
    require_cosignatures(forged, b"", [alias, wv])  # all of one witness: it cosigned
    log.store.set_meta(COSIGNED_META, forged.decode())
    code, err = _verify(log, tmp_path / "c", w.vkey, alias.vkey)
    assert code == 2 and "distinct" in err and len(err.strip().splitlines()) == 1


def test_only_valid_cosignatures_by_given_witnesses_count(
    witnessed: tuple[Log, Witness, BackgroundServer], tmp_path: Path,
) -> None:
    """Duplicate lines, a line by a key not given, a line over another checkpoint, a line with a
    timestamp past 2^63: none makes up a missing witness (exit 1, one line)."""
    log, w, srv = witnessed
    earlier = request_cosignature(log.home, srv.url, w.vkey)  # size 7
    seal_more = add_node(log, "late")  # the log grows by one entry
    assert seal_more is not None
    note = request_cosignature(log.home, srv.url, w.vkey)  # size 8
    other = Witness.init(tmp_path / "w2", "w2.example")
    ov = parse_vkey(other.vkey)
    stranger = Witness.init(tmp_path / "w3", "w3.example")
    line = note[len(log.store.checkpoint()):]
    stale_line = earlier[len(earlier.split(b"\n\n")[0]) + 2:].split(b"\n")[1] + b"\n"
    text = note.split(b"\n\n")[0] + b"\n"
    forged = (
        note + line + line  # the same witness three times
        + cosign(text, stranger.signer, 1)  # a witness not given
        + _relabel(stale_line, ov)  # w2's name on w's line over the earlier checkpoint
    )
    ws = [parse_vkey(w.vkey), ov]
    with pytest.raises(trust.QuorumMissing, match=r"1 of the 2 .*w2\.example"):
        trust.check_quorum(forged, ws, 2)
    far = NoteSignature(ov.name, ov.key_id, (1 << 63).to_bytes(8, "big") + b"\0" * 64).line()
    with pytest.raises(SignatureError, match=r"w2\.example"):  # exit 1, never a BadInput (exit 2)
        require_cosignatures(note + far, text, ws)
    log.store.set_meta(COSIGNED_META, (forged + far).decode())
    code, err = _verify(log, tmp_path / "c", w.vkey, other.vkey)
    assert code == 1 and "w2.example" in err and len(err.strip().splitlines()) == 1
    code, err = _verify(log, tmp_path / "c2", w.vkey, other.vkey, quorum=1)
    assert code == 0, err


def test_cosignature_time_is_the_witness_own_statement(
    witnessed: tuple[Log, Witness, BackgroundServer],
) -> None:
    """By design (docs/threat-model.md): a valid cosignature counts whatever its time, from 0 to
    2^63 - 1; only the witness can make one, and no freshness is claimed from it."""
    log, w, _srv = witnessed
    note = log.store.checkpoint()
    text = note.split(b"\n\n")[0] + b"\n"
    wv = parse_vkey(w.vkey)
    for t in (0, (1 << 63) - 1):
        assert trust.check_quorum(note + cosign(text, w.signer, t), [wv], 1)[0] == [wv.label]


def test_a_log_cannot_be_its_own_witness(
    witnessed: tuple[Log, Witness, BackgroundServer], tmp_path: Path,
) -> None:
    """The log's own Ed25519 key as a cosignature/v1 key: the operator could cosign anything."""
    log, _w, _srv = witnessed
    assert log.signer is not None
    own = NoteVerifier("self.example", key_id("self.example", log.signer.public,
                       ALG_COSIGNATURE_V1), log.signer.public, ALG_COSIGNATURE_V1)
    note = log.store.checkpoint()
    seed = log.signer.seed
    line = cosign(note.split(b"\n\n")[0] + b"\n", NoteSigner("self.example", b"", seed), 5)
    with pytest.raises(BadInput, match="log's own key"):
        trust.guard(note + line, log.verifier, [own], 1, None, None)
    code, err = _verify(log, tmp_path / "c", own.vkey)
    assert code == 2 and "own key" in err and len(err.strip().splitlines()) == 1


# -- shared sealing -------------------------------------------------------------------------------


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[Log, BackgroundServer]]:
    log = make_origin(tmp_path / "log", 3)
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        yield log, srv
    log.close()


class Lying(httpx.HTTPTransport):
    """The real server, its submission answer rewritten by ``change`` (the lie injected)."""

    def __init__(self, change: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self.change = change

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = super().handle_request(request)
        if request.url.path == "/api/v1/submit" and resp.status_code == 200:
            resp.read()
            answer = json.loads(resp.content)
            self.change(answer)
            return httpx.Response(200, json=answer)
        return resp


def _bare(a: dict[str, Any]) -> None:
    for k in ("inclusion", "consistency", "signer"):
        a.pop(k, None)  # the client fetches the proofs for whatever the lie names


def _submit(log: Log, srv: BackgroundServer, i: int, change: Callable[[dict[str, Any]], None],
            ) -> None:
    with httpx.Client(transport=Lying(change), timeout=60) as c:
        submit_bundle(srv.url, Bundle.from_files(bundle_files(i)), fields(i), node_key(log),
                      log.verifier, client=c)


def test_submit_refuses_a_server_that_lies_about_the_entry(
    served: tuple[Log, BackgroundServer], tmp_path: Path,
) -> None:
    """No receipt from an answer naming another entry, a checkpoint by another key under the
    log's name, or another key's registration (each exit 1)."""
    log, srv = served

    def other_index(a: dict[str, Any]) -> None:
        _bare(a)
        a["index"] = 1

    impostor = NoteSigner(log.origin, b"", bytes(range(32)))

    def other_key(a: dict[str, Any]) -> None:
        _bare(a)
        text = a["checkpoint"].split("\n\n")[0] + "\n"
        a["checkpoint"] = sign_note(text.encode(), [impostor]).decode()

    def other_registration(a: dict[str, Any]) -> None:
        _bare(a)
        a["signer_index"] = other_at

    other_at = add_node(log, "someone") and log.store.size() - 1
    for lie, err in ((other_index, VerificationFailed), (other_key, SignatureError),
                     (other_registration, VerificationFailed)):
        with pytest.raises(err) as got:
            _submit(log, srv, 700 + len(lie.__name__), lie)
        assert got.value.exit_code == 1


def test_submit_refuses_a_registration_that_is_not_before_the_entry(
    served: tuple[Log, BackgroundServer],
) -> None:
    """Found: `ledger submit` took any registration of the node's key in the tree, and wrote a
    receipt that `verify --receipt` then failed (signer not registered before the entry). The
    lying log here appends a second registration of the key after the entry and names it."""
    log, srv = served
    sk = node_key(log)
    first = log.store.key_row(node_key_id(bytes(sk.verify_key)))
    assert first is not None
    original = log.store.entry(first.registered_at)

    def late_registration(a: dict[str, Any]) -> None:
        _bare(a)
        assert log.signer is not None
        reg = json.loads(original)
        with log.store.writer() as wr:  # the operator re-registers the key after the entry
            reg.update({"origin": log.origin, "time": utc_now(),
                        **chain_link(wr.size, wr.root())})
            reg.pop("signature")
            entry = sign_entry(reg, nacl.signing.SigningKey(log.signer.seed))
            late = wr.append(entry, "bundle")
            wr.put_checkpoint(_note(log, wr.size, wr.root()), wr.size)
        a["signer_index"] = late
        a["checkpoint"] = log.store.checkpoint().decode()

    with pytest.raises(VerificationFailed, match="not before the entry"):
        _submit(log, srv, 801, late_registration)


def test_submissions_a_node_cannot_get_through(served: tuple[Log, BackgroundServer]) -> None:
    """Server side: a link to another log's tree of the same origin, files beyond the
    manifest, a replay by a key revoked since; the same bundle signed twice by one key is one
    entry (issue 33 item 8: the second is answered with the first)."""
    log, srv = served
    sk = node_key(log)
    kid = node_key_id(bytes(sk.verify_key))
    size = log.store.size()

    def body(i: int, cp: Checkpoint, extra_file: bool = False, now: str = "") -> bytes:
        bundle = Bundle.from_files(bundle_files(i))
        entry = sign_entry(chained_fields(bundle, fields(i), cp, kid, now or utc_now()), sk)
        files = {f.path: b64_encode(f.data) for f in bundle.files}
        if extra_file:
            files["extra.txt"] = b64_encode(b"not in the manifest\n")
        return canonical_json({"entry": b64_encode(entry), "files": files})

    def post(data: bytes) -> httpx.Response:
        with httpx.Client(timeout=60) as c:
            return c.post(srv.url + "/api/v1/submit", content=data, headers=auth_headers(sk, data))

    fork = Checkpoint(log.origin, size, b"\x44" * 32)  # the same origin, another history
    here = Checkpoint(log.origin, size, log.store.root())
    assert post(body(901, fork)).status_code == 409
    assert post(body(902, here, extra_file=True)).status_code == 422
    a = body(903, here, now="2030-01-01T00:00:00Z")
    b = body(903, here, now="2030-01-01T00:00:01Z")
    first, second = post(a), post(b)
    assert first.status_code == second.status_code == 200
    assert first.json()["index"] == second.json()["index"]  # one bundle, one key: one entry
    assert second.json()["already_sealed"] is True and "already_sealed" not in first.json()
    assert b64_decode(second.json()["entry_b64"]) == b64_decode(
        json.loads(a)["entry"])  # the entry it holds, for the client to check
    log.revoke(kid, "lost")
    replay = post(a)
    assert replay.status_code == 403 and "unrevoked" in replay.json()["error"]
    assert log.store.size() == size + 2  # one entry and the revocation, nothing else


def test_no_refusal_here_prints_a_traceback(
    witnessed: tuple[Log, Witness, BackgroundServer], tmp_path: Path,
) -> None:
    """`ledger witness add-checkpoint` against a witness that refuses: one line, exit 3."""
    log, w, srv = witnessed
    assert _ask(srv.url, 0, [], _note(log, 2, log.store.root(2))).status_code == 200
    other = make_origin(tmp_path / "fork", 1)  # another log (another key) of the same origin
    try:
        res = run_cli("witness", "add-checkpoint", srv.url, "--vkey", w.vkey, home=other.home)
    finally:
        other.close()
    assert res.returncode in (1, 3) and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1



def test_refresh_counts_verified_cosignatures_not_lines(
    witnessed: tuple[Log, Witness, BackgroundServer], tmp_path: Path,
) -> None:
    """Found: `receipt refresh` reported every signature line the server sent as a cosignature;
    a server padding its checkpoint with foreign and repeated lines inflated the count."""
    from ledger.refresh import refresh_receipt
    from ledger_cli.wiring import write_receipt

    log, w, wsrv = witnessed
    (tmp_path / "r").mkdir()
    path = write_receipt(log, 1, tmp_path / "r")
    add_node(log, "later")
    note = request_cosignature(log.home, wsrv.url, w.vkey)
    text = note.split(b"\n\n")[0] + b"\n"
    junk = b"".join(
        cosign(text, Witness.init(tmp_path / f"j{i}", f"j{i}.example").signer, i) for i in range(5)
    )
    log.store.set_meta(COSIGNED_META, (note + junk).decode())
    wv = parse_vkey(w.vkey)
    with BackgroundServer(make_app(log.home)) as srv:
        done = refresh_receipt(path, srv.url, log.verifier, (wv, _alias(wv, "again.example")), 1)
    assert (done.new_size, done.cosignatures) == (log.store.size(), 1)
