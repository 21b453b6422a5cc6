"""Kernel bundles, their manifest and digest (SPEC 3).

A bundle is a directory of regular files. Reading one:

1. walk the directory without following links; refuse symlinks, devices, fifos, sockets, names
   that are not UTF-8, that b3sum would escape (a backslash) or that hold a character
   ``ledger.core.text`` refuses (control, bidi, line separator: ``check_path``), and anything
   over the limits below (checked from ``lstat`` before a byte is read, so an 8 GB sparse file
   costs nothing);
2. leave out the receipt files the ledger writes (``ledger-receipt*.json`` at the top level);
3. require exactly one top-level ``contract.yaml`` and at least one ``.ptx``, ``.lean``, ``.fut``;
4. hash each file with BLAKE3 and write the manifest exactly as ``b3sum`` prints it, one line per
   file sorted by path bytes: ``<64 hex>  <path>\\n``;
5. the bundle digest is BLAKE3-256 of the manifest bytes.

The limits keep a ``bundle`` log entry under the C2SP 65,535-byte entry limit: at most
``MAX_FILES`` manifest lines of at most 67 + ``MAX_PATH_BYTES`` bytes each.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import blake3

from ledger.core.encoding import hex_decode, hex_encode, unhex_matched
from ledger.core.errors import BundleError
from ledger.core.fsutil import read_fd_bounded
from ledger.core.text import unsafe_at

MAX_FILES = 64
MAX_PATH_BYTES = 160
MAX_DEPTH = 8
MAX_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 32 << 20
CONTRACT_NAME = "contract.yaml"
REQUIRED_SUFFIXES = (".ptx", ".lean", ".fut")

_RECEIPT = re.compile(r"ledger-receipt[^/]*\.json")
# the temporary file a receipt is written through (ledger.core.fsutil.write_atomic); one left by a
# crash must not change the bundle's digest either
_RECEIPT_TMP = re.compile(r"\.ledger-receipt[^/]*\.json\.[^/]*\.tmp")
_MANIFEST_LINE = re.compile(rb"([0-9a-f]{64})  ([^\n]+)\n")


def blake3_digest(data: bytes) -> bytes:
    return blake3.blake3(data).digest()


def is_receipt_name(rel: str) -> bool:
    """True for the receipt files the ledger writes into a bundle (left out of the manifest)."""
    return _RECEIPT.fullmatch(rel) is not None


def check_path(rel: str) -> None:
    """Refuse a relative bundle path that leaves the bundle, is long, that b3sum would escape (a
    backslash; a newline), or that holds a character the one definition of text from outside
    refuses in a name (``ledger.core.text.unsafe_at``: C0 and C1 controls, DEL, bidi marks and
    overrides, line and paragraph separators; issue 33 item 7)."""
    if not rel or rel.startswith("/") or "\\" in rel:
        raise BundleError(f"bad file name in bundle: {rel!r}")
    at = unsafe_at(rel)
    if at is not None:
        raise BundleError(f"bad file name in bundle: {rel!r} holds the control or bidi character "
                          f"U+{ord(rel[at]):04X} at {at}")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BundleError(f"bad file name in bundle: {rel!r}")
    if len(parts) > MAX_DEPTH:
        raise BundleError(f"path nests deeper than {MAX_DEPTH} directories: {rel!r}")
    if len(rel.encode("utf-8")) > MAX_PATH_BYTES:
        raise BundleError(f"path longer than {MAX_PATH_BYTES} bytes: {rel[:60]!r}...")


@dataclass(frozen=True)
class BundleFile:
    path: str
    data: bytes
    digest: bytes


@dataclass(frozen=True)
class Bundle:
    """A validated bundle held in memory; build with ``from_dir`` or ``from_files``."""

    files: tuple[BundleFile, ...]
    manifest: bytes
    digest: bytes

    @classmethod
    def from_files(cls, files: Mapping[str, bytes]) -> Bundle:
        if len(files) > MAX_FILES:
            raise BundleError(f"bundle has more than {MAX_FILES} files")
        total = 0
        out: list[BundleFile] = []
        for rel in sorted(files, key=lambda p: p.encode("utf-8")):
            check_path(rel)
            data = files[rel]
            if len(data) > MAX_FILE_BYTES:
                raise BundleError(f"{rel}: larger than {MAX_FILE_BYTES} bytes")
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise BundleError(f"bundle is larger than {MAX_TOTAL_BYTES} bytes")
            out.append(BundleFile(rel, data, blake3_digest(data)))
        _require_members([f.path for f in out])
        manifest = make_manifest((f.path, f.digest) for f in out)
        return cls(tuple(out), manifest, blake3_digest(manifest))

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> Bundle:
        return cls.from_files(read_dir(Path(directory)))

    def file(self, rel: str) -> bytes:
        for f in self.files:
            if f.path == rel:
                return f.data
        raise KeyError(rel)

    def with_suffix(self, suffix: str) -> list[BundleFile]:
        return [f for f in self.files if f.path.endswith(suffix)]

    def materialize(self, dest: Path) -> None:
        """Write the files under ``dest`` (an empty directory the caller owns)."""
        for f in self.files:
            target = dest / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.data)


def _require_members(paths: list[str]) -> None:
    if CONTRACT_NAME not in paths:
        raise BundleError(f"bundle has no top-level {CONTRACT_NAME}")
    for suffix in REQUIRED_SUFFIXES:
        if not any(p.endswith(suffix) for p in paths):
            raise BundleError(f"bundle has no {suffix} file")


def make_manifest(entries: Iterable[tuple[str, bytes]]) -> bytes:
    """b3sum's output for (path, digest) pairs, sorted by path bytes."""
    rows = sorted(entries, key=lambda e: e[0].encode("utf-8"))
    return b"".join(hex_encode(d).encode() + b"  " + p.encode("utf-8") + b"\n" for p, d in rows)


_MANIFEST_DIGEST = re.compile(rb"^([0-9a-f]{64})  ", re.MULTILINE)


def manifest_digests(manifest: bytes) -> list[bytes]:
    """Only the BLAKE3 digests a manifest names (one per ``<64 hex>  <path>`` line), without
    judging its paths or members: for readers that replicate or audit what was signed, where
    ``parse_manifest`` is the verifier's job."""
    return [unhex_matched(m) for m in _MANIFEST_DIGEST.findall(manifest)]


def parse_manifest(manifest: bytes) -> list[tuple[str, bytes]]:
    """Parse and validate a manifest: exact b3sum lines, sorted, unique, within limits."""
    rows: list[tuple[str, bytes]] = []
    pos = 0
    while pos < len(manifest):
        m = _MANIFEST_LINE.match(manifest, pos)
        if m is None:
            raise BundleError(f"manifest line at byte {pos} is not '<64 hex>  <path>'")
        try:
            rel = m.group(2).decode("utf-8")
        except UnicodeDecodeError as e:
            raise BundleError("manifest path is not UTF-8") from e
        check_path(rel)
        rows.append((rel, hex_decode(m.group(1).decode())))
        pos = m.end()
        if len(rows) > MAX_FILES:
            raise BundleError(f"manifest lists more than {MAX_FILES} files")
    keys = [r[0].encode("utf-8") for r in rows]
    if keys != sorted(set(keys)):
        raise BundleError("manifest is not sorted by path or repeats a path")
    _require_members([r[0] for r in rows])
    return rows


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# what is compared to decide that a directory entry did not change while the bundle was read
_Stamp = tuple[int, int, int, int, int, int]


def _stamp(st: os.stat_result) -> _Stamp:
    return (
        st.st_dev,
        st.st_ino,
        stat.S_IFMT(st.st_mode),
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )


def read_dir(root: Path) -> dict[str, bytes]:
    """Read a bundle directory with the limits of this module; raise ``BundleError``.

    Every file is reached through directory file descriptors (``openat`` with ``O_NOFOLLOW``,
    checked with ``fstat`` on the open descriptor), never by a path after the walk, so swapping a
    subdirectory or a file for a symlink while the bundle is read cannot redirect a read. Each
    file is read once; the bytes returned are the bytes that were read, and the caller hashes and
    checks exactly those. When the bundle changes while it is read (a file or a directory
    replaced, grown, added or removed) it is refused."""
    try:
        st = os.lstat(root)
    except OSError as e:
        raise BundleError(f"{root}: cannot read bundle directory ({e.strerror})") from e
    if stat.S_ISLNK(st.st_mode):
        raise BundleError(f"{root}: bundle directory is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        raise BundleError(f"{root}: not a directory")
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as e:
        raise BundleError(f"{root}: cannot read bundle directory ({e.strerror})") from e
    opened: list[tuple[int, str, dict[str, _Stamp]]] = []
    try:
        if _stamp(os.fstat(fd))[:3] != _stamp(st)[:3]:
            raise BundleError(f"{root}: changed while reading")
        out: dict[str, bytes] = {}
        _walk(root, fd, "", 0, out, opened)
        # second look: every directory still lists the same entries, unchanged
        for dfd, rel, seen in opened:
            if _listing(root, dfd, rel) != seen:
                raise BundleError(f"{root / rel if rel else root}: changed while reading")
        return out
    finally:
        for dfd, _, _ in opened:
            os.close(dfd)
        if not opened or opened[0][0] != fd:
            os.close(fd)


def _listing(root: Path, dfd: int, prefix: str) -> dict[str, _Stamp]:
    here = root / prefix if prefix else root
    try:
        names = os.listdir(dfd)
        return {
            n: _stamp(os.stat(n, dir_fd=dfd, follow_symlinks=False))
            for n in names
            if not (prefix == "" and _is_receipt_or_temp(n))
        }
    except OSError as err:
        raise BundleError(f"{here}: cannot list directory ({err.strerror})") from err


def _is_receipt_or_temp(name: str) -> bool:
    return is_receipt_name(name) or _RECEIPT_TMP.fullmatch(name) is not None


def _walk(
    root: Path,
    dfd: int,
    prefix: str,
    depth: int,
    out: dict[str, bytes],
    opened: list[tuple[int, str, dict[str, _Stamp]]],
) -> None:
    if depth >= MAX_DEPTH:
        if opened:
            os.close(dfd)
        raise BundleError(f"{root}: directories nest deeper than {MAX_DEPTH}")
    try:
        listing = _listing(root, dfd, prefix)
    except BaseException:
        if opened:  # a subdirectory's descriptor; read_dir closes the root's
            os.close(dfd)
        raise
    opened.append((dfd, prefix, listing))
    here = root / prefix if prefix else root
    for name in sorted(listing, key=os.fsencode):
        try:
            os.fsencode(name).decode("utf-8")
        except UnicodeDecodeError as err:
            raise BundleError(f"{here}: file name is not UTF-8: {os.fsencode(name)!r}") from err
        rel = f"{prefix}/{name}" if prefix else name
        st_mode = listing[name][2]
        if stat.S_ISLNK(st_mode):
            raise BundleError(f"{rel}: symlinks are not allowed in a bundle")
        if stat.S_ISDIR(st_mode):
            child = _open_at(dfd, name, rel, _DIR_FLAGS, listing[name])
            _walk(root, child, rel, depth + 1, out, opened)
            continue
        if not stat.S_ISREG(st_mode):
            raise BundleError(f"{rel}: not a regular file (device, fifo or socket)")
        check_path(rel)
        size = listing[name][3]
        if size > MAX_FILE_BYTES:
            raise BundleError(f"{rel}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit")
        if len(out) + 1 > MAX_FILES:
            raise BundleError(f"{root}: bundle has more than {MAX_FILES} files")
        if sum(len(v) for v in out.values()) + size > MAX_TOTAL_BYTES:
            raise BundleError(f"{root}: bundle is larger than {MAX_TOTAL_BYTES} bytes")
        fd = _open_at(dfd, name, rel, _FILE_FLAGS, listing[name])
        try:
            out[rel] = _read_fd(fd, rel, listing[name])
        finally:
            os.close(fd)


def _open_at(dfd: int, name: str, rel: str, flags: int, want: _Stamp) -> int:
    """Open ``name`` relative to the directory ``dfd`` without following a link, and make sure
    it is still the very file that was listed (same device, inode and type)."""
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise BundleError(f"{rel}: changed while reading") from e
        raise BundleError(f"{rel}: cannot open ({e.strerror})") from e
    if _stamp(os.fstat(fd))[:3] != want[:3]:
        os.close(fd)
        raise BundleError(f"{rel}: changed while reading")
    return fd


def _read_fd(fd: int, rel: str, want: _Stamp) -> bytes:
    try:
        data = read_fd_bounded(fd, MAX_FILE_BYTES, 1 << 20)
        after = _stamp(os.fstat(fd))
    except OSError as e:
        raise BundleError(f"{rel}: cannot read ({e.strerror})") from e
    if len(data) != want[3] or after != want:
        raise BundleError(f"{rel}: changed while reading")
    return data
