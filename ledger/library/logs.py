"""A read-only log behind one interface (SPEC 10 "Library"): what ``Verifier`` reads.

``ReadLog`` has six methods: the signed checkpoint, an entry reference resolved to an index, the
bundle entries of a kernel ``name@version``, the evidence of one entry (entry, inclusion proof,
signer registration and revocation), the bundle's files, and consistency proofs. Three drivers:

* ``LocalLog``: a ledger directory (SQLite or PostgreSQL, whatever its ``Store`` opens); the
  evidence is replayed from the signed entries (``ledger.library.evidence``);
* ``ServerLog``: a ``ledger serve`` URL: ``/api/v1/lookup/...`` names the entry, its receipt
  (``/api/v1/entries/{i}/receipt``) is the evidence, ``/api/v1/blobs/{hex}`` the files; nothing
  the server says is trusted: the receipt is checked against the policy's log key, every file
  against the signed manifest;
* ``MirrorLog``: a static mirror (``ledger publish`` output, a directory or an HTTP location) or
  any server, followed with ``ledger.mirror`` (every entry and signature verified) into a private
  ledger directory under the cache, then read as a ``LocalLog``.

``open_log(location, vkey)`` picks one: a directory holding ``ledger.db`` (or ``db.url``) is a
ledger, a directory holding a ``checkpoint`` file a static mirror, an ``http(s)://`` URL a server
(``mirror=True``: followed as a mirror, e.g. a static HTTP location).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.core.encoding import hex_encode
from ledger.core.entries import decode_entry
from ledger.core.errors import BadInput, CannotCheck, LedgerError, UnknownHash
from ledger.core.note import NoteVerifier
from ledger.core.receipt import MAX_RECEIPT_BYTES, Receipt
from ledger.library.evidence import receipt_evidence
from verify.integrity import Evidence

if TYPE_CHECKING:
    import httpx

    from ledger.net.client import HttpClient
    from ledger.store import Store
    from ledger.trust import Prover

MAX_NAME_MATCHES = 64  # entries of one name@version a lookup lists at most
MAX_FILE_BYTES = 64 << 20


class ReadLog(Protocol):
    """A log a ``Verifier`` reads. ``where`` says which (for messages)."""

    where: str

    def checkpoint(self) -> bytes: ...
    def resolve(self, text: str) -> int: ...
    def lookup(self, name: str, version: str) -> list[int]: ...
    def evidence(self, index: int) -> Evidence: ...
    def files(self, index: int, entry: bytes) -> dict[str, bytes] | None: ...
    def prover(self) -> Prover | None: ...
    def close(self) -> None: ...


class LocalLog:
    """A ledger directory on this machine, read only."""

    def __init__(self, home: Path, store: Store | None = None) -> None:
        from ledger.store import open_store

        self.home = home
        self.where = str(home)
        self.store: Store = store if store is not None else open_store(home, read_only=True)

    @classmethod
    def of(cls, store: Store) -> LocalLog:
        """The ledger a ``Store`` already open reads (closed with this log)."""
        return cls(store.home, store)

    def checkpoint(self) -> bytes:
        from ledger.trust import with_cosignatures

        return with_cosignatures(self.store.checkpoint(), self.store.meta("witness.cosigned_note"))

    def resolve(self, text: str) -> int:
        return self.store.resolve(text)

    def lookup(self, name: str, version: str) -> list[int]:
        """The bundle entries sealing ``name@version`` (``ledger.kernels.entries_of``)."""
        from ledger.kernels import entries_of

        return entries_of(self.store, name, version)

    def evidence(self, index: int) -> Evidence:
        from ledger.library.evidence import evidence_from_store

        ev = evidence_from_store(self.store, index)
        return dataclasses.replace(ev, checkpoint=self.checkpoint())

    def files(self, index: int, entry: bytes) -> dict[str, bytes] | None:
        from ledger.library.evidence import files_from_store

        return files_from_store(self.store, entry, index)

    def prover(self) -> Prover | None:
        from ledger.trust import store_prover

        return store_prover(self.store)

    def close(self) -> None:
        self.store.close()


class ServerLog:
    """A ``ledger serve`` URL (SPEC 9), read through its JSON API and receipts."""

    def __init__(self, url: str, client: httpx.Client | None = None) -> None:
        from ledger.net.client import HttpClient

        self.http: HttpClient = HttpClient(url, "the log server", client=client)
        self.where = self.http.base
        self._receipts: dict[int, Receipt] = {}

    def _json(self, path: str) -> Any:
        from ledger.net.client import JSON

        a = self.http.get(path, 1 << 20, types=JSON, ok=(200, 400, 404))
        try:
            obj = json.loads(a.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise CannotCheck(f"{a.url}: the server's answer is not JSON") from e
        if a.status != 200:
            err = obj.get("error") if isinstance(obj, dict) else None
            raise UnknownHash(f"{self.where}: {err or f'HTTP {a.status}'}")
        return obj

    def checkpoint(self) -> bytes:
        from ledger.net.client import TEXT

        return self.http.get_ok("checkpoint", 64 << 10, types=TEXT).body

    def resolve(self, text: str) -> int:
        from urllib.parse import quote

        obj = self._json(f"api/v1/lookup/{quote(text.strip(), safe='')}")
        index = obj.get("index") if isinstance(obj, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise CannotCheck(f"{self.where}: the lookup answer names no index")
        return index

    def lookup(self, name: str, version: str) -> list[int]:
        from urllib.parse import quote

        obj = self._json(f"api/v1/lookup/{quote(f'{name}@{version}', safe='@')}")
        items = obj.get("entries") if isinstance(obj, dict) else None
        if not isinstance(items, list):
            raise CannotCheck(f"{self.where}: the lookup answer lists no entries")
        out = [i.get("index") for i in items[:MAX_NAME_MATCHES] if isinstance(i, dict)]
        return [i for i in out if isinstance(i, int) and not isinstance(i, bool) and i >= 0]

    def receipt(self, index: int) -> Receipt:
        if index not in self._receipts:
            a = self.http.get_ok(f"api/v1/entries/{index}/receipt", MAX_RECEIPT_BYTES,
                                 types=("application/json",))
            self._receipts[index] = Receipt.from_bytes(a.body)
        return self._receipts[index]

    def evidence(self, index: int) -> Evidence:
        rec = self.receipt(index)
        if rec.item.index != index:
            raise CannotCheck(f"{self.where}: the receipt of entry {index} is of another entry")
        return receipt_evidence(rec, rec.origin)

    def files(self, index: int, entry: bytes) -> dict[str, bytes] | None:
        from ledger.core.bundle import parse_manifest

        try:
            manifest = decode_entry(entry).manifest
            rows = parse_manifest(str(manifest).encode("utf-8")) if manifest else None
        except LedgerError:
            return None
        if rows is None:
            return None
        out: dict[str, bytes] = {}
        for rel, digest in rows:  # each checked against the manifest by integrity.manifest
            a = self.http.get(f"api/v1/blobs/{hex_encode(digest)}", MAX_FILE_BYTES, ok=(200, 404))
            if a.status == 200:
                out[rel] = a.body
        return out

    def prover(self) -> Prover | None:
        def prove(old: int, new: int) -> Sequence[bytes] | None:
            from ledger.core.encoding import b64_decode

            try:
                obj = self._json(f"api/v1/proof/consistency?old={old}&new={new}")
                return [b64_decode(h, 32, "proof hash") for h in obj["hashes"][:64]]
            except (LedgerError, KeyError, TypeError):
                return None

        return prove

    def close(self) -> None:
        self.http.close()


def mirror_home(location: str, vkey: NoteVerifier, cache: Path) -> Path:
    """Where the private mirror of ``location`` under ``vkey`` lives in the cache."""
    tag = hex_encode(hashlib.sha256(f"{vkey.vkey}\n{location}".encode()).digest())[:32]
    return cache / "mirrors" / tag


class MirrorLog(LocalLog):
    """A static mirror (a ``ledger publish`` directory or HTTP location) or a server, followed
    into a private ledger under the cache (every entry verified by ``ledger.mirror``)."""

    def __init__(self, location: str, vkey: NoteVerifier, cache: Path) -> None:
        from ledger.core.fsutil import private_dir
        from ledger.mirror import Mirror, Remote

        home = mirror_home(location, vkey, cache)
        private_dir(cache, "cache directory")
        private_dir(cache / "mirrors", "mirror cache")
        client = None
        url = location
        if "://" not in location:
            from ledger.net.client import directory_client

            client = directory_client(Path(location))
            url = "http://static-mirror.invalid"
        remote = Remote(url, client=client)
        try:
            Mirror(home, remote, vkey.vkey).sync()
        finally:
            remote.close()
        super().__init__(home)
        self.where = location


def open_log(location: str | Path, vkey: NoteVerifier | None = None,
             cache: Path | None = None, *, mirror: bool = False) -> ReadLog:
    """The read-only log at ``location``: a ledger directory, a static mirror directory, or an
    ``http(s)://`` server URL. ``mirror=True`` follows the location into a private mirror under
    the cache instead (a static HTTP location of ``ledger publish`` output, or any server whose
    every entry should be verified once and kept); it needs the log's ``vkey``."""
    text = str(location)
    path = Path(text)
    if mirror or ("://" not in text and (path / "checkpoint").is_file()
                  and not (path / "ledger.db").exists()):
        if vkey is None:
            raise BadInput(f"{text}: a mirror needs the log's verifier key (the policy's log)")
        from ledger.trust import cache_dir

        return MirrorLog(text, vkey, cache or cache_dir())
    if text.startswith(("http://", "https://")):
        return ServerLog(text)
    if (path / "ledger.db").exists() or (path / "db.url").exists():
        return LocalLog(path)
    raise BadInput(f"{path}: neither a ledger directory nor a static mirror")
