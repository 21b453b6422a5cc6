"""DSSE envelopes (github.com/secure-systems-lab/dsse, protocol v1) signed with Ed25519.

An envelope is the JSON object ``{"payload": base64, "payloadType": TYPE, "signatures":
[{"keyid": ID, "sig": base64}]}``. The signature covers the Pre-Authentication Encoding

    PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body

(``LEN``: the byte length as ASCII decimal, no leading zeros), never the JSON around it, so any
DSSE implementation (securesystemslib, sigstore, in-toto-golang) verifies what this module signs.
Envelopes are untrusted input: parsed with a size bound, a bound on the signatures, standard
base64 only (DSSE also allows URL-safe base64: refused here, as it is nowhere written). Pure:
no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import nacl.exceptions
import nacl.signing

from ledger.core.encoding import b64_decode, b64_encode
from ledger.core.errors import BadInput

MAX_ENVELOPE_BYTES = 8 << 20
MAX_SIGNATURES = 16
INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1's Pre-Authentication Encoding of ``payload`` of type ``payload_type``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_json(self) -> dict[str, Any]:
        return {"payload": b64_encode(self.payload), "payloadType": self.payload_type,
                "signatures": [{"keyid": s.keyid, "sig": b64_encode(s.sig)}
                               for s in self.signatures]}

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8")

    def verified_by(self, public: bytes) -> Signature | None:
        """The first signature that ``public`` (a raw Ed25519 key) made over the PAE, else None."""
        try:
            vk = nacl.signing.VerifyKey(public)
        except (nacl.exceptions.CryptoError, TypeError, ValueError):
            return None
        message = pae(self.payload_type, self.payload)
        for s in self.signatures:
            try:
                vk.verify(message, s.sig)
                return s
            except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
                continue
        return None


def sign(payload_type: str, payload: bytes, key: nacl.signing.SigningKey, keyid: str) -> Envelope:
    """The envelope of ``payload`` with one Ed25519 signature by ``key`` over its PAE."""
    sig = key.sign(pae(payload_type, payload)).signature
    return Envelope(payload_type, payload, (Signature(keyid, sig),))


def parse_envelope(data: bytes) -> Envelope:
    """The envelope ``data`` holds (``BadInput`` when it is not one)."""
    if len(data) > MAX_ENVELOPE_BYTES:
        raise BadInput(f"the envelope is larger than {MAX_ENVELOPE_BYTES} bytes")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadInput("the attestation is not JSON (or nests too deeply)") from e
    if not isinstance(obj, dict) or not {"payload", "payloadType", "signatures"} <= obj.keys():
        raise BadInput("not a DSSE envelope (it needs payload, payloadType and signatures)")
    ptype, sigs = obj["payloadType"], obj["signatures"]
    if not isinstance(ptype, str) or not isinstance(sigs, list):
        raise BadInput("DSSE envelope: payloadType must be a string, signatures a list")
    if not 1 <= len(sigs) <= MAX_SIGNATURES:
        raise BadInput(f"DSSE envelope: 1 to {MAX_SIGNATURES} signatures, not {len(sigs)}")
    return Envelope(ptype, _b64(obj["payload"], "payload"), tuple(_signature(s) for s in sigs))


def _signature(obj: Any) -> Signature:
    if not isinstance(obj, dict) or not isinstance(obj.get("sig"), str):
        raise BadInput("DSSE envelope: each signature needs a base64 sig")
    keyid = obj.get("keyid", "")
    if not isinstance(keyid, str) or len(keyid) > 256:
        raise BadInput("DSSE envelope: a keyid must be a short string")
    return Signature(keyid, _b64(obj["sig"], "signature"))


def _b64(value: Any, what: str) -> bytes:
    """Standard base64 (``ledger.core.encoding``)."""
    if not isinstance(value, str):
        raise BadInput(f"DSSE envelope: the {what} must be a base64 string")
    return b64_decode(value, None, f"DSSE envelope {what}")
