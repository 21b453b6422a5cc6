"""Shared sealing: a node submits a signed bundle entry to a remote log (SPEC 9 server, issue 5).

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
3. checks the signer is registered and not revoked, and the node signature (403);
4. spends a token of the signer's rate bucket (429 with ``Retry-After``);
5. rebuilds the bundle from the files and checks it against the entry's manifest and digest (422);
6. inside one write transaction: the entry must chain to the current tree (``prev_size``,
   ``prev_root``; else 409 so the client re-signs), must not repeat an entry of the log (409),
   then its blobs and the entry are appended and a new checkpoint is signed with the log key.

Answer: ``{"index", "leaf_hash" (hex), "checkpoint" (the new signed note)}``.
The client side is ``submit_bundle``: fetch and verify the checkpoint, sign, post; on contention
(409: the log moved on), a rate limit (429) or a transient failure (unreachable, 502-504), wait with
jittered exponential backoff and try again, re-signing against the new checkpoint, until an overall
deadline. All its requests go through the bounded ``ledger.httpclient.HttpClient``.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nacl.exceptions
import nacl.signing
from starlette.requests import Request
from starlette.responses import Response

from ledger import merkle
from ledger.bundle import Bundle
from ledger.canonical import canonical_json, loads_canonical
from ledger.encoding import b64_decode, b64_encode
from ledger.entries import (
    Entry,
    bundle_fields,
    check_entry_shape,
    decode_entry,
    node_key_id,
    sign_entry,
    verify_signature,
)
from ledger.errors import BadInput, CannotCheck, LedgerError, SignatureError, VerificationFailed
from ledger.httpbody import ClientGone, read_limited_body
from ledger.httpclient import BYTES, JSON, BadAnswer, HttpClient, oneline
from ledger.httpstate import json_response, served
from ledger.log import Log
from ledger.note import (
    Checkpoint,
    NoteVerifier,
    format_checkpoint,
    open_note,
    parse_checkpoint,
    sign_note,
)

MAX_BODY = 40 << 20
RATE_PER_SECOND = 1.0  # sustained submissions per node key
RATE_BURST = 10.0
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
        SIGNER_HEADER: node_key_id(bytes(node.verify_key)).hex(),
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
    kid = bytes.fromhex(kid_hex)
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


@dataclass(frozen=True)
class Intake:
    """What accepting submissions needs, made once per app and kept on ``Served.intake``: the
    log (with its key) and the per-signer rate limiter, together, so neither can be read before
    the other is set."""

    log: Log
    limiter: RateLimiter


def _intake(request: Request) -> Intake:
    s = served(request)
    if s.intake is None:
        log = Log.open(s.home)
        if log.signer is None:
            raise Rejected(503, "this ledger has no log key: it cannot accept submissions")
        s.intake = Intake(log, RateLimiter())
    return s.intake


def accept(
    log: Log, limiter: RateLimiter, body: bytes, sender: bytes | None = None
) -> dict[str, Any]:
    """Steps 1 to 6 of the module docstring on an already size-capped (and, with ``sender``,
    authenticated) ``body``."""
    signer = log.signer
    if signer is None:
        raise Rejected(503, "this ledger has no log key: it cannot accept submissions")
    data, entry, files = parse_submission(body)
    if entry.origin != log.origin:
        raise Rejected(400, f"entry is for origin {entry.origin!r}, not {log.origin!r}")
    kid = bytes.fromhex(str(entry.signer))
    if sender is not None and kid != sender:
        raise Rejected(403, f"the entry's signer is not the {SIGNER_HEADER} key")
    row = log.store.key_row(kid)
    if row is None or row.revoked_at is not None:
        raise Rejected(403, f"signer {kid.hex()} is not a registered, unrevoked node key")
    try:
        verify_signature(entry.fields, row.public)
    except SignatureError as e:
        raise Rejected(403, str(e)) from e
    limiter.take(kid)
    try:
        bundle = Bundle.from_files(files)
    except BadInput as e:
        raise Rejected(422, f"the files are not a valid bundle: {e}") from e
    if bundle.manifest.decode("utf-8") != entry.manifest:
        raise Rejected(422, "the files do not hash to the entry's manifest")
    if bundle.digest.hex() != entry.bundle_digest:
        raise Rejected(422, "the manifest does not hash to the entry's bundle digest")
    leaf = merkle.leaf_hash(data)
    store = log.store
    with store.writer() as w:
        root = w.root()
        if entry.prev_size != w.size or entry.prev_root != root.hex():
            raise Rejected(
                409,
                f"the log has moved on: size {w.size}, root {root.hex()}; sign again",
                {"X-Tree-Size": str(w.size)},
            )
        if store.has_leaf(leaf):
            raise Rejected(409, "this entry is in the log already (replay)")
        w.put_blobs((f.digest, f.data) for f in bundle.files)
        index = w.append(data, "bundle", bundle.digest)
        text = format_checkpoint(Checkpoint(log.origin, w.size, w.root(), ()))
        note = sign_note(text, [signer])
        w.put_checkpoint(note, w.size)
    return {"index": index, "leaf_hash": leaf.hex(), "checkpoint": note.decode("utf-8")}


async def submit_endpoint(request: Request) -> Response:
    try:
        intake = _intake(request)
        kid, public, sig = _signer(request, intake.log)
        body = await _read_body(request)
        check_body_signature(public, sig, body)
        out = accept(intake.log, intake.limiter, body, kid)
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
    index: int
    leaf_hash: bytes
    entry: bytes
    checkpoint: bytes
    attempts: int


def chained_fields(
    bundle: Bundle, extra: Mapping[str, Any], cp: Checkpoint, kid: bytes, now: str
) -> dict[str, Any]:
    """The fields of a bundle entry chained to the remote checkpoint ``cp``."""
    chain = {"origin": cp.origin, "time": now, "prev_size": cp.size, "prev_root": cp.root.hex()}
    return bundle_fields(chain, bundle, extra, kid)


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
) -> Submitted:
    """Sign ``bundle`` against the server's verified checkpoint and submit it.

    Contention (409, the log moved on), a rate limit (429) and transient failures (unreachable,
    a timeout, 502/503/504, an HTML page) are retried, re-signed against the new checkpoint,
    after ``min(BACKOFF_CAP, BACKOFF_BASE * 2**k)`` seconds times a random factor in [0.5, 1.5)
    (``Retry-After`` for a 429, when longer), until ``timeout`` seconds have passed in all; then
    ``CannotCheck`` with the last reason. Before re-signing after a failed POST, the server is
    asked whether the entry already got in, so a lost answer never makes a second entry.
    """
    from ledger.log import utc_now

    http = HttpClient(url, "the log server", timeout=timeout, client=client)
    deadline = time.monotonic() + timeout
    kid = node_key_id(bytes(node.verify_key))
    files = {f.path: b64_encode(f.data) for f in bundle.files}
    sent: list[bytes] = []
    attempt = 0
    reason = ""  # the most telling failure so far (a deadline cut-off does not hide another)
    try:
        while True:
            attempt += 1
            try:
                for entry in sent[-1:]:
                    index = _already_in(http, entry)
                    if index is not None:
                        return _answer(http, None, entry, vkey, attempt - 1, index)
                note = http.get_ok("checkpoint", MAX_ANSWER, types=BYTES).body
                try:
                    cp = parse_checkpoint(open_note(note, [vkey]).text)
                except SignatureError:
                    raise
                except BadInput as e:
                    raise BadAnswer(f"{http.url('checkpoint')} is not a signed checkpoint note: "
                                    f"{oneline(str(e))}") from e
                entry = sign_entry(chained_fields(bundle, extra, cp, kid, utc_now()), node)
                body = canonical_json({"entry": b64_encode(entry), "files": files})
                sent.append(entry)
                headers = {"Content-Type": "application/json", **auth_headers(node, body)}
                r = http.post("api/v1/submit", body, MAX_ANSWER, headers, types=JSON)
                if r.status == 200:
                    return _answer(http, r, entry, vkey, attempt)
                wait = _retry_after(r)
                if wait is None:
                    raise _client_error(r)
                why = f"HTTP {r.status}: {_message(r)}"
            except CannotCheck as e:
                wait, why = 0.0, str(e)
            if not reason or "no complete answer in time" not in why:
                reason = why
            backoff = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(attempt - 1, 30))
            wait = max(wait, backoff * (0.5 + rand()))
            if time.monotonic() + wait > deadline:
                raise CannotCheck(
                    f"gave up after {attempt} attempts in {timeout:g} s; the last: {reason}"
                )
            sleep(wait)
    finally:
        http.close()


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
    leaf = merkle.leaf_hash(entry).hex()
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
    if r.status in (401, 403):
        return VerificationFailed(msg)
    return CannotCheck(msg)


def _answer(
    http: HttpClient,
    r: Any,
    entry: bytes,
    vkey: NoteVerifier,
    attempts: int,
    index: int | None = None,
) -> Submitted:
    """Check the answer: a checkpoint signed by the log key and an inclusion proof of the entry
    in that very tree (with ``r`` None, the entry was found by lookup: the current checkpoint)."""
    try:
        if r is not None:
            obj = loads_json(r.body)
            index = int(obj["index"])
            note = str(obj["checkpoint"]).encode("utf-8")
        else:
            note = http.get_ok("checkpoint", MAX_ANSWER, types=BYTES).body
    except (ValueError, KeyError, TypeError) as e:
        raise BadAnswer("the server's answer is not the submission JSON") from e
    assert index is not None
    try:
        cp = parse_checkpoint(open_note(note, [vkey]).text)
    except SignatureError:
        raise
    except BadInput as e:
        raise BadAnswer(f"the server's checkpoint is malformed: {oneline(str(e))}") from e
    if not 0 <= index < cp.size:
        raise VerificationFailed(f"the server put the entry at {index}, past its checkpoint")
    leaf = merkle.leaf_hash(entry)
    proof = http.get_ok(
        "api/v1/proof/inclusion", MAX_ANSWER,
        [("index", str(index)), ("size", str(cp.size))], types=JSON,
    )
    try:
        hashes = [b64_decode(h, 32, "proof hash") for h in loads_json(proof.body)["hashes"]]
    except (ValueError, KeyError, TypeError, BadInput) as e:
        raise BadAnswer("the server's inclusion proof is not SPEC 6 JSON") from e
    merkle.verify_inclusion(leaf, index, cp.size, hashes, cp.root)
    return Submitted(index, leaf, entry, note, attempts)


def read_vkey(text_or_file: str) -> NoteVerifier:
    from ledger.note import parse_vkey

    p = Path(text_or_file)
    try:
        if p.is_file():
            text_or_file = p.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read the verifier key file {p}") from e
    return parse_vkey(text_or_file.strip())
