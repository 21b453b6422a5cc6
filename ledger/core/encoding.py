"""Hex and base64 at the edges: the only place bytes become text and back.

Inside the project, digests, keys and signatures are ``bytes``. CLI output, JSON and HTTP use
lowercase hex (digests) and standard padded base64 (signatures, keys, proof hashes), as the SPEC
fixes. Decoders are strict and raise ``BadInput``.
"""

from __future__ import annotations

import base64
import binascii
import re

from ledger.core.errors import BadInput

_HEX = re.compile(r"[0-9a-f]*")


def hex_encode(data: bytes) -> str:
    return data.hex()


def hex_decode(text: str, length: int | None = None, what: str = "hex value") -> bytes:
    """Decode lowercase hex; with ``length``, require exactly that many bytes."""
    if not isinstance(text, str) or _HEX.fullmatch(text) is None or len(text) % 2:
        raise BadInput(f"{what} is not lowercase hex")
    if length is not None and len(text) != 2 * length:
        raise BadInput(f"{what} must be {2 * length} hex digits, got {len(text)}")
    return bytes.fromhex(text)


def unhex_matched(text: bytes) -> bytes:
    """The bytes of ASCII hex that a caller's pattern has already matched as lowercase hex of
    even length (``ledger.core.bundle.manifest_digests``): no second validation."""
    return binascii.unhexlify(text)


def b64_encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64_decode(text: str | bytes, length: int | None = None, what: str = "base64 value") -> bytes:
    """Decode standard padded base64 strictly; with ``length``, require that many bytes."""
    try:
        raw = text.encode("ascii") if isinstance(text, str) else text
        out = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as e:
        raise BadInput(f"{what} is not valid base64") from e
    if base64.b64encode(out) != raw:
        raise BadInput(f"{what} is not canonical base64")
    if length is not None and len(out) != length:
        raise BadInput(f"{what} must decode to {length} bytes, got {len(out)}")
    return out
