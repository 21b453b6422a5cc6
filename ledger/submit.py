"""Shared sealing, the client half: ``ledger submit`` sends a signed bundle entry to a remote log
(SPEC 4, 7, 9; issue 13). The server half is ``ledger.http.submit`` (its docstring has the
protocol); the wire format both share is ``ledger.core.submission``.

The client side is ``submit_bundle``: fetch the checkpoint, verify it with the pinned log key (and
the checkpoint memory, ``ledger.trust``), sign a v2 entry over it once, post; a lost answer or
a transient failure (unreachable, 502-504) re-posts the same bytes after a jittered exponential
backoff, a rate limit (429) after its ``Retry-After`` (jittered, never doubled); a 409 re-signs
over a fresh checkpoint (after asking whether an earlier entry got in); all until an overall
deadline. The answer is checked: a checkpoint signed by
the log key, consistent with the one signed over, and an inclusion proof of the entry in it; with
the signer's registration and its inclusion proof and the tree's revoked-key list, that is an
offline receipt (``Submitted.receipt``). An answer about the entry by which this key sealed the
bundle before (``Submitted.already``, issue 33 item 8) is taken only as this key's own signed
seal of the same bundle. All requests go through the bounded ``ledger.net.client.HttpClient``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import nacl.signing

from ledger.core import merkle
from ledger.core.bundle import Bundle
from ledger.core.canonical import canonical_json
from ledger.core.encoding import b64_decode, b64_encode, hex_encode
from ledger.core.entries import (
    bundle_fields,
    chain_link,
    decode_entry,
    node_key_id,
    sign_entry,
    verify_signature,
)
from ledger.core.errors import (
    BadInput,
    CannotCheck,
    LedgerError,
    NotRegistered,
    SignatureError,
    VerificationFailed,
)
from ledger.core.note import Checkpoint, NoteVerifier, note_text, open_note, parse_checkpoint
from ledger.core.receipt import Included, Receipt
from ledger.core.revoked import Revoked, from_json
from ledger.core.submission import auth_headers
from ledger.log import utc_now
from ledger.net.client import BYTES, JSON, BadAnswer, HttpClient, oneline
from ledger.refresh import fetch_status

if TYPE_CHECKING:
    from ledger.trust import CheckpointMemory

__all__ = ["Submitted", "auth_headers", "chained_fields", "cosign_receipt",
           "submit_bundle"]

DEFAULT_TIMEOUT = 300.0  # seconds `submit` keeps trying in all
BACKOFF_BASE = 0.05  # seconds before the first retry (times a random factor)
BACKOFF_CAP = 10.0
MAX_ANSWER = 1 << 20

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
    # the tree's revoked-key list and the signer's revocation in it (``refresh.fetch_status``)
    revoked: tuple[Revoked, ...] | None = None
    revocation: Included | None = None
    # issue 33 item 8: nothing was appended, this key had sealed the bundle as this entry
    already: bool = False

    def receipt(self) -> Receipt:
        if self.signer is None:
            raise CannotCheck("the server named no key registration for the signer, so no "
                              "offline receipt can be written (`ledger receipt write` on the log)")
        return Receipt(
            self.origin, Included(self.index, self.entry, self.inclusion), self.checkpoint,
            self.signer, self.revocation, revoked=self.revoked,
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

    size = parse_checkpoint(note_text(note)).size

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

    http = HttpClient(url, "the log server", timeout=timeout, client=client)
    deadline = time.monotonic() + timeout
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
                    current = _earlier_in(http, sent)
                if current is None:
                    current = _sign_over_fresh(http, bundle, extra, files, node, vkey, memory)
                    sent.append(current)
                entry, body, cp = current
                headers = {"Content-Type": "application/json", **auth_headers(node, body)}
                r = http.post("api/v1/submit", body, MAX_ANSWER, headers, types=JSON)
                if r.status == 200:
                    done = _answer(http, r, entry, cp, vkey, bytes(node.verify_key), attempt,
                                   memory)
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
            throttled += limited
            wait = _spread(wait, limited, attempt - throttled, rand)
            if time.monotonic() + wait > deadline:
                raise CannotCheck(
                    f"gave up after {attempt} attempts in {timeout:g} s; the last: {reason}"
                )
            sleep(wait)
    finally:
        http.close()


def _earlier_in(
    http: HttpClient, sent: list[tuple[bytes, bytes, Checkpoint]]
) -> tuple[bytes, bytes, Checkpoint] | None:
    """After a 409: an entry sent before that got in after all (newest first), else None."""
    for old in sent[::-1]:
        if _already_in(http, old[0]) is not None:
            return old
    return None


def _sign_over_fresh(
    http: HttpClient,
    bundle: Bundle,
    extra: Mapping[str, Any],
    files: dict[str, str],
    node: nacl.signing.SigningKey,
    vkey: NoteVerifier,
    memory: CheckpointMemory | None,
) -> tuple[bytes, bytes, Checkpoint]:
    """(entry, body, tree signed over): a new entry signed over the server's verified (and
    remembered) checkpoint."""
    note = http.get_ok("checkpoint", MAX_ANSWER, types=BYTES).body
    cp = _verified(note, vkey, http.url("checkpoint"))
    _remember(http, note, vkey, memory)
    kid = node_key_id(bytes(node.verify_key))
    entry = sign_entry(chained_fields(bundle, extra, cp, kid, utc_now()), node)
    return entry, canonical_json({"entry": b64_encode(entry), "files": files}), cp


def _spread(wait: float, limited: bool, failures: int, rand: Callable[[], float]) -> float:
    """Seconds to wait before the next attempt. A rate limit: the server said when, its
    Retry-After spread over [1, 1.5) of it, not doubled (a submission that lost the race for its
    key's next token is not failing; doubling its waits starved it behind newer ones: 153 s in
    bench_submit.py). Else ``min(BACKOFF_CAP, BACKOFF_BASE * 2**k)`` times [0.5, 1.5), ``k`` the
    attempts failed so far that were not rate limits, or ``wait`` if longer."""
    if limited:
        return wait * (1.0 + rand() / 2)
    backoff = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(failures - 1, 30))
    return max(wait, backoff * (0.5 + rand()))


def _answer(
    http: HttpClient,
    r: Any,
    entry: bytes,
    signed_over: Checkpoint,
    vkey: NoteVerifier,
    public: bytes,
    attempts: int,
    memory: CheckpointMemory | None,
) -> Submitted:
    """Check the answer: a checkpoint signed by the log key, consistent with the tree the entry
    was signed over, an inclusion proof of the entry in it, and the signer's registration. The
    proofs come with the answer (``with_proofs``) or, from a server that sends none, by GET.
    When this key had sealed the bundle before, the answer is about that entry (``_held``)."""
    kid = node_key_id(public)
    try:
        obj = loads_json(r.body)
        held = _held(obj, entry, public)
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
        listed = obj.get("revoked_keys")
        inline_revoked = None if listed is None else from_json(listed)
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
    already, entry = held != entry, held
    leaf = merkle.leaf_hash(entry)
    hashes = inline_inclusion
    if hashes is None:
        hashes = _proof(http, "api/v1/proof/inclusion",
                        [("index", str(index)), ("size", str(cp.size))])
    merkle.verify_inclusion(leaf, index, cp.size, hashes, cp.root)
    signer = None
    if isinstance(signer_index, int) and not isinstance(signer_index, bool):
        signer = _registration(http, signer_index, kid, cp, vkey, index, inline_signer)
    revoked, revocation = fetch_status(http, entry, cp, inline_revoked)
    account = _remember(http, note, vkey, memory, known)
    return Submitted(index, leaf, entry, note, attempts, cp.origin, tuple(hashes), signer,
                     signed_over.size, account, revoked=revoked, revocation=revocation,
                     already=already)


def _held(obj: Any, entry: bytes, public: bytes) -> bytes:
    """The entry an answer is about: ``entry``, or (issue 33 item 8: this node key had sealed
    the same bundle before, as another entry) the held entry the answer carries in
    ``entry_b64``, taken only as this key's own signed seal of the same bundle for the same
    log (VerificationFailed otherwise: a server cannot pass off another entry)."""
    text = obj.get("entry_b64")
    if text is None:
        return entry
    held = b64_decode(str(text), what="entry")
    if held == entry:
        return entry
    mine, theirs = decode_entry(entry), decode_entry(held)
    if (theirs.type, theirs.origin, theirs.bundle_digest, theirs.signer) != (
        mine.type, mine.origin, mine.bundle_digest, mine.signer
    ):
        raise VerificationFailed(
            "the server answered with another entry than this key's seal of this bundle"
        )
    verify_signature(theirs.fields, public, held)
    return held


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

