"""Shared sealing, the server half: ``POST /api/v1/submit`` (SPEC 4, 7, 9; issue 13).

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
   submitting is idempotent, and no second entry is ever made of the same bytes); so is the
   same bundle signed again by the same key (issue 33 item 8: the answer then carries the held
   entry as ``entry_b64`` and ``"already_sealed": true``, ``existing_answer``);
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
from the tree the entry was signed over, ``signer``: the registration entry with its inclusion,
``revoked_keys``: the tree's revoked-key list, ``ledger.core.revoked``),
so a submission costs three requests (checkpoint, a consistency proof for the checkpoint memory,
the POST) instead of seven; a client facing a server that sends none fetches them.

The client is ``ledger.submit``; the wire format both share (headers, body signature, limit) is
``ledger.core.submission``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ledger.core import merkle
from ledger.core.bundle import Bundle
from ledger.core.canonical import loads_canonical
from ledger.core.encoding import b64_decode, b64_encode, hex_decode, hex_encode
from ledger.core.entries import (
    Entry,
    chain_problem,
    check_entry_shape,
    decode_entry,
    verify_signature,
)
from ledger.core.errors import BadInput, LedgerError, LedgerStateError, SignatureError
from ledger.core.note import sign_note
from ledger.core.revoked import to_json as revoked_json
from ledger.core.submission import (
    MAX_BODY,
    SIGNATURE_HEADER,
    SIGNER_HEADER,
    auth_headers,
    body_signature,
    body_signed_by,
)
from ledger.core.text import check_text
from ledger.http.body import ClientGone, read_limited_body
from ledger.http.state import json_response, served
from ledger.log import Log
from ledger.net.client import oneline
from ledger.revocation import checkpoint_body, revoked_at, revoked_list
from ledger.store import Store
from ledger.store.common import checkpoint_of

__all__ = [
    "MAX_BODY",
    "RateLimiter",
    "Rejected",
    "Sequencer",
    "accept",
    "auth_headers",
    "body_signature",
    "submit_endpoint",
    "validate",
    "with_proofs",
]

RATE_PER_SECOND = 1.0  # sustained submissions per node key
RATE_BURST = 10.0
RATE_ENV = "LEDGER_SUBMIT_RATE"  # "RATE[/BURST]" per node key, overriding the two above
BATCH_INTERVAL = 0.1  # seconds the sequencer gathers submissions before one transaction
BATCH_MAX = 256  # submissions integrated in one transaction (and one checkpoint) at most
ANSWER_WAIT = 60.0  # seconds a POST waits for its batch to commit before answering 503
SEQUENCER_IDLE = 5.0  # seconds without work after which the sequencer thread ends (restarts lazily)


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
    if row is None or revoked_at(log.store, row.key_id) is not None:
        raise Rejected(403, f"signer {kid_hex} is not a registered, unrevoked node key")
    return kid, row.public, sig


async def _read_body(request: Request) -> bytes:
    return await read_limited_body(
        request, MAX_BODY, lambda: Rejected(413, f"submission over {MAX_BODY} bytes")
    )


def check_body_signature(public: bytes, sig: bytes, body: bytes) -> None:
    if not body_signed_by(public, sig, body):
        raise Rejected(403, f"{SIGNATURE_HEADER} does not verify for this body")


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
        # the kernel's name and version as a contract's are (verify.contract, issue 33 item 7):
        # a node's entry is text from outside, shown to people from the log
        for k in ("name", "version"):
            check_text(entry.fields["kernel"][k], f"entry kernel.{k}")
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


def existing_index(
    store: Store, digest: bytes, leaf: bytes, signer: bytes | None = None
) -> int | None:
    """The index of the entry with leaf hash ``leaf`` (a bundle of ``digest``), when the log
    holds it already; with ``signer``, else of the entry by which that node key sealed the same
    bundle (another time, other bytes: issue 33 item 8, a re-submission is answered with it)."""
    held = store.indices_for_digest(digest)
    for idx in held:
        if store.leaf_hash(idx) == leaf:
            return idx
    want = None if signer is None else hex_encode(signer)
    for idx in held if want is not None else ():
        try:
            if decode_entry(store.entry(idx)).signer == want:
                return idx
        except BadInput:
            continue
    return None


def existing_answer(data: bytes, leaf: bytes) -> dict[str, Any]:
    """What an answer for the held entry ``data`` says beyond its index when the submission's
    own entry (leaf hash ``leaf``) is not that entry: its bytes, which the client checks are its
    own key's seal of the same bundle before taking them (``ledger.submit``)."""
    if merkle.leaf_hash(data) == leaf:
        return {}
    return {"leaf_hash": hex_encode(merkle.leaf_hash(data)), "entry_b64": b64_encode(data),
            "already_sealed": True}


def integrate(log: Log, batch: Sequence[Pending]) -> list[dict[str, Any] | Rejected]:
    """Append the acceptable submissions of ``batch`` in one transaction with one checkpoint;
    per submission, its answer or why it was refused. Raises (and appends nothing) when the
    transaction itself fails."""
    signer = log.signer
    if signer is None:
        raise LedgerStateError("this ledger has no log key: it cannot accept submissions")
    store = log.store
    out: list[dict[str, Any] | Rejected] = []
    # this batch's entries, (index, bytes), by leaf hash and by bundle digest + signer key id
    placed: dict[bytes, tuple[int, bytes]] = {}
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
            held = placed.get(p.leaf) or placed.get(digest + p.signer)
            if held is None:
                known = existing_index(store, digest, p.leaf, p.signer)
                held = None if known is None else (known, store.entry(known))
            if held is not None:
                out.append({"index": held[0], **existing_answer(held[1], p.leaf)})
                continue
            row = store.key_row(p.signer)
            if row is None or revoked_at(store, row.key_id) is not None:
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
            placed[p.leaf] = placed[digest + p.signer] = (index, p.data)
            out.append({"index": index, "signer_index": row.registered_at})
        if w.size > base:
            text = checkpoint_body(store, w.size, w.root())
            note = sign_note(text, [signer])
            w.put_checkpoint(note, w.size)
    # committed: now the answers may go out
    if note is None:
        note = store.checkpoint()
    for p, a in zip(batch, out, strict=True):
        if isinstance(a, dict):
            a.setdefault("leaf_hash", hex_encode(p.leaf))
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
    if isinstance(s.intake, Intake):
        return s.intake
    log = Log.open(s.home)
    if log.signer is None:
        log.close()
        raise Rejected(503, "this ledger has no log key: it cannot accept submissions")
    intake = Intake(log, RateLimiter(*rate_from_env()), Sequencer(s.home))
    s.intake = intake
    return intake


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
    known = existing_index(store, hex_decode(str(entry.bundle_digest)), leaf, kid)
    if known is not None:
        row = store.key_row(kid)
        return {"index": known, "leaf_hash": hex_encode(leaf),
                "checkpoint": store.checkpoint().decode("utf-8"),
                "signer_index": row.registered_at if row is not None else None,
                **existing_answer(store.entry(known), leaf)}
    row = store.key_row(kid)
    if row is None or revoked_at(store, row.key_id) is not None:
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
    (``{"old_size", "hashes"}`` from the tree the entry was signed over, when smaller),
    ``signer`` (``{"index", "entry_b64", "inclusion"}``: the signer's registration) and
    ``revoked_keys`` (the tree's revoked-key list, ``ledger.core.revoked``). Proof
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
        extra["revoked_keys"] = revoked_json(revoked_list(store, size))
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
