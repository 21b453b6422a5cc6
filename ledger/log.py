"""The log's write side (SPEC 4, 5, 6): init, key registration and revocation, sealing, checkpoints.

Every write is one ``Store.writer()`` transaction that (1) reads the size and root the new entry
will be chained to, (2) checks the rules (signer registered and unrevoked, no duplicate), (3) signs
and appends the entry, and (4) signs and stores a new checkpoint of the grown tree. A crash at any
moment leaves either the whole step or none of it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nacl.bindings
import nacl.signing

from ledger import sealers
from ledger.core import merkle
from ledger.core.bundle import Bundle
from ledger.core.encoding import b64_encode, hex_encode
from ledger.core.entries import (
    bundle_fields,
    chain_link,
    check_entry_shape,
    node_key_id,
    secret_key64,
    sign_entry,
)
from ledger.core.errors import (
    BadInput,
    CannotCheck,
    KeyFileError,
    LedgerError,
    LedgerStateError,
    TamperDetected,
)
from ledger.core.faults import kill_point
from ledger.core.fsutil import check_private_dir, fsync_dir, read_small, write_atomic
from ledger.core.gcpause import collector_paused
from ledger.core.note import (
    NoteSigner,
    NoteVerifier,
    format_skey,
    format_vkey,
    parse_skey,
    parse_vkey,
    sign_note,
)
from ledger.core.text import check_text
from ledger.core.vkeyfile import read_vkey_file
from ledger.revocation import checkpoint_body
from ledger.store import Store, create_store, open_store
from ledger.store.common import DB_NAME, LOCK_NAME, URL_NAME
from ledger.store.writer import Writer

if TYPE_CHECKING:  # key files (and their passphrase crypto) load only where a key is read
    from ledger.keys import NodePublic

LOG_KEY = "log.key"
LOG_VKEY = "log.vkey"
KEYDIR = "keys"


_NOW: list[Any] = [None, ""]  # (whole second, its text): one strftime per second, not per entry


def utc_now() -> str:
    second = int(time.time())
    if _NOW[0] != second:
        text = dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _NOW[:] = [second, text]
    return str(_NOW[1])


def pinned_vkey(home: Path) -> NoteVerifier | None:
    """The verifier key ``init`` wrote to ``LEDGER_HOME/log.vkey`` (and printed for pinning), or
    None where there is none (a mirror pins its key in its database at its first sync)."""
    path = home / LOG_VKEY
    if not os.path.lexists(path):
        return None
    return read_vkey_file(path)


def check_origin(origin: str) -> str:
    if (
        not origin
        or len(origin) > 200
        or not origin.isprintable()
        or any(c.isspace() or c == "+" for c in origin)
    ):
        raise BadInput(
            f"bad origin {origin!r}: use a schema-less URL-like name with no spaces or '+', "
            "e.g. example.com/kernels"
        )
    return origin


@dataclass(frozen=True, slots=True)
class Sealed:
    """One entry appended: its index, leaf hash and bytes. ``already``: nothing was appended, the
    key had sealed this bundle before and this is that entry (``Log.seal`` is idempotent)."""

    index: int
    leaf_hash: bytes
    entry: bytes
    already: bool = False


class Log:
    """A ledger opened for reading and, when its log key is present, writing."""

    def __init__(self, store: Store, signer: NoteSigner | None, verifier: NoteVerifier) -> None:
        self.store = store
        self.signer = signer
        self.verifier = verifier
        self._sealers: sealers.Sealers | None = None  # seal_many's workers, kept for the next

    @property
    def home(self) -> Path:
        return self.store.home

    @property
    def origin(self) -> str:
        return self.store.origin

    @property
    def keydir(self) -> Path:
        return self.store.home / KEYDIR

    # -- life cycle ----------------------------------------------------------------------------

    @classmethod
    def init(cls, home: Path, origin: str, db: str | None = None) -> Log:
        """Create a ledger in ``home``. Everything is validated first, then built in a private
        temporary directory next to ``home`` and renamed into place, so a failure or a crash
        leaves no half-built ledger that would block a second ``init``. With ``db`` (a
        ``postgresql://`` URL) the log lives in that database and ``home`` names it."""
        check_origin(origin)
        if db is not None:
            from ledger.store.postgres import check_url

            check_url(db)
        if any(os.path.lexists(home / n) for n in (DB_NAME, URL_NAME, LOG_KEY)):
            raise LedgerStateError(f"{home} holds a ledger already")
        if os.path.lexists(home) and not home.is_dir():
            raise LedgerStateError(f"{home} exists and is not a directory")
        if os.path.lexists(home):
            check_private_dir(home)
        parent = home.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{home.name}.init-", dir=parent))
        except OSError as e:
            raise BadInput(f"cannot create a ledger in {home}: {e.strerror}") from e
        try:
            cls._build(tmp, origin, db)
            cls._move_into_place(tmp, home)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return cls.open(home)

    @classmethod
    def _build(cls, home: Path, origin: str, db: str | None = None) -> None:
        seed = bytes(nacl.signing.SigningKey.generate())
        write_atomic(home / LOG_KEY, (format_skey(origin, seed) + "\n").encode(), 0o600)
        signer = parse_skey(format_skey(origin, seed))
        vkey = format_vkey(origin, signer.public)
        write_atomic(home / LOG_VKEY, (vkey + "\n").encode(), 0o644)
        store = create_store(home, origin, db)
        try:
            store.set_meta("vkey", vkey)
            log = cls(store, signer, parse_vkey(vkey))
            with store.writer() as w:
                log._checkpoint(w)
        finally:
            store.close()
        # read it back before it is moved into place: a write SQLite could not make (a full
        # disk while it checkpoints its WAL at close) must not become a ledger that is broken.
        # The WAL files stay: they may hold committed pages that close could not copy back.
        try:
            check = open_store(home, read_only=True)
            try:
                ok = check.meta("vkey") == vkey and check.size() == 0 and bool(check.checkpoint())
            finally:
                check.close()
        except (sqlite3.Error, LedgerError) as e:
            raise CannotCheck(f"could not build the ledger ({e}); nothing was created") from e
        if not ok:
            raise CannotCheck("could not build the ledger (it did not read back); nothing created")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(home / LOCK_NAME)

    @staticmethod
    def _move_into_place(tmp: Path, home: Path) -> None:
        try:
            os.rename(tmp, home)  # home absent, or an empty directory: one atomic step
            fsync_dir(home.absolute().parent)
            return
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise BadInput(f"cannot create a ledger in {home}: {e.strerror}") from e
        # home holds other files (e.g. keys/ made before init): move ours in, the database
        # last; it is what marks a ledger as existing
        last = [n for n in (DB_NAME + "-wal", DB_NAME + "-shm", DB_NAME, URL_NAME)
                if (tmp / n).exists()]
        for name in (LOG_VKEY, LOG_KEY, *last):
            try:
                os.link(tmp / name, home / name, follow_symlinks=False)
            except FileExistsError as e:
                raise LedgerStateError(f"{home} holds a ledger already ({name})") from e
            except OSError as e:
                raise BadInput(f"cannot create a ledger in {home}: {e.strerror}") from e
        fsync_dir(home)

    @classmethod
    def open(cls, home: Path, *, read_only: bool = False) -> Log:
        """The ledger in ``home``; ``read_only`` (every command that only reads): its database
        opened so that nothing can be written, and a schema older than this program reported
        (``ledger db migrate``), never migrated."""
        if os.path.lexists(home):
            check_private_dir(home)
        store = open_store(home, read_only=read_only)
        try:
            return cls._open(home, store)
        except BaseException:
            store.close()
            raise

    @classmethod
    def _open(cls, home: Path, store: Store) -> Log:
        vkey = store.meta("vkey")
        pinned = pinned_vkey(home)
        if pinned is not None:  # init recorded the key in both: the database's was altered
            try:
                verifier = parse_vkey(vkey or "")
            except BadInput as e:
                what = "no verifier key" if vkey is None else f"no valid verifier key ({e})"
                raise TamperDetected(
                    f"the database records {what}, but {home / LOG_VKEY} holds the one recorded "
                    "at init: the database was altered"
                ) from e
        elif vkey is None:
            raise LedgerStateError(f"{home}: ledger has no verifier key recorded")
        else:
            verifier = parse_vkey(vkey)
        if pinned is not None and (pinned.public, pinned.name) != (verifier.public, verifier.name):
            raise TamperDetected(
                f"the database's verifier key is not the one recorded at init in {home / LOG_VKEY}"
            )
        signer = None
        keyfile = home / LOG_KEY
        if os.path.lexists(keyfile):
            # the messages never quote the file: it is the log's secret
            try:
                data = read_small(keyfile, 4096, "log key", follow_symlinks=False)
            except BadInput as e:
                raise KeyFileError(f"cannot read log key {keyfile}: {e}") from e
            try:
                signer = parse_skey(data.decode("utf-8").strip())
            except UnicodeDecodeError as e:
                raise KeyFileError(f"{keyfile} is not a log key file (not UTF-8 text)") from e
            except BadInput as e:
                raise KeyFileError(
                    f"{keyfile} is not a log key file (expected PRIVATE+KEY+...)"
                ) from e
        if signer is not None and signer.public != verifier.public:
            raise KeyFileError(f"{keyfile} does not match the ledger's verifier key")
        return cls(store, signer, verifier)

    def close(self) -> None:
        if self._sealers is not None:
            self._sealers.close()
            self._sealers = None
        self.store.close()

    def _require_signer(self) -> NoteSigner:
        if self.signer is None:
            raise LedgerStateError(
                f"{self.home} has no log key ({LOG_KEY}): this ledger is a mirror and is read-only"
            )
        return self.signer

    def _log_signing_key(self) -> nacl.signing.SigningKey:
        return nacl.signing.SigningKey(self._require_signer().seed)

    def _checkpoint(self, w: Writer) -> bytes:
        text = checkpoint_body(self.store, w.size, w.root())
        note = sign_note(text, [self._require_signer()])
        w.put_checkpoint(note, w.size)
        return note

    def _chain(self, w: Writer) -> dict[str, Any]:
        """The chain link of an entry written here: a v2 link naming the tree just before it."""
        return {"origin": self.origin, "time": utc_now(), **chain_link(w.size, w.root())}

    # -- keys ----------------------------------------------------------------------------------

    def register(self, public: NodePublic) -> Sealed:
        key = self._log_signing_key()
        with self.store.writer() as w:
            if self.store.key_row(public.key_id) is not None:
                raise BadInput(f"node key {hex_encode(public.key_id)} is registered already")
            fields = {
                "type": "key-registration",
                **self._chain(w),
                "key_id": hex_encode(public.key_id),
                "name": public.name,
                "public_key": b64_encode(public.public),
                "pop": b64_encode(public.pop),
            }
            check_entry_shape(fields)
            entry = sign_entry(fields, key)
            idx = w.append(entry, "key-registration")
            self._checkpoint(w)
        return Sealed(idx, merkle.leaf_hash(entry), entry)

    def revoke(self, key_id: bytes, reason: str) -> Sealed:
        if not reason.strip() or len(reason) > 500:
            raise BadInput("give a --reason of 1 to 500 characters")
        check_text(reason, "--reason")  # one line, no control or bidi character
        key = self._log_signing_key()
        with self.store.writer() as w:
            row = self.store.key_row(key_id)
            if row is None:
                raise BadInput(f"no registered node key {hex_encode(key_id)}")
            if row.revoked_at is not None:
                raise BadInput(
                    f"node key {hex_encode(key_id)} was revoked already at entry {row.revoked_at}"
                )
            fields = {
                "type": "key-revocation",
                **self._chain(w),
                "key_id": hex_encode(key_id),
                "reason": reason,
            }
            entry = sign_entry(fields, key)
            idx = w.append(entry, "key-revocation")
            self._checkpoint(w)
        return Sealed(idx, merkle.leaf_hash(entry), entry)

    def check_may_seal(self, key_id: bytes) -> None:
        row = self.store.key_row(key_id)
        if row is None:
            raise BadInput(
                f"node key {hex_encode(key_id)} is not registered in this ledger "
                "(run `ledger keys register NAME`)"
            )
        if row.revoked_at is not None:
            raise BadInput(
                f"node key {hex_encode(key_id)} was revoked at entry {row.revoked_at}: "
                f"{row.revoke_reason}"
            )

    # -- sealing -------------------------------------------------------------------------------

    def seal(
        self,
        bundle: Bundle,
        fields: Mapping[str, Any],
        node: nacl.signing.SigningKey,
    ) -> Sealed:
        """Append a ``bundle`` entry for ``bundle`` with the extra ``fields`` (kernel, obligations,
        checks), signed by the node key; store every file as a blob. Idempotent (issue 33 item
        8): a bundle this key sealed before is answered with that entry (``Sealed.already``),
        nothing appended, so a retry after a crash or a lost receipt never makes a second one."""
        kid = node_key_id(bytes(node.verify_key))
        with self.store.writer() as w:
            self.check_may_seal(kid)
            held = self.sealed_by(bundle.digest, kid)
            if held is not None:
                data = self.store.entry(held)
                return Sealed(held, merkle.leaf_hash(data), data, already=True)
            obj = bundle_fields(self._chain(w), bundle, fields, kid)
            check_entry_shape(obj)
            entry = sign_entry(obj, node)
            w.put_blobs((f.digest, f.data) for f in bundle.files)
            idx = w.append(entry, "bundle", bundle.digest)
            self._checkpoint(w)
            kill_point("seal.appended")
        kill_point("seal.committed")
        return Sealed(idx, merkle.leaf_hash(entry), entry)

    def sealed_by(self, digest: bytes, key_id: bytes) -> int | None:
        """The entry by which node key ``key_id`` sealed the bundle ``digest``, if it did."""
        for idx in self.store.indices_for_digest(digest):
            if self._signer_of(idx) == hex_encode(key_id):
                return idx
        return None

    def seal_many(
        self,
        items: Iterable[tuple[Bundle, Mapping[str, Any]]],
        node: nacl.signing.SigningKey,
        workers: int | None = None,
    ) -> list[Sealed]:
        """Append many bundle entries in one transaction and one checkpoint (batch import).

        Every entry of the batch names the tree the batch starts from (a v2 link: a verified
        prefix of the log, SPEC 4), so no root is hashed per entry, and the plainness walk of
        the canonical encoding is skipped for entries ``plain_entry`` vouches for (issue 12).
        A batch of ``sealers.MIN_BATCH`` entries or more is made into entries (fields, shape
        rules, encoding, signature) by ``workers`` forked processes (default: one per CPU,
        ``sealers.worker_count``; 0: this thread alone) while this process stores them in
        order; a thread would not do, since signing keeps the GIL (ledger/sealers.py,
        bench/bench_append_parts.py); the workers stay for the next batch of the same key
        until ``close``. The result is the same either way: the same entries in the same order,
        the batch refused at the same first bad entry, nothing stored then. Such a batch leaves
        the copy of its WAL into the database file to a thread (``ledger.store.walcheckpoint``)."""
        batch = list(items)
        kid = node_key_id(bytes(node.verify_key))
        sk64 = secret_key64(node)
        count = sealers.worker_count(len(batch)) if workers is None else workers
        pool = None
        if count > 0 and batch:
            pool = self._sealers
            if pool is None or not pool.serves(count, sk64, kid, utc_now):
                if pool is not None:
                    pool.close()
                self._sealers = pool = sealers.Sealers(count, sk64, kid, utc_now)
        return self._seal_batch(batch, kid, sk64, pool)

    def _seal_batch(
        self,
        batch: list[tuple[Bundle, Mapping[str, Any]]],
        kid: bytes,
        sk64: bytes,
        pool: sealers.Sealers | None,
    ) -> list[Sealed]:
        out: list[Sealed] = []
        # a large batch leaves the copy of its WAL pages into the database file to a thread of
        # the store (ledger.store.walcheckpoint): the commit is as durable, and the caller goes on;
        # the batch makes no reference cycles, so the collector waits (ledger.core.gcpause)
        with collector_paused(), self.store.writer(
            checkpoint_later=len(batch) >= sealers.MIN_BATCH
        ) as w:
            self.check_may_seal(kid)
            link = {"origin": self.origin, **chain_link(w.size, w.root())}
            if pool is None:
                made, refused = sealers.bundle_entries(link, batch, kid, sk64, utc_now)
                chunks: Iterable[sealers.Chunk] = [sealers.Chunk(made, refused, None)]
            else:
                chunks = pool.chunks(link, w.size, batch)
            done = 0
            try:
                for chunk in chunks:
                    first = w.size
                    part = batch[done : done + len(chunk.made)]
                    w.put_bundle_files(first, [b.files for b, _ in part])
                    w.append_bundles(chunk.made, [b.digest for b, _ in part], chunk.levels)
                    out.extend(Sealed(first + k, lh, e) for k, (e, lh) in enumerate(chunk.made))
                    done += len(chunk.made)
                    if chunk.refused is not None:
                        raise BadInput(chunk.refused)
            finally:
                if isinstance(chunks, Generator):  # stopped early: the workers stop now
                    chunks.close()
            if done != len(batch):
                raise CannotCheck(f"the sealing workers made {done} of {len(batch)} entries")
            self._checkpoint(w)
        return out

    def _signer_of(self, idx: int) -> str:
        from ledger.core.entries import decode_entry

        return decode_entry(self.store.entry(idx)).signer or ""
