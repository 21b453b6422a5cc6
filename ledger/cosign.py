"""Cosigning by itself (issue 34): a log server that asks its witnesses to cosign each new
checkpoint in the background, and what a client learns from it.

Server side (``Cosigner``, made by ``from_policy`` when ``ledger serve`` starts):

1. the witnesses are those of the trust policy in force (``--policy`` is not a ``serve`` option:
   ``$LEDGER_POLICY``, else the config default, ``ledger.trust.policy_path``) that have a
   ``url``, and only when the policy names no log key or this log's key, and the ledger holds its
   log key (a mirror's ``serve`` never asks witnesses: the checkpoints are not its own);
2. one daemon thread per witness, each with its own store connection, looks at the latest
   checkpoint every ``POLL`` seconds (``Store.version``: one pragma when nothing changed);
3. when the note ``GET /checkpoint`` serves (the checkpoint with the cosignatures collected for
   it) carries no valid cosignature by that witness, it asks it with the code
   ``ledger witness add-checkpoint`` runs (``ledger.witness.request_cosignature``: the
   consistency proof from the size the witness holds, its 409 answers, the returned line checked
   against the witness's key), bounded by ``ASK_TIMEOUT`` seconds;
4. a failure is retried after ``min(BACKOFF_CAP, BACKOFF_BASE * 2**k)`` seconds times a random
   factor in [0.5, 1.5) (``k`` failures in a row), and said in the witness's status; a new
   checkpoint does not cut a backoff short, so a witness that is down costs one attempt per
   backoff, never a blocked append (appends never wait for a witness);
5. ``status()`` is what each witness last answered, served as ``GET /api/v1/witnesses``
   (``ledger.http.cosigners``).

Client side: ``await_quorum`` polls ``GET /checkpoint`` until it carries the quorum (``ledger
submit``, right after its entry was included); ``missing_reasons`` reads ``GET /api/v1/witnesses``
to say, for each witness whose cosignature is missing, why (``ledger receipt refresh``).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ledger.core.encoding import hex_encode
from ledger.core.errors import LedgerError
from ledger.core.note import MAX_NOTE_SIZE, NoteVerifier, note_text, parse_checkpoint
from ledger.net.client import JSON, TEXT, HttpClient, oneline

POLL = 0.25  # seconds between looks at the store
ASK_TIMEOUT = 10.0  # seconds one exchange with a witness may take in all
COSIGN_WAIT = 20.0  # seconds ``ledger submit`` waits for the server's cosigner
BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0
STATUS_PATH = "api/v1/witnesses"
MAX_STATUS_ANSWER = 64 * 1024
MANUAL_FIX = (
    "on the log's machine, `ledger witness add-checkpoint WITNESS_URL --vkey WVKEY` asks a "
    "witness by hand; then run `ledger receipt refresh` again"
)


@dataclass(frozen=True)
class WitnessStatus:
    """What one witness last answered the server's cosigner."""

    witness: str  # name+key id
    url: str
    cosigned_size: int | None  # the largest checkpoint size it cosigned for this server
    error: str | None  # why the last attempt failed; None after a success
    failures: int  # failed attempts in a row
    retry_in: float | None  # seconds until the next attempt after a failure

    def to_json(self) -> dict[str, Any]:
        return {
            "witness": self.witness, "url": self.url, "cosigned_size": self.cosigned_size,
            "error": self.error, "failures": self.failures,
            "retry_in": None if self.retry_in is None else round(max(self.retry_in, 0.0), 1),
        }


class Cosigner:
    """Background threads asking each witness to cosign the log's newest checkpoint (see the
    module docstring). ``ask`` is the exchange (``request_cosignature``; tests inject faults)."""

    def __init__(
        self,
        home: Path,
        witnesses: Sequence[tuple[NoteVerifier, str]],
        ask: Callable[[Path, str, str, float], bytes] | None = None,
        poll: float = POLL,
        ask_timeout: float = ASK_TIMEOUT,
    ) -> None:
        from ledger.witness import request_cosignature

        self.home = home
        self.witnesses = list(witnesses)
        self._ask = ask or (lambda h, u, k, t: request_cosignature(h, u, k, timeout=t))
        self.poll = poll
        self.ask_timeout = ask_timeout
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._status = {
            v.vkey: WitnessStatus(v.label, url, None, None, 0, None) for v, url in witnesses
        }
        self._retry_at: dict[str, float] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> Cosigner:
        for v, url in self.witnesses:
            t = threading.Thread(target=self._run, args=(v, url), daemon=True,
                                 name=f"ledger-cosign {v.name}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self, wait: float = 5.0) -> None:
        """Stop asking; wait at most ``wait`` seconds in all for the threads (one may be inside
        an exchange, bounded by ``ask_timeout``; they are daemon threads)."""
        self._stop.set()
        deadline = time.monotonic() + wait
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def status(self) -> list[WitnessStatus]:
        now = time.monotonic()
        with self._lock:
            out = []
            for v, _url in self.witnesses:
                s = self._status[v.vkey]
                at = self._retry_at.get(v.vkey)
                out.append(replace(s, retry_in=None if at is None else at - now))
            return out

    def _run(self, v: NoteVerifier, url: str) -> None:
        from ledger.store import Store, open_store

        store: Store | None = None
        done_at: tuple[int, int] | None = None  # the store's version when it last had the line
        try:
            while not self._stop.wait(self.poll):
                try:
                    if store is None:
                        store = open_store(self.home, read_only=True)  # it writes nothing
                    version = store.version()
                    if version == done_at:
                        continue
                    done_at = version if self._round(store, v, url) else None
                except LedgerError as e:  # the store could not be read: said, tried again
                    self._failed(v, f"the log's store: {oneline(str(e), 200)}")
                    if store is not None:
                        store.close()
                        store = None
        finally:
            if store is not None:
                store.close()

    def _round(self, store: Any, v: NoteVerifier, url: str) -> bool:
        """Step 3 once; whether the served note now carries the witness's cosignature (read
        back, since another writer may have moved the checkpoint meanwhile)."""
        from ledger.core.cosigned import published_note
        from ledger.trust import cosigned_by

        note = published_note(store, store.checkpoint())
        size = parse_checkpoint(note_text(note)).size
        if cosigned_by(note, [v]):
            self._ok(v, size)
            return True
        at = self._retry_at.get(v.vkey)
        if at is not None and time.monotonic() < at:
            return False
        try:
            self._ask(self.home, url, v.vkey, self.ask_timeout)
        except LedgerError as e:
            self._failed(v, oneline(str(e), 300))
        except (OSError, httpx.HTTPError) as e:  # a transport error the client did not wrap
            self._failed(v, f"cannot reach the witness: {oneline(str(e), 200)}")
        else:
            self._ok(v, size)
        return False  # looked at again next round (by then with the line, or a newer tree)

    def _ok(self, v: NoteVerifier, size: int) -> None:
        with self._lock:
            s = self._status[v.vkey]
            best = size if s.cosigned_size is None else max(size, s.cosigned_size)
            self._status[v.vkey] = replace(s, cosigned_size=best, error=None, failures=0)
            self._retry_at.pop(v.vkey, None)

    def _failed(self, v: NoteVerifier, why: str) -> None:
        with self._lock:
            s = self._status[v.vkey]
            k = s.failures
            delay = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(k, 30)) * (0.5 + random.random())
            self._status[v.vkey] = replace(s, error=why, failures=k + 1)
            self._retry_at[v.vkey] = time.monotonic() + delay


def witnesses_to_ask(home: Path) -> tuple[list[tuple[NoteVerifier, str]], str]:
    """The witnesses a server over ``home`` asks (step 1 of the module docstring), and one line
    saying what it does (or why it asks none)."""
    from ledger import trust
    from ledger.log import LOG_KEY
    from ledger.store import open_store

    try:
        policy, witnesses, _need = trust.resolve(None, [], None)
    except LedgerError as e:
        return [], f"witnesses not asked: the trust policy cannot be read ({oneline(str(e))})"
    if policy is None or not witnesses:
        return [], ""
    asked = [(w, url) for w in witnesses if (url := policy.url(w)) is not None]
    if not asked:
        return [], ""
    if not (home / LOG_KEY).exists():
        return [], "witnesses not asked: this ledger holds no log key (a mirror)"
    store = open_store(home, read_only=True)
    try:
        vkey = store.meta("vkey")
    finally:
        store.close()
    if policy.log is not None and policy.log.vkey != vkey:
        return [], (f"witnesses not asked: the trust policy {policy.source} is for another "
                    f"log ({policy.log.name})")
    names = ", ".join(f"{w.name} ({url})" for w, url in asked)
    return asked, f"asking witnesses to cosign each new checkpoint: {names}"


def from_policy(home: Path) -> tuple[Cosigner | None, str]:
    """A started ``Cosigner`` for the server over ``home`` (None when it asks no witness), and
    the line ``witnesses_to_ask`` says."""
    asked, line = witnesses_to_ask(home)
    return (Cosigner(home, asked).start() if asked else None), line


def cosignatures(note: bytes, log_key: NoteVerifier) -> list[dict[str, Any]]:
    """The signature lines of ``note`` other than the log's own (``ledger checkpoint --json``):
    ``{"name", "key_id" (hex), "time"}``, ``time`` the cosignature/v1 timestamp (Unix seconds;
    None for a line of another length). Read, not verified: the lines a log keeps were verified
    when it stored them, and a reader checks them against the witness keys it trusts. A stored
    note that no longer parses (a line with a control character, kept by an older version: the
    table is append-only) lists none; its text is still printed, escaped."""
    from ledger.core.errors import LedgerError
    from ledger.core.note import open_note

    try:
        sigs = open_note(note, [log_key]).signatures
    except LedgerError:  # a note an older version stored with lines no reader accepts now
        return []
    out = []
    for sig in sigs:
        if (sig.name, sig.key_id) == (log_key.name, log_key.key_id):
            continue
        stamp = int.from_bytes(sig.signature[:8], "big") if len(sig.signature) == 72 else None
        out.append({"name": sig.name, "key_id": hex_encode(sig.key_id), "time": stamp})
    return out


# -- client side ----------------------------------------------------------------------------


def await_quorum(
    url: str,
    witnesses: Sequence[NoteVerifier],
    quorum: int,
    min_size: int,
    timeout: float,
    client: httpx.Client | None = None,
) -> bool:
    """Poll ``GET /checkpoint`` (every ``POLL * 2`` seconds, ``timeout`` seconds in all) until
    it is of size ``min_size`` or more and carries ``quorum`` valid cosignatures by distinct
    ``witnesses``; whether it did. A server that asks no witness by itself (``GET
    /api/v1/witnesses``) is not waited for. Only a wait: the caller verifies what it fetches."""
    from ledger.trust import cosigned_by, witness_groups

    groups = witness_groups(witnesses)
    deadline = time.monotonic() + timeout
    http = HttpClient(url, "the server", timeout=timeout, client=client)
    try:
        listed = _fetch_status(http)
        while listed is not None:
            try:
                note = http.get_ok("checkpoint", MAX_NOTE_SIZE, types=TEXT).body
                size = parse_checkpoint(note_text(note)).size
                done = [cosigned_by(note, g) for g in groups]
                if size >= min_size and sum(done) >= quorum:
                    return True
                # witnesses the server last failed to reach will not cosign in this wait
                failing = sum(
                    1 for g, ok in zip(groups, done, strict=True)
                    if not ok and (listed.get(g[0].label) or {}).get("error")
                )
                if len(groups) - failing < quorum:
                    return False
            except LedgerError:
                pass  # not there yet, or not readable: the caller's own request says why
            if time.monotonic() + POLL * 2 > deadline:
                return False
            time.sleep(POLL * 2)
            listed = _fetch_status(http)
        return False
    finally:
        http.close()


def missing_reasons(
    url: str, missing: Sequence[NoteVerifier], timeout: float = 10.0,
    client: httpx.Client | None = None,
) -> str:
    """One line saying, for each witness in ``missing``, why the server at ``url`` has no
    cosignature of it (from ``GET /api/v1/witnesses``), or that the server asks none of them by
    itself and how to ask by hand."""
    http = HttpClient(url, "the server", timeout=timeout, client=client)
    try:
        listed = _fetch_status(http)
    finally:
        http.close()
    if listed is None:
        return f"the server at {url} does not ask witnesses by itself; {MANUAL_FIX}"
    parts = []
    for w in missing:
        item = listed.get(w.label)
        if item is None:
            parts.append(f"{w.label}: not among the witnesses the server asks (its trust "
                         f"policy has no url for it); {MANUAL_FIX}")
            continue
        why = item.get("error") or "asked, no cosignature yet (try again in a few seconds)"
        retry = item.get("retry_in")
        when = f", retrying in {retry:g} s" if isinstance(retry, (int, float)) else ""
        at = oneline(str(item.get("url")), 200)  # the server's text, like ``why``
        parts.append(f"{w.label} at {at}: {oneline(str(why), 200)}{when}")
    return "; ".join(parts)


def _fetch_status(http: HttpClient) -> dict[str, dict[str, Any]] | None:
    """The server's ``GET /api/v1/witnesses`` by witness label; None when it asks no witness by
    itself (or cannot say)."""
    try:
        a = http.get(STATUS_PATH, MAX_STATUS_ANSWER, types=JSON, ok=(200,))
    except LedgerError:
        return None
    return _status_list(a.body) if a.status == 200 else None


def _status_list(body: bytes) -> dict[str, dict[str, Any]] | None:
    try:
        obj = json.loads(body)
        items = obj["witnesses"]
        if obj.get("cosigning") is not True or not isinstance(items, list):
            return None
        return {str(i["witness"]): i for i in items if isinstance(i, dict) and "witness" in i}
    except (ValueError, KeyError, TypeError):
        return None
