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
written (a blob already at DEST is skipped: a ``stat`` in a directory, a ``HEAD`` in a bucket),
then the checkpoint, **last**. A run that stops half-way leaves the old checkpoint, with its tree
whole; the next run writes the rest again.

Directories: files are written to a temporary name and renamed (a reader never sees half a
file), synced to disk once (``syncfs``) before the checkpoint is written and fsynced. Buckets:
``s3://bucket/prefix`` through boto3 (credentials from its usual chain; ``--endpoint-url`` for a
non-AWS store), uploads in parallel (``PUT_THREADS``).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ledger.bundle import manifest_digests
from ledger.encoding import hex_encode
from ledger.errors import BadInput, CannotCheck, LedgerError, LedgerStateError
from ledger.note import Checkpoint, note_text, parse_checkpoint
from ledger.store import Store
from ledger.tiles import (
    TILE_WIDTH,
    entries_tile_path,
    entry_bundle,
    hash_tile,
    tile_path,
    tiles_for_size,
)

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
    def read(self, key: str, limit: int) -> bytes | None: ...
    def exists(self, key: str) -> bool: ...
    def put(self, obj: Obj) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class DirTarget:
    """A directory tree; headers are the web server's job (docs/scale-out.md)."""

    threads = 1  # local writes: one thread (the page cache does the rest)

    def __init__(self, root: Path) -> None:
        if root.exists() and not root.is_dir():
            raise BadInput(f"{root} exists and is not a directory")
        self.root = root

    def describe(self) -> str:
        return str(self.root)

    def read(self, key: str, limit: int) -> bytes | None:
        from ledger.fsutil import read_small

        path = self.root / key
        if not path.exists():
            return None
        return read_small(path, limit, f"published {key}")

    def exists(self, key: str) -> bool:
        return os.path.exists(self.root / key)

    def put(self, obj: Obj) -> None:
        from ledger.fsutil import write_atomic

        path = self.root / obj.key
        durable = obj.key == "checkpoint"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(f"cannot create {path.parent}: {e.strerror or e}") from e
        write_atomic(path, obj.data, 0o644, exclusive=False, fsync=durable)

    def flush(self) -> None:
        """Everything written so far reaches the disk before the checkpoint is written."""
        try:
            fd = os.open(self.root, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
            _syncfs(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        pass


class S3Target:
    """``s3://bucket/prefix`` through boto3 (imported here: only publish needs it)."""

    threads = PUT_THREADS

    def __init__(self, url: str, endpoint_url: str | None = None, client: Any = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise BadInput(f"{url!r}: expected s3://bucket[/prefix]")
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self.url = url
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as e:
                raise BadInput(
                    "publishing to s3:// needs boto3 (pip install 'kernel-ledger[s3]')"
                ) from e
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
        self.s3 = client

    def describe(self) -> str:
        return self.url

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, what: str, e: Exception) -> LedgerError:
        from botocore.exceptions import ClientError, NoCredentialsError

        if isinstance(e, NoCredentialsError):
            return BadInput(f"{self.url}: no S3 credentials ({e})")
        if isinstance(e, ClientError):
            code = e.response.get("Error", {}).get("Code", "?")
            if code in ("NoSuchBucket", "AccessDenied", "InvalidAccessKeyId",
                        "SignatureDoesNotMatch"):
                return BadInput(f"{self.url}: {what}: {code}")
            return CannotCheck(f"{self.url}: {what}: {code}")
        return CannotCheck(f"{self.url}: {what}: {' '.join(str(e).split())[:200]}")

    def read(self, key: str, limit: int) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            got = self.s3.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
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
        return data

    def exists(self, key: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.s3.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail(f"looking up {key}", e) from e
        except BotoCoreError as e:
            raise self._fail(f"looking up {key}", e) from e
        return True

    def put(self, obj: Obj) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        extra: dict[str, str] = {}
        if obj.encoding:
            extra["ContentEncoding"] = obj.encoding
        try:
            self.s3.put_object(
                Bucket=self.bucket, Key=self._key(obj.key), Body=obj.data,
                ContentType=obj.content_type, CacheControl=obj.cache_control, **extra,
            )
        except (ClientError, BotoCoreError) as e:
            raise self._fail(f"writing {obj.key}", e) from e

    def flush(self) -> None:
        pass  # a PUT that returned is stored

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.s3.close()


def _syncfs(fd: int) -> None:
    """syncfs(2) on the file system holding ``fd`` (Linux), else sync(2)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) == 0:
            return
    except (OSError, AttributeError):
        pass
    os.sync()


def open_target(dest: str, endpoint_url: str | None = None) -> DirTarget | S3Target:
    if dest.startswith("s3://"):
        return S3Target(dest, endpoint_url)
    if "://" in dest:
        raise BadInput(f"{dest!r}: DEST is a directory or s3://bucket/prefix")
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


def published_size(target: Target, store: Store, cp: Checkpoint) -> int:
    """The tree size DEST's checkpoint publishes, after checking it is this log's own tree;
    0 when DEST holds none."""
    old = target.read("checkpoint", MAX_CHECKPOINT_BYTES)
    if old is None:
        return 0
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
    return prev.size


def new_tiles(old: int, new: int) -> list[tuple[int, int, int]]:
    """The hash tiles of the tree of ``new`` leaves that the tree of ``old`` lacks."""
    had = set(tiles_for_size(old))
    return [t for t in tiles_for_size(new) if t not in had]


def tile_objects(
    store: Store, tiles: list[tuple[int, int, int]], compress: bool = True
) -> Iterator[Obj]:
    for level, n, width in tiles:
        yield Obj(tile_path(level, n, width), hash_tile(level, n, width, store.stored_hash))
        if level == 0:
            start = n * TILE_WIDTH
            bundle = entry_bundle(list(store.entries(start, start + width)))
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
    from ledger.httpstate import published_note

    t0 = time.perf_counter()
    store = Store.open(home)
    try:
        try:
            note = published_note(store, store.checkpoint())
        except LedgerStateError as e:
            raise BadInput(f"nothing to publish: {e}") from e
        cp = parse_checkpoint(note_text(note))
        old = published_size(target, store, cp)
        tiles = new_tiles(old, cp.size)
        digests = list(named_blobs(store, old, cp.size)) if blobs else []
        # every file but the checkpoint: hash tiles, entry bundles (one per level-0 tile), blobs
        total = len(tiles) + sum(1 for t in tiles if t[0] == 0) + len(digests)
        done = 0
        written_tiles = written_blobs = nbytes = 0

        def step() -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total)

        def objects() -> Iterator[Obj]:
            yield from tile_objects(store, tiles, compress)
            for digest, index in digests:
                data = store.blob(digest, index)
                if data is None:  # a ledger that lacks a file it names (a partial mirror)
                    raise BadInput(f"bundle file {hex_encode(digest)} is named by an entry but not "
                                   "stored here: cannot publish it")
                yield Obj(BLOB_PREFIX + hex_encode(digest), data)

        def send(obj: Obj) -> int:
            if obj.key.startswith(BLOB_PREFIX) and (old > 0 or isinstance(target, DirTarget)) \
                    and target.exists(obj.key):
                return 0
            target.put(obj)
            return len(obj.data)

        for obj, sent in _run(send, objects(), target.threads):
            if obj.key.startswith(BLOB_PREFIX):
                written_blobs += sent > 0
            else:
                written_tiles += 1
            nbytes += sent
            step()
        target.flush()
        target.put(Obj("checkpoint", note, NOTE_TYPE, NO_CACHE))
        target.flush()
        return PublishResult(
            target.describe(), cp.origin, old, cp.size, written_tiles, written_blobs,
            nbytes + len(note), time.perf_counter() - t0,
        )
    finally:
        store.close()


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
