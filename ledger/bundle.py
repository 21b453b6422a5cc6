"""Kernel bundles, their manifest and digest (SPEC 3).

A bundle is a directory of regular files. Reading one:

1. walk the directory without following links; refuse symlinks, devices, fifos, sockets, names
   that are not UTF-8 or that b3sum would escape, and anything over the limits below (checked
   from ``lstat`` before a byte is read, so an 8 GB sparse file costs nothing);
2. leave out the receipt files the ledger writes (``ledger-receipt*.json`` at the top level);
3. require exactly one top-level ``contract.yaml`` and at least one ``.ptx``, ``.lean``, ``.fut``;
4. hash each file with BLAKE3 and write the manifest exactly as ``b3sum`` prints it, one line per
   file sorted by path bytes: ``<64 hex>  <path>\\n``;
5. the bundle digest is BLAKE3-256 of the manifest bytes.

The limits keep a ``bundle`` log entry under the C2SP 65,535-byte entry limit: at most
``MAX_FILES`` manifest lines of at most 67 + ``MAX_PATH_BYTES`` bytes each.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import blake3

from ledger.errors import BundleError

MAX_FILES = 64
MAX_PATH_BYTES = 160
MAX_DEPTH = 8
MAX_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 32 << 20
CONTRACT_NAME = "contract.yaml"
REQUIRED_SUFFIXES = (".ptx", ".lean", ".fut")

_RECEIPT = re.compile(r"ledger-receipt[^/]*\.json")
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")
_MANIFEST_LINE = re.compile(rb"([0-9a-f]{64})  ([^\n]+)\n")


def blake3_digest(data: bytes) -> bytes:
    return blake3.blake3(data).digest()


def is_receipt_name(rel: str) -> bool:
    """True for the receipt files the ledger writes into a bundle (left out of the manifest)."""
    return _RECEIPT.fullmatch(rel) is not None


def check_path(rel: str) -> None:
    """Refuse a relative bundle path that b3sum would escape, that leaves the bundle, or is long."""
    if not rel or rel.startswith("/") or _BAD_CHARS.search(rel):
        raise BundleError(f"bad file name in bundle: {rel!r}")
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
    return b"".join(d.hex().encode() + b"  " + p.encode("utf-8") + b"\n" for p, d in rows)


_MANIFEST_DIGEST = re.compile(rb"^([0-9a-f]{64})  ", re.MULTILINE)


def manifest_digests(manifest: bytes) -> list[bytes]:
    """Only the BLAKE3 digests a manifest names (one per ``<64 hex>  <path>`` line), without
    judging its paths or members: for readers that replicate or audit what was signed, where
    ``parse_manifest`` is the verifier's job."""
    return [bytes.fromhex(m.decode()) for m in _MANIFEST_DIGEST.findall(manifest)]


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
        rows.append((rel, bytes.fromhex(m.group(1).decode())))
        pos = m.end()
        if len(rows) > MAX_FILES:
            raise BundleError(f"manifest lists more than {MAX_FILES} files")
    keys = [r[0].encode("utf-8") for r in rows]
    if keys != sorted(set(keys)):
        raise BundleError("manifest is not sorted by path or repeats a path")
    _require_members([r[0] for r in rows])
    return rows


def read_dir(root: Path) -> dict[str, bytes]:
    """Read a bundle directory with the limits of this module; raise ``BundleError``."""
    try:
        st = os.lstat(root)
    except OSError as e:
        raise BundleError(f"{root}: cannot read bundle directory ({e.strerror})") from e
    if stat.S_ISLNK(st.st_mode):
        raise BundleError(f"{root}: bundle directory is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        raise BundleError(f"{root}: not a directory")
    found: dict[str, int] = {}
    _walk(root, "", 0, found)
    total = sum(found.values())
    if total > MAX_TOTAL_BYTES:
        raise BundleError(f"{root}: bundle is larger than {MAX_TOTAL_BYTES} bytes")
    out: dict[str, bytes] = {}
    for rel, size in found.items():
        data = _read_regular(root / rel, size)
        out[rel] = data
    return out


def _walk(root: Path, prefix: str, depth: int, found: dict[str, int]) -> None:
    if depth >= MAX_DEPTH:
        raise BundleError(f"{root}: directories nest deeper than {MAX_DEPTH}")
    here = root / prefix if prefix else root
    try:
        with os.scandir(os.fsencode(here)) as it:
            entries = sorted(it, key=lambda d: d.name)
    except OSError as err:
        raise BundleError(f"{here}: cannot list directory ({err.strerror})") from err
    for e in entries:
        try:
            name = e.name.decode("utf-8")
        except UnicodeDecodeError as err:
            raise BundleError(f"{here}: file name is not UTF-8: {e.name!r}") from err
        rel = f"{prefix}/{name}" if prefix else name
        st = e.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise BundleError(f"{rel}: symlinks are not allowed in a bundle")
        if stat.S_ISDIR(st.st_mode):
            _walk(root, rel, depth + 1, found)
            continue
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"{rel}: not a regular file (device, fifo or socket)")
        if depth == 0 and is_receipt_name(rel):
            continue
        check_path(rel)
        if st.st_size > MAX_FILE_BYTES:
            raise BundleError(f"{rel}: {st.st_size} bytes is over the {MAX_FILE_BYTES}-byte limit")
        found[rel] = st.st_size
        if len(found) > MAX_FILES:
            raise BundleError(f"{root}: bundle has more than {MAX_FILES} files")


def _read_regular(path: Path, size: int) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise BundleError(f"{path}: cannot open ({e.strerror})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"{path}: changed while reading (not a regular file)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES or len(data) != size:
        raise BundleError(f"{path}: changed while reading")
    return data
