"""ledger.core.note: Go's sumdb/note known answers, RFC 8032 vectors, checkpoints and cosignatures.

Known answers:
- golang.org/x/mod/sumdb/note note_test.go (TestNewVerifier, TestNewSigner, TestSign, TestOpen):
  the PeterNeumann keys and the signed note below, byte for byte (also in Debian's
  golang-golang-x-mod-dev, /usr/share/gocode/src/golang.org/x/mod/sumdb/note/note_test.go).
- RFC 8032 section 7.1 Ed25519 test vectors TEST 1, 2, 3 and TEST SHA(abc), through PyNaCl.
"""

from __future__ import annotations

import base64
import hashlib

import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import note
from ledger.core.errors import BadInput, SignatureError

PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_TEXT = (
    b"If you think cryptography is the answer to your problem,\n"
    b"then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
).encode()
PETER_NOTE = PETER_TEXT + b"\n" + PETER_SIG

RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
        "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e"
        "458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290"
        "ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
    (
        "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
        "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
        hashlib.sha512(b"abc").hexdigest(),  # RFC 8032 TEST SHA(abc): the message is SHA-512("abc")
        "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ec"
        "fdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
    ),
]


@pytest.mark.parametrize(("seed", "public", "msg", "sig"), RFC8032)
def test_rfc8032_vectors(seed: str, public: str, msg: str, sig: str) -> None:
    signer = note.NoteSigner("rfc8032", b"", bytes.fromhex(seed))
    assert signer.public.hex() == public
    assert signer.sign(bytes.fromhex(msg)).hex() == sig
    assert signer.verifier.verify(bytes.fromhex(msg), bytes.fromhex(sig))
    bad = bytearray.fromhex(sig)
    bad[0] ^= 1
    assert not signer.verifier.verify(bytes.fromhex(msg), bytes(bad))
    assert not signer.verifier.verify(bytes.fromhex(msg) + b"x", bytes.fromhex(sig))
    assert not signer.verifier.verify(bytes.fromhex(msg), bytes.fromhex(sig)[:63])


def test_go_keys() -> None:
    v = note.parse_vkey(PETER_VKEY)
    assert (v.name, v.key_id.hex(), v.alg) == ("PeterNeumann", "c74f20a3", 1)
    assert v.vkey == PETER_VKEY
    s = note.parse_skey(PETER_SKEY)
    assert s.public == v.public and s.key_id == v.key_id
    assert note.format_skey(s.name, s.seed) == PETER_SKEY
    assert note.format_vkey(s.name, s.public) == PETER_VKEY
    assert note.key_id("PeterNeumann", v.public) == bytes.fromhex("c74f20a3")
    assert "seed" not in repr(s) or s.seed.hex() not in repr(s)


@pytest.mark.parametrize(
    "vkey",
    [
        # note_test.go TestNewVerifier bad keys
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TX",  # wrong key id
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3",
        "PeterNeumann+c74f20a3+!!!",
        "",
    ],
)
def test_bad_vkeys(vkey: str) -> None:
    with pytest.raises(BadInput):
        note.parse_vkey(vkey)


@pytest.mark.parametrize(
    "skey",
    [
        PETER_SKEY.replace("PRIVATE+KEY", "PUBLIC+KEY"),
        PETER_SKEY.replace("c74f20a3", "c74f20a4"),
        PETER_SKEY[:-4],
        PETER_SKEY.replace("+AYEK", "+ZYEK"),
    ],
)
def test_bad_skeys(skey: str) -> None:
    with pytest.raises(BadInput):
        note.parse_skey(skey)


def test_go_signed_note_byte_for_byte() -> None:
    signer = note.parse_skey(PETER_SKEY)
    assert note.sign_note(PETER_TEXT, [signer]) == PETER_NOTE
    n = note.open_note(PETER_NOTE, [note.parse_vkey(PETER_VKEY)])
    assert n.text == PETER_TEXT
    assert [s.name for s in n.verified] == ["PeterNeumann"]
    assert n.verified[0].key_id == bytes.fromhex("c74f20a3")
    assert n.verified[0].line() == PETER_SIG


def test_open_keeps_unknown_signatures_and_needs_a_known_one() -> None:
    peter = note.parse_vkey(PETER_VKEY)
    other = note.NoteSigner("Other", b"", bytes(range(32)))
    both = note.sign_note(PETER_TEXT, [note.parse_skey(PETER_SKEY), other])
    n = note.open_note(both, [peter])
    assert [s.name for s in n.signatures] == ["PeterNeumann", "Other"]
    assert [s.name for s in n.verified] == ["PeterNeumann"]
    n2 = note.open_note(both, [peter, other.verifier])
    assert len(n2.verified) == 2
    with pytest.raises(SignatureError, match="no valid signature"):
        note.open_note(PETER_NOTE, [other.verifier])
    with pytest.raises(SignatureError):
        note.open_note(PETER_NOTE, [])
    # A duplicated line is dropped, not counted twice.
    assert len(note.open_note(PETER_NOTE + PETER_SIG, [peter]).signatures) == 1


def test_wrong_signature_by_known_key() -> None:
    peter = note.parse_vkey(PETER_VKEY)
    for tampered in [
        PETER_NOTE.replace(b"answer", b"Answer"),
        PETER_NOTE.replace(b"x08go", b"x08gp"),
        PETER_TEXT + b"\n" + PETER_SIG.replace(b"nAM=", b"nAA="),
        # A blank line among the signatures: the text then ends at the last blank line.
        PETER_TEXT + b"\n" + PETER_SIG * 2 + b"\n" + PETER_SIG,
    ]:
        with pytest.raises(SignatureError, match="PeterNeumann"):
            note.open_note(tampered, [peter])
    # A signature by another key under Peter's name and key id is a failed signature.
    impostor = note.NoteSigner("Impostor", b"", bytes(32))
    fake = note.sign_note(PETER_TEXT, [impostor]).replace(
        b"Impostor " + base64.b64encode(impostor.key_id)[:4],
        b"PeterNeumann " + base64.b64encode(peter.key_id)[:4],
    )
    with pytest.raises((SignatureError, BadInput)):
        note.open_note(fake, [peter])


def test_checked_once_answers_as_checking_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside ``checked_once`` a signature checked before gets the answer it got: a good note
    still opens, every tampered one (same key, other bytes or signature) is still refused, and
    nothing is remembered once the block ends."""
    peter = note.parse_vkey(PETER_VKEY)
    calls: list[bytes] = []
    real = nacl.signing.VerifyKey.verify

    def counted(self: nacl.signing.VerifyKey, *args: bytes) -> bytes:
        calls.append(args[0])
        return real(self, *args)

    monkeypatch.setattr(nacl.signing.VerifyKey, "verify", counted)
    with note.checked_once():
        for _ in range(3):
            note.open_note(PETER_NOTE, [peter])
        assert len(calls) == 1
        for tampered in (PETER_NOTE.replace(b"answer", b"Answer"),
                         PETER_TEXT + b"\n" + PETER_SIG.replace(b"nAM=", b"nAA=")):
            for _ in range(2):
                with pytest.raises(SignatureError):
                    note.open_note(tampered, [peter])
        with note.checked_once():  # nested: the same record
            note.open_note(PETER_NOTE, [peter])
        assert len(calls) == 3
    note.open_note(PETER_NOTE, [peter])
    assert len(calls) == 4  # the block ended: checked again



@pytest.mark.parametrize(
    "msg",
    [
        PETER_TEXT,  # no signatures
        PETER_TEXT + b"\n",  # blank line, no signatures
        PETER_NOTE[:-1],  # no final newline
        PETER_NOTE.replace("—".encode(), b"-"),  # ASCII dash
        PETER_NOTE.replace(b"PeterNeumann x08", b"PeterNeumannx08"),  # no space
        PETER_NOTE.replace(b"x08go/", b"x08go!"),  # not base64
        PETER_NOTE.replace(b"problem,", b"problem,\r"),
        PETER_NOTE.replace(b"problem,", b"problem,\x00"),
        PETER_NOTE.replace(b"problem,", b"problem,\xff"),  # invalid UTF-8
        PETER_TEXT + b"\n" + "— PeterNeumann AAAA\n".encode(),  # too short
        PETER_TEXT
        + b"\n"
        + b"".join(note.NoteSignature(f"k{i}", bytes(4), bytes(64)).line() for i in range(101)),
        b"x" * (note.MAX_NOTE_SIZE + 1),
    ],
)
def test_malformed_notes(msg: bytes) -> None:
    with pytest.raises(BadInput):
        note.open_note(msg, [note.parse_vkey(PETER_VKEY)])


def test_sign_note_refuses_bad_text() -> None:
    signer = note.parse_skey(PETER_SKEY)
    for text in [b"no newline", b"cr\r\n", b"ok\n\xff\n"]:
        with pytest.raises(BadInput):
            note.sign_note(text, [signer])
    with pytest.raises(BadInput):
        note.sign_note(PETER_TEXT, [])


ROOT = hashlib.sha256(b"root").digest()


def test_checkpoint_round_trip() -> None:
    cp = note.Checkpoint("example.com/log", 42, ROOT, ("ext one",))
    text = note.format_checkpoint(cp)
    assert text == b"example.com/log\n42\n" + base64.b64encode(ROOT) + b"\next one\n"
    assert note.parse_checkpoint(text) == cp
    empty = note.Checkpoint("o", 0, ROOT)
    assert note.parse_checkpoint(note.format_checkpoint(empty)) == empty


@pytest.mark.parametrize(
    "text",
    [
        b"origin\n42\n",
        b"origin\n42\n" + base64.b64encode(ROOT),
        b"\n42\n" + base64.b64encode(ROOT) + b"\n",
        b"origin\n042\n" + base64.b64encode(ROOT) + b"\n",
        b"origin\n-1\n" + base64.b64encode(ROOT) + b"\n",
        b"origin\n+1\n" + base64.b64encode(ROOT) + b"\n",
        b"origin\n18446744073709551616\n" + base64.b64encode(ROOT) + b"\n",
        b"origin\n42\n" + base64.b64encode(ROOT[:31]) + b"\n",
        b"origin\n42\n" + base64.b64encode(ROOT).rstrip(b"=") + b"\n",
        b"origin\n42\n" + base64.b64encode(ROOT) + b"\n\n",
        b"origin\n42\n" + base64.b64encode(ROOT) + b"\r\n",
    ],
)
def test_bad_checkpoints(text: bytes) -> None:
    with pytest.raises(BadInput):
        note.parse_checkpoint(text)


def test_checkpoint_note_spec_shape() -> None:
    # SPEC 6: "ORIGIN\n<size>\n<base64 root>\n\n— ORIGIN <base64(key id || signature)>\n"
    log = note.NoteSigner("example.com/log", b"", bytes(range(32, 64)))
    text = note.format_checkpoint(note.Checkpoint(log.name, 7, ROOT))
    signed = note.sign_note(text, [log])
    head, sigline = signed.split(b"\n\n")
    assert head + b"\n" == text
    raw = base64.b64decode(sigline.split(b" ")[2])
    assert sigline.startswith("— example.com/log ".encode()) and len(raw) == 68
    assert raw[:4] == log.key_id
    pub = nacl.signing.VerifyKey(log.public)
    pub.verify(text, raw[4:])


def test_cosignature_v1() -> None:
    log = note.NoteSigner("example.com/log", b"", bytes(range(32)))
    witness = note.NoteSigner("witness.example", b"", bytes(range(1, 33)))
    text = note.format_checkpoint(note.Checkpoint(log.name, 7, ROOT))
    signed = note.sign_note(text, [log])
    line = note.cosign(text, witness, 1_700_000_000)
    wv = note.parse_vkey(note.format_vkey(witness.name, witness.public, note.ALG_COSIGNATURE_V1))
    assert wv.alg == 0x04 and wv.key_id == note.key_id(witness.name, witness.public, 0x04)
    assert wv.key_id != witness.key_id
    raw = base64.b64decode(line.rstrip(b"\n").split(b" ")[2])
    assert len(raw) == 4 + 8 + 64 and raw[4:12] == (1_700_000_000).to_bytes(8, "big")
    # The Ed25519 signature covers the documented cosigned message.
    msg = b"cosignature/v1\ntime 1700000000\n" + text
    nacl.signing.VerifyKey(witness.public).verify(msg, raw[12:])
    n = note.open_note(signed + line, [log.verifier, wv])
    assert [s.name for s in n.verified] == [log.name, witness.name]
    assert note.verify_cosignature(text, n.verified[1], wv) == 1_700_000_000
    # Only the cosigner's key, only the signed timestamp, only this checkpoint.
    sig = n.verified[1]
    later = note.NoteSignature(sig.name, sig.key_id, (1_700_000_001).to_bytes(8, "big") + raw[12:])
    with pytest.raises(SignatureError):
        note.verify_cosignature(text, later, wv)
    other = note.format_checkpoint(note.Checkpoint(log.name, 8, ROOT))
    with pytest.raises(SignatureError):
        note.verify_cosignature(other, sig, wv)
    with pytest.raises(SignatureError):
        note.verify_cosignature(text, sig, witness.verifier)  # alg 0x01 key
    for bad_time in (-1, 1 << 63):  # C2SP: the timestamp MUST NOT exceed 2^63 - 1
        with pytest.raises(BadInput):
            note.cosign(text, witness, bad_time)
    huge = note.NoteSignature(sig.name, sig.key_id, (1 << 63).to_bytes(8, "big") + raw[12:])
    with pytest.raises(BadInput):
        note.verify_cosignature(text, huge, wv)
    with pytest.raises(SignatureError):
        note.open_note(signed + line.replace(b"witness.example", b"witness.exampl"), [wv])


# --- properties -----------------------------------------------------------------------------

_LOG = note.NoteSigner("example.com/log", b"", bytes(range(100, 132)))
_WITNESS = note.NoteSigner("witness.example", b"", bytes(range(200, 232)))
_WV = note.parse_vkey(note.format_vkey(_WITNESS.name, _WITNESS.public, note.ALG_COSIGNATURE_V1))
_CP = note.format_checkpoint(note.Checkpoint(_LOG.name, 1234, ROOT, ("ext",)))
_SIGNED = note.sign_note(_CP, [_LOG]) + note.cosign(_CP, _WITNESS, 1_700_000_000)


@settings(max_examples=400)
@given(st.data())
def test_any_flipped_byte_of_a_signed_checkpoint_is_rejected(data: st.DataObject) -> None:
    assert len(note.open_note(_SIGNED, [_LOG.verifier, _WV]).verified) == 2
    pos = data.draw(st.integers(min_value=0, max_value=len(_SIGNED) - 1))
    bit = data.draw(st.integers(min_value=1, max_value=255))
    bad = bytearray(_SIGNED)
    bad[pos] ^= bit
    # A flip in the text, the blank line or a trusted key's own line is caught; a flip in another
    # key's line may leave the note valid for the trusted key (or make it malformed).
    log_end = _SIGNED.index(b"\n", len(_CP) + 1) + 1
    guarded = {0: range(log_end), 1: [*range(len(_CP) + 1), *range(log_end, len(_SIGNED))]}
    for i, trusted in enumerate(([_LOG.verifier], [_WV])):
        if pos in guarded[i]:
            with pytest.raises((BadInput, SignatureError)):
                note.open_note(bytes(bad), trusted)


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=63), st.integers(min_value=1, max_value=255))
def test_any_flipped_signature_byte_is_rejected(pos: int, bit: int) -> None:
    sig = bytearray(_LOG.sign(_CP))
    sig[pos] ^= bit
    assert not _LOG.verifier.verify(_CP, bytes(sig))
    line = note.NoteSignature(_LOG.name, _LOG.key_id, bytes(sig)).line()
    with pytest.raises(SignatureError):
        note.open_note(_CP + b"\n" + line, [_LOG.verifier])
