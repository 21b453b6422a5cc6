"""The verified cache (SPEC 10 "Library"), like the Go command's module cache beside its sumdb
cache: what a first verification fetched, kept so that the same ref verifies again offline.

Layout under the cache directory (``$LEDGER_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernel-ledger``,
else ``~/.cache/kernel-ledger``; the checkpoint memory lives beside it), every directory 0700:

* ``kernels/<bundle digest hex>/entry``: one file (``pack``): the receipt (the entry, its
  inclusion proof, the checkpoint, the signer's registration, revocation and the committed
  revoked-key list; ``ledger.core.receipt``) and the bundle's files, written atomically, so a
  cached kernel is read with one open and one read (a directory of files took a listing, an open
  per file and a second listing: the largest cost of a cached verification). Format, UTF-8
  headers: ``kernel-ledger cache entry v1\n``, ``<receipt length>\n`` and the receipt's bytes,
  then per file in sorted path order ``<length> <path>\n`` and its bytes; read with the
  bundle's limits (files, bytes, paths), anything else is a miss. (Caches written before it, a
  ``receipt.json`` beside a ``files/`` folder, are a miss: fetched again.)
* ``kernels/names/<sha256(log vkey)[:32]>/<NAME@VERSION hex-encoded>``: the digest a verified
  ``NAME@VERSION`` had in that log (``sha256-<hex of its SHA-256>`` for a ref of more than
  ``MAX_HEX_NAME`` bytes, whose hex would pass the file system's 255-byte name limit). A name
  file that does not hold a digest is a miss (fetched again), never an error.

Nothing here is trusted: a cached ref is verified again from scratch (its files hashed against
the signed manifest, the receipt's signatures and proofs checked under the policy's log key, the
checkpoint guarded by the checkpoint memory, so a cached entry from a tree the log has since been
shown to contradict fails). A cache entry whose files changed on disk fails ``integrity.manifest``
(``TamperDetected``): ``Verifier.verify`` forgets it and fetches it again from its log.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core.bundle import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES, check_path
from ledger.core.encoding import hex_encode
from ledger.core.errors import BadInput, LedgerError
from ledger.core.fsutil import private_dir, read_small, write_atomic
from ledger.core.note import NoteVerifier
from ledger.core.receipt import MAX_RECEIPT_BYTES, Receipt
from ledger.library.evidence import receipt_evidence

if TYPE_CHECKING:
    from ledger.library.certificate import Certificate
    from ledger.library.evidence import Found
    from ledger.trust import Policy


MAX_HEX_NAME = 100  # bytes of a NAME@VERSION kept as its hex (200 characters) in a name file


_DIGEST = re.compile(r"[0-9a-f]{64}")
_MAGIC = b"kernel-ledger cache entry v1\n"
ENTRY = "entry"  # kernels/<digest>/entry: the receipt and the files (``pack``)
_MAX_ENTRY = len(_MAGIC) + MAX_RECEIPT_BYTES + MAX_TOTAL_BYTES + MAX_FILES * 1100


def _is_digest(text: str) -> bool:
    return _DIGEST.fullmatch(text) is not None


def pack(receipt: bytes, files: Mapping[str, bytes]) -> bytes:
    """A cache entry's bytes: the receipt, then each file in sorted path order."""
    parts = [_MAGIC, b"%d\n" % len(receipt), receipt]
    for rel in sorted(files):
        parts += [b"%d %s\n" % (len(files[rel]), rel.encode("utf-8")), files[rel]]
    return b"".join(parts)


def unpack(data: bytes) -> tuple[bytes, dict[str, bytes]]:
    """The receipt and files of a cache entry; ``BadInput`` for anything ``pack`` does not
    write (or a bundle its limits refuse): the caller treats it as a miss."""
    if not data.startswith(_MAGIC):
        raise BadInput("not a cache entry")
    at = len(_MAGIC)
    size, at = _length(data, at, MAX_RECEIPT_BYTES)
    receipt, at = data[at:at + size], at + size
    files: dict[str, bytes] = {}
    last = b""
    while at < len(data):
        end = data.find(b"\n", at, at + 1100)
        n, sep, raw = data[at:end].partition(b" ") if end > 0 else (b"", b"", b"")
        if not sep or not n.isdigit() or raw <= last or len(files) >= MAX_FILES:
            raise BadInput("cache entry: malformed file header")
        size, last = int(n), raw
        try:
            rel = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadInput("cache entry: a file name is not UTF-8") from e
        check_path(rel)
        if size > MAX_FILE_BYTES or end + 1 + size > len(data):
            raise BadInput(f"cache entry: {rel} is cut short or over the file limit")
        files[rel], at = data[end + 1:end + 1 + size], end + 1 + size
    return receipt, files


def _length(data: bytes, at: int, limit: int) -> tuple[int, int]:
    end = data.find(b"\n", at, at + 12)
    if end < 0 or not data[at:end].isdigit() or int(data[at:end]) > limit:
        raise BadInput("cache entry: malformed receipt header")
    size = int(data[at:end])
    if end + 1 + size > len(data):
        raise BadInput("cache entry: the receipt is cut short")
    return size, end + 1


@functools.lru_cache(maxsize=64)
def _names_dir(root: Path, vkey: str) -> Path:
    """``kernels/names/<sha256(vkey)[:32]>`` under ``root``, made once per cache and log key."""
    return root / "kernels" / "names" / hex_encode(hashlib.sha256(vkey.encode()).digest())[:32]


@dataclass(frozen=True)
class Cache:
    """The verified cache rooted at ``root`` (``Cache.default()``: the user's)."""

    root: Path

    @classmethod
    def default(cls) -> Cache:
        from ledger.trust import cache_dir

        return cls(cache_dir())

    def _kernel(self, digest: str) -> Path:
        if not _is_digest(digest):
            raise BadInput(f"{digest!r} is not a bundle digest")
        return self.root / "kernels" / digest

    def _names(self, vkey: NoteVerifier) -> Path:
        return _names_dir(self.root, vkey.vkey)

    @staticmethod
    def _name_file(ref: str) -> str:
        raw = ref.encode("utf-8")
        if len(raw) <= MAX_HEX_NAME:
            return hex_encode(raw)
        return "sha256-" + hex_encode(hashlib.sha256(raw).digest())

    def digest_of(self, ref: str, policy: Policy) -> str | None:
        """The cached digest ``ref`` names: itself when a full digest, else the digest recorded
        for ``NAME@VERSION`` under one of the policy's log keys."""
        t = ref.strip().lower()
        if _is_digest(t):
            return t
        if "@" not in ref or "/" in ref:
            return None
        for vk in policy.log_keys:
            p = self._names(vk) / self._name_file(ref)
            try:  # read first, ask why only when it fails: no stat on the common path
                got = read_small(p, 128, "cached name").decode("ascii").strip()
            except BadInput:
                if not p.is_file():
                    continue  # not cached under this key
                return None
            except UnicodeDecodeError:
                return None
            return got if _is_digest(got) else None  # a tampered name file: a miss
        return None

    def lookup(self, ref: str, policy: Policy) -> Found | None:
        """The cached evidence and files for ``ref``, None when there are none."""
        from ledger.library.evidence import Found

        digest = self.digest_of(ref, policy)
        if digest is None:
            return None
        d = self._kernel(digest)
        try:  # none there, unreadable or not what ``pack`` writes: a miss, fetched again
            receipt, files = unpack(read_small(d / ENTRY, _MAX_ENTRY, "cache entry",
                                               follow_symlinks=False))
            rec = Receipt.from_bytes(receipt)
        except LedgerError:
            return None
        ev = receipt_evidence(rec, rec.origin)
        return Found(ev, files, None, f"cache {d}")

    def forget(self, found: Found) -> None:
        from ledger.core.entries import decode_entry

        digest = str(decode_entry(found.evidence.item.entry).bundle_digest)
        shutil.rmtree(self._kernel(digest), ignore_errors=True)

    def keep(self, found: Found, cert: Certificate, vkey: NoteVerifier) -> None:
        """Keep what ``found`` fetched for ``cert``: its entry (receipt and files, ``pack``)
        written atomically, then the name file that points to it."""
        if found.files is None or found.where.startswith("cache "):
            return
        ev = found.evidence
        d = self._kernel(cert.bundle_digest)
        for p in (self.root, self.root / "kernels", d):
            private_dir(p, "verified cache")
        rec = Receipt(vkey.name, ev.item, ev.checkpoint, ev.signer, ev.revocation,
                      revoked=ev.revoked)  # the signer's status at that checkpoint
        write_atomic(d / ENTRY, pack(rec.to_bytes(), found.files), 0o600, exclusive=False)
        names = self._names(vkey)
        private_dir(names.parent, "verified cache")
        private_dir(names, "verified cache")
        write_atomic(names / self._name_file(cert.kernel),
                     cert.bundle_digest.encode("ascii"), 0o600, exclusive=False)
