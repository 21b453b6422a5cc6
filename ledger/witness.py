"""A checkpoint witness and the log side that asks it to cosign (SPEC 9; C2SP tlog-witness and
tlog-cosignature/v1 through ``ledger.core.note.cosign`` / ``verify_cosignature``).

Witness side (``Witness``; its HTTP app is ``ledger.http.witness.make_witness_app``): a
directory holding ``witness.key`` (mode 0600), ``witness.vkey`` (the cosignature/v1 verifier
key, alg 0x04), ``logs.json`` (origin -> the log's verifier key) and ``checkpoints/`` (the
latest checkpoint cosigned per log).
``POST /add-checkpoint`` takes ``old <size>\\n``, the consistency proof (one base64 hash per
line), an empty line and the log's signed checkpoint note, and:

1. parses it with limits (400 when malformed);
2. finds the log by origin (404 when unknown) and verifies the log's signature (403);
3. refuses a checkpoint smaller than ``old`` (400), then, under an exclusive lock on
   ``.state.lock`` (check and persist are one step, across processes too), compares ``old`` with
   the size it last cosigned (409, ``Content-Type`` exactly ``text/x.tlog.size``, body its size and
   a newline, when they differ; 409 too for another root at the same size);
4. verifies the consistency proof from its last root (the empty tree's before the first) to the
   new one, in every case: no proof where none is due, a size-0 checkpoint only with the empty
   tree's root (422);
5. makes the cosignature over the text the log's signature covers, then stores the checkpoint
   (atomically: fsynced before the answer, so a kill -9 never loses a size it cosigned) and
   answers the line.

Log side (``request_cosignature``): send the log's latest checkpoint and a consistency proof from
the size the witness last saw (learning it from a 409), check the returned cosignature against the
witness's verifier key, and store the note with the cosignatures collected so far in the store's
meta (``ledger.core.cosigned.COSIGNED_META``), which ``GET /checkpoint`` then serves.
``ask_witnesses`` does that for each witness a trust policy names with a URL (``ledger seal``) and
says, per witness, why it did not cosign.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import nacl.signing

from ledger.core import merkle
from ledger.core.cosigned import COSIGNED_META, merge_cosignatures
from ledger.core.encoding import b64_decode, b64_encode, hex_encode
from ledger.core.errors import (
    BadInput,
    CannotCheck,
    KeyFileError,
    LedgerError,
    LedgerStateError,
    ProofError,
    SignatureError,
)
from ledger.core.fsutil import check_private_dir, private_dir, read_small, write_atomic
from ledger.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    NoteVerifier,
    cosign,
    format_skey,
    format_vkey,
    keep_verified,
    note_text,
    open_note,
    parse_checkpoint,
    parse_skey,
    parse_vkey,
)
from ledger.net.client import TEXT, BadAnswer, HttpClient, oneline
from ledger.store import Store, open_store
from ledger.store.common import checkpoint_of
from ledger.trust import witness_groups

KEY_FILE = "witness.key"
VKEY_FILE = "witness.vkey"
LOGS_FILE = "logs.json"
CHECKPOINTS = "checkpoints"
MAX_BODY = (1 << 20) + 64 * 64 + 64
MAX_PROOF_LINES = 64
SIZE_MEDIA = "text/x.tlog.size"
MAX_ANSWER = 4096  # cosignature lines
ASK_TIMEOUT = 30.0  # seconds ``ask_witnesses`` gives each witness in all


class WitnessReject(Exception):
    """An add-checkpoint request the witness refuses: an HTTP status and a message."""

    def __init__(self, status: int, message: str, body: bytes | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body if body is not None else (message + "\n").encode("utf-8")


def cosigner_vkey(name: str, public: bytes) -> str:
    return format_vkey(name, public, ALG_COSIGNATURE_V1)


def parse_cosigner_vkey(text: str) -> NoteVerifier:
    v = parse_vkey(text.strip())
    if v.alg != ALG_COSIGNATURE_V1:
        raise BadInput(f"{v.name}: a witness key must be a cosignature/v1 key (alg 0x04)")
    return v


# key, log list and per-log state files are small; a larger one is refused, never read in full
MAX_STATE_FILE = 1 << 20

class Witness:
    """A witness's state directory (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        if not (home / KEY_FILE).exists():
            raise LedgerStateError(f"no witness at {home} (run `ledger witness init --name NAME`)")
        check_private_dir(home, "witness directory")  # others must not swap its key or state
        key = read_small(home / KEY_FILE, MAX_STATE_FILE, "witness key file")
        try:
            self.signer = parse_skey(key.decode("utf-8").strip())
        except UnicodeDecodeError as e:
            raise KeyFileError(f"{home / KEY_FILE}: not a witness key file") from e
        self.vkey = cosigner_vkey(self.signer.name, self.signer.public)
        self.logs: dict[str, str] = self._read_logs()

    @classmethod
    def init(cls, home: Path, name: str) -> Witness:
        if (home / KEY_FILE).exists():
            raise LedgerStateError(f"{home} holds a witness already")
        private_dir(home, "witness directory")  # 0700 whatever the umask
        seed = bytes(nacl.signing.SigningKey.generate())
        write_atomic(home / KEY_FILE, (format_skey(name, seed) + "\n").encode(), 0o600)
        w = cls.__new__(cls)
        w.home = home
        w.signer = parse_skey(format_skey(name, seed))
        w.vkey = cosigner_vkey(name, w.signer.public)
        write_atomic(home / VKEY_FILE, (w.vkey + "\n").encode(), 0o644)
        w.logs = {}
        w._write_logs()
        return w

    def _read_logs(self) -> dict[str, str]:
        path = self.home / LOGS_FILE
        if not path.exists():
            return {}
        try:
            data = json.loads(read_small(path, MAX_STATE_FILE, "witness log list"))
        except ValueError as e:
            raise KeyFileError(f"{path}: unreadable witness log list") from e
        logs = data.get("logs") if isinstance(data, dict) else None
        if not isinstance(logs, dict):
            raise KeyFileError(f'{path}: expected {{"logs": {{origin: vkey}}}}')
        return {str(k): str(v) for k, v in logs.items()}

    def _write_logs(self) -> None:
        data = json.dumps({"logs": self.logs}, indent=2, sort_keys=True) + "\n"
        write_atomic(self.home / LOGS_FILE, data.encode(), 0o644, exclusive=False)

    def add_log(self, vkey_text: str) -> str:
        v = parse_vkey(vkey_text.strip())
        if v.alg != 0x01:
            raise BadInput("a log's verifier key is an Ed25519 note key (alg 0x01)")
        self.logs[v.name] = v.vkey
        self._write_logs()
        return v.name

    def _state_path(self, origin: str) -> Path:
        return self.home / CHECKPOINTS / (hex_encode(hashlib.sha256(origin.encode()).digest())[:32])

    def latest(self, origin: str) -> bytes | None:
        path = self._state_path(origin)
        return read_small(path, MAX_STATE_FILE, "witness state") if path.exists() else None

    def add_checkpoint(self, body: bytes, now: int | None = None) -> bytes:
        """Handle one add-checkpoint request body; return the cosignature line(s)."""
        old, proof, note = parse_request(body)
        try:
            cp = parse_checkpoint(note_text(note))
        except BadInput as e:
            raise WitnessReject(400, f"malformed checkpoint: {e}") from e
        vkey = self.logs.get(cp.origin)
        if vkey is None:
            raise WitnessReject(404, f"unknown log origin {cp.origin!r}")
        try:
            opened = open_note(note, [parse_vkey(vkey)])
            cp = parse_checkpoint(opened.text)  # the text the log's signature covers
            note = keep_verified(note, [parse_vkey(vkey)])  # kept: the log's line, no other
        except SignatureError as e:
            raise WitnessReject(403, f"checkpoint signature: {e}") from e
        except BadInput as e:
            raise WitnessReject(400, f"malformed note: {e}") from e
        if cp.size < old:  # C2SP tlog-witness: checked before the 409 of a stale old size
            raise WitnessReject(400, f"checkpoint size {cp.size} is below old size {old}")
        with _state_lock(self.home):  # check-and-persist is atomic across processes too
            return self._add_locked(cp, old, proof, note, opened.text, now)

    def _add_locked(
        self, cp: Checkpoint, old: int, proof: list[bytes], note: bytes, text: bytes,
        now: int | None,
    ) -> bytes:
        latest = self.latest(cp.origin)
        have = checkpoint_of(latest) if latest is not None else None
        have_size = have.size if have is not None else 0
        if old != have_size:
            raise WitnessReject(409, f"witness holds size {have_size}", f"{have_size}\n".encode())
        if have is not None and cp.size == have.size and cp.root != have.root:
            raise WitnessReject(409, f"another root for size {cp.size}: not cosigned")
        if cp.size == 0 and cp.root != merkle.EMPTY_ROOT:
            raise WitnessReject(422, "a checkpoint of size 0 whose root is not the empty tree's")
        try:  # every case, so a proof for other sizes (or any proof where none is due) is refused
            merkle.verify_consistency(
                have_size, cp.size, have.root if have is not None else merkle.EMPTY_ROOT, cp.root,
                proof,
            )
        except ProofError as e:
            raise WitnessReject(422, f"consistency proof: {e}") from e
        try:  # made before the state moves: a checkpoint it cannot cosign leaves the state alone
            line = cosign(text, self.signer, int(time.time()) if now is None else now)
        except BadInput as e:
            raise WitnessReject(400, f"malformed checkpoint: {e}") from e
        path = self._state_path(cp.origin)
        private_dir(path.parent, "witness state directory")
        write_atomic(path, note, 0o644, exclusive=False)
        return line


@contextlib.contextmanager
def _state_lock(home: Path) -> Iterator[None]:
    fd = os.open(home / ".state.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def parse_request(body: bytes) -> tuple[int, list[bytes], bytes]:
    """``old <size>\\n`` + proof lines + ``\\n`` + note -> (old, proof hashes, note)."""
    if len(body) > MAX_BODY:
        raise WitnessReject(413, f"request over {MAX_BODY} bytes")
    head, sep, note = body.partition(b"\n\n")
    if not sep:
        raise WitnessReject(400, "request needs 'old <size>', proof lines, a blank line, a note")
    lines = head.split(b"\n")
    first = lines[0]
    if not first.startswith(b"old ") or not first[4:].isdigit() or len(first) > 24:
        raise WitnessReject(400, "first line must be 'old <decimal size>'")
    if first[4:] != b"0" and first[4:5] == b"0":
        raise WitnessReject(400, "old size has a leading zero")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise WitnessReject(400, f"more than {MAX_PROOF_LINES} proof lines")
    try:
        proof = [b64_decode(line.decode("ascii"), 32, "proof hash") for line in lines[1:]]
    except (BadInput, UnicodeDecodeError) as e:
        raise WitnessReject(400, f"bad proof line: {e}") from e
    return int(first[4:]), proof, note


# --- log side ---------------------------------------------------------------------------------


def _size_meta(url: str) -> str:
    return f"witness.size {url}"


def require_cosignatures(note: bytes, text: bytes, witnesses: Sequence[NoteVerifier]) -> None:
    """SignatureError unless each witness key has a valid cosignature line on ``note`` (a key
    given under several names is one witness: a line under any of them, ``witness_groups``)."""
    for group in witness_groups(witnesses):
        try:
            open_note(note, list(group))
        except (SignatureError, BadInput) as e:  # the note opened already: a bad line of theirs
            raise SignatureError(
                f"witness {group[0].name}: no valid cosignature on the checkpoint ({e})"
            ) from e


def merge_cosigned(store: Store, note: bytes, lines: bytes) -> bytes:
    """Store ``note`` with the cosignature ``lines`` added to those already kept for it, read
    and written in one write transaction (the server's cosigner asks several witnesses at once,
    ``ledger.cosign``); a note kept for a larger checkpoint stays (a late answer about an older
    one never replaces it)."""
    with store.writer():
        kept = store.meta(COSIGNED_META)
        if kept and _size_of(kept.encode("utf-8")) > checkpoint_of(note).size:
            return note + lines
        merged = merge_cosignatures(note, kept, lines)
        store.conn.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)",
                           (COSIGNED_META, merged.decode("utf-8")))
    return merged


def _size_of(note: bytes) -> int:
    try:
        return checkpoint_of(note).size
    except LedgerError:
        return -1


def request_cosignature(
    home: Path,
    url: str,
    witness_vkey: str,
    client: httpx.Client | None = None,
    timeout: float = 120.0,
) -> bytes:
    """Ask the witness at ``url`` to cosign the log's latest checkpoint; return the cosigned note
    (also stored for ``GET /checkpoint``). Every request goes through the bounded
    ``HttpClient`` (``timeout`` seconds in all, answers capped, no redirects)."""
    wv = parse_cosigner_vkey(witness_vkey)
    http = HttpClient(url, "the witness", timeout=timeout, client=client)
    store = open_store(home)
    try:
        note = store.checkpoint()
        cp = checkpoint_of(note)
        old = int(store.meta(_size_meta(url)) or "0")
        for _ in range(3):
            if old > cp.size:
                raise BadInput(f"the witness holds size {old}, larger than this log's {cp.size}")
            proof = store.consistency_proof(old, cp.size) if 0 < old < cp.size else []
            body = (
                f"old {old}\n".encode()
                + b"".join(b64_encode(h).encode() + b"\n" for h in proof)
                + b"\n"
                + note
            )
            r = http.post(
                "add-checkpoint", body, MAX_ANSWER, {"Content-Type": "text/plain"}, types=TEXT
            )
            if r.status == 409 and r.media_type == SIZE_MEDIA:
                text = r.body.strip()
                if not text.isascii() or not text.isdigit() or len(text) > 20:
                    raise BadAnswer("the witness's 409 answer holds no size")
                old = int(text)
                continue
            if r.status != 200:
                raise CannotCheck(
                    f"the witness refused the checkpoint: HTTP {r.status} {r.snippet()}"
                )
            lines = r.body
            if not lines.endswith(b"\n"):
                raise BadAnswer("the witness's answer is not cosignature lines")
            try:
                opened = open_note(note + lines, [wv])
            except SignatureError as e:
                raise BadAnswer(f"the witness's answer holds no valid cosignature: {e}") from e
            except BadInput as e:
                raise BadAnswer(
                    f"the witness answered malformed cosignatures: {oneline(str(e))}"
                ) from e
            store.set_meta(_size_meta(url), str(cp.size))
            # the witness's verified line is kept, no other line it sent (issue 33 item 5)
            return merge_cosigned(store, note, opened.verified[0].line())
        raise CannotCheck("the witness kept answering 409 (its size keeps changing)")
    finally:
        store.close()
        http.close()


@dataclass(frozen=True)
class Asked:
    """What one witness answered ``ask_witnesses``: ``error`` None when it cosigned."""

    witness: str  # name+key id
    url: str | None
    error: str | None

    def line(self) -> str:
        where = f" ({self.url})" if self.url else ""
        return f"{self.witness}{where}: {self.error or 'cosigned'}"


def ask_witnesses(
    home: Path,
    witnesses: Sequence[tuple[NoteVerifier, str | None]],
    timeout: float = ASK_TIMEOUT,
    client: httpx.Client | None = None,
) -> list[Asked]:
    """Ask each witness (its cosignature key and the URL it is asked at, None when none is known)
    to cosign the log's latest checkpoint, one after the other (the collected note is merged in
    the store's meta, one writer at a time); what each answered, never raising for a witness that
    cannot be reached or refuses."""
    out: list[Asked] = []
    for v, url in witnesses:
        name = v.label
        if url is None:
            out.append(Asked(name, None, 'no URL to ask it at (give it as {"vkey", "url"} in '
                                         "the trust policy)"))
            continue
        try:
            request_cosignature(home, url, v.vkey, client=client, timeout=timeout)
        except LedgerError as e:
            out.append(Asked(name, url, oneline(str(e), 200)))
        else:
            out.append(Asked(name, url, None))
    return out
