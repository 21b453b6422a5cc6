"""Issue 14: the witness against C2SP tlog-witness (https://c2sp.org/tlog-witness), including the
spec's own example request and response bodies byte for byte, and a witness killed with SIGKILL
mid-stream that never cosigns two different checkpoints of one size."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from ledger.core import merkle
from ledger.core.encoding import b64_encode
from ledger.core.note import (
    Checkpoint,
    NoteSigner,
    _parse_signature_line,
    cosign,
    format_checkpoint,
    sign_note,
)
from ledger.http.witness import make_witness_app
from ledger.witness import SIZE_MEDIA, Witness, WitnessReject, parse_request
from tests.helpers.ledgers import REPO
from tests.helpers.server import BackgroundServer

ORIGIN = "conformance.example/log"
SEED = bytes(range(32))

# The example request and response bodies of the C2SP tlog-witness spec, byte for byte.
SPEC_REQUEST = (
    "old 20852014\n"
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n"
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n"
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n"
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n"
    "\n"
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zh"
    "cyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    "— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49"
    "/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
).encode()
SPEC_RESPONSE = (
    "— witness.example/w1 CMp+6LWBU0anHGH5aNDTJkH/gj79sG+T6+iP2ThYN5krrDJbR1HDnucjL39QsZTSvVjy"
    "QLrdk3DXDqI5G2HgLatVs0pWh6Up69HVOw==\n"
    "— witness.example/w1 I7rEps0pvK2UqkS2gSpVUDhrhVtQV9lgF6pRrWAvjJHjyWpW7VcE3SiOlVlbQNt64vWh"
    "O+DlkL0+UfzuOBMh9ChdMkP1vi/lCAsmlw==\n"
    "— witness.example/w2 AWui8Sk55XjYLOijihBjhqEH6nS1ndDymE0a+6idX7pLcnoB+dhnz0854aLZgrrKbYKA"
    "7nC3HNJhm/kWl7oJlqU3rXXvpysAdyP3wQ==\n"
).encode()


def leaves(n: int, salt: bytes = b"") -> list[bytes]:
    return [merkle.leaf_hash(salt + i.to_bytes(4, "big")) for i in range(n)]


def getter(ls: Sequence[bytes]) -> merkle.GetStored:
    def get(level: int, n: int) -> bytes:
        return merkle.root_from_leaf_hashes(ls[n << level : (n + 1) << level])

    return get


def note_of(ls: Sequence[bytes], size: int) -> bytes:
    signer = NoteSigner(ORIGIN, b"", SEED)
    text = format_checkpoint(Checkpoint(ORIGIN, size, merkle.root_from_leaf_hashes(ls[:size])))
    return sign_note(text, [signer])


def body(old: int, proof: Sequence[bytes], note: bytes) -> bytes:
    return f"old {old}\n".encode() + b"".join(b64_encode(h).encode() + b"\n" for h in proof) + (
        b"\n" + note
    )


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    w = Witness.init(tmp_path / "w", "w.example")
    w.add_log(NoteSigner(ORIGIN, b"", SEED).verifier.vkey)
    return w


def test_spec_example_request_parses_byte_for_byte() -> None:
    old, proof, note = parse_request(SPEC_REQUEST)
    assert old == 20852014 and len(proof) == 4
    assert b64_encode(proof[0]) == "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw="
    assert note == SPEC_REQUEST.split(b"\n\n", 1)[1]
    assert note.startswith(b"example.com/behind-the-sofa\n20852163\n")


def test_spec_example_request_unknown_origin_is_404(witness: Witness) -> None:
    with BackgroundServer(make_witness_app(witness.home)) as srv, httpx.Client(
        base_url=srv.url
    ) as c:
        r = c.post("/add-checkpoint", content=SPEC_REQUEST)
    assert r.status_code == 404


def test_spec_example_response_lines_have_our_cosignature_shape() -> None:
    ours = cosign(format_checkpoint(Checkpoint(ORIGIN, 1, b"\x00" * 32)), NoteSigner(
        "witness.example/w1", b"", SEED), 1700000000)
    mine = _parse_signature_line(ours.rstrip(b"\n"))
    for line in SPEC_RESPONSE.splitlines():
        sig = _parse_signature_line(line)
        assert sig.name.startswith("witness.example/w")
        assert len(sig.key_id) == 4 and len(sig.signature) == len(mine.signature) == 72
    # the shape the log side accepts: one or more note signature lines, each ending in \n
    assert SPEC_RESPONSE.endswith(b"\n") and all(
        ln.startswith("— ".encode()) for ln in SPEC_RESPONSE.splitlines()
    )


def test_409_is_exactly_text_x_tlog_size_and_old_above_size_is_400(witness: Witness) -> None:
    ls = leaves(8)
    with BackgroundServer(make_witness_app(witness.home)) as srv, httpx.Client(
        base_url=srv.url
    ) as c:
        r = c.post("/add-checkpoint", content=body(0, [], note_of(ls, 5)))
        assert r.status_code == 200 and r.content.startswith("— w.example ".encode())
        r = c.post("/add-checkpoint", content=body(0, [], note_of(ls, 8)))
        assert r.status_code == 409
        assert r.headers["content-type"] == SIZE_MEDIA  # no charset parameter
        assert r.content == b"5\n"
        # old larger than the checkpoint's size: 400, before any 409
        r = c.post("/add-checkpoint", content=body(7, [], note_of(ls, 6)))
        assert r.status_code == 400
        # the same size with another root: 409, never a second cosignature for size 5
        r = c.post("/add-checkpoint", content=body(5, [], note_of(leaves(8, b"x"), 5)))
        assert r.status_code == 409
        # a bad consistency proof: 422; the right one: 200
        r = c.post("/add-checkpoint", content=body(5, [b"\x01" * 32], note_of(ls, 8)))
        assert r.status_code == 422
        proof = merkle.consistency_proof(5, 8, getter(ls))
        r = c.post("/add-checkpoint", content=body(5, proof, note_of(ls, 8)))
        assert r.status_code == 200


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ledger.core import merkle
    from ledger.witness import Witness
    from tests.ledger.test_witness_conformance import body, getter, leaves, note_of

    w = Witness(Path(sys.argv[1]))
    ls = leaves(4096)
    old = 0
    for size in range(1, 4096):
        proof = merkle.consistency_proof(old, size, getter(ls)) if old else []
        w.add_checkpoint(body(old, proof, note_of(ls, size)))
        sys.stdout.write(f"{size}\\n")
        sys.stdout.flush()
        old = size
    """
)


def test_a_witness_killed_with_sigkill_never_cosigns_two_checkpoints_of_one_size(
    witness: Witness,
) -> None:
    cosigned = 0
    with subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(witness.home)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            while cosigned < 25:
                line = proc.stdout.readline()
                assert line, proc.stderr.read()
                cosigned = int(line)
            proc.kill()  # SIGKILL, mid-stream: somewhere inside a later add-checkpoint
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -9
    w = Witness(witness.home)  # a fresh process's view of the state on disk
    kept = w.latest(ORIGIN)
    assert kept is not None
    size = int(kept.split(b"\n")[1])
    assert size >= cosigned  # persisted before the cosignature was answered
    # another root at the persisted size (or any size it already answered) is never cosigned
    with pytest.raises(WitnessReject) as e:
        w.add_checkpoint(body(size, [], note_of(leaves(4096, b"fork"), size)))
    assert e.value.status == 409
    with pytest.raises(WitnessReject) as e:
        w.add_checkpoint(body(0, [], note_of(leaves(4096, b"fork"), cosigned)))
    assert e.value.status == 409 and e.value.body == f"{size}\n".encode()
    # and the real history continues from it
    ls = leaves(4096)
    proof = merkle.consistency_proof(size, size + 1, getter(ls))
    assert w.add_checkpoint(body(size, proof, note_of(ls, size + 1))).startswith(b"\xe2\x80\x94 ")
