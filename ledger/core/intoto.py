"""in-toto Statement v1 (github.com/in-toto/attestation, spec/v1/statement.md): the shape of the
statements ``ledger attest`` writes, and the reader of untrusted ones (docs/attestations.md).

``{"_type": STATEMENT_TYPE, "subject": [{"name": PATH, "digest": {"sha256": HEX, "blake3":
HEX}}, ...], "predicateType": URI, "predicate": {...}}``. The predicate types are names, not
URLs anything fetches: ``CERTIFICATE_V1`` (this project's certificate, schema
docs/schemas/attestation-certificate-v1.json) and SLSA Provenance v1. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.core.bundle import blake3_digest
from ledger.core.encoding import hex_encode
from ledger.core.errors import BadInput

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
CERTIFICATE_V1 = "https://kernel-ledger.dev/certificate/v1"
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
MAX_SUBJECTS = 4096


def digests(data: bytes) -> dict[str, str]:
    """A subject's (or material's) digest set: ``sha256`` for every tool, ``blake3`` as the
    bundle manifest records it."""
    return {"sha256": hex_encode(hashlib.sha256(data).digest()),
            "blake3": hex_encode(blake3_digest(data))}


def subjects(files: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """One subject per file, sorted by path (the name is the path in the bundle)."""
    return [{"name": rel, "digest": digests(files[rel])} for rel in sorted(files)]


def statement(subject: list[dict[str, Any]], predicate_type: str,
              predicate: dict[str, Any]) -> dict[str, Any]:
    return {"_type": STATEMENT_TYPE, "subject": subject, "predicateType": predicate_type,
            "predicate": predicate}


def to_payload(obj: dict[str, Any]) -> bytes:
    """The statement's bytes as the envelope carries them (sorted keys, compact UTF-8)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Statement:
    """A statement read from untrusted bytes: its subjects (name -> digest set) and predicate."""

    subjects: dict[str, dict[str, str]]
    predicate_type: str
    predicate: dict[str, Any]


def parse_statement(payload: bytes) -> Statement:
    """The in-toto Statement v1 in ``payload`` (``BadInput`` for any other shape)."""
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadInput("the envelope's payload is not JSON") from e
    if not isinstance(obj, dict) or obj.get("_type") != STATEMENT_TYPE:
        raise BadInput(f"the payload is not an in-toto Statement ({STATEMENT_TYPE})")
    subject, ptype, pred = obj.get("subject"), obj.get("predicateType"), obj.get("predicate")
    if not isinstance(subject, list) or not 1 <= len(subject) <= MAX_SUBJECTS:
        raise BadInput(f"the statement needs 1 to {MAX_SUBJECTS} subjects")
    if not isinstance(ptype, str) or not isinstance(pred, dict):
        raise BadInput("the statement needs a predicateType string and a predicate object")
    out: dict[str, dict[str, str]] = {}
    for s in subject:
        name, digest = _subject(s)
        if name in out:
            raise BadInput(f"the statement names subject {name!r} twice")
        out[name] = digest
    return Statement(out, ptype, pred)


def _subject(s: Any) -> tuple[str, dict[str, str]]:
    if not isinstance(s, dict) or not isinstance(s.get("name"), str):
        raise BadInput("each subject needs a name")
    digest = s.get("digest")
    if not isinstance(digest, dict) or not digest or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in digest.items()):
        raise BadInput(f"subject {s['name'][:80]!r}: digest must map algorithms to hex strings")
    return s["name"], {k: v.lower() for k, v in digest.items()}
