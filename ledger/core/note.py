"""Signed notes, checkpoints and cosignatures (SPEC 5, 6): C2SP signed-note, tlog-checkpoint and
tlog-cosignature, byte-compatible with Go's golang.org/x/mod/sumdb/note.

Keys
    verifier key ``<name>+<8 hex key id>+<base64(alg || public key)>``; signer key (Go)
    ``PRIVATE+KEY+<name>+<8 hex key id>+<base64(alg || seed)>``; key id = first 4 bytes of
    SHA-256(name || "\\n" || alg || public key). alg 0x01 is Ed25519; alg 0x04 is an Ed25519
    cosigner (tlog-cosignature/v1).

Note (``sign_note`` / ``open_note``)
    1. the text: UTF-8, no control character but ``\\n`` (nor a C1 control or a bidi character:
       ``ledger.core.text``, stricter than Go), ending in ``\\n``;
    2. a blank line;
    3. one line per signature: ``— <name> <base64(key id || signature)>\\n`` (U+2014, a space).
    An Ed25519 signature signs the text bytes. Limits: 1 MiB, 100 signature lines.

Checkpoint (the text of the log's note)
    ``<origin>\\n<decimal size>\\n<base64 root hash>\\n`` then optional non-empty extension lines.

Cosignature v1 (a witness's signature line, added to the log's note)
    signed message ``cosignature/v1\\ntime <T>\\n`` followed by the checkpoint text; line payload
    ``key id (alg 0x04) || T as uint64 big endian || Ed25519 signature``. ``cosign`` makes the line,
    ``verify_cosignature`` checks one and returns T; ``open_note`` verifies cosignatures of any
    alg-0x04 verifier it is given.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import nacl.exceptions
import nacl.signing

from ledger.core.encoding import b64_decode, b64_encode, hex_decode, hex_encode
from ledger.core.errors import BadInput, SignatureError
from ledger.core.text import unsafe_at

ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04
MAX_NOTE_SIZE = 1 << 20
MAX_SIGNATURES = 100
SIG_PREFIX = "— ".encode()
_COSIG_HEADER = b"cosignature/v1\ntime "
_HEX8 = re.compile(r"[0-9a-f]{8}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


@functools.lru_cache(maxsize=256)
def _valid_name(name: str) -> bool:
    # Go: non-empty, valid UTF-8, no Unicode space, no "+"; here also no control or bidi
    # character (ledger.core.text: a name is shown to people)
    return (bool(name) and "+" not in name and not any(c.isspace() for c in name)
            and unsafe_at(name) is None)


def note_text(note: bytes) -> bytes:
    """The signed text of a C2SP note: everything up to and including the line before the last
    blank line (as ``open_note`` and Go's note package split it, so the text parsed is the text
    a signature covers; a checkpoint text holding a blank line then fails to parse). BadInput
    when there is no blank line. The one helper for this."""
    cut = note.rfind(b"\n\n")
    if cut < 0:
        raise BadInput("signed note has no blank line before its signatures")
    return note[: cut + 1]


def key_id(name: str, public: bytes, alg: int = ALG_ED25519) -> bytes:
    """First 4 bytes of SHA-256(name || "\\n" || alg || public)."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([alg]) + public).digest()[:4]


def format_vkey(name: str, public: bytes, alg: int = ALG_ED25519) -> str:
    """``name+<8 hex key id>+<base64(alg || public)>``."""
    if not _valid_name(name):
        raise BadInput(f"key name {name!r} is empty or holds a space or '+'")
    if len(public) != 32:
        raise BadInput(f"an Ed25519 public key is 32 bytes, got {len(public)}")
    return f"{name}+{hex_encode(key_id(name, public, alg))}+{b64_encode(bytes([alg]) + public)}"


def format_skey(name: str, seed: bytes) -> str:
    """Go's signer key ``PRIVATE+KEY+name+<8 hex key id>+<base64(0x01 || seed)>``."""
    signer = NoteSigner(name, b"", seed)
    key = b64_encode(bytes([ALG_ED25519]) + seed)
    return f"PRIVATE+KEY+{name}+{hex_encode(signer.key_id)}+{key}"


@dataclass(frozen=True)
class NoteVerifier:
    """A verifier key: ``alg`` 0x01 (Ed25519 note signature) or 0x04 (cosignature/v1)."""

    name: str
    key_id: bytes
    public: bytes
    alg: int = ALG_ED25519

    def __post_init__(self) -> None:
        if not _valid_name(self.name):
            raise BadInput(f"key name {self.name!r} is empty or holds a space or '+'")
        if self.alg not in (ALG_ED25519, ALG_COSIGNATURE_V1):
            raise BadInput(f"unknown key algorithm {self.alg:#04x}")
        if len(self.public) != 32:
            raise BadInput(f"an Ed25519 public key is 32 bytes, got {len(self.public)}")
        if self.key_id != key_id(self.name, self.public, self.alg):
            raise BadInput(f"key id {hex_encode(self.key_id)} does not match key {self.name}")

    @functools.cached_property
    def vkey(self) -> str:
        """The key's text (``name+<key id>+<base64>``), made once per key: the verified cache
        and the checkpoint memory name their folders by its hash on every lookup."""
        return format_vkey(self.name, self.public, self.alg)

    @property
    def label(self) -> str:
        """``name+keyid`` (hex): how messages name this key, as Go's note package does."""
        return f"{self.name}+{hex_encode(self.key_id)}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        memo = _CHECKED.get()
        key = (self.alg, self.public, message, signature)
        if memo is not None and key in memo:
            return memo[key]
        try:
            nacl.signing.VerifyKey(self.public).verify(message, signature)
            ok = True
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError):
            ok = False
        if memo is not None:
            memo[key] = ok
        return ok


# (alg, public key, message, signature) -> the answer, inside ``checked_once`` only
_CHECKED: contextvars.ContextVar[dict[tuple[int, bytes, bytes, bytes], bool] | None] = (
    contextvars.ContextVar("note_signatures_checked", default=None))


@contextlib.contextmanager
def checked_once() -> Iterator[None]:
    """Within this block (one verification, which reads the same checkpoint in several steps:
    its integrity check, ``keep_verified`` before it is remembered, the remembered copy) a note
    signature is checked once: the same key over the same bytes with the same signature gets
    the answer it got, never a weaker one. An outermost block starts empty (a nested one shares
    it), so nothing carries from one verification to the next."""
    if _CHECKED.get() is not None:
        yield
        return
    token = _CHECKED.set({})
    parsed = _PARSED.set({})
    try:
        yield
    finally:
        _PARSED.reset(parsed)
        _CHECKED.reset(token)


# inside ``checked_once`` only: what a verification's steps parse of the same bytes again (a
# note opened under the same keys, a checkpoint text): the first answer, parsed once (both are
# frozen values of the bytes alone; a failure is not kept and is raised again by parsing again)
_PARSED: contextvars.ContextVar[dict[tuple[object, ...], object] | None] = (
    contextvars.ContextVar("note_parsed", default=None))


@dataclass(frozen=True)
class NoteSigner:
    """An Ed25519 signer. ``key_id`` may be given as b"" and is then derived (alg 0x01)."""

    name: str
    key_id: bytes
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not _valid_name(self.name):
            raise BadInput(f"key name {self.name!r} is empty or holds a space or '+'")
        if len(self.seed) != 32:
            raise BadInput(f"an Ed25519 seed is 32 bytes, got {len(self.seed)}")
        want = key_id(self.name, self.public)
        if self.key_id == b"":
            object.__setattr__(self, "key_id", want)
        elif self.key_id != want:
            raise BadInput(f"key id {hex_encode(self.key_id)} does not match key {self.name}")

    @property
    def public(self) -> bytes:
        return bytes(nacl.signing.SigningKey(self.seed).verify_key)

    @property
    def verifier(self) -> NoteVerifier:
        return NoteVerifier(self.name, self.key_id, self.public)

    def sign(self, message: bytes) -> bytes:
        return bytes(nacl.signing.SigningKey(self.seed).sign(message).signature)


def _split_key(text: str, parts: int, what: str) -> list[str]:
    if not isinstance(text, str):
        raise BadInput(f"{what} must be text")
    fields = text.strip().split("+", parts - 1)
    if len(fields) != parts:
        raise BadInput(f"{what} must have the form {'+'.join(['…'] * parts)}")
    return fields


def _parse_key(name: str, hex_id: str, b64: str, what: str) -> tuple[bytes, int, bytes]:
    if not _valid_name(name):
        raise BadInput(f"{what}: name {name!r} is empty or holds a space or '+'")
    if _HEX8.fullmatch(hex_id) is None:
        raise BadInput(f"{what}: key id must be 8 lowercase hex digits")
    raw = b64_decode(b64, what=f"{what} key")
    if len(raw) != 33:
        raise BadInput(f"{what}: key must be 1 algorithm byte and 32 key bytes, got {len(raw)}")
    return hex_decode(hex_id), raw[0], raw[1:]


def parse_vkey(text: str) -> NoteVerifier:
    """Parse ``name+keyid+base64(alg||pub)`` (alg 0x01 or 0x04); BadInput when malformed."""
    name, hex_id, b64 = _split_key(text, 3, "verifier key")
    kid, alg, public = _parse_key(name, hex_id, b64, "verifier key")
    if alg not in (ALG_ED25519, ALG_COSIGNATURE_V1):
        raise BadInput(f"verifier key: unknown algorithm {alg:#04x}")
    if kid != key_id(name, public, alg):
        raise BadInput(f"verifier key: key id {hex_id} does not match the key")
    return NoteVerifier(name, kid, public, alg)


def parse_skey(text: str) -> NoteSigner:
    """Parse Go's ``PRIVATE+KEY+name+keyid+base64(0x01||seed)``; BadInput when malformed."""
    p1, p2, name, hex_id, b64 = _split_key(text, 5, "signer key")
    if (p1, p2) != ("PRIVATE", "KEY"):
        raise BadInput("signer key must start with PRIVATE+KEY+")
    kid, alg, seed = _parse_key(name, hex_id, b64, "signer key")
    if alg != ALG_ED25519:
        raise BadInput(f"signer key: unknown algorithm {alg:#04x}")
    signer = NoteSigner(name, b"", seed)
    if signer.key_id != kid:
        raise BadInput(f"signer key: key id {hex_id} does not match the key")
    return signer


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: ``signature`` is the payload after the 4-byte key id."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> bytes:
        return SIG_PREFIX + f"{self.name} {b64_encode(self.key_id + self.signature)}\n".encode()


@dataclass(frozen=True)
class Note:
    text: bytes
    signatures: tuple[NoteSignature, ...]  # every distinct signature line, known key or not
    verified: tuple[NoteSignature, ...]  # those by a given verifier, each checked


def _check_text(data: bytes, what: str) -> None:
    try:
        decoded = data.decode("utf-8", "strict")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} is not valid UTF-8 (byte {e.start})") from e
    at = unsafe_at(decoded, "\n")  # stricter than Go's note: C1 and bidi characters too
    if at is not None:
        raise BadInput(f"{what} holds control or bidi character U+{ord(decoded[at]):04X} at {at}")


def sign_note(text: bytes, signers: Sequence[NoteSigner]) -> bytes:
    """The signed note: ``text``, a blank line, one signature line per signer in order."""
    _check_text(text, "note text")
    if not text.endswith(b"\n"):
        raise BadInput("note text must end with a newline")
    if not signers:
        raise BadInput("a note needs at least one signer")
    lines = [NoteSignature(s.name, s.key_id, s.sign(text)).line() for s in signers]
    out = text + b"\n" + b"".join(lines)
    if len(out) > MAX_NOTE_SIZE:
        raise BadInput(f"signed note is {len(out)} bytes, over {MAX_NOTE_SIZE}")
    return out


def _parse_signature_line(line: bytes) -> NoteSignature:
    if not line.startswith(SIG_PREFIX):
        raise BadInput("signature line must start with an em dash and a space")
    name, sep, b64 = line[len(SIG_PREFIX) :].decode("utf-8").partition(" ")
    if not sep or not _valid_name(name) or not b64:
        raise BadInput("signature line must be '— <name> <base64>'")
    raw = b64_decode(b64, what=f"signature by {name}")
    if len(raw) < 5:
        raise BadInput(f"signature by {name} is too short")
    return NoteSignature(name, raw[:4], raw[4:])


def open_note(note: bytes, verifiers: Sequence[NoteVerifier]) -> Note:
    """Parse a signed note and verify the signatures of the given keys.

    BadInput when malformed; SignatureError when a signature by a given key fails or when no
    given key signed it. Signatures by other keys are kept in ``.signatures`` only; a repeated
    line is dropped. Inside ``checked_once`` the same note under the same keys is opened once.
    """
    memo = _PARSED.get()
    if memo is None:
        return _open_note(note, verifiers)
    key = ("note", note, *((v.alg, v.name, v.key_id, v.public) for v in verifiers))
    got = memo.get(key)
    if got is None:
        got = memo[key] = _open_note(note, verifiers)
    assert isinstance(got, Note)
    return got


def _open_note(note: bytes, verifiers: Sequence[NoteVerifier]) -> Note:
    if not isinstance(note, bytes):
        raise BadInput("a signed note must be bytes")
    if len(note) > MAX_NOTE_SIZE:
        raise BadInput(f"signed note is {len(note)} bytes, over {MAX_NOTE_SIZE}")
    _check_text(note, "signed note")
    split = note.rfind(b"\n\n")
    if split < 0:
        raise BadInput("signed note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block or not block.endswith(b"\n"):
        raise BadInput("signed note must end with a signature line and a newline")
    lines = block[:-1].split(b"\n")
    if len(lines) > MAX_SIGNATURES:
        raise BadInput(f"signed note has {len(lines)} signatures, over {MAX_SIGNATURES}")
    known = {(v.name, v.key_id): v for v in verifiers}
    signatures: list[NoteSignature] = []
    verified: list[NoteSignature] = []
    for line in lines:
        sig = _parse_signature_line(line)
        if sig in signatures:
            continue
        signatures.append(sig)
        v = known.get((sig.name, sig.key_id))
        if v is None:
            continue
        if any((s.name, s.key_id) == (v.name, v.key_id) for s in verified):
            continue  # Go keeps the first signature of a key
        if v.alg == ALG_COSIGNATURE_V1:
            verify_cosignature(text, sig, v)
        elif not v.verify(text, sig.signature):
            raise SignatureError(f"invalid signature for key {v.label}")
        verified.append(sig)
    if not verified:
        names = ", ".join(f"{s.name}+{hex_encode(s.key_id)}" for s in signatures)
        raise SignatureError(f"note has no valid signature by a trusted key (signed by {names})")
    return Note(text, tuple(signatures), tuple(verified))


def signature_keys(note: bytes) -> frozenset[tuple[str, bytes]]:
    """(name, key id) of every signature line of ``note``, checked or not; BadInput when the
    note is malformed."""
    cut = note.rfind(b"\n\n")
    if cut < 0:
        raise BadInput("signed note has no blank line before its signatures")
    lines = note[cut + 2 :].splitlines()[:MAX_SIGNATURES]
    return frozenset((s.name, s.key_id) for s in map(_parse_signature_line, lines))


def keep_verified(note: bytes, verifiers: Sequence[NoteVerifier]) -> bytes:
    """``note`` as it may be kept: its text, a blank line and the signature line of each of
    ``verifiers`` whose signature on it verifies, in the order given, one line per key (the
    first name a key is given under that signed). A line by any other key is dropped, so what
    is kept is what was checked. The first verifier (the log's key) must have signed it
    (``SignatureError``); the others (witnesses) may be missing or fail (then left out)."""
    opened = open_note(note, list(verifiers[:1]))
    lines = [opened.verified[0].line()]
    seen = {(verifiers[0].alg, verifiers[0].public)}
    for v in verifiers[1:]:
        if (v.alg, v.public) in seen:
            continue
        try:
            got = open_note(note, [v])
        except (SignatureError, BadInput):
            continue
        seen.add((v.alg, v.public))
        lines.append(got.verified[0].line())
    return opened.text + b"\n" + b"".join(lines)


def tells_more(note: bytes, kept: bytes) -> bool:
    """Whether keeping ``note`` beside ``kept`` (both verified and stripped by
    ``keep_verified``) adds anything: another text, or a signature by a key ``kept`` lacks. A
    newer line by a key already kept (a witness's later cosignature of the same checkpoint)
    adds nothing, so a host replaying lines cannot make a store grow while the tree stands."""
    if note == kept:
        return False
    if note_text(note) != note_text(kept):
        return True
    return not signature_keys(note) <= signature_keys(kept)


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()


def format_checkpoint(cp: Checkpoint) -> bytes:
    """The note text of a checkpoint: origin, size, base64 root, extension lines."""
    if not cp.origin or "\n" in cp.origin:
        raise BadInput("checkpoint origin must be one non-empty line")
    if cp.size < 0 or cp.size >= 1 << 64:
        raise BadInput(f"checkpoint size {cp.size} is out of range")
    if len(cp.root) != 32:
        raise BadInput(f"checkpoint root must be 32 bytes, got {len(cp.root)}")
    for ext in cp.extensions:
        if not ext or "\n" in ext:
            raise BadInput("checkpoint extension lines must be non-empty single lines")
    lines = [cp.origin, str(cp.size), b64_encode(cp.root), *cp.extensions]
    text = ("\n".join(lines) + "\n").encode("utf-8")
    _check_text(text, "checkpoint")
    return text


def parse_checkpoint(text: bytes) -> Checkpoint:
    """Parse checkpoint note text strictly; BadInput when malformed (inside ``checked_once``
    the same text is parsed once)."""
    memo = _PARSED.get()
    if memo is None:
        return _parse_checkpoint(text)
    got = memo.get(("checkpoint", text))
    if got is None:
        got = memo[("checkpoint", text)] = _parse_checkpoint(text)
    assert isinstance(got, Checkpoint)
    return got


def _parse_checkpoint(text: bytes) -> Checkpoint:
    _check_text(text, "checkpoint")
    if not text.endswith(b"\n"):
        raise BadInput("checkpoint must end with a newline")
    lines = text[:-1].decode("utf-8").split("\n")
    if len(lines) < 3:
        raise BadInput("checkpoint must have an origin, a size and a root hash line")
    origin, size_text, root_text, *ext = lines
    if not origin:
        raise BadInput("checkpoint origin line is empty")
    if (
        _DECIMAL.fullmatch(size_text) is None
        or len(size_text) > 20  # int() of 4,300 digits raises ValueError
        or int(size_text) >= 1 << 64
    ):
        raise BadInput(f"checkpoint size {size_text[:30]!r} is not a decimal uint64")
    root = b64_decode(root_text, what="checkpoint root hash")
    if len(root) != 32:
        raise BadInput(f"checkpoint root hash must be 32 bytes, got {len(root)}")
    if any(not e for e in ext):
        raise BadInput("checkpoint has an empty extension line")
    return Checkpoint(origin, int(size_text), root, tuple(ext))


def _cosigned_message(checkpoint_text: bytes, timestamp: int) -> bytes:
    if not 0 <= timestamp < 1 << 63:  # C2SP: MUST NOT exceed 2^63 - 1
        raise BadInput(f"cosignature timestamp {timestamp} is out of range")
    parse_checkpoint(checkpoint_text)
    return _COSIG_HEADER + str(timestamp).encode() + b"\n" + checkpoint_text


def cosign(checkpoint_text: bytes, signer: NoteSigner, timestamp: int) -> bytes:
    """A tlog-cosignature/v1 signature line by ``signer`` at ``timestamp`` (Unix seconds).

    Returns the whole line ``— <name> <base64(keyid || timestamp || sig)>\\n``, with the key id
    computed for alg 0x04; append it to the log's signed note to add the cosignature.
    """
    message = _cosigned_message(checkpoint_text, timestamp)
    payload = timestamp.to_bytes(8, "big") + signer.sign(message)
    kid = key_id(signer.name, signer.public, ALG_COSIGNATURE_V1)
    return NoteSignature(signer.name, kid, payload).line()


def verify_cosignature(
    checkpoint_text: bytes, signature: NoteSignature, verifier: NoteVerifier
) -> int:
    """Check one cosignature/v1 over ``checkpoint_text``; return its timestamp.

    SignatureError unless ``verifier`` is an alg-0x04 key matching the line's name and key id and
    the Ed25519 signature over the cosigned message verifies.
    """
    who = verifier.label
    if verifier.alg != ALG_COSIGNATURE_V1:
        raise SignatureError(f"key {who} is not a cosignature/v1 key")
    if (signature.name, signature.key_id) != (verifier.name, verifier.key_id):
        raise SignatureError(f"cosignature is by {signature.name}, not by key {who}")
    if len(signature.signature) != 72:
        raise SignatureError(f"cosignature by {who} is {len(signature.signature)} bytes, not 72")
    timestamp = int.from_bytes(signature.signature[:8], "big")
    message = _cosigned_message(checkpoint_text, timestamp)
    if not verifier.verify(message, signature.signature[8:]):
        raise SignatureError(f"invalid cosignature for key {who}")
    return timestamp
