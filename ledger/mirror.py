"""Follow a remote ledger and detect any rewrite (SPEC 9, ``ledger mirror``).

One ``sync`` does, in order:

1. fetch ``/checkpoint`` (size-capped) and open it with the pinned verifier key (a bad signature is
   ``SignatureError``); with ``witnesses``, require a valid cosignature from each of them;
2. compare it with what the local mirror already verified: its latest checkpoint, the checkpoint
   an interrupted sync was working towards (``mirror.pending``) and the entries already stored.
   A remote tree that is smaller, or whose consistency proof (computed from the remote hash tiles,
   then verified against both signed roots) fails, is a rewrite: both signed notes are written to
   ``LEDGER_HOME/evidence/`` and ``RewriteDetected`` names the files;
3. fetch the entry tiles of the new range in batches; for each entry check its chaining
   (``prev_size`` / ``prev_root``), its signatures, its signer's registration (``Registry``) and
   status (``Signers``: ``ledger.core.revoked.key_status`` over the revoked-key list the remote
   checkpoint commits to, where the remote serves it, and the revocations replayed), and
   for bundle entries that the manifest hashes to the digest; recompute the tree: a batch ending
   before the signed size must be proved a prefix of the signed tree by a consistency proof from
   the remote hash tiles; the last batch must give exactly the signed root;
4. fetch every blob the new bundle entries name (batched) and check its BLAKE3 digest;
5. append the batch (entries, blobs, key index) in one transaction, and store the checkpoint note
   only after the last batch, once the revocations replayed match the list it commits to
   (``check_revoked``). An interrupted sync resumes from what the store holds.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from ledger.core import merkle
from ledger.core.bundle import blake3_digest
from ledger.core.bundle import manifest_digests as bundle_manifest_digests
from ledger.core.encoding import b64_encode, hex_decode, hex_encode
from ledger.core.entries import (
    ENTRY_V1,
    ENTRY_V2,
    KEY_TYPES,
    BundleView,
    ChainCheck,
    NodeKey,
    Registry,
    bundle_view,
    check_entry_shape,
    entry_object,
    link_problem,
    signed_part,
)
from ledger.core.errors import (
    BadInput,
    CannotCheck,
    LedgerError,
    LedgerStateError,
    ProofError,
    RewriteDetected,
    SignatureError,
    TamperDetected,
    VerificationFailed,
)
from ledger.core.fsutil import write_atomic
from ledger.core.gcpause import collector_paused
from ledger.core.native import Verifying, VerifyJob, verify_many
from ledger.core.note import (
    Checkpoint,
    NoteVerifier,
    keep_verified,
    note_text,
    open_note,
    parse_checkpoint,
    tells_more,
)
from ledger.core.revoked import (
    MAX_ANSWER_BYTES,
    KeyStatus,
    Revoked,
    check_list,
    commitment,
    key_status,
    parse_answer,
)
from ledger.core.tiles import TILE_WIDTH, entries_tile_path, parse_entry_bundle, tile_path
from ledger.net.client import (
    BYTES,
    CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    JSON,
    REQUEST_TIMEOUT,
    BadAnswer,
    HttpClient,
    LeanGet,
    oneline,
)
from ledger.net.pipeline import Check, HandBack, PipelinedGet
from ledger.store import Store, create_store, open_store
from ledger.store.common import part_of, part_start

MAX_CHECKPOINT_BYTES = 1 << 20
MAX_ENTRY_TILE_BYTES = TILE_WIDTH * (2 + 65535)
MAX_BLOB_ANSWER_BYTES = 80 << 20
BATCH_TILES = 32  # entry tiles verified and appended per transaction, at most (8,192 entries)
FIRST_TILES = 4  # entry tiles of the first batch (``Mirror._batch_end``)
TILES_IN_FLIGHT = 4  # entry tiles of a batch fetched at once
BLOBS_PER_REQUEST = 64
BLOB_REQUESTS_IN_FLIGHT = 4
STATIC_IN_FLIGHT = 8  # single-blob requests in flight from a static location
VERIFY_THREADS = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                            else os.cpu_count() or 1))  # a batch's signatures verified at once
PENDING_META = "mirror.pending"
URL_META = "mirror.url"
VKEY_META = "vkey"
EVIDENCE_DIR = "evidence"


class Remote:
    """The remote ledger's HTTP interface: every request through the bounded ``HttpClient``
    (an overall deadline per sync, a deadline per request, answers size-capped while they stream,
    content types checked, no redirect to another host)."""

    def __init__(
        self,
        url: str,
        client: httpx.Client | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.http = HttpClient(
            url, "the mirrored server", timeout, request_timeout, client=client
        )
        self.url = self.http.base
        self.batch: bool | None = None  # has the batch blob endpoint (None: not known yet)
        # the one-file-per-blob GETs of a static location through the lean client; not when a
        # client was handed in (tests inject faults through it)
        self.lean = LeanGet(self.http) if client is None else None
        # ... and before it, the same GETs pipelined (ledger.net.pipeline); what that hands back
        # goes through the lean client, then HttpClient
        self.pipe = PipelinedGet(self.http.base, self.http.what, request_timeout,
                                 CONNECT_TIMEOUT) if client is None else None

    @property
    def requests(self) -> int:
        return self.http.requests

    def restart(self) -> None:
        """Start a new overall deadline (one per sync); pipeline again if the last sync's host
        made the pipelined client give up."""
        self.http.restart()
        if self.pipe is not None:
            self.pipe.reset()

    def close(self) -> None:
        self.http.client.close()  # a client handed in is the Remote's to close, as before
        if self.lean is not None:
            self.lean.close()

    def pipelined(
        self, paths: Sequence[str], limit: int, check: Check,
        encodings: Sequence[bytes] = (b"identity",),
    ) -> list[bytes | None]:
        """``PipelinedGet.get_many`` within this sync's deadline, its requests counted with the
        others; all None when there is no pipelined client (a client was handed in)."""
        if self.pipe is None:
            return [None] * len(paths)
        before = self.pipe.requests
        try:
            return self.pipe.get_many(paths, limit, self.http.deadline, check, encodings)
        finally:
            self.http.requests += self.pipe.requests - before

    def get(
        self, path: str, limit: int, params: Sequence[tuple[str, str]] | None = None
    ) -> tuple[bytes, httpx.Headers]:
        """GET ``path`` and return the body, refusing one over ``limit`` bytes; 404 is
        ``CannotCheck`` too (the remote cannot serve what its checkpoint promises)."""
        a = self.http.get_ok(path, limit, params, BYTES)
        return a.body, a.headers

    def checkpoint(self) -> bytes:
        return self.get("checkpoint", MAX_CHECKPOINT_BYTES)[0]

    def revoked(self, size: int) -> tuple[Revoked, ...] | None:
        """The remote's revoked-key list of the tree of ``size`` (``GET api/v1/revoked?size=N``,
        parsed strictly, not yet checked against a checkpoint); None when it serves none (a
        static location written by ``ledger publish``, an older server: any status but 200)."""
        a = self.http.get("api/v1/revoked", MAX_ANSWER_BYTES, [("size", str(size))], JSON)
        if a.status != 200:
            return None
        try:
            return parse_answer(a.body, size)
        except BadInput as e:
            raise BadAnswer(f"{a.url}: {oneline(str(e))}") from e

    def blobs(self, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        """Fetch blobs by digest, each checked against its BLAKE3 digest: from ``ledger serve``
        in batches of ``BLOBS_PER_REQUEST`` (``GET api/v1/blobs?d=...``, a few requests in
        flight); from a static location (``ledger publish``: no batch endpoint) one file per
        blob, ``GET api/v1/blobs/<hex>``, ``STATIC_IN_FLIGHT`` at a time. Which one is found out
        on the first batch and kept."""
        if not digests:
            return {}
        out: dict[bytes, bytes] = {}
        if self.batch is None:
            first = digests[:BLOBS_PER_REQUEST]
            try:
                out.update(self._blob_chunk(first))
                self.batch = True
            except CannotCheck:
                self.batch = False  # no batch endpoint here: a static location
                out.update(self._blob_singles(first))
            digests = digests[len(first) :]
        if not self.batch:
            out.update(self._blob_singles(digests))
            return out
        chunks = [digests[i : i + BLOBS_PER_REQUEST] for i in range(0, len(digests),
                                                                    BLOBS_PER_REQUEST)]
        chunks = self._chunks_pipelined(chunks, out)  # what it leaves: one request at a time
        if len(chunks) <= 1:
            for chunk in chunks:
                out.update(self._blob_chunk(chunk))
            return out
        with ThreadPoolExecutor(max_workers=BLOB_REQUESTS_IN_FLIGHT) as pool:
            for part in pool.map(self._blob_chunk, chunks):
                out.update(part)
        return out

    def _chunks_pipelined(
        self, chunks: list[Sequence[bytes]], out: dict[bytes, bytes]
    ) -> list[Sequence[bytes]]:
        """The batch requests of ``chunks`` pipelined (``ledger.net.pipeline``), each answer read
        into ``out`` as it arrives (``_blob_answer``); the digests it did not deliver (a
        request handed back, an answer holding fewer than asked), as chunks for ``_blob_chunk``."""
        if self.pipe is None or len(chunks) <= 1:
            return chunks
        got: dict[int, int] = {}  # chunk -> how many of its digests the answer held

        def take(i: int, body: bytes, fields: Mapping[bytes, bytes]) -> None:
            count = fields.get(b"x-blob-count", b"").decode("latin-1")
            try:
                got[i] = self._blob_answer(chunks[i], body, count, out)
            except (BadAnswer, CannotCheck):
                raise HandBack from None  # asked again alone, which says what is wrong

        paths = [f"api/v1/blobs?{'&'.join('d=' + hex_encode(d) for d in c)}" for c in chunks]
        self.pipelined(paths, MAX_BLOB_ANSWER_BYTES, take)
        return [c[got.get(i, 0):] for i, c in enumerate(chunks) if got.get(i, 0) < len(c)]

    def _blob_singles(self, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        rest = list(digests)
        if self.pipe is not None and len(digests) > 1:

            def check(i: int, data: bytes, _: object) -> None:  # each file as it arrives
                if blake3_digest(data) != digests[i]:
                    raise HandBack  # asked again alone, where a wrong file is BadAnswer

            got = self.pipelined([f"api/v1/blobs/{hex_encode(d)}" for d in digests],
                                 MAX_BLOB_ANSWER_BYTES, check)
            rest = []
            for digest, data in zip(digests, got, strict=True):
                if data is None:
                    rest.append(digest)  # asked again one by one, which says what is wrong
                else:
                    out[digest] = data
        if len(rest) <= 1:
            out.update((d, self._blob_one(d)) for d in rest)
            return out
        with ThreadPoolExecutor(max_workers=STATIC_IN_FLIGHT) as pool:
            out.update(zip(rest, pool.map(self._blob_one, rest), strict=True))
        return out

    def _blob_one(self, digest: bytes) -> bytes:
        path = f"api/v1/blobs/{hex_encode(digest)}"
        data = self.lean.get(path, MAX_BLOB_ANSWER_BYTES) if self.lean is not None else None
        if data is None:
            data = self.get(path, MAX_BLOB_ANSWER_BYTES)[0]
        if blake3_digest(data) != digest:
            raise BadAnswer(f"blob {hex_encode(digest)} from the mirror has another hash")
        return data

    def _blob_chunk(self, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        todo = list(digests)
        while todo:
            ask = todo[:BLOBS_PER_REQUEST]
            body, headers = self.get(
                "api/v1/blobs", MAX_BLOB_ANSWER_BYTES, [("d", hex_encode(d)) for d in ask]
            )
            todo = todo[self._blob_answer(ask, body, headers.get("x-blob-count", ""), out) :]
        return out

    @staticmethod
    def _blob_answer(
        ask: Sequence[bytes], body: bytes, count: str, out: dict[bytes, bytes]
    ) -> int:
        """Read one batch answer (``count``: its ``X-Blob-Count``) into ``out``, each blob
        checked against its digest; how many of ``ask`` it held."""
        if not count.isascii() or not count.isdigit() or len(count) > 4 \
                or not 1 <= int(count) <= len(ask):
            raise CannotCheck("the mirror's blob answer has no valid X-Blob-Count")
        pos = 0
        for digest in ask[: int(count)]:
            if pos + 4 > len(body):
                raise BadAnswer("the mirror's blob answer is truncated")
            (n,) = struct.unpack_from(">I", body, pos)
            data = body[pos + 4 : pos + 4 + n]
            if len(data) != n:
                raise BadAnswer("the mirror's blob answer is truncated")
            if blake3_digest(data) != digest:
                raise BadAnswer(f"blob {hex_encode(digest)} from the mirror has another hash")
            out[digest] = data
            pos += 4 + n
        if pos != len(body):
            raise BadAnswer("the mirror's blob answer has trailing bytes")
        return int(count)


class TileHashes:
    """``GetStored`` over the remote hash tiles of the tree of ``size`` (fetched lazily, cached).

    The hashes are untrusted until a proof built from them verifies against a signed root.
    """

    def __init__(self, remote: Remote, size: int) -> None:
        self.remote = remote
        self.size = size
        self._tiles: dict[str, bytes] = {}
        self._hashes: dict[tuple[int, int], bytes] = {}

    def get(self, level: int, n: int) -> bytes:
        got = self._hashes.get((level, n))
        if got is not None:
            return got
        tlevel, r = divmod(level, 8)
        start, count = n << r, 1 << r
        avail = self.size >> (8 * tlevel)
        if start + count > avail:
            raise ProofError(f"hash ({level}, {n}) is outside the tree of size {self.size}")
        t, offset = divmod(start, TILE_WIDTH)
        width = min(TILE_WIDTH, avail - t * TILE_WIDTH)
        path = tile_path(tlevel, t, width)
        data = self._tiles.get(path)
        if data is None:
            data = self.remote.get(path, TILE_WIDTH * merkle.HASH_SIZE)[0]
            if len(data) != width * merkle.HASH_SIZE:
                raise BadAnswer(
                    f"remote {path} has {len(data)} bytes, not {width * 32}: the tile does not "
                    "match the signed checkpoint"
                )
            self._tiles[path] = data
        row = [data[i * 32 : i * 32 + 32] for i in range(offset, offset + count)]
        while len(row) > 1:
            row = [merkle.node_hash(row[i], row[i + 1]) for i in range(0, len(row), 2)]
        self._hashes[(level, n)] = row[0]
        return row[0]

    def forget(self) -> None:
        """Drop every fetched tile (they are fetched again on the next ``get``)."""
        self._tiles.clear()
        self._hashes.clear()


def _consistency_roots(old: int, new: int, path: list[bytes]) -> tuple[bytes, bytes] | None:
    """The (old, new) roots a consistency path leads to (``merkle.consistency_roots``), or None
    when the path has the wrong length."""
    try:
        return merkle.consistency_roots(old, new, path)
    except ProofError:
        return None


def prefix_root(old: int, cp: Checkpoint, hashes: TileHashes) -> bytes:
    """``prefix_proof``'s root."""
    return prefix_proof(old, cp, hashes)[0]


def prefix_proof(old: int, cp: Checkpoint, hashes: TileHashes) -> tuple[bytes, list[bytes]]:
    """The root of the first ``old`` leaves (0 < old < cp.size) of the tree that the signed
    checkpoint ``cp`` commits to, from the remote hash tiles, **authenticated**: the tile hashes
    used must lead to the signed root, else ``BadAnswer`` (the tiles, not the log, are wrong).
    Tiles that do not match are fetched once more before giving up.

    A root obtained this way is bound to ``cp.root``; comparing it with another signed root of
    size ``old`` is a proof either way (consistent, or a fork). Also returns the path used
    (RFC 9162 consistency proof, led by the old subtree's hash when ``old`` is a power of two).
    """
    for _attempt in (1, 2):
        try:
            proof = merkle.consistency_proof(old, cp.size, hashes.get)
            path = list(proof)
            if old & (old - 1) == 0:
                path.insert(0, hashes.get(old.bit_length() - 1, 0))
            roots = _consistency_roots(old, cp.size, path)
            if roots is not None and roots[1] == cp.root:
                return roots[0], path
        except ProofError:
            pass
        hashes.forget()
    raise BadAnswer(
        f"the remote hash tiles do not match the signed checkpoint of size {cp.size} "
        f"(a tile does not match the signed checkpoint; fetched twice)"
    )


@dataclass(frozen=True)
class SyncResult:
    origin: str
    old_size: int
    new_size: int
    entries: int
    blobs: int
    requests: int
    seconds: float
    checkpoint: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "entries": self.entries,
            "blobs": self.blobs,
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
            "checkpoint": self.checkpoint.decode("utf-8"),
        }


@dataclass
class Mirror:
    """A local mirror of one remote log; keep the object between polls (``--follow``)."""

    home: Path
    remote: Remote
    vkey_text: str
    witnesses: Sequence[NoteVerifier] = ()
    progress: Callable[[int, int], None] | None = None
    # called with the store (every entry of the new tree verified and stored) and the signed
    # checkpoint before it is stored; raising keeps the checkpoint out (not served, not trusted)
    before_store: Callable[[Store, bytes], None] | None = None
    # more witness keys whose valid cosignatures are kept with the note, though not each one is
    # required (a trust policy's K of N, which ``before_store`` checks); any other line is not
    keep: Sequence[NoteVerifier] = ()
    vkey: NoteVerifier = field(init=False)
    _registry: Registry | None = field(default=None, init=False)
    _registry_size: int = field(default=0, init=False)
    _ahead_seen: set[bytes] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        from ledger.core.note import parse_vkey

        self.vkey = parse_vkey(self.vkey_text)

    # -- steps 1 and 2 ---------------------------------------------------------------------------

    def fetch_checkpoint(self) -> tuple[bytes, Checkpoint]:
        note = self.remote.checkpoint()
        try:
            opened = open_note(note, [self.vkey])
            cp = parse_checkpoint(opened.text)
        except SignatureError:
            raise
        except BadInput as e:
            raise BadAnswer(
                f"{self.remote.url}/checkpoint is not a signed checkpoint note: {oneline(str(e))}"
            ) from e
        if cp.origin != self.vkey.name:
            raise VerificationFailed(
                f"checkpoint origin {cp.origin!r} is not the pinned key's name {self.vkey.name!r}"
            )
        if self.witnesses:
            from ledger.witness import require_cosignatures

            require_cosignatures(note, opened.text, self.witnesses)
        # only what was checked goes on: the log's signature and the cosignatures of the
        # witnesses named here, never the other lines the host sent (issue 33 item 5)
        return keep_verified(note, [self.vkey, *self.witnesses, *self.keep]), cp

    def open_store(self, origin: str) -> Store:
        try:
            store = open_store(self.home)
        except LedgerStateError:
            if (self.home / "ledger.db").exists():
                raise
            store = create_store(self.home, origin)
            store.set_meta(VKEY_META, self.vkey_text)
            store.set_meta(URL_META, self.remote.url)
            return store
        if store.origin != origin:
            store.close()
            raise BadInput(f"{self.home} mirrors {store.origin!r}, not {origin!r}")
        known = store.meta(VKEY_META)
        if known is not None and known != self.vkey_text:
            store.close()
            raise BadInput(f"{self.home} follows the key {known}, not {self.vkey_text}")
        if known is None:
            store.set_meta(VKEY_META, self.vkey_text)
        return store

    def evidence(
        self,
        store: Store,
        kept: bytes,
        remote: bytes,
        why: str,
        proof: tuple[int, int, bytes, list[bytes]] | None = None,
    ) -> RewriteDetected:
        """Write both signed checkpoints (and, for a larger remote tree, the authenticated
        consistency path that shows the disagreement) to ``evidence/``."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        folder = self.home / EVIDENCE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        a = folder / f"{stamp}-verified.checkpoint"
        b = folder / f"{stamp}-remote.checkpoint"
        write_atomic(a, kept, 0o644)
        write_atomic(b, remote, 0o644)
        if proof is not None:
            old, new, got, path = proof
            text = (
                f"kernel-ledger consistency evidence\nold {old} {b64_encode(got)}\nnew {new}\n"
                + "".join(b64_encode(h) + "\n" for h in path)
            )
            write_atomic(folder / f"{stamp}-consistency.proof", text.encode("ascii"), 0o644)
        return RewriteDetected(
            f"the remote log was rewritten: {why}; both signed checkpoints are kept in {a} and {b}"
        )

    def check_consistent(
        self, store: Store, kept: bytes, note: bytes, cp: Checkpoint, hashes: TileHashes
    ) -> None:
        """Compare the signed checkpoint ``kept`` (verified earlier) with the remote one.

        Evidence is written only for two signed checkpoints that disagree: another root at the
        same size; a smaller remote tree whose root differs from the root at that size of the
        verified entries held here; a larger remote tree whose tiles, authenticated against its
        own signed root, give another root at the kept size. Tiles that do not lead to the signed
        root are bad data from whoever served them (``BadAnswer``), and a smaller checkpoint that
        agrees with the verified entries is a stale answer (``CannotCheck``), not a fork.
        """
        old = parse_checkpoint(note_text(kept))
        if old.size > cp.size:
            if cp.size > store.size():
                raise CannotCheck(
                    f"the remote serves a checkpoint of size {cp.size}, older than the one "
                    f"being mirrored (size {old.size}); it may be a stale copy"
                )
            if cp.size > 0 and store.root(cp.size) != cp.root:
                raise self.evidence(
                    store, kept, note,
                    f"its tree shrank from {old.size} to {cp.size} with another root at "
                    f"size {cp.size}",
                )
            raise CannotCheck(
                f"the remote serves a checkpoint of size {cp.size}, older than the one verified "
                f"here (size {old.size}) but consistent with it; it may be a stale copy"
            )
        if old.size == cp.size:
            if old.root != cp.root:
                raise self.evidence(store, kept, note, f"two roots for size {cp.size}")
            return
        if old.size == 0:
            return
        got, path = prefix_proof(old.size, cp, hashes)
        if got != old.root:
            raise self.evidence(
                store, kept, note,
                f"no consistency from size {old.size} to {cp.size} (the signed tree of size "
                f"{cp.size} holds another tree of size {old.size})",
                (old.size, cp.size, got, path),
            )

    # -- the sync --------------------------------------------------------------------------------

    def sync(self) -> SyncResult:
        self.remote.restart()
        t0 = time.perf_counter()
        requests0 = self.remote.requests
        note, cp = self.fetch_checkpoint()
        store = self.open_store(cp.origin)
        try:
            return self._sync(store, note, cp, t0, requests0)
        except BaseException:
            self._registry = None  # it may hold entries of a batch that was not stored
            raise
        finally:
            store.close()

    def _sync(
        self, store: Store, note: bytes, cp: Checkpoint, t0: float, requests0: int
    ) -> SyncResult:
        hashes = TileHashes(self.remote, cp.size)
        verified: bytes | None
        try:
            verified = store.checkpoint()
        except LedgerStateError:
            verified = None
        if verified is not None:
            self.check_consistent(store, verified, note, cp, hashes)
        pending = store.meta(PENDING_META)
        if pending:
            self.check_consistent(store, pending.encode("utf-8"), note, cp, hashes)
        start_size = self._check_local(store, cp, hashes)
        blobs_fetched = 0
        if start_size < cp.size:
            store.set_meta(PENDING_META, note.decode("utf-8"))
            blobs_fetched = self._fetch_all(store, start_size, cp, hashes,
                                            self.committed(cp))
        # a new row only when the tree moved or a checked key signed it that the kept note
        # lacks: the table grows by at most one row per key and tree size (issue 33 item 5)
        if verified is None or tells_more(note, verified):
            check_revoked(self.registry(store, cp.size), cp)
            if self.before_store is not None:
                self.before_store(store, note)  # e.g. the user's checkpoint memory (issue 14)
            store.put_checkpoint(note, cp.size)
        if pending:
            store.set_meta(PENDING_META, "")
        return SyncResult(
            cp.origin,
            start_size,
            cp.size,
            cp.size - start_size,
            blobs_fetched,
            self.remote.requests - requests0,
            time.perf_counter() - t0,
            note,
        )

    @staticmethod
    def _check_local(store: Store, cp: Checkpoint, hashes: TileHashes) -> int:
        """The number of entries stored here, once checked against the signed tree ``cp``."""
        local = store.size()
        if local > cp.size:
            raise CannotCheck(
                f"the remote serves a checkpoint of size {cp.size}, older than the {local} "
                "entries verified here; it may be a stale copy"
            )
        if 0 < local < cp.size:
            if prefix_root(local, cp, hashes) != store.root(local):
                raise TamperDetected(
                    f"the {local} entries stored here are not a prefix of the signed tree "
                    f"of size {cp.size}, although the checkpoints agree: the store was changed"
                )
        elif local == cp.size and store.root(local) != cp.root:
            raise TamperDetected(
                "the entries stored here do not give the signed root, although the checkpoints "
                "agree: the store was changed"
            )
        return local

    def committed(self, cp: Checkpoint) -> CommittedStatus | None:
        """The status of keys in the remote tree ``cp`` from the revoked-key list it commits to
        (``ledger.core.revoked``), fetched and checked against that commitment before any entry
        is judged; None when ``cp`` commits to no list (an older log) or the remote serves none
        (a static location): the replayed revocations alone then decide, and ``check_revoked``
        holds them to the commitment before the checkpoint is kept. A list that is not the one
        committed to is ``BadAnswer`` (whoever served it lied; the log's signed data did not)."""
        if commitment(cp) is None:
            return None
        items = self.remote.revoked(cp.size)
        if items is None:
            return None
        try:
            check_list(cp, items)
        except (BadInput, VerificationFailed) as e:
            raise BadAnswer(f"{self.remote.url}/api/v1/revoked?size={cp.size}: {e}") from e
        return CommittedStatus(cp, items)

    def _fetch_all(
        self, store: Store, local: int, cp: Checkpoint, hashes: TileHashes,
        committed: CommittedStatus | None = None,
    ) -> int:
        """Fetch, verify and store entries ``local`` .. ``cp.size``; the blobs fetched."""
        signers = Signers(self.registry(store, local), committed)
        blobs_fetched = 0
        frontier = merkle.Frontier.from_store(local, store.stored_hash)
        known: set[tuple[int, bytes]] = set()  # (part, digest) stored here
        self._ahead_seen = set()
        # fetch batch k+1 (its entry tiles, parsed, and its bundle files) while batch k is
        # verified and stored
        with ThreadPoolExecutor(max_workers=1) as pool:
            end = self._batch_end(local, cp.size)
            ahead = pool.submit(self._fetch, local, end, cp.size)
            while local < cp.size:
                rows, blobs = ahead.result()
                nxt = self._batch_end(end, cp.size)
                if end < cp.size:
                    ahead = pool.submit(self._fetch, end, nxt, cp.size)
                with collector_paused():  # the batch makes no cycles (ledger.core.gcpause)
                    try:
                        blobs_fetched += self._batch(
                            store, signers, frontier, rows, end, cp, hashes, known, blobs
                        )
                    except _TilesMismatch:
                        pipe = self.remote.pipe
                        if pipe is None or not pipe.usable:
                            raise
                        # the tiles may have come pipelined through something that mixes
                        # up answers: once more, one request at a time, before judging
                        pipe.on = False
                        rows, again = self._fetch(local, end, cp.size)
                        blobs.update(again)  # files are checked by digest: both sets hold
                        blobs_fetched += self._batch(
                            store, signers, frontier, rows, end, cp, hashes, known, blobs
                        )
                local, end = end, nxt
                self._registry_size = local
                if self.progress is not None:
                    self.progress(local, cp.size)
        return blobs_fetched

    def registry(self, store: Store, size: int) -> Registry:
        """The node-key registry after the first ``size`` local entries (kept between polls)."""
        if self._registry is None or self._registry_size > size:
            self._registry = Registry(self.vkey.public, self.vkey.name)
            self._registry_size = 0
        if self._registry_size < size:
            for i, _, data in store.rows(self._registry_size):
                if i >= size:
                    break
                self._registry.apply(i, data)
            self._registry_size = size
        return self._registry

    @staticmethod
    def _batch_end(start: int, size: int) -> int:
        """The end of the batch that starts at ``start``. Every batch but a first one that
        starts inside a tile group is a perfect subtree of the tree (aligned to its width, a
        power of two): from ``FIRST_TILES`` tiles, each as wide as its start allows, up to
        ``BATCH_TILES`` tiles (1,024, 1,024, 2,048, 4,096, 8,192, 8,192, ... entries from an
        empty mirror), so the first batch is verified while the next is fetched."""
        most = TILE_WIDTH * BATCH_TILES
        least = TILE_WIDTH * min(FIRST_TILES, BATCH_TILES)
        if start % least:
            return min(size, (start // least + 1) * least)
        width = least if start == 0 else min(most, start & -start)
        return min(size, start + width)

    def _fetch(
        self, start: int, end: int, size: int
    ) -> tuple[list[Fetched], dict[bytes, bytes]]:
        """Entries ``[start, end)``, each parsed (``Fetched``), and the bundle files they name
        that this sync has not fetched yet (unverified entries: the files are checked against
        their digests here and used only for the entries that ``_batch`` then verifies; one it
        lacks is fetched there). Run on the fetch thread, while the previous batch is verified."""
        rows = [_parse(i, data) for i, data in self._fetch_entries(start, end, size)]
        named: list[bytes] = []
        for f in rows:
            named.extend(f.files())
        wanted = [d for d in dict.fromkeys(named) if d not in self._ahead_seen]
        self._ahead_seen.update(wanted)
        return rows, self.remote.blobs(wanted)

    def _fetch_entries(self, start: int, end: int, size: int) -> list[tuple[int, bytes]]:
        """Entries ``[start, end)`` from the remote entry tiles of the tree of ``size`` (the
        tiles fetched ``TILES_IN_FLIGHT`` at a time)."""
        tiles = list(range(start // TILE_WIDTH, (end + TILE_WIDTH - 1) // TILE_WIDTH))
        piped = self._tiles_pipelined(tiles, size)
        rest = [t for t in tiles if t not in piped]  # handed back: one request at a time
        if len(rest) <= 1:
            piped.update((t, self._entry_tile(t, size)) for t in rest)
        else:
            with ThreadPoolExecutor(max_workers=TILES_IN_FLIGHT) as pool:
                piped.update(zip(rest, pool.map(lambda t: self._entry_tile(t, size), rest),
                                 strict=True))
        got = [piped[t] for t in tiles]
        out: list[tuple[int, bytes]] = []
        for t, items in zip(tiles, got, strict=True):
            for k, data in enumerate(items):
                i = t * TILE_WIDTH + k
                if start <= i < end:
                    out.append((i, data))
        return out

    def _tiles_pipelined(self, tiles: list[int], size: int) -> dict[int, list[bytes]]:
        """The entry tiles ``tiles`` pipelined (``ledger.net.pipeline``; gzip taken as it comes,
        opened by ``gunzip_bundle``), each read as it arrives; those it hands back are not in
        the answer."""
        out: dict[int, list[bytes]] = {}
        if self.remote.pipe is None or len(tiles) <= 1:
            return out

        def take(i: int, body: bytes, _: object) -> None:
            try:
                out[tiles[i]] = self._entry_items(tiles[i], size, body)
            except BadAnswer:
                raise HandBack from None  # asked again alone, which says what is wrong

        self.remote.pipelined([entries_tile_path(t, min(TILE_WIDTH, size - t * TILE_WIDTH))
                               for t in tiles], MAX_ENTRY_TILE_BYTES, take,
                              encodings=(b"identity", b"gzip"))
        return out

    def _entry_tile(self, t: int, size: int) -> list[bytes]:
        width = min(TILE_WIDTH, size - t * TILE_WIDTH)
        return self._entry_items(t, size, self.remote.get(entries_tile_path(t, width),
                                                          MAX_ENTRY_TILE_BYTES)[0])

    @staticmethod
    def _entry_items(t: int, size: int, data: bytes) -> list[bytes]:
        """The entries of entry tile ``t`` of the tree of ``size``, from its bytes as served
        (gzip or not)."""
        width = min(TILE_WIDTH, size - t * TILE_WIDTH)
        path = entries_tile_path(t, width)
        try:
            items = parse_entry_bundle(gunzip_bundle(data))
        except BadInput as e:
            raise BadAnswer(
                f"remote {path} is malformed ({oneline(str(e))}): the tile does not match "
                "the signed checkpoint"
            ) from e
        if len(items) != width:
            raise BadAnswer(
                f"remote {path} holds {len(items)} entries, not {width}: the tile does not "
                "match the signed checkpoint"
            )
        return items

    def _batch(
        self,
        store: Store,
        signers: Signers,
        frontier: merkle.Frontier,
        fetched: list[Fetched],
        end: int,
        cp: Checkpoint,
        hashes: TileHashes,
        known: set[tuple[int, bytes]],
        prefetched: dict[bytes, bytes] | None = None,
    ) -> int:
        """Verify the entries ``fetched`` (up to ``end``), take their blobs from ``prefetched``
        or fetch them, append them.

        1. The bytes against the signed root first: a tile that does not match it is bad data
           from whoever served it; only entries the log signed are judged as the log's entries.
           A full batch (aligned, every batch but the first) is one perfect subtree, hashed
           level by level.
        2. Each entry in log order (``_rules``): its parse, the signer rules, the shape, the
           chain link, the manifest digest; the bundle signatures gathered.
        3. The signatures, on every core without the GIL (``native.Verifying``): those of
           signers known before the batch from its start (``_early_signatures``, while steps 1
           and 2 run), the others after step 2; both while steps 4 and 5 run. The first entry
           with a problem of either kind fails the sync.
        4. The files each part of the batch lacks; 5. all of it appended in one transaction,
           which commits only once every signature has verified.
        """
        with _early_checks(signers.registry, fetched) as (early, early_jobs):
            start = frontier.size
            leaves = [f.leaf for f in fetched]
            width = len(leaves)
            levels = joined = None
            probe = merkle.Frontier.from_edge(start, frontier.edge())
            if width and width & (width - 1) == 0 and start % width == 0:
                levels = merkle.perfect_levels(leaves)
                joined = merkle.joined_levels(levels)  # stored as they are, a statement a level
                probe.append_joined(joined)
            else:
                for lh in leaves:
                    probe.append(lh)
            root = probe.root()
            if (end < cp.size and prefix_root(end, cp, hashes) != root) or (
                end == cp.size and root != cp.root
            ):
                raise _TilesMismatch(
                    f"the remote entry tiles up to {end} do not match the signed checkpoint of "
                    f"size {cp.size} (a tile does not match the signed checkpoint)"
                )
            jobs: list[VerifyJob] = []
            job_at: list[int] = []
            first: tuple[int, LedgerError] | None = None
            links = _BatchLinks(store, frontier, levels, joined)
            for f in fetched:
                try:
                    _rules(signers, links, f, jobs, job_at)
                except LedgerError as e:  # the registry is not used past it: the sync fails
                    first = (f.at, e)
                    break
            else:
                links.done()
            if first is not None:
                bad = verify_many(jobs, threads=VERIFY_THREADS)
                if bad and job_at[bad[0]] <= first[0]:
                    raise SignatureError(f"remote entry {job_at[bad[0]]}: entry signature does not "
                                         "verify")
                raise first[1]
            # the signatures are checked on threads of their own (without the GIL) while the batch's
            # files are gathered and its rows written; the transaction commits only once every
            # signature has verified, and a bad one rolls it back
            verifying = _Signatures(early, early_jobs, jobs, job_at)
            try:
                return self._store(store, fetched, start, end, root, joined, known, prefetched,
                                   verifying, job_at)
            except BaseException:
                bad = verifying.result()  # a bad signature is the first thing to report
                if bad:
                    raise SignatureError(f"remote entry {job_at[bad[0]]}: entry signature does not "
                                         "verify") from None
                raise

    def _store(
        self,
        store: Store,
        fetched: list[Fetched],
        start: int,
        end: int,
        root: bytes,
        joined: list[bytes] | None,
        known: set[tuple[int, bytes]],
        prefetched: dict[bytes, bytes] | None,
        verifying: _Signatures,
        job_at: list[int],
    ) -> int:
        """Steps 4 and 5 of ``_batch``, committed once ``verifying`` has found every signature
        good."""
        # the files each part of the batch lacks: an entry's files are stored in its part
        # (ledger.store.common, "Parts"), so a file this mirror holds in an older part is copied
        wanted: dict[int, dict[bytes, None]] = {}
        for f in fetched:
            part = part_of(f.at)
            for digest in f.files():
                if (part, digest) not in known:
                    wanted.setdefault(part, {})[digest] = None
        for part, digests in wanted.items():
            present = stored_blobs(store, list(digests), part_start(part))
            known.update((part, d) for d in present)
            for digest in present:
                del digests[digest]
        need = list(dict.fromkeys(d for digests in wanted.values() for d in digests))
        have = prefetched or {}
        blobs = {d: have[d] for d in need if d in have}
        for d in need:  # held here in an older part: copied, not fetched again
            if d not in blobs:
                held = store.blob(d)
                if held is not None and blake3_digest(held) == d:
                    blobs[d] = held
        blobs.update(self.remote.blobs([d for d in need if d not in blobs]))
        # a batch of a thousand entries or more leaves its WAL checkpoint to a thread of the
        # store (ledger.store.walcheckpoint) while the next batch is fetched and verified
        with store.writer(checkpoint_later=end - start >= 1024) as w:
            if w.size != start:
                raise TamperDetected("the local store changed while the mirror was appending")
            for part, digests in wanted.items():  # batched with the entries
                w.put_blobs(((d, blobs[d]) for d in digests), index=part_start(part))
            if joined is not None and all(f.bundle for f in fetched):
                w.append_bundles([(f.data, f.leaf) for f in fetched],
                                 [f.digest() for f in fetched], joined)
            else:
                for f in fetched:  # every entry passed _rules: a view or an object
                    if f.bundle:
                        w.append_bundle(f.data, f.digest())
                    else:
                        assert f.obj is not None
                        w.append(f.data, f.obj["type"], None)  # also indexes key entries
            if w.size != end or w.root() != root:
                raise TamperDetected("the local store changed while the mirror was appending")
            w.flush()  # the rows go in while the signatures are checked
            bad = verifying.result()
            if bad:
                raise SignatureError(f"remote entry {job_at[bad[0]]}: entry signature does not "
                                     "verify")
        known.update((part, d) for part, digests in wanted.items() for d in digests)
        return len(blobs)


class _TilesMismatch(BadAnswer):
    """A batch's entry tiles do not give the signed tree (raised before anything of the batch
    is judged, so the batch can be fetched again and judged anew)."""


@contextmanager
def _early_checks(
    registry: Registry, fetched: list[Fetched]
) -> Iterator[tuple[Verifying, dict[int, tuple[int, VerifyJob]]]]:
    """``_early_signatures`` for the length of a batch: its threads are done before the batch
    is, however it ends."""
    early = _early_signatures(registry, fetched)
    try:
        yield early
    finally:
        early[0].result()


def _early_signatures(
    registry: Registry, fetched: list[Fetched]
) -> tuple[Verifying, dict[int, tuple[int, VerifyJob]]]:
    """The signature checks of a batch's bundle entries whose signer the registry holds before
    the batch, started at once (``Verifying``), so they run while the batch is hashed and
    judged; and, by entry index, each one's position and inputs. Nothing is decided here:
    ``_rules`` then asks for the checks the log's rules call for, and ``_Signatures`` reuses a
    result only for exactly the same inputs (key, message, signature)."""
    jobs: list[VerifyJob] = []
    at: dict[int, tuple[int, VerifyJob]] = {}
    keys = registry.keys
    for f in fetched:
        if f.view is None:
            continue
        try:
            key = keys.get(hex_decode(f.view.signer))
        except BadInput:
            continue  # _rules says what is wrong with it
        if key is not None:
            job = (key.public, f.view.signed, f.view.signature)
            at[f.at] = (len(jobs), job)
            jobs.append(job)
    return Verifying(jobs, threads=VERIFY_THREADS), at


class _Signatures:
    """The signature checks ``_rules`` asked for (``jobs``, of the entries ``job_at``): the
    result of an early check (``_early_signatures``) where its inputs are the same, the others
    checked now. ``result()`` waits for both and names the jobs whose signature does not
    verify, in order, as ``native.verify_many`` would."""

    def __init__(
        self,
        early: Verifying,
        early_jobs: dict[int, tuple[int, VerifyJob]],
        jobs: list[VerifyJob],
        job_at: list[int],
    ) -> None:
        self.early = early
        self.reused: list[tuple[int, int]] = []  # (job, its position in the early check)
        self.rest: list[int] = []
        for k, (job, at) in enumerate(zip(jobs, job_at, strict=True)):
            e = early_jobs.get(at)
            if e is not None and e[1] == job:
                self.reused.append((k, e[0]))
            else:
                self.rest.append(k)
        self.late = Verifying([jobs[k] for k in self.rest], threads=VERIFY_THREADS)

    def result(self) -> list[int]:
        bad_early = set(self.early.result())
        bad = [k for k, e in self.reused if e in bad_early]
        bad.extend(self.rest[i] for i in self.late.result())
        return sorted(bad)


class CommittedStatus:
    """Keys' status in one remote tree, each answered by ``ledger.core.revoked.key_status`` from
    the revoked-key list that tree's checkpoint commits to (``Mirror.committed`` checked the list
    against the commitment), once per key."""

    def __init__(self, cp: Checkpoint, items: Sequence[Revoked]) -> None:
        self.cp, self.items = cp, tuple(items)
        self._known: dict[bytes, KeyStatus] = {}

    def of(self, key_id: bytes) -> KeyStatus:
        got = self._known.get(key_id)
        if got is None:
            got = self._known[key_id] = key_status(key_id, self.cp, self.items)
        return got


@dataclass
class Signers:
    """Who may sign remote entry ``index`` (issue 33 item 1: the one answer to "status of key K
    in tree N" decides here as in verify, refresh and submit): a key the log's entries registered
    before it (``Registry``, replayed), whose status in the remote tree (``committed``: the list
    its checkpoint commits to, ``key_status``) is not "revoked before it", nor revoked before it
    by an entry replayed here. A key is revoked once, so "revoked at r in the tree of size N"
    with r < index is exactly "revoked in the tree before the entry". Without a committed list
    (an older log, a static location) the replayed revocations alone decide, and
    ``check_revoked`` holds them to the checkpoint's commitment before the checkpoint is kept."""

    registry: Registry
    committed: CommittedStatus | None = None

    @property
    def origin(self) -> str:
        return self.registry.origin

    def check(self, key_id: bytes, index: int) -> NodeKey:
        if self.committed is not None:
            status = self.committed.of(key_id)
            if status.revoked_at is not None and status.revoked_at < index:
                raise VerificationFailed(
                    f"signer {hex_encode(key_id)} of entry {index} was {status.describe()}"
                )
        return self.registry.check_signer(key_id, index)


def check_revoked(registry: Registry, cp: Checkpoint) -> None:
    """The remote checkpoint's revoked-key line (``ledger.core.revoked``) must commit to the
    revocations the verified entries of its tree hold (``registry``, replayed up to its size):
    a log that signs a list hiding a revocation is caught here, before its checkpoint is kept."""
    items = [Revoked(k.key_id, k.revoked_at) for k in registry.keys.values()
             if k.revoked_at is not None and k.revoked_at < cp.size]
    try:
        check_list(cp, items)
    except (BadInput, VerificationFailed) as e:
        raise TamperDetected(f"the remote checkpoint of size {cp.size}: {e}") from e


def gunzip_bundle(data: bytes) -> bytes:
    """An entry bundle as published (``ledger publish``) by a host that does not send its
    ``Content-Encoding: gzip``: the gzip bytes themselves, decompressed here (bounded). No
    bundle starts with the gzip magic: its first entry would be 0x1f8b bytes long and begin
    with byte 0x08, and an entry is JSON (it begins with ``{``)."""
    if not data.startswith(b"\x1f\x8b\x08"):
        return data
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, MAX_ENTRY_TILE_BYTES + 1)
    except zlib.error as e:
        raise BadInput(f"gzip data is corrupt ({e})") from e
    if len(out) > MAX_ENTRY_TILE_BYTES or not d.eof or d.unused_data:
        raise BadInput("gzip data is too large, truncated or followed by other bytes")
    return out


def stored_blobs(store: Store, digests: Sequence[bytes], index: int) -> set[bytes]:
    """Which of ``digests`` the local store holds already where the entry ``index`` finds its
    files."""
    return store.has_blobs(digests, index)


class Fetched(NamedTuple):
    """One fetched entry, as the fetch thread hands it over: its index in the log, bytes and
    leaf hash, and its parse: a bundle entry read by ``entries.bundle_view`` (``view``), else
    ``entries.entry_object``'s object and signature bytes, else why the bytes do not parse."""

    at: int
    data: bytes
    leaf: bytes
    view: BundleView | None
    obj: dict[str, Any] | None
    signature: bytes
    problem: str | None

    @property
    def bundle(self) -> bool:
        return self.view is not None or (self.obj is not None and self.obj["type"] == "bundle")

    def files(self) -> list[bytes]:
        """The digests of the bundle files the entry names (none for a key entry)."""
        if self.view is not None:
            return self.view.file_digests
        if self.obj is not None and self.obj["type"] == "bundle":
            return manifest_digests(self.obj["manifest"])
        return []

    def digest(self) -> bytes:
        """A bundle entry's bundle digest."""
        if self.view is not None:
            return self.view.bundle_digest
        assert self.obj is not None
        return hex_decode(self.obj["bundle_digest"])


def _parse(at: int, data: bytes) -> Fetched:
    leaf = merkle.leaf_hash(data)
    view = bundle_view(data)
    if view is not None:
        return Fetched(at, data, leaf, view, None, b"", None)
    try:
        obj, signature = entry_object(data)
    except BadInput as e:
        return Fetched(at, data, leaf, None, None, b"", str(e))
    return Fetched(at, data, leaf, None, obj, signature, None)


def _rules(
    signers: Signers, links: _BatchLinks, f: Fetched, jobs: list[VerifyJob], job_at: list[int]
) -> None:
    """Judge one remote entry in log order: its parse; a key entry applied to the registry (the
    log key's signature, the proof of possession, the key rules); a bundle's origin and signer
    rules, its signature gathered into ``jobs``; the shape rules (no reader of the log meets an
    odd shape), the chain link, a bundle's manifest against its digest."""
    index = f.at
    if f.view is not None:  # a bundle entry, read in one pass
        origin, size, named, v, digest, manifest, signer, signature, signed, _, shaped = f.view
        if origin != signers.origin:
            raise VerificationFailed(f"entry {index} names origin {origin!r}")
        key = signers.check(hex_decode(signer), index)
        jobs.append((key.public, signed, signature))
        job_at.append(index)
        if not shaped:
            _shape(index, entry_object(f.data)[0])  # raises, naming the rule
        _link(links, index, v, size, named, f.leaf)
        if blake3_digest(manifest) != digest:
            raise TamperDetected(f"remote entry {index}: the manifest does not hash to the digest")
        return
    if f.obj is None:
        raise VerificationFailed(f"remote entry {index} is malformed: {f.problem}")
    obj = f.obj
    if obj["type"] in KEY_TYPES:
        signers.registry.apply(index, f.data)
    else:
        if obj["origin"] != signers.origin:
            raise VerificationFailed(f"entry {index} names origin {obj['origin']!r}")
        key = signers.check(hex_decode(obj["signer"]), index)
        jobs.append((key.public, signed_part(f.data, obj), f.signature))
        job_at.append(index)
    _shape(index, obj)
    _link(links, index, ENTRY_V2 if "v" in obj else ENTRY_V1, obj["prev_size"], obj["prev_root"],
          f.leaf)
    if obj["type"] == "bundle":
        digest = blake3_digest(obj["manifest"].encode("utf-8"))
        if hex_encode(digest) != obj["bundle_digest"]:
            raise TamperDetected(f"remote entry {index}: the manifest does not hash to the digest")


def _shape(index: int, obj: dict[str, Any]) -> None:
    try:
        check_entry_shape(obj)
    except BadInput as e:
        raise VerificationFailed(f"remote entry {index} has a shape no log writes: {e}") from e


def _link(links: _BatchLinks, index: int, v: int, size: int, named: str, leaf: bytes) -> None:
    link = links.check(index, v, size, named, leaf)
    if link is not None:
        raise TamperDetected(f"remote entry {index} is not chained to the log: {link}")


class _BatchLinks:
    """The chain links of one batch's entries, met in order, against the tree: the roots of the
    sizes they name, from the batch's own perfect subtree (``levels``, a full batch:
    ``merkle.edge_within``) or leaf by leaf (``ChainCheck``) for the first, partial one; older
    sizes from the verified entries stored here. ``frontier`` (the tree before the batch) is
    brought to the batch's end."""

    def __init__(
        self,
        store: Store,
        frontier: merkle.Frontier,
        levels: list[list[bytes]] | None,
        joined: list[bytes] | None,
    ) -> None:
        self.store = store
        self.frontier = frontier
        self.levels = levels
        self.joined = joined  # the same levels, each joined (``merkle.joined_levels``)
        self.start = frontier.size
        self.edge = frontier.edge()
        self.chain = ChainCheck(store.root)  # older trees: the verified entries stored here
        self.roots: dict[int, bytes | None] = {}

    def root_at(self, size: int) -> bytes | None:
        if size not in self.roots:
            if size < self.start:
                self.roots[size] = self.store.root(size)
            elif self.levels is not None and size - self.start <= len(self.levels[0]):
                edge = merkle.edge_within(self.edge, self.levels, size - self.start)
                self.roots[size] = merkle.edge_root(edge)
            else:
                self.roots[size] = None
        return self.roots[size]

    def check(self, index: int, v: int, size: int, named: str, leaf: bytes) -> str | None:
        """The problem with the link of entry ``index`` (None when it holds)."""
        if self.levels is None:
            problem = self.chain.check_link(v, size, named, index, self.frontier)
            self.frontier.append(leaf)
            return problem
        needed = v == ENTRY_V1 or size == index
        return link_problem(v, size, named, index, self.root_at(index) if needed else None,
                            self.root_at)

    def done(self) -> None:
        """Every entry checked: the frontier at the batch's end."""
        if self.joined is not None:
            self.frontier.append_joined(self.joined)


def manifest_digests(manifest: str) -> list[bytes]:
    """The BLAKE3 digests a bundle manifest names (``ledger.core.bundle.manifest_digests``).

    The mirror replicates the log as signed: judging the manifest's paths and members is the
    verifier's ``integrity.manifest`` check, not a reason to stop following the log. The digest
    of the manifest itself is checked (``_rules``), and every blob named is fetched and checked
    against its digest.
    """
    return bundle_manifest_digests(manifest.encode("utf-8"))


def follow(
    mirror: Mirror,
    interval: float,
    report: Callable[[SyncResult], None],
    on_error: Callable[[LedgerError, float], None],
    max_interval: float = 300.0,
    rounds: int | None = None,
    jitter: Callable[[], float] | None = None,
) -> None:
    """Sync forever (or ``rounds`` times, at least 1): every ``interval`` seconds while the remote
    answers; after a transient failure, wait ``interval * 2**k`` (k failures in a row, at most
    ``max_interval``), times a random factor in [0.75, 1.25], and try again.

    Transient: ``CannotCheck`` (unreachable, a timeout, an HTTP error status, an HTML page, an
    answer over its size limit) and ``BadAnswer`` (bytes that do not match the signed checkpoint:
    bad data from whoever served it). Any other failure (a fork, a checkpoint not signed by the
    pinned key) ends the loop by raising. With ``rounds``, when not one poll succeeded the last
    failure is raised (exit 3, or 1 for bad data).
    """
    if rounds is not None and rounds < 1:
        raise BadInput(f"--rounds must be at least 1, got {rounds}")
    rand = jitter or (lambda: random.uniform(0.75, 1.25))
    delay = interval
    done = succeeded = failures = 0
    last: LedgerError | None = None
    while rounds is None or done < rounds:
        done += 1
        try:
            report(mirror.sync())
            succeeded += 1
            failures = 0
            delay = interval
        except (CannotCheck, BadAnswer) as e:
            failures += 1
            last = e
            delay = min(max_interval, interval * 2 ** min(failures, 40)) * rand()
            on_error(e, delay)
        if rounds is not None and done >= rounds:
            break
        time.sleep(delay)
    if rounds is not None and succeeded == 0 and last is not None:
        why = f"no poll of {rounds} succeeded; the last: {last}"
        raise BadAnswer(why) if isinstance(last, BadAnswer) else CannotCheck(why)
