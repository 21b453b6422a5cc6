"""What a mirror's worker processes check of fetched entries before the main process checks them
in log order (``ledger.mirror``): each entry parsed strictly and a bundle's signature verified
under the key its signer id names. A module of its own, with only the parsing and signature
imports, so a spawned worker starts without the HTTP side (half a second of imports per worker
on this 2-CPU machine, issue 12)."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.bundle import manifest_digests as bundle_manifest_digests
from ledger.encoding import hex_decode
from ledger.entries import Entry, decode_entry, verify_signature
from ledger.errors import BadInput, SignatureError


def manifest_digests(manifest: str) -> list[bytes]:
    """The BLAKE3 digests a bundle manifest names (``ledger.bundle.manifest_digests``).

    The mirror replicates the log as signed: judging the manifest's paths and members is the
    verifier's ``integrity.manifest`` check, not a reason to stop following the log. The digest
    of the manifest itself is checked (``check_entry``), and every blob named is fetched and
    checked against its digest.
    """
    return bundle_manifest_digests(manifest.encode("utf-8"))



@dataclass(frozen=True)
class Prechecked:
    """A worker's verdict on one entry: ``ok`` (a bundle whose signature verifies under
    ``public``, the key its signer id names in the keys known or fetched so far), ``apply``
    (check it in order with ``Registry.apply``: a key entry, or a signer not known yet),
    ``malformed`` or ``signature`` (refused, with ``message``). ``digests``: the bundle files
    its manifest names (fetched ahead)."""

    index: int
    status: str
    entry: Entry | None = None
    public: bytes = b""
    message: str = ""
    digests: tuple[bytes, ...] = ()


def precheck(rows: list[tuple[int, bytes]], keys: dict[bytes, bytes]) -> list[Prechecked]:
    """Run in a worker process: parse each entry strictly (canonical JSON, shape) and verify
    bundle signatures (module-level so that it pickles)."""
    out: list[Prechecked] = []
    for index, data in rows:
        try:
            entry = decode_entry(data)
        except BadInput as e:
            out.append(Prechecked(index, "malformed", message=f"malformed: {e}"))
            continue
        digests: tuple[bytes, ...] = ()
        if entry.manifest is not None:
            digests = tuple(manifest_digests(entry.manifest))
        public = keys.get(hex_decode(entry.signer)) if entry.signer is not None else None
        if public is None:
            out.append(Prechecked(index, "apply", digests=digests))
            continue
        try:
            verify_signature(entry.fields, public, entry.data)
        except SignatureError as e:
            out.append(Prechecked(index, "signature", message=str(e)))
            continue
        out.append(Prechecked(index, "ok", entry, public, digests=digests))
    return out
