"""What a verifier trusts beyond one signed checkpoint (issue 14): a witness quorum, a trust policy
named once in the user's configuration, and a memory of the largest checkpoint verified per log.

Witness quorum (``check_quorum``)
    The checkpoint a verdict rests on must carry at least K valid cosignature/v1 lines (C2SP
    tlog-cosignature) by distinct witnesses among those given: distinct Ed25519 keys, since a
    cosignature signs no name (one key given under two names is one witness). Lines by other
    keys are ignored; an invalid line by a given witness counts as missing; the log's own key is
    no witness (``BadInput``).

Trust policy (``load_policy``)
    A JSON file ``{"log": VKEY | [VKEY, ...], "witnesses": [WVKEY | {"vkey": WVKEY, "url": URL},
    ...], "quorum": K, "checks": [GLOB, ...], "obligations": {"PO1": "ok"|"partial"},
    "signers": [KEY_ID | NAME, ...], "allow_revoked": BOOL, "verdict": "partial"|"verified",
    "oracles": ["trusted", "bundle", "futhark"], "oldest_checkpoint": SIZE}`` (every field
    optional; K defaults to the number of witnesses; a witness's ``url`` is where a log sealed on
    this machine asks it to cosign, ``ledger seal``; an unknown field is an error). The rules
    past ``quorum`` are applied by the library's ``Verifier`` (``ledger.library``), which
    ``ledger verify`` calls. Found at
    ``--policy FILE``, else ``$LEDGER_POLICY``, else
    ``$XDG_CONFIG_HOME/kernel-ledger/policy.json`` (``~/.config/...`` when unset); absent means no
    policy. Command-line ``--witness`` / ``--quorum`` / ``--vkey`` override it.

Checkpoint memory (``CheckpointMemory``)
    Like the Go command's sumdb cache of the latest verified tree: per log (origin and log key),
    the signed note of the largest checkpoint verified, in
    ``$LEDGER_CACHE_DIR`` (else ``$XDG_CACHE_HOME/kernel-ledger``, else ``~/.cache/kernel-ledger``)
    ``/checkpoints/<sha256(vkey)[:32]>``, written atomically under a lock, and beside it
    (``.seen``) the sizes and roots of the checkpoints proven to be prefixes of it (at most
    ``MAX_SEEN``). A new checkpoint is compared with it:

    * the same size must have the same root;
    * a larger one must be proved consistent (the proof is verified against both signed roots)
      before it replaces the memory; with no proof at hand (offline) it is accepted, said, and
      not remembered;
    * a smaller one must be a proven prefix: one of the ``.seen`` checkpoints, or proved by a
      consistency proof to the remembered tree; with neither it **fails** (``Unproven``, exit 1)
      with a line saying how to bring it forward (``ledger receipt refresh``).

    A failure writes both signed notes (and the proof, if any) to ``<cache>/evidence/`` and
    raises ``Equivocation`` (two checkpoints that cannot both be true) or ``Unproven`` (exit 1).
    The memory only ever holds checkpoints proven to extend it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core import merkle
from ledger.core.cosigned import with_cosignatures as with_cosignatures  # callers' name
from ledger.core.encoding import b64_decode, b64_encode, hex_encode
from ledger.core.errors import (
    BadInput,
    LedgerError,
    ProofError,
    RewriteDetected,
    SignatureError,
    VerificationFailed,
)
from ledger.core.fsutil import private_dir, read_small, write_atomic
from ledger.core.note import (
    ALG_COSIGNATURE_V1,
    Checkpoint,
    NoteVerifier,
    keep_verified,
    note_text,
    open_note,
    parse_checkpoint,
    parse_vkey,
    tells_more,
)

if TYPE_CHECKING:
    from ledger.store import Store

POLICY_ENV = "LEDGER_POLICY"
CACHE_ENV = "LEDGER_CACHE_DIR"
MAX_POLICY_BYTES = 64 * 1024
MAX_WITNESSES = 64
MAX_SEEN = 1024  # proven-prefix checkpoints kept beside the remembered one

# (old size, new size) -> consistency proof hashes, or None when none can be had here
Prover = Callable[[int, int], "Sequence[bytes] | None"]

OLDER_FIX = (
    "verify it against a source that holds the newer tree, or bring it forward "
    "(`ledger receipt refresh FILE --server URL` for a receipt)"
)


class Equivocation(RewriteDetected):
    """Two signed checkpoints of one log that cannot both be true (exit 1)."""


class Unproven(VerificationFailed):
    """A checkpoint older than the one remembered that nothing at hand proves a prefix of it
    (exit 1): it may be an honest older one, or a fork below the remembered size."""


class QuorumMissing(SignatureError):
    """Fewer valid witness cosignatures than the quorum (exit 1)."""


# -- witness quorum ------------------------------------------------------------------------------


def who(v: NoteVerifier) -> str:
    return v.label


def witness_groups(witnesses: Sequence[NoteVerifier]) -> list[tuple[NoteVerifier, ...]]:
    """The given witness keys, one group per distinct Ed25519 public key with every name it was
    given under, in order. A cosignature/v1 signs no name (only the time and the checkpoint), so
    one witness's line can be relabelled under any name its key is given under: one key is one
    witness, however many names it has. ``BadInput`` for a key that is not a cosignature/v1 key."""
    groups: dict[bytes, list[NoteVerifier]] = {}
    for w in witnesses:
        if w.alg != ALG_COSIGNATURE_V1:
            raise BadInput(f"witness key {w.name}: not a cosignature/v1 key (alg 0x04)")
        names = groups.setdefault(w.public, [])
        if all((v.name, v.key_id) != (w.name, w.key_id) for v in names):
            names.append(w)
    return [tuple(g) for g in groups.values()]


def cosigned_by(note: bytes, group: Sequence[NoteVerifier]) -> bool:
    """Whether ``note`` carries a valid cosignature by the witness key of ``group`` (under any
    of its names)."""
    try:
        open_note(note, list(group))
    except LedgerError:
        return False
    return True


def check_quorum(
    note: bytes, witnesses: Sequence[NoteVerifier], quorum: int
) -> tuple[list[str], list[str]]:
    """(witnesses with a valid cosignature, witnesses without one), counting distinct witness
    keys (``witness_groups``); ``QuorumMissing`` when fewer than ``quorum`` cosigned,
    ``BadInput`` for a quorum that cannot be met or a non-witness key."""
    if not 0 <= quorum <= len(witnesses):
        raise BadInput(f"--quorum {quorum}: must be between 0 and the {len(witnesses)} witnesses")
    groups = witness_groups(witnesses)
    if len(groups) < quorum:
        raise BadInput(f"--quorum {quorum}: only {len(groups)} distinct witness keys given "
                       "(a key given twice, or under two names, is one witness)")
    good: list[str] = []
    bad: list[str] = []
    for g in groups:
        (good if cosigned_by(note, g) else bad).append(who(g[0]))
    if len(good) < quorum:
        raise QuorumMissing(
            f"the checkpoint carries {len(good)} of the {quorum} required witness cosignatures; "
            f"missing: {', '.join(bad)}"
        )
    return good, bad


# -- trust policy --------------------------------------------------------------------------------


VERDICTS = ("partial", "verified")  # the least verdict a policy may ask for, weakest first
ORACLE_KINDS = ("trusted", "bundle", "futhark")  # SPEC 3: what a falsify check compared with
PO_STATUSES = ("failed", "partial", "ok")  # a proof obligation's status, weakest first
POLICY_FIELDS = ("log", "witnesses", "quorum", "checks", "obligations", "signers",
                 "allow_revoked", "verdict", "oracles", "oldest_checkpoint")


@dataclass(frozen=True)
class Policy:
    """What a consumer requires before it trusts a kernel (SPEC 10 "Library"): the log's key,
    witnesses and quorum, and the team's rules on the entry itself. Every field has the most
    lenient default, so ``Policy(log=VKEY)`` asks only for a valid, included entry.

    ``checks``: check ids (globs: ``falsify.*``) that must have run and passed; ``obligations``:
    (``PO1``..``PO8``, least status ``ok``|``partial``) pairs the ``certificate`` must show;
    ``signers``: node key ids (hex) or registered names allowed to have sealed it (empty: any
    registered key); ``allow_revoked``: a signer revoked after it sealed the entry is accepted;
    ``verdict``: the least verdict (``partial`` or ``verified``); ``oracles``: the oracle kinds
    whose ``falsify.*`` results count; ``oldest_checkpoint``: the least tree size of the
    checkpoint a verification rests on. ``log_keys``: every accepted log key (``log`` is the
    first)."""

    log: NoteVerifier | None = None
    witnesses: tuple[NoteVerifier, ...] = ()
    quorum: int = 0
    source: str = ""
    urls: tuple[tuple[str, str], ...] = ()  # (witness vkey, URL a local log asks it at)
    checks: tuple[str, ...] = ()
    obligations: tuple[tuple[str, str], ...] = ()
    signers: tuple[str, ...] = ()
    allow_revoked: bool = False
    verdict: str = "partial"
    oracles: tuple[str, ...] = ORACLE_KINDS
    oldest_checkpoint: int = 0
    log_keys: tuple[NoteVerifier, ...] = ()

    def __post_init__(self) -> None:
        where = f"trust policy {self.source}" if self.source else "trust policy"
        if self.verdict not in VERDICTS:
            raise BadInput(f"{where}: verdict must be one of {', '.join(VERDICTS)}")
        bad = [k for k in self.oracles if k not in ORACLE_KINDS]
        if bad:
            raise BadInput(f"{where}: unknown oracle kind {bad[0]!r} (known: "
                           f"{', '.join(ORACLE_KINDS)})")
        for po, status in self.obligations:
            if not (po.startswith("PO") and po[2:].isdigit()) or status not in PO_STATUSES[1:]:
                raise BadInput(f"{where}: obligations map PO1..PO8 to ok or partial, not "
                               f"{po}: {status}")
        if not 0 <= self.quorum <= len(self.witnesses):
            raise BadInput(f"{where}: quorum must be 0..{len(self.witnesses)}")
        if self.oldest_checkpoint < 0:
            raise BadInput(f"{where}: oldest_checkpoint is a tree size, at least 0")
        if self.log is not None and not self.log_keys:
            object.__setattr__(self, "log_keys", (self.log,))
        elif self.log is None and self.log_keys:
            object.__setattr__(self, "log", self.log_keys[0])

    def url(self, w: NoteVerifier) -> str | None:
        return dict(self.urls).get(w.vkey)


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kernel-ledger"


def policy_path(option: Path | None) -> Path | None:
    """The policy file in force: ``option``, else $LEDGER_POLICY, else the config default when it
    exists; None when there is none."""
    if option is not None:
        return option
    env = os.environ.get(POLICY_ENV)
    if env:
        return Path(env)
    default = config_dir() / "policy.json"
    return default if default.exists() else None


def parse_witness(text: str) -> NoteVerifier:
    v = parse_vkey(text.strip())
    if v.alg != ALG_COSIGNATURE_V1:
        raise BadInput(f"{v.name}: a witness key must be a cosignature/v1 key (alg 0x04)")
    return v


def _policy_witness(item: object, path: Path) -> tuple[NoteVerifier, str | None]:
    """One ``witnesses`` item: a key string, or ``{"vkey": KEY, "url": URL}``."""
    if isinstance(item, str):
        return parse_witness(item), None
    if (
        isinstance(item, dict)
        and isinstance(item.get("vkey"), str)
        and set(item) <= {"vkey", "url"}
        and isinstance(item.get("url", ""), str)
    ):
        url = item.get("url")
        if url is not None:
            from ledger.net.client import check_base_url  # only for a policy naming URLs

            url = check_base_url(url, f"trust policy {path}: witness")
        return parse_witness(item["vkey"]), url
    raise BadInput(
        f'trust policy {path}: a witness is a key string or {{"vkey": KEY, "url": URL}}'
    )


def load_policy(path: Path) -> Policy:
    """The policy file at ``path`` (the module docstring; docs/using-verified-kernels.md): a JSON
    object of ``POLICY_FIELDS`` only; an unknown field is an error, never ignored."""
    data = read_small(path, MAX_POLICY_BYTES, "trust policy")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadInput(f"trust policy {path} is not JSON") from e
    if not isinstance(obj, dict):
        raise BadInput(f"trust policy {path}: expected a JSON object")
    unknown = sorted(set(obj) - set(POLICY_FIELDS))
    if unknown:
        raise BadInput(f"trust policy {path}: unknown field {unknown[0]!r} (known: "
                       f"{', '.join(POLICY_FIELDS)})")
    logs = _policy_logs(obj.get("log"), path)
    ws = obj.get("witnesses", [])
    if not isinstance(ws, list) or len(ws) > MAX_WITNESSES:
        raise BadInput(f"trust policy {path}: witnesses must be a list of at most 64 keys")
    parsed = [_policy_witness(w, path) for w in ws]
    witnesses = tuple(v for v, _url in parsed)
    urls = tuple((v.vkey, url) for v, url in parsed if url is not None)
    quorum = obj.get("quorum", len(witnesses))
    if not isinstance(quorum, int) or isinstance(quorum, bool) or not 0 <= quorum <= len(ws):
        raise BadInput(f"trust policy {path}: quorum must be 0..{len(ws)}")
    return Policy(
        logs[0] if logs else None, witnesses, quorum, str(path), urls,
        checks=_strings(obj, "checks", path),
        obligations=_obligations(obj.get("obligations", {}), path),
        signers=_strings(obj, "signers", path),
        allow_revoked=_flag(obj, "allow_revoked", path),
        verdict=_choice(obj, "verdict", VERDICTS, "partial", path),
        oracles=_strings(obj, "oracles", path, ORACLE_KINDS),
        oldest_checkpoint=_size(obj, "oldest_checkpoint", path),
        log_keys=logs,
    )


def _policy_logs(value: object, path: Path) -> tuple[NoteVerifier, ...]:
    """``log``: one verifier key string, or a list of them (any of which may sign)."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if value is None:
        return ()
    if not items or len(items) > MAX_WITNESSES or not all(isinstance(v, str) for v in items):
        raise BadInput(f"trust policy {path}: log must be a verifier key string or a list of them")
    return tuple(parse_vkey(str(v)) for v in items)


def _strings(
    obj: dict[str, object], name: str, path: Path, default: tuple[str, ...] = ()
) -> tuple[str, ...]:
    value = obj.get(name, list(default))
    if (not isinstance(value, list) or len(value) > 256
            or not all(isinstance(v, str) and 0 < len(v) <= 200 for v in value)):
        raise BadInput(f"trust policy {path}: {name} must be a list of strings")
    return tuple(str(v) for v in value)


def _obligations(value: object, path: Path) -> tuple[tuple[str, str], ...]:
    """``obligations``: ``{"PO1": "ok", "PO7": "partial"}``, or a list of POs (each ``ok``)."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = {str(v): "ok" for v in value}
    if not isinstance(value, dict) or len(value) > 64 or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadInput(f'trust policy {path}: obligations must map POs to a status '
                       '({"PO1": "ok"})')
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def _flag(obj: dict[str, object], name: str, path: Path) -> bool:
    value = obj.get(name, False)
    if not isinstance(value, bool):
        raise BadInput(f"trust policy {path}: {name} must be true or false")
    return value


def _choice(
    obj: dict[str, object], name: str, allowed: tuple[str, ...], default: str, path: Path
) -> str:
    value = obj.get(name, default)
    if value not in allowed:
        raise BadInput(f"trust policy {path}: {name} must be one of {', '.join(allowed)}")
    return str(value)


def _size(obj: dict[str, object], name: str, path: Path) -> int:
    value = obj.get(name, 0)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 63:
        raise BadInput(f"trust policy {path}: {name} must be a tree size (an integer >= 0)")
    return value


def resolve(
    option: Path | None, witness_keys: Sequence[str], quorum: int | None
) -> tuple[Policy | None, tuple[NoteVerifier, ...], int]:
    """The policy in force and the witnesses and quorum to require (options override it)."""
    path = policy_path(option)
    policy = load_policy(path) if path is not None else None
    if witness_keys:
        witnesses = tuple(parse_witness(_key_text(w)) for w in witness_keys)
    else:
        witnesses = policy.witnesses if policy else ()
    if quorum is None:
        quorum = policy.quorum if policy and not witness_keys else len(witnesses)
    if not 0 <= quorum <= len(witnesses):
        raise BadInput(f"--quorum {quorum}: must be between 0 and the {len(witnesses)} witnesses")
    return policy, witnesses, quorum


def _key_text(text: str) -> str:
    """A key given inline or as a file holding it."""
    if "+" in text and not os.path.exists(text):
        return text
    return read_small(Path(text), 4096, "witness key file").decode("utf-8", "replace").strip()


# -- checkpoint memory ---------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError as e:  # no HOME and no passwd entry
        raise BadInput(f"no cache directory ({e}); set {CACHE_ENV}") from e
    return Path(base) / "kernel-ledger"


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


@functools.lru_cache(maxsize=64)
def _memory_path(root: Path, vkey: str) -> Path:
    """``checkpoints/<sha256(vkey)[:32]>`` under ``root``, made once per memory and log key."""
    return root / "checkpoints" / hex_encode(hashlib.sha256(vkey.encode()).digest())[:32]


@dataclass
class CheckpointMemory:
    root: Path

    @classmethod
    def default(cls) -> CheckpointMemory:
        """The user's memory; when no cache directory can be named, one whose every use fails
        with ``BadInput`` (``guard`` then says the memory was not used)."""
        try:
            return cls(cache_dir())
        except BadInput:
            return cls(Path("/nonexistent/kernel-ledger-cache"))

    def path(self, vkey: NoteVerifier) -> Path:
        return _memory_path(self.root, vkey.vkey)

    def _seen_path(self, vkey: NoteVerifier) -> Path:
        p = self.path(vkey)
        return p.with_name(p.name + ".seen")

    def _private(self) -> None:
        private_dir(self.root, "checkpoint cache")
        private_dir(self.root / "checkpoints", "checkpoint cache")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._private()
        try:
            fd = os.open(self.root / "checkpoints" / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise BadInput(f"cannot lock the checkpoint cache {self.root}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def remembered(self, vkey: NoteVerifier) -> bytes | None:
        path = self.path(vkey)
        try:  # read first, ask why only when it fails: no stat on the common path
            return read_small(path, 1 << 20, "remembered checkpoint")
        except BadInput:
            if not path.exists():
                return None
            raise

    def seen(self, vkey: NoteVerifier) -> dict[int, bytes]:
        """size -> root of the checkpoints proven to be prefixes of the remembered one (a damaged
        or missing file is an empty record: it only ever lets more checkpoints pass)."""
        path = self._seen_path(vkey)
        if not path.exists():
            return {}
        out: dict[int, bytes] = {}
        try:
            for line in read_small(path, 128 * MAX_SEEN, "checkpoint record").splitlines():
                size, root = line.decode("ascii").split(" ")
                if not size.isdigit() or len(size) > 20:
                    return {}
                out[int(size)] = b64_decode(root, 32, "remembered root")
        except (BadInput, ValueError, UnicodeDecodeError):
            return {}
        return out

    def _write_seen(self, vkey: NoteVerifier, seen: dict[int, bytes]) -> None:
        keep = sorted(seen)[-MAX_SEEN:]
        text = "".join(f"{s} {b64_encode(seen[s])}\n" for s in keep)
        write_atomic(self._seen_path(vkey), text.encode("ascii"), 0o600, exclusive=False)

    def _keep(
        self, kept: bytes, seen: bytes, proof: Sequence[bytes] | None = None
    ) -> tuple[str, str | None]:
        """Write the remembered and the presented signed notes (and a proof) as evidence:
        (where they are, or why they are not, as a clause; the presented note's path)."""
        stamp = _stamp()
        try:
            folder = private_dir(self.root / "evidence", "evidence directory")
            a = folder / f"{stamp}-remembered.checkpoint"
            b = folder / f"{stamp}-presented.checkpoint"
            write_atomic(a, kept, 0o644)
            write_atomic(b, seen, 0o644)
            if proof is not None:
                text = "".join(b64_encode(h) + "\n" for h in proof)
                write_atomic(folder / f"{stamp}-consistency.proof", text.encode(), 0o644)
        except BadInput as e:  # the failure stands; only the evidence is lost
            return f"the evidence was not written ({e})", None
        return f"both signed checkpoints are kept in {a} and {b}", str(b)

    def evidence(
        self, kept: bytes, seen: bytes, why: str, proof: Sequence[bytes] | None = None
    ) -> Equivocation:
        where, _ = self._keep(kept, seen, proof)
        return Equivocation(f"the log equivocates: {why}; {where}")

    def observe(
        self, note: bytes, vkey: NoteVerifier, prove: Prover | None = None, fix: str = "",
        witnesses: Sequence[NoteVerifier] = (),
    ) -> str:
        """Compare the verified signed checkpoint ``note`` with the one remembered for ``vkey``'s
        log; remember it when it is proven to extend it. Returns a one-line account;
        ``Equivocation`` or ``Unproven`` (with the evidence written, and ``fix`` said for an older
        checkpoint nothing here proves a prefix) when it cannot be accepted. Only the log's
        signature and the valid cosignatures of ``witnesses`` are kept, never other lines."""
        note = keep_verified(note, [vkey, *witnesses])
        cp = parse_checkpoint(note_text(note))
        self._private()
        if self.remembered(vkey) == note:  # written atomically: read whole, nothing to write
            return f"same as the checkpoint remembered (size {cp.size})"
        with self._locked():
            kept = self.remembered(vkey)
            if kept is None:
                self._store(vkey, note, {cp.size: cp.root})
                return f"first checkpoint remembered for {vkey.name} (size {cp.size})"
            try:  # the very bytes just verified and stripped: the same checkpoint
                old = cp if kept == note else parse_checkpoint(open_note(kept, [vkey]).text)
            except LedgerError:
                self._store(vkey, note, {cp.size: cp.root})  # a damaged cache: start again
                return f"remembered checkpoint was unreadable; now size {cp.size}"
            return self._compare(kept, old, note, cp, vkey, prove, fix or OLDER_FIX)

    def _compare(
        self, kept: bytes, old: Checkpoint, note: bytes, cp: Checkpoint, vkey: NoteVerifier,
        prove: Prover | None, fix: str,
    ) -> str:
        if cp.size == old.size:
            if cp.root != old.root:
                raise self.evidence(kept, note, f"two roots for tree size {cp.size}")
            if note_text(note) == note_text(kept) and tells_more(note, kept):
                seen = self.seen(vkey)
                seen[old.size] = old.root
                self._store(vkey, note, seen)  # keep the copy with more cosignatures
            return f"same as the checkpoint remembered (size {cp.size})"
        seen = self.seen(vkey)
        seen[old.size] = old.root
        if cp.size < old.size and cp.size in seen:
            if seen[cp.size] != cp.root:
                raise self.evidence(
                    kept, note,
                    f"another root for size {cp.size} than the one proven a prefix of size "
                    f"{old.size} before",
                )
            return f"verified before as a prefix of the remembered size {old.size}"
        small, big = (cp, old) if cp.size < old.size else (old, cp)
        if small.size == 0 and small.root != merkle.EMPTY_ROOT:
            raise self.evidence(kept, note, "a tree of size 0 whose root is not the empty root")
        proof = prove(small.size, big.size) if prove is not None and small.size > 0 else None
        if small.size > 0 and proof is None:
            if cp.size < old.size:
                where, _ = self._keep(kept, note)
                raise Unproven(
                    f"the checkpoint (size {cp.size}) is older than the size {old.size} this "
                    f"verifier already verified for {vkey.name} and nothing here proves it a "
                    f"prefix: {fix} ({where})"
                )
            return (
                f"larger than the remembered size {old.size}, but no consistency proof here "
                "(offline): not remembered"
            )
        if small.size > 0:
            try:
                merkle.verify_consistency(
                    small.size, big.size, small.root, big.root, list(proof or [])
                )
            except (ProofError, LedgerError) as e:
                raise self.evidence(
                    kept, note,
                    f"no consistency from size {small.size} to {big.size} ({e})", proof,
                ) from e
        seen[cp.size] = cp.root
        if cp.size > old.size:
            self._store(vkey, note, seen)
            return f"consistent with the remembered size {old.size}; now remembering {cp.size}"
        self._write_seen(vkey, seen)
        return f"a proven prefix of the remembered size {old.size}"

    def keep_unwitnessed(self, note: bytes) -> str:
        """Keep a checkpoint that lacked its witness quorum (evidence of a split view)."""
        try:
            folder = private_dir(self.root / "evidence", "evidence directory")
            path = folder / f"{_stamp()}-unwitnessed.checkpoint"
            write_atomic(path, note, 0o644)
        except BadInput as e:
            return f"nowhere ({e})"
        return str(path)

    def _store(self, vkey: NoteVerifier, note: bytes, seen: dict[int, bytes]) -> None:
        """The record first, then the note: a crash between the two leaves a record of
        prefixes of a tree at least as large as the one remembered."""
        self._write_seen(vkey, seen)
        write_atomic(self.path(vkey), note, 0o600, exclusive=False)


# -- the guard the commands apply -----------------------------------------------------------------


def guard(
    note: bytes,
    vkey: NoteVerifier,
    witnesses: Sequence[NoteVerifier],
    quorum: int,
    memory: CheckpointMemory | None,
    prove: Prover | None,
    fix: str = "",
) -> str:
    """Require the quorum on ``note`` (already verified under ``vkey``), then compare it with
    the checkpoint memory (``fix``: what to do about an older checkpoint nothing proves a prefix).
    Returns a one-line account; raises ``QuorumMissing`` (the presented note is kept as
    evidence), ``Equivocation`` or ``Unproven``."""
    parts: list[str] = []
    for w in witnesses:
        if w.public == vkey.public:
            raise BadInput(f"witness key {w.label} is the log's own key: a log cannot witness "
                           "itself")
    if witnesses:
        try:
            good, _bad = check_quorum(note, witnesses, quorum)
        except QuorumMissing as e:
            if memory is not None:
                kept = memory.keep_unwitnessed(keep_verified(note, [vkey, *witnesses]))
                raise QuorumMissing(f"{e}; the checkpoint is kept in {kept}") from e
            raise
        parts.append(f"{len(good)} of {len(witnesses)} witnesses cosigned (quorum {quorum})")
    if memory is not None:
        try:
            parts.append(memory.observe(note, vkey, prove, fix, witnesses))
        except BadInput as e:  # the cache cannot be read or written: said, not fatal
            parts.append(f"checkpoint memory not used ({e})")
    return "; ".join(parts)


def receipt_consistency(data: bytes) -> tuple[bytes, list[bytes]] | None:
    """The ``consistency`` member of a refreshed receipt: (old signed checkpoint, proof hashes)
    from the receipt's earlier checkpoint to its current one; None when absent or malformed."""
    try:
        obj = json.loads(data.decode("utf-8"))
        c = obj["consistency"]
        old = c["old_checkpoint"].encode("utf-8")
        hashes = [b64_decode(h, 32, "proof hash") for h in c["hashes"][:64]]
    except (KeyError, TypeError, ValueError, AttributeError, UnicodeError, LedgerError,
            RecursionError):
        return None
    return old, hashes


def receipt_prover(
    data: bytes, vkey: NoteVerifier, memory: CheckpointMemory
) -> Prover:
    """A prover for an offline receipt: its carried consistency proof, usable when it starts at
    the remembered checkpoint's size (the roots are checked by ``observe``)."""
    carried = receipt_consistency(data)

    def prove(old: int, new: int) -> Sequence[bytes] | None:
        if carried is None:
            return None
        note, hashes = carried
        try:
            cp = parse_checkpoint(open_note(note, [vkey]).text)
        except LedgerError:
            return None
        return hashes if cp.size == old else None

    return prove


def remember_store(
    home: Path, vkey: NoteVerifier, memory: CheckpointMemory, fix: str = "",
    witnesses: Sequence[NoteVerifier] = (), quorum: int = 0,
) -> str:
    """Compare the checkpoint a ledger directory holds (a mirror after a sync) with the memory,
    proving consistency from the entries it holds (and require the witness quorum on it)."""
    from ledger.store import open_store

    store = open_store(home, read_only=True)
    try:
        return guard(
            store.checkpoint(), vkey, witnesses, quorum, memory, store_prover(store), fix
        )
    finally:
        store.close()


def first_proof(*provers: Prover) -> Prover:
    """A prover asking each of ``provers`` in turn (the first proof found; ``observe`` checks
    every proof against both signed roots, so where one comes from does not matter)."""

    def prove(old: int, new: int) -> Sequence[bytes] | None:
        for p in provers:
            got = p(old, new)
            if got is not None:
                return got
        return None

    return prove


def local_store(home: Path, vkey: NoteVerifier) -> Store | None:
    """The ledger at ``home`` when it is the log ``vkey`` names (its recorded verifier key), for
    proofs an offline verification may use; None when there is none or it is another log."""
    from ledger.core.note import parse_vkey
    from ledger.store import open_store

    try:
        store = open_store(home, read_only=True)
    except LedgerError:
        return None
    try:
        recorded = parse_vkey(store.meta("vkey") or "")
    except LedgerError:
        recorded = None
    if recorded is None or (recorded.name, recorded.public) != (vkey.name, vkey.public):
        store.close()
        return None
    return store


def store_prover(store: Store) -> Prover:
    """Consistency proofs from a ledger's own entries, for trees no larger than it holds."""
    size = store.size()
    return lambda a, b: store.consistency_proof(a, b) if b <= size else None
