"""The certificate predicate (``https://kernel-ledger.dev/certificate/v1``, docs/attestations.md,
schema docs/schemas/attestation-certificate-v1.json), computed from an entry's receipt alone.

Everything in the predicate follows from the receipt (``ledger.core.receipt``): the kernel, the
bundle digest and the seal-time checks from the signed entry; the signer from its registration
entry; the log inclusion is the receipt itself (so ``predicate.log`` saved as a file is a receipt
``ledger verify --receipt`` reads) with the leaf hash and the log's verifier key name beside it.
A verifier recomputes the predicate from ``predicate.log`` once that evidence is verified and
refuses any difference: no field can be changed on its own. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from ledger.core.encoding import b64_decode, b64_encode, hex_encode
from ledger.core.entries import Entry, decode_entry
from ledger.core.errors import BadInput, LedgerError
from ledger.core.merkle import leaf_hash
from ledger.core.receipt import Receipt
from ledger.core.verdict import obligation_states, oracle_kinds, partial_line

MAX_LOG_BYTES = 1 << 20


def certificate_predicate(rec: Receipt, vkey_name: str) -> dict[str, Any]:
    """The predicate of the bundle entry ``rec`` proves, under the log key named ``vkey_name``."""
    entry = _entry(rec.item.entry, "the entry")
    if entry.type != "bundle":
        raise BadInput(f"entry {rec.item.index} is no bundle entry: no kernel to attest")
    kernel = entry.kernel or {}
    log = rec.to_json()
    log["leaf_hash"] = hex_encode(leaf_hash(rec.item.entry))
    log["verifier_key_name"] = vkey_name
    return {
        "kernel": {"name": str(kernel.get("name", "")), "version": str(kernel.get("version", ""))},
        "bundle_digest": str(entry.bundle_digest),
        "sealed": entry.time,
        "certificate": certificate_of(entry),
        "signer": _signer(rec, entry),
        "log": log,
    }


def certificate_of(entry: Entry) -> dict[str, Any]:
    """The seal-time certificate the entry records: verdict (by SPEC 8's rule), the one line of a
    partial verdict, each check with tool and version, the PO table, the oracle kinds."""
    checks = [_check(c) for c in entry.checks or () if isinstance(c, dict)]
    triples = [(c["id"], c["status"], c["detail"]) for c in checks]
    statuses = {c["status"] for c in checks}
    verdict = ("failed" if not checks or "failed" in statuses
               else "partial" if "skipped" in statuses else "verified")
    cert = next((c["detail"] for c in checks if c["id"] == "certificate"), "")
    oracles = sorted({k for c in checks if c["id"].startswith("falsify.")
                      and c["status"] == "passed" for k in oracle_kinds(c["detail"])})
    return {
        "verdict": verdict, "partial": partial_line(triples), "checks": checks,
        "obligations": [{"id": po, "status": s, "evidence": ev}
                        for po, s, ev in obligation_states(cert)],
        "oracles": oracles,
    }


def receipt_of_predicate(predicate: dict[str, Any]) -> Receipt:
    """The receipt ``predicate.log`` is (``BadInput`` when it is none)."""
    import json

    log = predicate.get("log")
    if not isinstance(log, dict):
        raise BadInput("the predicate has no log object")
    data = json.dumps(log).encode("utf-8")
    if len(data) > MAX_LOG_BYTES:
        raise BadInput(f"the predicate's log object is larger than {MAX_LOG_BYTES} bytes")
    return Receipt.from_bytes(data)


def signer_public(predicate: dict[str, Any]) -> bytes:
    """The Ed25519 public key the predicate names as the signer's (``BadInput`` if none)."""
    signer = predicate.get("signer")
    key = signer.get("public_key") if isinstance(signer, dict) else None
    if not isinstance(key, str):
        raise BadInput("the predicate names no signer public key")
    return b64_decode(key, 32, "signer public key")


def _signer(rec: Receipt, entry: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {"key_id": str(entry.signer), "name": "", "public_key": ""}
    if rec.signer is not None:
        reg = _entry(rec.signer.entry, "the signer's registration")
        if reg.key_id == entry.signer:
            out["name"] = str(reg.name or "")
            out["public_key"] = b64_encode(b64_decode(str(reg.public_key), 32, "public key"))
    return out


def _check(c: dict[str, Any]) -> dict[str, str]:
    return {k: str(c.get(k, "")) for k in ("id", "status", "detail", "tool", "version")}


def _entry(data: bytes, what: str) -> Entry:
    try:
        return decode_entry(data)
    except LedgerError as e:
        raise BadInput(f"{what} does not decode: {e}") from e
