"""``ledger publish DEST``: the log as static files, for any static web server or S3-compatible
object store (SPEC 7; issue 13 "static publishing").

What is written (paths relative to DEST; the same URL space ``ledger serve`` answers, so one
client follows either):

============================  ==========================================  =======================
path                          content                                     headers (S3 metadata)
============================  ==========================================  =======================
``tile/<L>/<N>[.p/<W>]``      C2SP tlog-tiles hash tiles                  octet-stream, immutable
``tile/entries/<N>[.p/<W>]``  entry bundles, **gzip-compressed** bytes    octet-stream, immutable,
                                                                          ``Content-Encoding: gzip``
``api/v1/blobs/<hex>``        bundle files by BLAKE3 digest (raw bytes)   octet-stream, immutable
``checkpoint``                the signed checkpoint note (with any        text/plain; utf-8,
                              witness cosignatures the log collected)     ``no-cache``
============================  ==========================================  =======================

C2SP tlog-tiles lets a log serve entry bundles with ``Content-Encoding: gzip`` without
negotiation; the files hold the compressed bytes, so the web server must send that header for
``tile/entries/`` (docs/scale-out.md has the nginx lines; on S3 it is the object's metadata).
Every tile path names content that never changes (a partial tile ``.p/<W>`` is the first W
hashes, fixed forever by the append-only tree), and so does a blob path (its digest): they are
all ``Cache-Control: public, max-age=31536000, immutable``.

**Order and increments.** The checkpoint at DEST is the publication's state: everything its tree
needs is there before it is written. A run reads it first: another origin, a larger tree or
another root at its size is refused (``BadInput``, exit 2: DEST holds another log or a fork, and
nothing is written); otherwise only the tiles of the new tree that the old one did not have
(every full tile of the old tree is left alone) and the blobs named by the new entries are
written, then the checkpoint, **last**. A blob already at DEST is kept only when it holds
exactly the bytes the log signed (``Target.holds``: in a directory its size and bytes, read back
and fsynced; in a bucket its size and the MD5 ETag, or its bytes), never on its name alone: a
zero-length or short file a crash left is written again. A run that stops half-way leaves the
old checkpoint, with its tree whole; the next run writes the rest again and repairs what the
stopped run left damaged.

**Only what the log signed** (docs/threat-model.md, section 7): the checkpoint must verify under
the log's key and equal the root of the tiles' hashes (``tiled_root``), each tile hash is checked
against its entry or the full tile below it and each bundle file against its BLAKE3 digest as it
is made, else ``TamperDetected`` (exit 1) and DEST's checkpoint is not written. DEST's checkpoint
is read again just before it is replaced (``published_state``) and, in a bucket, replaced with a
conditional write on what was read (``If-Match`` its ETag, ``If-None-Match: *`` when there was
none; ``put_checkpoint``): it never goes back, even with another publisher writing it at once.

Directories: DEST may not be, hold or lie in the ledger directory (``check_outside_home``: a web
server would serve ``log.key``); DEST is locked (``flock``) for the run; everything beneath it is
reached through directory descriptors with ``O_NOFOLLOW`` (a planted symlink is refused or
replaced, never followed); files are written to a temporary name, fsynced and renamed (a reader
never sees half a file, a power cut never leaves an empty one under the name), their directories
fsynced before the checkpoint is written and fsynced.
Buckets:
``s3://bucket/prefix`` through boto3 (credentials from its usual chain; ``--endpoint-url`` for a
non-AWS store), uploads in parallel (``PUT_THREADS``); the URL and the endpoint carry no
credentials, and no message shows a secret (``parse_s3_url``, ``check_endpoint_url``, ``scrub``).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ledger.core import merkle
from ledger.core.bundle import blake3_digest, manifest_digests
from ledger.core.encoding import hex_encode
from ledger.core.errors import BadInput, CannotCheck, LedgerError, LedgerStateError, TamperDetected
from ledger.core.fsutil import read_fd_bounded
from ledger.core.note import Checkpoint, NoteVerifier, note_text, open_note, parse_checkpoint
from ledger.core.tiles import (
    TILE_HEIGHT,
    TILE_WIDTH,
    entries_tile_path,
    entry_bundle,
    hash_tile,
    tile_path,
    tiles_for_size,
)
from ledger.store import Store, open_store

IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"
OCTETS = "application/octet-stream"
NOTE_TYPE = "text/plain; charset=utf-8"
BLOB_PREFIX = "api/v1/blobs/"
PUT_THREADS = 8
MAX_CHECKPOINT_BYTES = 1 << 20
ENTRIES_PER_READ = 4096  # entries read from the store per step (bounded memory)


@dataclass(frozen=True)
class Obj:
    """One file to publish: its key (path under DEST), bytes and HTTP metadata."""

    key: str
    data: bytes
    content_type: str = OCTETS
    cache_control: str = IMMUTABLE
    encoding: str | None = None


class Target(Protocol):
    """Where files go: a directory or a bucket prefix."""

    def describe(self) -> str: ...
    def lock(self) -> None: ...
    def read(self, key: str, limit: int) -> bytes | None: ...
    def read_tagged(self, key: str, limit: int) -> tuple[bytes | None, str | None]: ...
    def holds(self, key: str, data: bytes) -> bool: ...
    def put(self, obj: Obj) -> None: ...
    def put_if(self, obj: Obj, tag: str | None) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class DirTarget:
    """A directory tree; headers are the web server's job (docs/scale-out.md).

    DEST itself is opened once (a symlink given as DEST is followed: it is the user's choice);
    everything beneath it is reached through directory descriptors (``openat`` with
    ``O_NOFOLLOW``), so a symlink planted at any level (a tile directory, a tile, the checkpoint)
    is never written or read through: a directory that is a symlink is refused, a file that is
    one is replaced (``ledger.core.fsutil.write_atomic_at``). A run holds an exclusive ``flock`` on
    DEST for its whole length (``lock``); a second publish into DEST meanwhile is refused."""

    threads = 1  # local writes: one thread (the page cache does the rest)

    def __init__(self, root: Path) -> None:
        if root.exists() and not root.is_dir():
            raise BadInput(f"{root} exists and is not a directory")
        self.root = root
        self._fds: dict[str, int] = {}

    def describe(self) -> str:
        return str(self.root)

    def _root_fd(self) -> int:
        fd = self._fds.get("")
        if fd is None:
            from ledger.core.fsutil import make_parents

            try:
                if not os.path.isdir(self.root):
                    make_parents(self.root)
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(self.root, 0o755)
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                raise BadInput(f"cannot use {self.root} as DEST: {e.strerror or e}") from e
            self._fds[""] = fd
        return fd

    def _dir_fd(self, rel: str, create: bool) -> int | None:
        """The descriptor of directory ``rel`` beneath DEST (made when ``create``), reached one
        component at a time without following a symlink; None when it is absent and not made."""
        if rel in self._fds:
            return self._fds[rel]
        fd = self._root_fd()
        done = ""
        for part in rel.split("/") if rel else []:
            done = f"{done}/{part}" if done else part
            if done in self._fds:
                fd = self._fds[done]
                continue
            if create:
                with contextlib.suppress(FileExistsError):
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except OSError as e:
                        if e.errno != errno.EEXIST:
                            raise BadInput(f"cannot create {self.root / done}: "
                                           f"{e.strerror or e}") from e
            try:
                fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise BadInput(f"cannot create {self.root / done}") from None
                return None
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise BadInput(f"{self.root / done} is a symlink or not a directory: "
                                   "refusing to publish through it") from e
                raise BadInput(f"cannot use {self.root / done}: {e.strerror or e}") from e
            self._fds[done] = fd
        return fd

    def lock(self) -> None:
        """Take DEST's exclusive lock (on the directory itself: nothing is added to DEST) and
        refuse a symlink at any of the fixed directories before anything is written."""
        import fcntl

        try:
            fcntl.flock(self._root_fd(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            raise CannotCheck(f"{self.root}: another publish into it is under way; run this "
                              "one again when it has finished") from e
        except OSError as e:
            raise CannotCheck(f"{self.root}: cannot lock it ({e.strerror or e})") from e
        for rel in ("tile", "tile/entries", "api", "api/v1", BLOB_PREFIX.rstrip("/")):
            self._dir_fd(rel, create=False)  # a planted symlink is refused before any write

    def read(self, key: str, limit: int) -> bytes | None:
        from ledger.core.fsutil import read_open

        parent, _, name = key.rpartition("/")
        dfd = self._dir_fd(parent, create=False)
        if dfd is None:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise BadInput(f"{self.root / key} is a symlink: refusing to read through it "
                               "(remove it; publish writes a regular file there)") from e
            raise BadInput(f"cannot read {self.root / key}: {e.strerror or e}") from e
        return read_open(fd, str(self.root / key), limit, regular_only=True)

    def read_tagged(self, key: str, limit: int) -> tuple[bytes | None, str | None]:
        return self.read(key, limit), None  # DEST is locked for the run: no tag needed

    def holds(self, key: str, data: bytes) -> bool:
        """Whether a regular file (not a symlink) at ``key`` holds exactly ``data`` (its size,
        then its bytes): only then is it kept, after an fsync (it may be the unsynced file of a
        run that crashed, and the checkpoint about to name it must find it on the disk). Anything
        else (a short or zero-length file a power cut left, other bytes) is rewritten."""
        parent, _, name = key.rpartition("/")
        dfd = self._dir_fd(parent, create=False)
        if dfd is None:
            return False
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dfd)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
                return False
            if read_fd_bounded(fd, len(data)) != data:
                return False
            os.fsync(fd)
        except OSError:
            return False
        finally:
            os.close(fd)
        return True

    def put(self, obj: Obj) -> None:
        """Write ``obj`` under a temporary name, fsync it, rename it into place (and fsync its
        directory): a file is on the disk before any checkpoint names it."""
        from ledger.core.fsutil import write_atomic_at

        parent, _, name = obj.key.rpartition("/")
        dfd = self._dir_fd(parent, create=True)
        assert dfd is not None
        write_atomic_at(dfd, name, obj.data, 0o644, fsync=True, shown=str(self.root / obj.key))

    def put_if(self, obj: Obj, tag: str | None) -> None:
        self.put(obj)  # DEST's lock is held: nobody else writes it meanwhile

    def flush(self) -> None:
        """Every directory made or written in is fsynced (its new entries reach the disk) before
        the checkpoint is written; every file was fsynced as it was written (``put``)."""
        for fd in list(self._fds.values()):
            try:
                os.fsync(fd)
            except OSError as e:
                raise CannotCheck(f"{self.root}: cannot sync it to disk ({e.strerror or e})") from e

    def close(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # the lock goes with the root's descriptor
        self._fds.clear()


class S3Target:
    """``s3://bucket/prefix`` through boto3 (imported here: only publish needs it)."""

    threads = PUT_THREADS

    def __init__(self, url: str, endpoint_url: str | None = None, client: Any = None) -> None:
        self.bucket, self.prefix = parse_s3_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        if endpoint_url is not None:
            check_endpoint_url(endpoint_url)
        if client is None:
            try:
                import boto3
                from botocore.config import Config
                from botocore.exceptions import BotoCoreError
            except ImportError as e:
                raise BadInput(
                    "publishing to s3:// needs boto3 (pip install 'kernel-ledger[s3]')"
                ) from e
            try:
                client = boto3.client(
                    "s3",
                    endpoint_url=endpoint_url,
                    config=Config(
                        max_pool_connections=PUT_THREADS * 2,
                        retries={"max_attempts": 5, "mode": "standard"},
                        connect_timeout=10,
                        read_timeout=60,
                    ),
                )
            except (BotoCoreError, ValueError) as e:  # a bad region, an endpoint boto refuses
                raise BadInput(f"{self.url}: cannot set up the S3 client: "
                               f"{scrub(str(e), endpoint_url)}") from e
        self.s3 = client
        self.endpoint_url = endpoint_url

    def describe(self) -> str:
        return self.url

    def lock(self) -> None:
        pass  # a bucket has no lock: the checkpoint is read again before it is written

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, what: str, e: Exception) -> LedgerError:
        from botocore.exceptions import ClientError, NoCredentialsError

        if isinstance(e, NoCredentialsError):
            return BadInput(f"{self.url}: no S3 credentials (none found in the environment or "
                            "the AWS configuration files)")
        if isinstance(e, ClientError):
            code = str(e.response.get("Error", {}).get("Code", "?"))[:64]
            if code in ("NoSuchBucket", "AccessDenied", "InvalidAccessKeyId",
                        "SignatureDoesNotMatch", "InvalidBucketName"):
                return BadInput(f"{self.url}: {what}: {code}")
            return CannotCheck(f"{self.url}: {what}: {code}")
        text = scrub(" ".join(str(e).split()), self.endpoint_url)[:200]
        return CannotCheck(f"{self.url}: {what}: {text}")

    def read(self, key: str, limit: int) -> bytes | None:
        return self.read_tagged(key, limit)[0]

    def read_tagged(self, key: str, limit: int) -> tuple[bytes | None, str | None]:
        """(the object's bytes, its ETag); (None, None) when there is none."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            got = self.s3.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None, None
            raise self._fail(f"reading {key}", e) from e
        except BotoCoreError as e:
            raise self._fail(f"reading {key}", e) from e
        body = got["Body"]
        try:
            data: bytes = body.read(limit + 1)
        finally:
            body.close()
        if len(data) > limit:
            raise BadInput(f"{self.url}/{key} is over {limit} bytes")
        tag = got.get("ETag")
        return data, tag if isinstance(tag, str) else None

    def holds(self, key: str, data: bytes) -> bool:
        """Whether the object at ``key`` holds exactly ``data``: its size, then its MD5 when the
        ETag is one (a single-part upload's), else its bytes read back."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail(f"looking up {key}", e) from e
        except BotoCoreError as e:
            raise self._fail(f"looking up {key}", e) from e
        if head.get("ContentLength") != len(data):
            return False
        etag = str(head.get("ETag", "")).strip('"')
        if _MD5_HEX.fullmatch(etag):
            return etag == hex_encode(hashlib.md5(data, usedforsecurity=False).digest())
        return self.read(key, len(data)) == data

    def put(self, obj: Obj) -> None:
        self._put(obj, {})

    def put_if(self, obj: Obj, tag: str | None) -> None:
        """Write ``obj`` only if the object is still the one read with ETag ``tag`` (``If-Match``),
        or, with no tag, only if there is none (``If-None-Match: *``); ``Moved`` when the store
        refuses (412 or 409: another publisher wrote it meanwhile)."""
        self._put(obj, {"IfMatch": tag} if tag is not None else {"IfNoneMatch": "*"})

    def _put(self, obj: Obj, extra: dict[str, str]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        if obj.encoding:
            extra["ContentEncoding"] = obj.encoding
        try:
            self.s3.put_object(
                Bucket=self.bucket, Key=self._key(obj.key), Body=obj.data,
                ContentType=obj.content_type, CacheControl=obj.cache_control, **extra,
            )
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _MOVED_CODES or status in (409, 412):
                raise Moved(f"{self.url}/{obj.key} changed while this run worked ({code})") from e
            raise self._fail(f"writing {obj.key}", e) from e
        except BotoCoreError as e:
            raise self._fail(f"writing {obj.key}", e) from e

    def flush(self) -> None:
        pass  # a PUT that returned is stored

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.s3.close()


_MD5_HEX = re.compile(r"[0-9a-f]{32}")
_MOVED_CODES = ("PreconditionFailed", "ConditionalRequestConflict")


class Moved(CannotCheck):
    """DEST's checkpoint changed between this run's read and its conditional write."""


_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,253}[A-Za-z0-9]")
_SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def shown_url(url: str) -> str:
    """``url`` as a message may show it: no user name or password, no query, no fragment (where a
    presigned signature or a token would be), at most 200 characters."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return "the URL given"
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    shown = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path
    if parts.query or parts.fragment:
        shown += "?***"
    return repr(shown[:200]) if not shown.isprintable() else shown[:200]


def scrub(text: str, *urls: str | None) -> str:
    """``text`` without the secrets a boto message could carry: the values of the AWS secret
    environment variables and any URL's user information (``user:password@``)."""
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    for url in urls:
        if url:
            with contextlib.suppress(ValueError):
                netloc = urlsplit(url).netloc
                if "@" in netloc:
                    text = text.replace(netloc.rpartition("@")[0], "***")
    return re.sub(r"(?<=://)[^/\s\"'@]+@", "***@", text)


def parse_s3_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix]``; BadInput, never quoting a credential or
    query the URL carries, for anything else: user information, a query or fragment, a bucket
    name S3 does not allow, control characters or ``.``/``..`` segments in the prefix."""
    bad = f"{shown_url(url)}: expected s3://bucket[/prefix]"
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise BadInput(bad) from e
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise BadInput(bad)
    if "@" in parts.netloc or ":" in parts.netloc:
        raise BadInput(f"{shown_url(url)}: an s3:// URL carries no credentials or port (give "
                       "credentials as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, an endpoint "
                       "as --endpoint-url)")
    bucket = parts.netloc
    if _BUCKET.fullmatch(bucket) is None:
        raise BadInput(f"{shown_url(url)}: not a valid bucket name (3-255 letters, digits, '.', "
                       "'-', '_')")
    prefix = parts.path.strip("/")
    segments = prefix.split("/") if prefix else []
    if not prefix.isprintable() or "\\" in prefix or any(s in (".", "..") for s in segments):
        raise BadInput(f"{shown_url(url)}: the prefix holds a control character, a backslash "
                       "or a '.'/'..' segment")
    return bucket, prefix


def check_endpoint_url(endpoint_url: str) -> None:
    """An S3 endpoint is ``http(s)://host[:port][/path]``: no credentials (they would be printed
    in messages and sent in the clear), no query; BadInput naming it without them otherwise."""
    try:
        parts = urlsplit(endpoint_url)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError as e:
        raise BadInput(f"--endpoint-url {shown_url(endpoint_url)}: not an http(s) URL") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--endpoint-url {shown_url(endpoint_url)}: not an http(s) URL")
    if "@" in parts.netloc:
        raise BadInput(f"--endpoint-url {shown_url(endpoint_url)}: credentials do not belong in "
                       "the URL; give them as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY")
    if parts.query or parts.fragment or not endpoint_url.isprintable():
        raise BadInput(f"--endpoint-url {shown_url(endpoint_url)}: not an http(s) URL")


def open_target(dest: str, endpoint_url: str | None = None) -> DirTarget | S3Target:
    if dest.startswith("s3://"):
        return S3Target(dest, endpoint_url)
    if "://" in dest:
        raise BadInput(f"{shown_url(dest)}: DEST is a directory or s3://bucket/prefix")
    if endpoint_url is not None:
        raise BadInput("--endpoint-url is only for an s3:// destination")
    return DirTarget(Path(dest))


@dataclass(frozen=True)
class PublishResult:
    destination: str
    origin: str
    old_size: int
    size: int
    tiles: int
    blobs: int
    bytes: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "origin": self.origin,
            "old_size": self.old_size,
            "tree_size": self.size,
            "tiles": self.tiles,
            "blobs": self.blobs,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
        }


def gzip_bytes(data: bytes) -> bytes:
    """Reproducible gzip (no timestamp, no name): the same bundle gives the same file."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def published_state(
    target: Target, store: Store, cp: Checkpoint, vk: NoteVerifier | None = None
) -> tuple[int, str | None]:
    """(the tree size DEST's checkpoint publishes, the tag to write over it on condition), after
    checking it is this log's own tree (signed by its key ``vk`` when given) and no larger than
    ``cp``; (0, None) when DEST holds none."""
    old, tag = target.read_tagged("checkpoint", MAX_CHECKPOINT_BYTES)
    if old is None:
        return 0, None
    where = target.describe()
    try:
        prev = parse_checkpoint(note_text(old))
    except LedgerError as e:
        raise BadInput(f"{where}/checkpoint is not a checkpoint note ({e}); refusing to "
                       "publish over it") from e
    if prev.origin != cp.origin:
        raise BadInput(f"{where} publishes another log ({prev.origin!r}, not {cp.origin!r})")
    if prev.size > cp.size:
        raise BadInput(f"{where} publishes a tree of size {prev.size}, larger than this "
                       f"ledger's {cp.size}: refusing to roll it back")
    if prev.size > 0 and store.root(prev.size) != prev.root:
        raise BadInput(f"{where} publishes a tree of size {prev.size} with another root than "
                       "this ledger's: refusing to publish over another history")
    if vk is not None:
        try:
            open_note(old, [vk])
        except LedgerError as e:
            raise BadInput(f"{where}/checkpoint is not signed by this log's key {vk.label}: "
                           "refusing to publish over it") from e
    return prev.size, tag


def check_outside_home(home: Path, dest: Path) -> None:
    """Refuse a DEST that is the ledger directory, lies inside it, or holds it (symlinks
    resolved): a web server serving DEST would serve ``log.key`` and ``keys/``."""
    real_home, real_dest = os.path.realpath(home), os.path.realpath(dest)
    if os.path.commonpath([real_home, real_dest]) in (real_home, real_dest):
        raise BadInput(
            f"{dest}: DEST is the ledger directory {home}, inside it or above it: a web server "
            "serving DEST would serve the log's private key; publish to a directory outside it"
        )


def log_verifier(home: Path, store: Store) -> NoteVerifier:
    """The log's key: the one ``init`` wrote to ``log.vkey`` (or a mirror pinned), which the
    database's record must equal."""
    from ledger.core.note import parse_vkey
    from ledger.log import pinned_vkey

    pinned = pinned_vkey(home)
    try:
        recorded = parse_vkey(store.meta("vkey") or "")
    except BadInput as e:
        raise TamperDetected("the database records no valid verifier key: refusing to "
                             "publish (run `ledger audit`)") from e
    if pinned is not None and (pinned.name, pinned.public) != (recorded.name, recorded.public):
        raise TamperDetected(f"the database's verifier key is not the one in {home}/log.vkey: "
                             "refusing to publish (run `ledger audit`)")
    return pinned or recorded


def tiled_root(size: int, get: merkle.GetStored) -> bytes:
    """The root of the tree of ``size`` leaves from the hashes the tiles publish (heights 0, 8,
    16, ...) alone, as a tile client computes it; the other heights are hashed here."""
    made: dict[tuple[int, int], bytes] = {}

    def tiled(level: int, n: int) -> bytes:
        if level % TILE_HEIGHT == 0:
            return get(level, n)
        got = made.get((level, n))
        if got is None:
            got = made[(level, n)] = merkle.node_hash(
                tiled(level - 1, 2 * n), tiled(level - 1, 2 * n + 1))
        return got

    return merkle.tree_root(size, tiled)


def _hashes(tile: bytes) -> list[bytes]:
    return [tile[i : i + merkle.HASH_SIZE] for i in range(0, len(tile), merkle.HASH_SIZE)]


def new_tiles(old: int, new: int) -> list[tuple[int, int, int]]:
    """The hash tiles of the tree of ``new`` leaves that the tree of ``old`` lacks."""
    had = set(tiles_for_size(old))
    return [t for t in tiles_for_size(new) if t not in had]


def tile_objects(
    store: Store, tiles: list[tuple[int, int, int]], compress: bool = True
) -> Iterator[Obj]:
    """The tiles' files, each checked before it is handed out: a level-0 hash must be the leaf
    hash of its entry, a higher hash the root of the full tile below it (``TamperDetected``
    otherwise), so every file is bound to the root the checkpoint signs (``tiled_root``)."""
    get = store.stored_hash
    below: dict[tuple[int, int], bytes] = {}  # roots of the full tiles made in this run
    for level, n, width in tiles:
        tile = hash_tile(level, n, width, get)
        hashes = _hashes(tile)
        start = n * TILE_WIDTH
        entries: list[bytes] = []
        if level == 0:
            entries = list(store.entries(start, start + width))
            for i, h in enumerate(hashes):
                if i >= len(entries) or merkle.leaf_hash(entries[i]) != h:
                    raise TamperDetected(f"entry {start + i} does not match its stored leaf "
                                         "hash: refusing to publish (run `ledger audit`)")
        else:
            for i, h in enumerate(hashes):
                sub = below.pop((level - 1, start + i), None)
                if sub is None:
                    sub = merkle.root_from_leaf_hashes(
                        _hashes(hash_tile(level - 1, start + i, TILE_WIDTH, get)))
                if sub != h:
                    raise TamperDetected(
                        f"stored hash ({TILE_HEIGHT * level}, {start + i}) is not the root of "
                        "the hashes below it: refusing to publish (run `ledger audit`)")
        if width == TILE_WIDTH:
            below[(level, n)] = merkle.root_from_leaf_hashes(hashes)
        yield Obj(tile_path(level, n, width), tile)
        if level == 0:
            bundle = entry_bundle(entries)
            if compress:
                yield Obj(entries_tile_path(n, width), gzip_bytes(bundle), encoding="gzip")
            else:
                yield Obj(entries_tile_path(n, width), bundle)


def named_blobs(store: Store, start: int, end: int) -> Iterator[tuple[bytes, int]]:
    """The digests of the bundle files named by entries ``[start, end)`` (each once per call),
    each with the index of the first entry naming it (where the store keeps it)."""
    seen: set[bytes] = set()
    for lo in range(start, end, ENTRIES_PER_READ):
        for k, data in enumerate(store.entries(lo, min(end, lo + ENTRIES_PER_READ))):
            if b'"manifest"' not in data:
                continue
            try:
                entry = json.loads(data)
            except ValueError:
                continue
            manifest = entry.get("manifest") if isinstance(entry, dict) else None
            if entry.get("type") != "bundle" or not isinstance(manifest, str):
                continue
            for digest in manifest_digests(manifest.encode("utf-8")):
                if digest not in seen:
                    seen.add(digest)
                    yield digest, lo + k


def publish(
    home: Path,
    target: DirTarget | S3Target,
    progress: Callable[[int, int], None] | None = None,
    blobs: bool = True,
    compress: bool = True,
) -> PublishResult:
    """Publish the ledger at ``home`` to ``target`` (see the module docstring). ``progress(done,
    total)`` counts every file but the checkpoint: tiles, entry bundles, then blobs.
    ``blobs=False, compress=False`` is ``ledger export-tiles`` (tiles only, entry bundles
    uncompressed, for any host)."""

    t0 = time.perf_counter()
    if isinstance(target, DirTarget):
        check_outside_home(home, target.root)
    store = open_store(home, read_only=True)
    try:
        note, cp, vk = signed_checkpoint(home, store)
        target.lock()
        old, _ = published_state(target, store, cp, vk)
        tiles = new_tiles(old, cp.size)
        digests = list(named_blobs(store, old, cp.size)) if blobs else []
        files = _Files(store, target, tiles, digests, progress)
        # a first publish to a bucket writes every blob (a request saved per blob): one left by
        # a run that stopped is written again, never trusted
        files.reuse = old > 0 or isinstance(target, DirTarget)
        files.send_all(compress)
        target.flush()  # every file on the disk before the checkpoint that names them
        put_checkpoint(target, store, cp, vk, note)
        target.flush()
        return PublishResult(
            target.describe(), cp.origin, old, cp.size, files.tiles, files.blobs,
            files.bytes + len(note), time.perf_counter() - t0,
        )
    finally:
        store.close()
        if isinstance(target, DirTarget):
            target.close()  # its descriptors and DEST's lock (it opens them again if used again)


def signed_checkpoint(home: Path, store: Store) -> tuple[bytes, Checkpoint, NoteVerifier]:
    """(the note to publish, its checkpoint, the log's key): only what the log signed, the note
    under the log's key, its root that of the stored tree as the tiles show it (each tile is
    checked as it is made: ``tile_objects``); ``TamperDetected`` otherwise."""
    from ledger.core.cosigned import published_note

    vk = log_verifier(home, store)
    try:
        note = published_note(store, store.checkpoint())
    except LedgerStateError as e:
        raise BadInput(f"nothing to publish: {e}") from e
    try:
        cp = parse_checkpoint(open_note(note, [vk]).text)
    except LedgerError as e:
        raise TamperDetected(f"the ledger's latest checkpoint does not verify under the "
                             f"log's key {vk.label} ({e}): refusing to publish it (run "
                             "`ledger audit`)") from e
    if cp.origin != store.origin or tiled_root(cp.size, store.stored_hash) != cp.root:
        raise TamperDetected("the ledger's latest checkpoint does not match its stored "
                             "tree: refusing to publish it (run `ledger audit`)")
    return note, cp, vk


CHECKPOINT_TRIES = 3


def put_checkpoint(
    target: Target, store: Store, cp: Checkpoint, vk: NoteVerifier, note: bytes
) -> None:
    """Write DEST's checkpoint, last. DEST's checkpoint is read again first: one written
    meanwhile (by a publisher that holds no lock: a bucket) must still be a prefix of this tree,
    never rolled back (``published_state`` refuses a larger one). On a bucket the write is
    conditional on the object read (``If-Match`` its ETag, ``If-None-Match: *`` when there was
    none), so a publisher that wrote between the read and the write makes it fail (``Moved``)
    and it is read and judged again, rather than overwritten."""
    for _ in range(CHECKPOINT_TRIES):
        _, tag = published_state(target, store, cp, vk)
        try:
            target.put_if(Obj("checkpoint", note, NOTE_TYPE, NO_CACHE), tag)
            return
        except Moved:
            continue
    raise CannotCheck(f"{target.describe()}/checkpoint changed under {CHECKPOINT_TRIES} tries "
                      "(other publishers are writing it): run this publish again")


class _Files:
    """Every file of a publish but the checkpoint: hash tiles, entry bundles (one per level-0
    tile), blobs, each checked before it is handed out, sent on the target's threads; a blob
    already at DEST is kept only when it holds exactly the verified bytes (``Target.holds``)."""

    def __init__(
        self, store: Store, target: DirTarget | S3Target, tiles: list[tuple[int, int, int]],
        digests: list[tuple[bytes, int]], progress: Callable[[int, int], None] | None,
    ) -> None:
        self.store, self.target, self.list, self.digests = store, target, tiles, digests
        self.progress = progress
        self.total = len(tiles) + sum(1 for t in tiles if t[0] == 0) + len(digests)
        self.tiles = self.blobs = self.bytes = 0
        self.reuse = True

    def objects(self, compress: bool) -> Iterator[Obj]:
        yield from tile_objects(self.store, self.list, compress)
        for digest, index in self.digests:
            data = self.store.blob(digest, index)
            if data is None:  # a ledger that lacks a file it names (a partial mirror)
                raise BadInput(f"bundle file {hex_encode(digest)} is named by an entry but not "
                               "stored here: cannot publish it")
            if blake3_digest(data) != digest:
                raise TamperDetected(f"bundle file {hex_encode(digest)} as stored does not "
                                     "hash to its digest: refusing to publish it (run "
                                     "`ledger audit`)")
            yield Obj(BLOB_PREFIX + hex_encode(digest), data)

    def send(self, obj: Obj) -> int:
        if self.reuse and obj.key.startswith(BLOB_PREFIX) and self.target.holds(obj.key, obj.data):
            return 0
        self.target.put(obj)
        return len(obj.data)

    def send_all(self, compress: bool) -> None:
        done = 0
        for obj, sent in _run(self.send, self.objects(compress), self.target.threads):
            if obj.key.startswith(BLOB_PREFIX):
                self.blobs += sent > 0
            else:
                self.tiles += 1
            self.bytes += sent
            done += 1
            if self.progress is not None:
                self.progress(done, self.total)


def _run(
    send: Callable[[Obj], int], objs: Iterable[Obj], threads: int
) -> Iterator[tuple[Obj, int]]:
    """``send`` every object, on ``threads`` threads with a bounded window in flight (memory
    stays bounded however large the log); yields (object, bytes sent) in order."""
    if threads <= 1:
        for obj in objs:
            yield obj, send(obj)
        return
    window = threads * 4
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending: list[tuple[Obj, Any]] = []
        for obj in objs:
            pending.append((obj, pool.submit(send, obj)))
            if len(pending) >= window:
                first, fut = pending.pop(0)
                yield first, fut.result()
        for obj, fut in pending:
            yield obj, fut.result()


__all__ = [
    "DirTarget",
    "Obj",
    "PublishResult",
    "S3Target",
    "open_target",
    "publish",
]
