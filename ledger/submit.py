"""Shared sealing: a node submits a signed bundle entry to a remote log (SPEC 9 server, issue 5).

Request: ``POST /api/v1/submit`` with the canonical JSON body ``{"entry": base64(entry bytes),
"files": {path: base64(file bytes)}}`` (at most ``MAX_BODY`` bytes). Enabled only by ``ledger serve
--accept-submissions`` on a ledger holding its log key. The server, in order:

1. reads the body with a size cap (413) and parses it strictly (400);
2. decodes the entry (400): a ``bundle`` entry of this log's origin;
3. checks the signer is registered and not revoked, and the node signature (403);
4. spends a token of the signer's rate bucket (429 with ``Retry-After``);
5. rebuilds the bundle from the files and checks it against the entry's manifest and digest (422);
6. inside one write transaction: the entry must chain to the current tree (``prev_size``,
   ``prev_root``; else 409 so the client re-signs), must not repeat an entry of the log (409),
   then its blobs and the entry are appended and a new checkpoint is signed with the log key.

Answer: ``{"index", "leaf_hash" (hex), "checkpoint" (the new signed note)}``.
The client side is ``submit_bundle``: fetch and verify the checkpoint, sign, post, re-sign on 409.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nacl.signing
from starlette.requests import Request
from starlette.responses import Response

from ledger import merkle
from ledger.bundle import Bundle
from ledger.canonical import canonical_json, loads_canonical
from ledger.encoding import b64_decode, b64_encode
from ledger.entries import (
    bundle_fields,
    decode_entry,
    node_key_id,
    sign_entry,
    verify_signature,
)
from ledger.errors import BadInput, CannotCheck, LedgerError, SignatureError, VerificationFailed
from ledger.httpbody import read_limited_body
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
MAX_RETRIES = 5


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


async def _read_body(request: Request) -> bytes:
    return await read_limited_body(
        request, MAX_BODY, lambda: Rejected(413, f"submission over {MAX_BODY} bytes")
    )


def parse_submission(body: bytes) -> tuple[bytes, dict[str, Any], dict[str, bytes]]:
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
    if entry["type"] != "bundle":
        raise Rejected(400, "only bundle entries can be submitted")
    return data, entry, files


def _log(request: Request) -> Any:
    from ledger.log import Log
    from ledger.server import served

    s = served(request)
    log = s.extra.get("log")
    if log is None:
        log = Log.open(s.home)
        if log.signer is None:
            raise Rejected(503, "this ledger has no log key: it cannot accept submissions")
        s.extra["log"] = log
        s.extra["limiter"] = RateLimiter()
    return log


def accept(log: Any, limiter: RateLimiter, body: bytes) -> dict[str, Any]:
    """Steps 2 to 6 of the module docstring on an already size-capped ``body``."""
    data, entry, files = parse_submission(body)
    if entry["origin"] != log.origin:
        raise Rejected(400, f"entry is for origin {entry['origin']!r}, not {log.origin!r}")
    kid = bytes.fromhex(entry["signer"])
    row = log.store.key_row(kid)
    if row is None or row[4] is not None:
        raise Rejected(403, f"signer {kid.hex()} is not a registered, unrevoked node key")
    try:
        verify_signature(entry, row[2])
    except SignatureError as e:
        raise Rejected(403, str(e)) from e
    limiter.take(kid)
    try:
        bundle = Bundle.from_files(files)
    except BadInput as e:
        raise Rejected(422, f"the files are not a valid bundle: {e}") from e
    if bundle.manifest.decode("utf-8") != entry["manifest"]:
        raise Rejected(422, "the files do not hash to the entry's manifest")
    if bundle.digest.hex() != entry["bundle_digest"]:
        raise Rejected(422, "the manifest does not hash to the entry's bundle digest")
    leaf = merkle.leaf_hash(data)
    store = log.store
    with store.writer() as w:
        root = w.root()
        if entry["prev_size"] != w.size or entry["prev_root"] != root.hex():
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
        note = sign_note(text, [log.signer])
        w.put_checkpoint(note, w.size)
    return {"index": index, "leaf_hash": leaf.hex(), "checkpoint": note.decode("utf-8")}


async def submit_endpoint(request: Request) -> Response:
    from ledger.server import json_response, served

    try:
        body = await _read_body(request)
        log = _log(request)
        out = accept(log, served(request).extra["limiter"], body)
    except Rejected as e:
        return json_response({"error": str(e)}, e.status, e.headers)
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
) -> Submitted:
    """Sign ``bundle`` against the server's verified checkpoint and submit it; re-sign on 409."""
    from ledger.log import utc_now

    base = url.rstrip("/")
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(120.0, connect=10.0))
    kid = node_key_id(bytes(node.verify_key))
    files = {f.path: b64_encode(f.data) for f in bundle.files}
    try:
        for attempt in range(1, MAX_RETRIES + 1):
            note = _get(http, f"{base}/checkpoint").content
            cp = parse_checkpoint(open_note(note, [vkey]).text)
            entry = sign_entry(chained_fields(bundle, extra, cp, kid, utc_now()), node)
            body = canonical_json({"entry": b64_encode(entry), "files": files})
            try:
                r = http.post(
                    f"{base}/api/v1/submit",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
            except httpx.HTTPError as e:
                raise CannotCheck(f"cannot reach {base}: {e}") from e
            if r.status_code == 409 and "replay" not in r.text:
                continue
            if r.status_code == 429:
                time.sleep(min(30, int(r.headers.get("retry-after", "1") or 1)))
                continue
            if r.status_code != 200:
                raise _client_error(r)
            return _answer(http, base, r, entry, vkey, attempt)
        raise CannotCheck(f"the log kept moving: gave up after {MAX_RETRIES} attempts")
    finally:
        if own:
            http.close()


def _get(http: httpx.Client, url: str) -> httpx.Response:
    try:
        r = http.get(url)
    except httpx.HTTPError as e:
        raise CannotCheck(f"cannot reach {url}: {e}") from e
    if r.status_code != 200 or len(r.content) > (1 << 20):
        raise CannotCheck(f"{url}: HTTP {r.status_code}")
    return r


def _client_error(r: httpx.Response) -> LedgerError:
    try:
        msg = str(r.json().get("error", r.text))
    except ValueError:
        msg = r.text
    msg = f"the server refused the submission (HTTP {r.status_code}): {msg[:300]}"
    if r.status_code in (400, 413, 422, 409):
        return BadInput(msg)
    if r.status_code == 403:
        return VerificationFailed(msg)
    return CannotCheck(msg)


def _answer(
    http: httpx.Client,
    base: str,
    r: httpx.Response,
    entry: bytes,
    vkey: NoteVerifier,
    attempts: int,
) -> Submitted:
    """Check the answer: a checkpoint signed by the log key and an inclusion proof of the entry
    in that very tree."""
    try:
        obj = r.json()
        index = int(obj["index"])
        note = str(obj["checkpoint"]).encode("utf-8")
    except (ValueError, KeyError, TypeError) as e:
        raise CannotCheck("the server's answer is not the submission JSON") from e
    cp = parse_checkpoint(open_note(note, [vkey]).text)
    if not 0 <= index < cp.size:
        raise VerificationFailed(f"the server put the entry at {index}, past its checkpoint")
    leaf = merkle.leaf_hash(entry)
    proof = _get(http, f"{base}/api/v1/proof/inclusion?index={index}&size={cp.size}")
    try:
        hashes = [b64_decode(h, 32, "proof hash") for h in proof.json()["hashes"]]
    except (ValueError, KeyError, TypeError) as e:
        raise CannotCheck("the server's inclusion proof is not SPEC 6 JSON") from e
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
