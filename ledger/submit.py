"""Shared sealing: a node submits a signed bundle entry to a remote log (SPEC 4, 7, 9; issue 13).

Request: ``POST /api/v1/submit`` with the canonical JSON body ``{"entry": base64(entry bytes),
"files": {path: base64(file bytes)}}`` (at most ``MAX_BODY`` bytes) and two headers that
authenticate it before it is parsed: ``X-Ledger-Signer`` (the node key id, hex) and
``X-Ledger-Signature`` (base64 Ed25519 signature by that key of ``BODY_CONTEXT`` followed by the
SHA-256 of the body). Enabled only by ``ledger serve --accept-submissions`` on a ledger holding its
log key. The server, in order:

0. before reading the body: the headers must be present and well formed (401), the key id a
   registered, unrevoked node key (403), the declared ``Content-Length`` within ``MAX_BODY``
   (413); then it reads the body with the cap (413) and checks the body signature (403), so an
   unauthenticated body is never read past its head, and a body is never parsed unauthenticated;
1. parses the body strictly (400);
2. decodes the entry (400): a ``bundle`` entry of this log's origin, signed by the key of the
   headers (403 otherwise);
3. an entry already in the log is answered at once with its index (a retry after a lost answer:
   submitting is idempotent, and no second entry is ever made of the same bytes);
4. checks the signer is registered and not revoked, and the node signature (403);
5. spends a token of the signer's rate bucket (429 with ``Retry-After``);
6. rebuilds the bundle from the files and checks it against the entry's manifest and digest (422);
7. hands the entry to the log's one ``Sequencer``, which integrates pending submissions in
   batches: every ``BATCH_INTERVAL`` seconds or ``BATCH_MAX`` entries, one write transaction
   assigns the indices, checks each entry's chain link (``ledger.core.entries.chain_problem``: a v2
   entry names a tree the log has, as a prefix, of size at most its index; a v1 entry the very
   tree before it), its signer once more, and duplicates within the batch, appends blobs and
   entries, and signs **one** checkpoint for the batch. The request is answered only after that
   transaction committed (``synchronous=FULL``): a kill -9 never loses an acknowledged entry.
   A link the log cannot accept is 409 (sign again over a checkpoint of this log); no answer
   within ``ANSWER_WAIT`` seconds is 503 (the entry may still be integrated: submitting the same
   bytes again is answered from step 3).

Answer: ``{"index", "leaf_hash" (hex), "checkpoint" (a signed note of a tree holding the entry),
"signer_index" (the index of the signer's key-registration entry, for the receipt)}``, and beside
them the proofs the client needs to check it (``with_proofs``: ``inclusion``, ``consistency``
from the tree the entry was signed over, ``signer``: the registration entry with its inclusion),
so a submission costs three requests (checkpoint, a consistency proof for the checkpoint memory,
the POST) instead of seven; a client facing a server that sends none fetches them.

The client side is ``submit_bundle``: fetch the checkpoint, verify it with the pinned log key (and
the checkpoint memory, ``ledger.trust``), sign a v2 entry over it once, post; a lost answer or
a transient failure (unreachable, 502-504) re-posts the same bytes after a jittered exponential
backoff, a rate limit (429) after its ``Retry-After`` (jittered, never doubled); a 409 re-signs
over a fresh checkpoint (after asking whether an earlier entry got in); all until an overall
deadline. The answer is checked: a checkpoint signed by
the log key, consistent with the one signed over, and an inclusion proof of the entry in it; with
the signer's registration and its inclusion proof, that is an offline receipt
(``Submitted.receipt``). All requests go through the bounded ``ledger.net.client.HttpClient``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import nacl.exceptions
import nacl.signing
from starlette.requests import Request
from starlette.responses import Response

from ledger.core import merkle
from ledger.core.bundle import Bundle
from ledger.core.canonical import canonical_json, loads_canonical
from ledger.core.encoding import b64_decode, b64_encode, hex_decode, hex_encode
from ledger.core.entries import (
    Entry,
    bundle_fields,
    chain_link,
    chain_problem,
    check_entry_shape,
    decode_entry,
    node_key_id,
    sign_entry,
    verify_signature,
)
from ledger.core.errors import (
    BadInput,
    CannotCheck,
    LedgerError,
    LedgerStateError,
    NotRegistered,
    SignatureError,
    VerificationFailed,
)
from ledger.core.note import (
    Checkpoint,
    NoteVerifier,
    format_checkpoint,
    open_note,
    parse_checkpoint,
    sign_note,
)
from ledger.core.receipt import Included, Receipt
from ledger.http.body import ClientGone, read_limited_body
from ledger.http.state import json_response, served
from ledger.log import Log
from ledger.net.client import BYTES, JSON, BadAnswer, HttpClient, oneline
from ledger.store.sqlite import Store, checkpoint_of

if TYPE_CHECKING:
    from ledger.trust import CheckpointMemory

MAX_BODY = 40 << 20
RATE_PER_SECOND = 1.0  # sustained submissions per node key
RATE_BURST = 10.0
RATE_ENV = "LEDGER_SUBMIT_RATE"  # "RATE[/BURST]" per node key, overriding the two above
BATCH_INTERVAL = 0.1  # seconds the sequencer gathers submissions before one transaction
BATCH_MAX = 256  # submissions integrated in one transaction (and one checkpoint) at most
ANSWER_WAIT = 60.0  # seconds a POST waits for its batch to commit before answering 503
SEQUENCER_IDLE = 5.0  # seconds without work after which the sequencer thread ends (restarts lazily)
BODY_CONTEXT = b"kernel-ledger submit body v1\n"
SIGNER_HEADER = "X-Ledger-Signer"
SIGNATURE_HEADER = "X-Ledger-Signature"
DEFAULT_TIMEOUT = 300.0  # seconds `submit` keeps trying in all
BACKOFF_BASE = 0.05  # seconds before the first retry (times a random factor)
BACKOFF_CAP = 10.0
MAX_ANSWER = 1 << 20


class Rejected(Exception):
    """A submission refused with an HTTP status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


@dataclass
class Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """A token bucket per key id: ``burst`` tokens, refilled at ``rate`` per second."""

    def __init__(
        self,
        rate: float | None = None,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = RATE_PER_SECOND if rate is None else rate
        self.burst = RATE_BURST if burst is None else burst
        self.clock = clock
        self.buckets: dict[bytes, Bucket] = {}

    def take(self, key: bytes) -> None:
        now = self.clock()
        b = self.buckets.setdefault(key, Bucket(self.burst, now))
        b.tokens = min(self.burst, b.tokens + (now - b.stamp) * self.rate)
        b.stamp = now
        if b.tokens < 1.0:
            wait = max(1, int((1.0 - b.tokens) / self.rate + 0.999))
            raise Rejected(429, "too many submissions for this key", {"Retry-After": str(wait)})
        b.tokens -= 1.0


def body_signature(node: nacl.signing.SigningKey, body: bytes) -> str:
    """The ``X-Ledger-Signature`` value for ``body``."""
    return b64_encode(node.sign(BODY_CONTEXT + hashlib.sha256(body).digest()).signature)


def auth_headers(node: nacl.signing.SigningKey, body: bytes) -> dict[str, str]:
    return {
        SIGNER_HEADER: hex_encode(node_key_id(bytes(node.verify_key))),
        SIGNATURE_HEADER: body_signature(node, body),
    }


def _signer(request: Request, log: Any) -> tuple[bytes, bytes, bytes]:
    """Step 0 before the body: (key id, public key, signature) from the headers, or Rejected."""
    kid_hex = request.headers.get(SIGNER_HEADER, "")
    sig_text = request.headers.get(SIGNATURE_HEADER, "")
    if not kid_hex or not sig_text:
        raise Rejected(401, f"a submission needs the {SIGNER_HEADER} and {SIGNATURE_HEADER} "
                            "headers (node key id, body signature)")
    if len(kid_hex) != 16 or not all(c in "0123456789abcdef" for c in kid_hex):
        raise Rejected(401, f"{SIGNER_HEADER} must be a node key id (16 lowercase hex digits)")
    try:
        sig = b64_decode(sig_text[:200], 64, "body signature")
    except BadInput as e:
        raise Rejected(401, str(e)) from e
    kid = hex_decode(kid_hex)
    row = log.store.key_row(kid)
    if row is None or row.revoked_at is not None:
        raise Rejected(403, f"signer {kid_hex} is not a registered, unrevoked node key")
    return kid, row.public, sig


async def _read_body(request: Request) -> bytes:
    return await read_limited_body(
        request, MAX_BODY, lambda: Rejected(413, f"submission over {MAX_BODY} bytes")
    )


def check_body_signature(public: bytes, sig: bytes, body: bytes) -> None:
    try:
        nacl.signing.VerifyKey(public).verify(
            BODY_CONTEXT + hashlib.sha256(body).digest(), sig
        )
    except nacl.exceptions.BadSignatureError as e:
        raise Rejected(403, f"{SIGNATURE_HEADER} does not verify for this body") from e


def parse_submission(body: bytes) -> tuple[bytes, Entry, dict[str, bytes]]:
    """(entry bytes, decoded entry, files) from a request body; Rejected(400) when malformed."""
    try:
        obj = loads_canonical(body, max_bytes=MAX_BODY, max_depth=4)
        if not isinstance(obj, dict) or set(obj) != {"entry", "files"}:
            raise BadInput('body must be {"entry": base64, "files": {path: base64}}')
        files_obj = obj["files"]
        if not isinstance(obj["entry"], str) or not isinstance(files_obj, dict):
            raise BadInput('body must be {"entry": base64, "files": {path: base64}}')
        data = b64_decode(obj["entry"], what="entry")
        entry = decode_entry(data)
        files = {
            str(p): b64_decode(v, what=f"file {p}") if isinstance(v, str) else b""
            for p, v in files_obj.items()
        }
        if any(not isinstance(v, str) for v in files_obj.values()):
            raise BadInput("each file must be base64 text")
    except BadInput as e:
        raise Rejected(400, str(e)) from e
    if entry.type != "bundle":
        raise Rejected(400, "only bundle entries can be submitted")
    try:
        check_entry_shape(entry.fields)
    except BadInput as e:
        raise Rejected(400, str(e)) from e
    return data, entry, files


@dataclass
class Pending:
    """A validated submission waiting for its batch; ``done`` gets the answer or a Rejected."""

    data: bytes
    entry: Entry
    leaf: bytes
    signer: bytes
    bundle: Bundle
    done: Future[dict[str, Any]] = field(default_factory=Future)


class Sequencer:
    """The one writer of submissions for a ledger in this process: a thread that takes the
    pending submissions in batches (``interval`` seconds after the first, or ``max_batch`` of
    them) and integrates each batch in one write transaction with one checkpoint. Its own
    connection (opened in its thread); it ends after ``SEQUENCER_IDLE`` seconds without work
    and is started again by the next submission. Other processes writing the same ledger
    (``seal``) queue on the store's write lock like any writer."""

    def __init__(
        self, home: Path, interval: float | None = None, max_batch: int | None = None
    ) -> None:
        self.home = home
        self.interval = BATCH_INTERVAL if interval is None else interval
        self.max_batch = BATCH_MAX if max_batch is None else max_batch
        self._cond = threading.Condition()
        self._queue: list[Pending] = []
        self._thread: threading.Thread | None = None
        self.batches = 0  # transactions committed (for tests and benchmarks)

    def enqueue(self, p: Pending) -> Future[dict[str, Any]]:
        with self._cond:
            self._queue.append(p)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-sequencer", daemon=True
                )
                self._thread.start()
            else:
                self._cond.notify()
        return p.done

    def _take(self) -> list[Pending] | None:
        """The next batch; None when idle for ``SEQUENCER_IDLE`` seconds (the thread then ends,
        under the lock, so a later ``enqueue`` starts a new one)."""
        with self._cond:
            idle_until = time.monotonic() + SEQUENCER_IDLE
            while not self._queue:
                left = idle_until - time.monotonic()
                if left <= 0:
                    self._thread = None
                    return None
                self._cond.wait(left)
            close_at = time.monotonic() + self.interval
            while len(self._queue) < self.max_batch:
                left = close_at - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            return batch

    def _run(self) -> None:
        log: Log | None = None
        try:
            while True:
                batch = self._take()
                if batch is None:
                    return
                try:
                    if log is None:
                        log = Log.open(self.home)
                    answers = integrate(log, batch)
                    self.batches += 1
                except Exception as e:  # every waiter gets an answer, never a hang
                    why = Rejected(503, f"the log could not integrate the batch "
                                        f"({oneline(str(e))}); submit the same entry again",
                                   {"Retry-After": "1"})
                    answers = [why] * len(batch)
                    if log is not None:
                        log.close()
                        log = None
                for p, a in zip(batch, answers, strict=True):
                    try:
                        if isinstance(a, Rejected):
                            p.done.set_exception(a)
                        else:
                            p.done.set_result(a)
                    except InvalidStateError:
                        pass  # its request gave up waiting (503); a retry finds the entry
        finally:
            if log is not None:
                log.close()


def existing_index(store: Store, digest: bytes, leaf: bytes) -> int | None:
    """The index of the entry with leaf hash ``leaf`` (a bundle of ``digest``), when the log
    holds it already."""
    for idx in store.indices_for_digest(digest):
        if store.leaf_hash(idx) == leaf:
            return idx
    return None


def integrate(log: Log, batch: Sequence[Pending]) -> list[dict[str, Any] | Rejected]:
    """Append the acceptable submissions of ``batch`` in one transaction with one checkpoint;
    per submission, its answer or why it was refused. Raises (and appends nothing) when the
    transaction itself fails."""
    signer = log.signer
    if signer is None:
        raise LedgerStateError("this ledger has no log key: it cannot accept submissions")
    store = log.store
    out: list[dict[str, Any] | Rejected] = []
    placed: dict[bytes, int] = {}  # leaf hash -> index, this batch
    roots: dict[int, bytes] = {}  # log roots at the sizes entries of this batch name

    def root_at(size: int) -> bytes:
        if size not in roots:
            roots[size] = store.root(size)  # a committed size: before this transaction's entries
        return roots[size]

    note: bytes | None = None
    with store.writer() as w:
        base = w.size
        for p in batch:
            digest = p.bundle.digest
            index: int | None = placed.get(p.leaf)
            if index is None:
                index = existing_index(store, digest, p.leaf)
            if index is not None:
                out.append({"index": index})
                continue
            row = store.key_row(p.signer)
            if row is None or row.revoked_at is not None:
                out.append(Rejected(403, f"signer {hex_encode(p.signer)} is not a registered, "
                                         "unrevoked node key"))
                continue
            size = p.entry.prev_size
            if size > base and size != w.size:
                out.append(Rejected(409, f"the entry names a tree of size {size}, larger than "
                                         f"this log ({base}); sign again over its checkpoint",
                                    {"X-Tree-Size": str(base)}))
                continue
            problem = chain_problem(p.entry, w.size, w.root(), root_at)
            if problem is not None:
                out.append(Rejected(409, f"the log cannot take this entry at {w.size}: {problem}; "
                                         "sign again over a checkpoint of this log",
                                    {"X-Tree-Size": str(w.size)}))
                continue
            w.put_blobs((f.digest, f.data) for f in p.bundle.files)
            index, _lh = w.append_bundle(p.data, digest)
            placed[p.leaf] = index
            out.append({"index": index, "signer_index": row.registered_at})
        if w.size > base:
            text = format_checkpoint(Checkpoint(log.origin, w.size, w.root(), ()))
            note = sign_note(text, [signer])
            w.put_checkpoint(note, w.size)
    # committed: now the answers may go out
    if note is None:
        note = store.checkpoint()
    for p, a in zip(batch, out, strict=True):
        if isinstance(a, dict):
            a["leaf_hash"] = hex_encode(p.leaf)
            a["checkpoint"] = note.decode("utf-8")
            if "signer_index" not in a:
                row = store.key_row(p.signer)
                a["signer_index"] = row.registered_at if row is not None else None
    return out


def rate_from_env() -> tuple[float | None, float | None]:
    """(rate, burst) from ``LEDGER_SUBMIT_RATE`` ("RATE" or "RATE/BURST"), else (None, None);
    a malformed value is ignored (the defaults apply)."""
    text = os.environ.get(RATE_ENV, "")
    try:
        rate, _, burst = text.partition("/")
        r, b = float(rate), float(burst) if burst else None
    except ValueError:
        return None, None
    if not 0 < r < 1e9 or (b is not None and not 1 <= b < 1e9):
        return None, None
    return r, b


@dataclass(frozen=True)
class Intake:
    """What accepting submissions needs, made once per app and kept on ``Served.intake``: the
    log (with its key, read in the event loop's thread), the per-signer rate limiter and the
    sequencer (the one writer), together, so none can be read before the others are set."""

    log: Log
    limiter: RateLimiter
    sequencer: Sequencer


def _intake(request: Request) -> Intake:
    s = served(request)
    if s.intake is None:
        log = Log.open(s.home)
        if log.signer is None:
            log.close()
            raise Rejected(503, "this ledger has no log key: it cannot accept submissions")
        s.intake = Intake(log, RateLimiter(*rate_from_env()), Sequencer(s.home))
    return s.intake


def validate(
    log: Log, limiter: RateLimiter, body: bytes, sender: bytes | None = None
) -> Pending | dict[str, Any]:
    """Steps 1 to 6 of the module docstring on an already size-capped (and, with ``sender``,
    authenticated) ``body``: the submission to integrate, or (step 3) the answer for an entry
    the log holds already."""
    if log.signer is None:
        raise Rejected(503, "this ledger has no log key: it cannot accept submissions")
    data, entry, files = parse_submission(body)
    if entry.origin != log.origin:
        raise Rejected(400, f"entry is for origin {entry.origin!r}, not {log.origin!r}")
    kid = hex_decode(str(entry.signer))
    if sender is not None and kid != sender:
        raise Rejected(403, f"the entry's signer is not the {SIGNER_HEADER} key")
    leaf = merkle.leaf_hash(data)
    store = log.store
    known = existing_index(store, hex_decode(str(entry.bundle_digest)), leaf)
    if known is not None:
        row = store.key_row(kid)
        return {"index": known, "leaf_hash": hex_encode(leaf),
                "checkpoint": store.checkpoint().decode("utf-8"),
                "signer_index": row.registered_at if row is not None else None}
    row = store.key_row(kid)
    if row is None or row.revoked_at is not None:
        raise Rejected(403, f"signer {hex_encode(kid)} is not a registered, unrevoked node key")
    try:
        verify_signature(entry.fields, row.public, data)
    except SignatureError as e:
        raise Rejected(403, str(e)) from e
    limiter.take(kid)
    try:
        bundle = Bundle.from_files(files)
    except BadInput as e:
        raise Rejected(422, f"the files are not a valid bundle: {e}") from e
    if bundle.manifest.decode("utf-8") != entry.manifest:
        raise Rejected(422, "the files do not hash to the entry's manifest")
    if hex_encode(bundle.digest) != entry.bundle_digest:
        raise Rejected(422, "the manifest does not hash to the entry's bundle digest")
    return Pending(data, entry, leaf, kid, bundle)


def accept(
    log: Log, limiter: RateLimiter, body: bytes, sender: bytes | None = None,
    sequencer: Sequencer | None = None, wait: float | None = None,
) -> dict[str, Any]:
    """Validate ``body`` and integrate it (a batch of one without ``sequencer``); the answer
    once committed. For callers outside the event loop (tests, tools)."""
    got = validate(log, limiter, body, sender)
    if isinstance(got, dict):
        return got
    if sequencer is None:
        [a] = integrate(log, [got])
        if isinstance(a, Rejected):
            raise a
        return a
    return sequencer.enqueue(got).result(ANSWER_WAIT if wait is None else wait)


def with_proofs(store: Store, answer: dict[str, Any], signed_over: int | None) -> dict[str, Any]:
    """``answer`` with, beside its fields, what the client would otherwise fetch to check it
    (four GETs): ``inclusion`` (the entry's proof in the answer's checkpoint), ``consistency``
    (``{"old_size", "hashes"}`` from the tree the entry was signed over, when smaller) and
    ``signer`` (``{"index", "entry_b64", "inclusion"}``: the signer's registration). Proof
    hashes are base64, as in SPEC 6. The client checks them as it checks fetched ones; where they
    cannot be made, the answer goes without them (the entry is committed: never an error now)."""
    try:
        size = checkpoint_of(str(answer["checkpoint"]).encode("utf-8")).size
        index = int(answer["index"])
        if signed_over is None:  # an entry the log held already: read what it was signed over
            signed_over = decode_entry(store.entry(index)).prev_size
        extra: dict[str, Any] = {
            "inclusion": [b64_encode(h) for h in store.inclusion_proof(index, size)]
        }
        if 0 < signed_over < size:
            extra["consistency"] = {
                "old_size": signed_over,
                "hashes": [b64_encode(h) for h in store.consistency_proof(signed_over, size)],
            }
        reg = answer.get("signer_index")
        if isinstance(reg, int) and 0 <= reg < size:
            extra["signer"] = {
                "index": reg, "entry_b64": b64_encode(store.entry(reg)),
                "inclusion": [b64_encode(h) for h in store.inclusion_proof(reg, size)],
            }
    except (LedgerError, KeyError, TypeError, ValueError):
        return answer
    return {**answer, **extra}


async def submit_endpoint(request: Request) -> Response:
    try:
        intake = _intake(request)
        kid, public, sig = _signer(request, intake.log)
        body = await _read_body(request)
        check_body_signature(public, sig, body)
        got = validate(intake.log, intake.limiter, body, kid)
        if isinstance(got, dict):
            return json_response(with_proofs(intake.log.store, got, None))
        future = intake.sequencer.enqueue(got)
        try:
            out = await asyncio.wait_for(asyncio.wrap_future(future), ANSWER_WAIT)
        except TimeoutError:
            raise Rejected(503, f"not integrated within {ANSWER_WAIT:g} s; it may still be: "
                                "submit the same entry again", {"Retry-After": "1"}) from None
        out = with_proofs(intake.log.store, out, got.entry.prev_size)
    except Rejected as e:
        headers = dict(e.headers)
        if e.status in (401, 403, 413):
            headers["Connection"] = "close"  # the rest of an unread body is not worth reading
        return json_response({"error": str(e)}, e.status, headers)
    except ClientGone:
        return Response(status_code=400)  # nobody is listening: no answer, no traceback
    return json_response(out)


# --- client -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submitted:
    """A submission the log integrated, checked: ``checkpoint`` is signed by the log key and
    consistent with the tree the entry was signed over (``signed_over``), ``inclusion`` proves the
    entry in it, and ``signer`` (when the server named it) is the signer's key registration with
    its inclusion proof in the same tree: together an offline receipt (``receipt()``)."""

    index: int
    leaf_hash: bytes
    entry: bytes
    checkpoint: bytes
    attempts: int
    origin: str = ""
    inclusion: tuple[bytes, ...] = ()
    signer: Included | None = None
    signed_over: int = 0
    memory: str = ""
    signed: int = 1  # entries signed for it (more than one only after a 409)
    retried: tuple[str, ...] = ()  # why each earlier attempt failed

    def receipt(self) -> Receipt:
        if self.signer is None:
            raise CannotCheck("the server named no key registration for the signer, so no "
                              "offline receipt can be written (`ledger receipt write` on the log)")
        return Receipt(
            self.origin, Included(self.index, self.entry, self.inclusion), self.checkpoint,
            self.signer,
        )


def chained_fields(
    bundle: Bundle, extra: Mapping[str, Any], cp: Checkpoint, kid: bytes, now: str
) -> dict[str, Any]:
    """The fields of a (v2) bundle entry signed over the verified remote checkpoint ``cp``."""
    chain = {"origin": cp.origin, "time": now, **chain_link(cp.size, cp.root)}
    return bundle_fields(chain, bundle, extra, kid)


def _verified(note: bytes, vkey: NoteVerifier, what: str) -> Checkpoint:
    try:
        cp = parse_checkpoint(open_note(note, [vkey]).text)
    except SignatureError:
        raise
    except BadInput as e:
        raise BadAnswer(f"{what} is not a signed checkpoint note: {oneline(str(e))}") from e
    if cp.origin != vkey.name:
        raise VerificationFailed(f"{what} is for origin {cp.origin!r}, not {vkey.name!r}")
    return cp


def _proof(http: HttpClient, path: str, params: list[tuple[str, str]]) -> list[bytes]:
    got = _proof_or_none(http, path, params, absent_ok=False)
    if got is None:  # not reached: only an absent_ok answer is None
        raise CannotCheck(f"{http.url(path)}: no proof")
    return got


def _proof_or_none(
    http: HttpClient, path: str, params: list[tuple[str, str]], absent_ok: bool
) -> list[bytes] | None:
    """The proof hashes the server answers; with ``absent_ok``, None when it answers 404 (it
    does not hold the tree asked for)."""
    a = http.get(path, MAX_ANSWER, params, types=JSON)
    if a.status == 404 and absent_ok:
        return None
    if a.status != 200:
        raise http.status_error(a)
    try:
        hashes = loads_json(a.body)["hashes"]
        if not isinstance(hashes, list) or len(hashes) > 64:
            raise ValueError("not a list of at most 64 hashes")
        return [b64_decode(h, 32, "proof hash") for h in hashes]
    except (ValueError, KeyError, TypeError, BadInput) as e:
        raise BadAnswer(f"{a.url}: not a SPEC 6 proof ({oneline(str(e))})") from e


def _remember(
    http: HttpClient, note: bytes, vkey: NoteVerifier, memory: CheckpointMemory | None,
    known: Mapping[tuple[int, int], list[bytes]] | None = None,
) -> str:
    """Show ``note`` (verified) to the checkpoint memory, proving consistency from the server
    (or with ``known``: proofs already verified, by (old, new) size)."""
    if memory is None:
        return ""
    from ledger.trust import guard

    size = checkpoint_of(note).size

    def prove(old: int, new: int) -> list[bytes] | None:
        if known is not None and (old, new) in known:
            return known[old, new]
        # ``note`` may be older than the memory while the server holds the newer tree (another
        # submission of this node remembered a later batch's checkpoint first): it proves that;
        # a server that does not hold it (404) is behind the memory (trust.Unproven says so)
        return _proof_or_none(http, "api/v1/proof/consistency",
                              [("old", str(old)), ("new", str(new))], absent_ok=new > size)

    return guard(note, vkey, (), 0, memory, prove,
                 f"{http.base} serves an older tree: submit to a server that holds the newer one")


def submit_bundle(
    url: str,
    bundle: Bundle,
    extra: Mapping[str, Any],
    node: nacl.signing.SigningKey,
    vkey: NoteVerifier,
    client: httpx.Client | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    memory: CheckpointMemory | None = None,
) -> Submitted:
    """Sign ``bundle`` over the server's verified checkpoint, submit it, wait for its inclusion.

    The entry is signed once; a lost answer, a rate limit (429) and transient failures
    (unreachable, a timeout, 502/503/504, an HTML page) re-post the same bytes (the server answers
    an entry it holds with its index, so this never makes a second entry); a 409 (the log cannot
    take the tree the entry names) re-signs over a fresh checkpoint, after asking whether an
    earlier entry got in. Retries wait ``min(BACKOFF_CAP, BACKOFF_BASE * 2**k)`` seconds times a
    random factor in [0.5, 1.5), ``k`` counting the failed attempts (a 429 waits its
    ``Retry-After`` times a factor in [1, 1.5) and does not grow ``k``), until ``timeout``
    seconds have passed in all; then ``CannotCheck`` with the last reason. With ``memory``, every
    checkpoint seen is compared with the checkpoint memory (``ledger.trust``).
    """
    from ledger.log import utc_now

    http = HttpClient(url, "the log server", timeout=timeout, client=client)
    deadline = time.monotonic() + timeout
    kid = node_key_id(bytes(node.verify_key))
    files = {f.path: b64_encode(f.data) for f in bundle.files}
    sent: list[tuple[bytes, bytes, Checkpoint]] = []  # (entry, body, tree signed over)
    current: tuple[bytes, bytes, Checkpoint] | None = None
    attempt = 0
    throttled = 0  # attempts answered 429 (they do not grow the backoff)
    reason = ""  # the most telling failure so far (a deadline cut-off does not hide another)
    whys: list[str] = []
    try:
        while True:
            attempt += 1
            try:
                if current is None:
                    for old in sent[::-1]:  # after a 409: did an earlier entry get in after all?
                        if _already_in(http, old[0]) is not None:
                            current = old
                            break
                if current is None:
                    note = http.get_ok("checkpoint", MAX_ANSWER, types=BYTES).body
                    cp = _verified(note, vkey, http.url("checkpoint"))
                    _remember(http, note, vkey, memory)
                    entry = sign_entry(chained_fields(bundle, extra, cp, kid, utc_now()), node)
                    body = canonical_json({"entry": b64_encode(entry), "files": files})
                    current = (entry, body, cp)
                    sent.append(current)
                entry, body, cp = current
                headers = {"Content-Type": "application/json", **auth_headers(node, body)}
                r = http.post("api/v1/submit", body, MAX_ANSWER, headers, types=JSON)
                if r.status == 200:
                    done = _answer(http, r, entry, cp, vkey, kid, attempt, memory)
                    return replace(done, signed=len(sent), retried=tuple(whys))
                wait = _retry_after(r)
                if wait is None:
                    raise _client_error(r)
                if r.status == 409:
                    current = None  # sign again over a fresh checkpoint
                limited = r.status == 429
                why = f"HTTP {r.status}: {_message(r)}"
            except CannotCheck as e:
                wait, why, limited = 0.0, str(e), False
            whys.append(why)
            if not reason or "no complete answer in time" not in why:
                reason = why
            if limited:
                # the server said when: its Retry-After, spread over [1, 1.5) of it, not doubled
                # (a submission that lost the race for its key's next token is not failing;
                # doubling its waits starved it behind newer ones: 153 s in bench_submit.py)
                throttled += 1
                wait *= 1.0 + rand() / 2
            else:
                backoff = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(attempt - 1 - throttled, 30))
                wait = max(wait, backoff * (0.5 + rand()))
            if time.monotonic() + wait > deadline:
                raise CannotCheck(
                    f"gave up after {attempt} attempts in {timeout:g} s; the last: {reason}"
                )
            sleep(wait)
    finally:
        http.close()


def _answer(
    http: HttpClient,
    r: Any,
    entry: bytes,
    signed_over: Checkpoint,
    vkey: NoteVerifier,
    kid: bytes,
    attempts: int,
    memory: CheckpointMemory | None,
) -> Submitted:
    """Check the answer: a checkpoint signed by the log key, consistent with the tree the entry
    was signed over, an inclusion proof of the entry in it, and the signer's registration. The
    proofs come with the answer (``with_proofs``) or, from a server that sends none, by GET."""
    try:
        obj = loads_json(r.body)
        index = obj["index"]
        note = str(obj["checkpoint"]).encode("utf-8")
        signer_index = obj.get("signer_index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError("index is not an integer")
        inline_inclusion = _hashes_or_none(obj.get("inclusion"))
        cons = obj.get("consistency")
        inline_consistency = (
            _hashes_or_none(cons.get("hashes"))
            if isinstance(cons, dict) and cons.get("old_size") == signed_over.size else None
        )
        reg = obj.get("signer")
        inline_signer = None
        if isinstance(reg, dict) and reg.get("index") == signer_index:
            reg_hashes = _hashes_or_none(reg.get("inclusion"))
            if reg_hashes is not None:
                inline_signer = (b64_decode(str(reg["entry_b64"]), what="entry"), reg_hashes)
    except (ValueError, KeyError, TypeError, AttributeError, BadInput) as e:
        raise BadAnswer(f"the server's answer is not the submission JSON ({oneline(str(e))})") \
            from e
    cp = _verified(note, vkey, "the server's checkpoint")
    if not 0 <= index < cp.size:
        raise VerificationFailed(f"the server put the entry at {index}, past its checkpoint")
    if cp.size < signed_over.size or (cp.size == signed_over.size and cp.root != signed_over.root):
        raise VerificationFailed(
            f"the server's checkpoint (size {cp.size}) does not extend the one the entry was "
            f"signed over (size {signed_over.size})"
        )
    known: dict[tuple[int, int], list[bytes]] = {}
    if 0 < signed_over.size < cp.size:
        proof = inline_consistency
        if proof is None:
            proof = _proof(http, "api/v1/proof/consistency",
                           [("old", str(signed_over.size)), ("new", str(cp.size))])
        merkle.verify_consistency(signed_over.size, cp.size, signed_over.root, cp.root, proof)
        known[signed_over.size, cp.size] = proof
    leaf = merkle.leaf_hash(entry)
    hashes = inline_inclusion
    if hashes is None:
        hashes = _proof(http, "api/v1/proof/inclusion",
                        [("index", str(index)), ("size", str(cp.size))])
    merkle.verify_inclusion(leaf, index, cp.size, hashes, cp.root)
    signer = None
    if isinstance(signer_index, int) and not isinstance(signer_index, bool):
        signer = _registration(http, signer_index, kid, cp, vkey, index, inline_signer)
    account = _remember(http, note, vkey, memory, known)
    return Submitted(index, leaf, entry, note, attempts, cp.origin, tuple(hashes), signer,
                     signed_over.size, account)


def _hashes_or_none(value: Any) -> list[bytes] | None:
    """Proof hashes (base64, at most 64) sent with an answer; None when absent; BadInput when
    they are not that."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > 64:
        raise BadInput("proof hashes are not a list of at most 64")
    if not all(isinstance(h, str) for h in value):
        raise BadInput("proof hashes are not base64 text")
    return [b64_decode(h, 32, "proof hash") for h in value]


def _registration(
    http: HttpClient, index: int, kid: bytes, cp: Checkpoint, vkey: NoteVerifier,
    entry_index: int, inline: tuple[bytes, list[bytes]] | None = None,
) -> Included:
    """The signer's key-registration entry at ``index`` (before the entry at ``entry_index``,
    signed by the log key ``vkey``, of the node's key), checked, with its inclusion proof (sent
    with the answer, or fetched)."""
    if not 0 <= index < cp.size:
        raise VerificationFailed(f"the server names a registration at {index}, past its tree")
    if inline is not None:
        data, hashes = inline
    else:
        a = http.get_ok(f"api/v1/entries/{index}", MAX_ANSWER, types=JSON)
        try:
            data = b64_decode(str(loads_json(a.body)["entry_b64"]), what="entry")
        except (ValueError, KeyError, TypeError, BadInput) as e:
            raise BadAnswer(f"{a.url}: not an entry ({oneline(str(e))})") from e
        hashes = _proof(http, "api/v1/proof/inclusion",
                        [("index", str(index)), ("size", str(cp.size))])
    try:
        reg = decode_entry(data)
    except BadInput as e:
        raise BadAnswer(f"the signer's registration {index} is not an entry "
                        f"({oneline(str(e))})") from e
    if reg.type != "key-registration" or reg.key_id != hex_encode(kid):
        raise VerificationFailed(f"entry {index} is not the registration of key {hex_encode(kid)}")
    # what an offline verifier of the receipt checks (verify.integrity), so a lying server
    # cannot make `ledger submit` write a receipt that then fails: the log's signature, the
    # node's own public key, and a registration before the entry
    try:
        verify_signature(reg.fields, vkey.public, data)
        public = b64_decode(str(reg.public_key), 32, "registered public key")
    except BadInput as e:
        raise VerificationFailed(f"entry {index}: {e}") from e
    if node_key_id(public) != kid:
        raise VerificationFailed(f"entry {index} registers another public key than the node's")
    if index >= entry_index:
        raise VerificationFailed(
            f"the server names a registration at {index}, not before the entry at {entry_index}"
        )
    merkle.verify_inclusion(merkle.leaf_hash(data), index, cp.size, hashes, cp.root)
    return Included(index, data, tuple(hashes))


def _retry_after(r: Any) -> float | None:
    """Seconds to wait before retrying the answer ``r``, or None when it is final."""
    if r.status == 409 and "replay" not in _message(r):
        return 0.0
    if r.status == 429:
        value = r.headers.get("retry-after", "1").strip()
        return float(int(value)) if value.isascii() and value.isdigit() and len(value) < 6 else 1.0
    if r.status in (502, 503, 504):
        return 0.0
    return None


def _message(r: Any) -> str:
    try:
        msg = json.loads(r.body).get("error", "")
        text = msg if isinstance(msg, str) else ""
    except (ValueError, AttributeError):
        text = r.snippet()
    return oneline(text or r.snippet(), 300)


def _already_in(http: HttpClient, entry: bytes) -> int | None:
    """The index of ``entry`` when the server's log holds it already (a lost answer)."""
    leaf = hex_encode(merkle.leaf_hash(entry))
    a = http.get(f"api/v1/lookup/{leaf}", MAX_ANSWER, types=JSON, ok=(200,))
    if a.status != 200:
        return None
    try:
        obj = loads_json(a.body)
        index = obj["index"]
        if not isinstance(index, int) or obj.get("leaf_hash") != leaf:
            return None
        return index
    except (ValueError, KeyError, TypeError):
        return None


def loads_json(data: bytes) -> Any:
    return json.loads(data)


def _client_error(r: Any) -> LedgerError:
    msg = f"the server refused the submission (HTTP {r.status}): {_message(r)}"
    if r.status in (400, 413, 422, 409):
        return BadInput(msg)
    if r.status == 403 and "not a registered, unrevoked node key" in msg:
        return NotRegistered(msg)  # exit 2 with the operator's command (ledger.onboard)
    if r.status in (401, 403):
        return VerificationFailed(msg)
    return CannotCheck(msg)


def read_vkey(text_or_file: str) -> NoteVerifier:
    from ledger.core.note import parse_vkey

    p = Path(text_or_file)
    try:
        if p.is_file():
            text_or_file = p.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read the verifier key file {p}") from e
    return parse_vkey(text_or_file.strip())


def cosign_receipt(
    path: Path, url: str, vkey: NoteVerifier, client: httpx.Client | None = None
) -> tuple[bool | None, str]:
    """Issue 14: with witnesses configured (the trust policy), bring the receipt at ``path`` to
    the server's newest checkpoint carrying their quorum (``ledger receipt refresh``).

    (True, account) when it now carries the quorum; (None, why) when no witnesses are configured;
    (False, why) when it could not be (most often: the log has not yet asked its witnesses to
    cosign the checkpoint this submission made; the receipt is then left as written)."""
    from ledger import trust
    from ledger.refresh import refresh_receipt

    _policy, witnesses, need = trust.resolve(None, [], None)
    if not witnesses or need == 0:
        return None, ("no witnesses configured (trust policy): the receipt carries the log's "
                      "signature only")
    from ledger.cosign import COSIGN_WAIT, await_quorum

    await_quorum(url, witnesses, need, 0, COSIGN_WAIT, client=client)  # the server's cosigner
    try:
        # no checkpoint memory here: a checkpoint not yet cosigned is no evidence of a split view
        done = refresh_receipt(path, url, vkey, witnesses, need, None, client=client)
    except LedgerError as e:
        return False, (
            f"receipt not cosigned ({oneline(str(e), 600)}); run `ledger receipt refresh "
            f"{path} --server {url}` later"
        )
    return True, (f"receipt cosigned: {done.cosignatures} cosignature(s) on the checkpoint of "
                  f"size {done.new_size}")

