"""C2SP tlog-tiles: tile paths, hash tiles and entry bundles (SPEC 6, 9). Pure, no I/O.

A tile has height 8 and up to 256 hashes. Hash tile ``(L, N, W)`` holds the stored hashes of
Merkle level ``8 * L`` with indices ``N * 256 .. N * 256 + W - 1`` (see ``ledger.core.merkle`` for
the
``(level, n)`` addressing), concatenated; ``W < 256`` only for the right-most, partial tile of a
level. The entry bundle ``N`` holds the entries of leaves ``N * 256 ..``, each as a big-endian
uint16 length followed by the entry bytes.

Paths: ``tile/<L>/<N>[.p/<W>]`` and ``tile/entries/<N>[.p/<W>]``, where ``N`` is written in
groups of three decimal digits, every group but the last prefixed with ``x``
(1234067 -> ``x001/x234/067``); this is Go's ``sumdb/tlog`` ``Tile.Path`` without its height
element. Parsing is strict: only the one canonical spelling of a tile is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ledger.core.errors import BadInput
from ledger.core.merkle import GetStored

TILE_HEIGHT = 8
TILE_WIDTH = 256
MAX_ENTRY_SIZE = 0xFFFF
MAX_LEVEL = 63
_GROUP = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")


def _check(level: int, n: int, width: int) -> None:
    if not 0 <= level <= MAX_LEVEL:
        raise BadInput(f"tile level {level} is out of range")
    if n < 0:
        raise BadInput(f"tile index {n} is negative")
    if not 1 <= width <= TILE_WIDTH:
        raise BadInput(f"tile width {width} is not in 1..{TILE_WIDTH}")


def _n_path(n: int) -> str:
    parts = [f"{n % 1000:03d}"]
    n //= 1000
    while n:
        parts.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(parts))


def _suffix(width: int) -> str:
    return "" if width == TILE_WIDTH else f".p/{width}"


def tile_path(level: int, n: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``."""
    _check(level, n, width)
    return f"tile/{level}/{_n_path(n)}{_suffix(width)}"


def entries_tile_path(n: int, width: int = TILE_WIDTH) -> str:
    """``tile/entries/<N>[.p/<W>]``."""
    _check(0, n, width)
    return f"tile/entries/{_n_path(n)}{_suffix(width)}"


def parse_tile_path(path: str) -> tuple[str, int, int, int]:
    """``(kind, level, n, width)`` with kind "hash" or "entries" (level 0); BadInput otherwise."""
    bad = BadInput(f"{path!r} is not a C2SP tile path")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise bad
    width = TILE_WIDTH
    if parts[-2].endswith(".p"):
        w = parts[-1]
        if not w.isascii() or not w.isdigit() or len(w) > 3:  # int() of 4,300 digits raises
            raise bad
        width = int(w)
        parts = [*parts[:-2], parts[-2][: -len(".p")]]
    if parts[1] == "entries":
        kind, level = "entries", 0
    elif parts[1].isascii() and parts[1].isdigit() and len(parts[1]) <= 3:
        kind, level = "hash", int(parts[1])
    else:
        raise bad
    groups = parts[2:]
    if not groups or _LAST.fullmatch(groups[-1]) is None:
        raise bad
    if any(_GROUP.fullmatch(g) is None for g in groups[:-1]):
        raise bad
    n = 0
    for g in groups:
        n = n * 1000 + int(g.lstrip("x"))
    try:
        canonical = entries_tile_path(n, width) if kind == "entries" else tile_path(level, n, width)
    except BadInput as e:
        raise bad from e
    if canonical != path:
        raise bad
    return kind, level, n, width


def hash_tile(level: int, n: int, width: int, get: GetStored) -> bytes:
    """The tile's bytes: ``width`` stored hashes of Merkle level ``8 * level``, concatenated."""
    _check(level, n, width)
    start = n * TILE_WIDTH
    return b"".join(get(TILE_HEIGHT * level, start + i) for i in range(width))


def entry_bundle(entries: Sequence[bytes]) -> bytes:
    """Each entry as uint16 big-endian length || bytes."""
    if not 1 <= len(entries) <= TILE_WIDTH:
        raise BadInput(f"an entry bundle holds 1..{TILE_WIDTH} entries, got {len(entries)}")
    out = bytearray()
    for i, entry in enumerate(entries):
        if len(entry) > MAX_ENTRY_SIZE:
            raise BadInput(f"entry {i} is {len(entry)} bytes, over {MAX_ENTRY_SIZE}")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def parse_entry_bundle(data: bytes) -> list[bytes]:
    """Split an entry bundle; BadInput on a truncated length or entry, or over 256 entries."""
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        if pos + 2 > len(data):
            raise BadInput(f"entry bundle is truncated in a length at byte {pos}")
        size = int.from_bytes(data[pos : pos + 2], "big")
        pos += 2
        if pos + size > len(data):
            raise BadInput(f"entry bundle is truncated in entry {len(out)}")
        out.append(data[pos : pos + size])
        pos += size
        if len(out) > TILE_WIDTH:
            raise BadInput(f"entry bundle holds more than {TILE_WIDTH} entries")
    if not out:
        raise BadInput("entry bundle is empty")
    return out


def tiles_for_size(size: int) -> list[tuple[int, int, int]]:
    """Every hash tile ``(level, n, width)`` of a tree of ``size`` leaves, level by level.

    Per level: all full tiles, then the partial tile if that level's hash count is not a
    multiple of 256. The entry bundles are the level-0 tiles' ``(n, width)``.
    """
    if size < 0:
        raise BadInput(f"negative tree size {size}")
    out: list[tuple[int, int, int]] = []
    level = 0
    count = size
    while count > 0:
        full, rest = divmod(count, TILE_WIDTH)
        out.extend((level, n, TILE_WIDTH) for n in range(full))
        if rest:
            out.append((level, full, rest))
        level += 1
        count >>= TILE_HEIGHT
    return out
