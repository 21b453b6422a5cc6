"""The submission wire format shared by ``ledger submit`` (``ledger.submit``) and the server's
``POST /api/v1/submit`` (``ledger.http.submit``), issue 13: the body limit, the two headers that
authenticate a body before it is parsed, and the signature over it.

``X-Ledger-Signer`` is the node key id (16 lowercase hex digits); ``X-Ledger-Signature`` is the
base64 Ed25519 signature by that key of ``BODY_CONTEXT`` followed by the SHA-256 of the body.
"""

from __future__ import annotations

import hashlib

import nacl.exceptions
import nacl.signing

from ledger.core.encoding import b64_encode, hex_encode
from ledger.core.entries import node_key_id

MAX_BODY = 40 << 20
BODY_CONTEXT = b"kernel-ledger submit body v1\n"
SIGNER_HEADER = "X-Ledger-Signer"
SIGNATURE_HEADER = "X-Ledger-Signature"


def body_message(body: bytes) -> bytes:
    """What the ``X-Ledger-Signature`` of ``body`` signs."""
    return BODY_CONTEXT + hashlib.sha256(body).digest()


def body_signature(node: nacl.signing.SigningKey, body: bytes) -> str:
    """The ``X-Ledger-Signature`` value for ``body``."""
    return b64_encode(node.sign(body_message(body)).signature)


def body_signed_by(public: bytes, sig: bytes, body: bytes) -> bool:
    """Whether ``sig`` is the node key ``public``'s body signature of ``body``."""
    try:
        nacl.signing.VerifyKey(public).verify(body_message(body), sig)
    except nacl.exceptions.BadSignatureError:
        return False
    return True


def auth_headers(node: nacl.signing.SigningKey, body: bytes) -> dict[str, str]:
    return {
        SIGNER_HEADER: hex_encode(node_key_id(bytes(node.verify_key))),
        SIGNATURE_HEADER: body_signature(node, body),
    }
