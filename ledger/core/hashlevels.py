"""The stored hashes of a tree's upper levels in memory, for proofs (issue 12: proofs at 10^6
within 3x of Go's sumdb/tlog, which proves from hashes in memory).

``HashLevels`` holds, for every level from ``low`` up, the stored hashes ``(level, 0 ..
(size >> level) - 1)`` (``ledger.core.merkle`` addressing) back to back in ``bytes`` chunks: 32
bytes
per hash and no per-hash object. ``low`` is the lowest level whose rows, with all the
levels above, fit in ``budget`` bytes: at 10^6 entries the whole tree (64 MB), at 10^7 the levels
from 4 up. ``fill`` reads only the rows it does not hold yet (stored hashes never change once
committed), top level first and a bounded number per call, so following a growing log costs the
new rows only and filling a large tree never stalls one request for long.

``inclusion_paths`` computes which stored hashes an inclusion proof combines, without hashing,
so a proof is: the addresses, the hashes (from memory, the rest in one batched read), and at
most one right-edge subtree hashed together. Pure: no I/O (the store hands in the reads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ledger.core.merkle import (
    HASH_SIZE,
    Address,
    combine,
    consistency_path,
    inclusion_path,
    range_addresses,
)

HASH_CACHE_BYTES = 64 << 20  # memory a HashLevels may hold (the whole tree up to ~10^6 entries)

ReadLevel = Callable[[int, int, int], Iterable[bytes]]  # (level, start, end) -> hashes in order
__all__ = ["Address", "HashLevels", "combine", "inclusion_paths", "lowest_level"]


def lowest_level(size: int, budget: int = HASH_CACHE_BYTES) -> int:
    """The lowest level whose stored hashes, with all levels above, fit in ``budget`` bytes."""
    level = 0
    while sum(size >> lv for lv in range(level, size.bit_length() + 1)) * HASH_SIZE > budget:
        level += 1
    return level


CHUNK_BITS = 12  # a level is held as chunks of 4,096 hashes (128 KiB): growing copies one
CHUNK = 1 << CHUNK_BITS
_MASK = CHUNK - 1


class HashLevels:
    """Levels ``low`` and up of a tree's stored hashes: per level, a list of ``bytes`` chunks
    of ``CHUNK`` hashes back to back (the last one partial), so a hash is two index operations
    and a slice, and growing rebuilds the last chunk only."""

    __slots__ = ("_edges", "budget", "levels", "low", "size")

    def __init__(self, budget: int | None = None) -> None:
        self.budget = HASH_CACHE_BYTES if budget is None else budget
        self.low = 0
        self.size = 0  # the tree size the levels are complete for
        self.levels: list[list[bytes]] = []  # index: level; below ``low``: empty
        self._edges: dict[tuple[int, int], bytes] = {}  # right-edge subtree hashes by range

    def fill(self, size: int, read: ReadLevel, max_rows: int | None = None) -> bool:
        """Hold every stored hash of a tree of ``size`` leaves from level ``lowest_level`` up,
        reading the rows not held yet with ``read(level, start, end)`` (committed rows only),
        top level first; with ``max_rows``, at most that many rows this call (a server fills
        a large tree over several proofs instead of stalling on one). True when complete: then
        ``size`` is the tree the levels hold."""
        if size <= self.size:
            return True
        low = lowest_level(size, self.budget)
        top = size.bit_length()
        while len(self.levels) <= top:
            self.levels.append([])
        if low > self.low:
            self.size = 0  # the levels below ``low`` go: no tree is held whole meanwhile
            for level in range(low):
                self.levels[level] = []
        self.low = low
        rows = 0
        for level in range(top, low - 1, -1):
            have = self.count(level)
            want = size >> level
            end = want if max_rows is None else min(want, have + max_rows - rows)
            if end <= have:
                if have < want:
                    return False
                continue
            got = b"".join(read(level, have, end))
            if len(got) != (end - have) * HASH_SIZE:
                raise LookupError(f"stored hashes of level {level} are missing below {end}")
            chunks = self.levels[level]
            if chunks and len(chunks[-1]) < CHUNK * HASH_SIZE:
                got = chunks.pop() + got
            step = CHUNK * HASH_SIZE
            chunks.extend(got[k : k + step] for k in range(0, len(got), step))
            rows += end - have
            if end < want:
                return False
        self.size = size
        return True

    def count(self, level: int) -> int:
        chunks = self.levels[level] if level < len(self.levels) else []
        return 0 if not chunks else (len(chunks) - 1) * CHUNK + len(chunks[-1]) // HASH_SIZE

    def get(self, level: int, n: int) -> bytes | None:
        """The stored hash ``(level, n)``, or None when not held."""
        if level >= len(self.levels) or n < 0:
            return None
        chunks = self.levels[level]
        c = n >> CHUNK_BITS
        if c >= len(chunks):
            return None
        at = (n & _MASK) * HASH_SIZE
        h = chunks[c][at : at + HASH_SIZE]
        return h if len(h) == HASH_SIZE else None

    def nbytes(self) -> int:
        return sum(len(c) for chunks in self.levels for c in chunks)

    def inclusion_proof(self, index: int, size: int) -> list[bytes] | None:
        """RFC 9162 PATH(index, D[size]) from memory (``merkle.inclusion_path``), or None when
        a hash it needs is not held (a level below ``low``, a tree beyond ``size``)."""
        if self.low or size > self.size or not 0 <= index < size:
            return None
        levels = self.levels

        def held(level: int, n: int) -> bytes:
            at = (n & _MASK) * HASH_SIZE
            return levels[level][n >> CHUNK_BITS][at : at + HASH_SIZE]

        return inclusion_path(index, size, held, self._edge)

    def consistency_proof(self, old: int, new: int) -> list[bytes] | None:
        """RFC 9162 PROOF(old, D[new]) from memory (``merkle.consistency_path``), or None when
        a hash it needs is not held."""
        if self.low or new > self.size or not 0 <= old <= new:
            return None
        return consistency_path(old, new, self._range)

    def _range(self, lo: int, hi: int) -> bytes:
        """MTH of leaves ``[lo, hi)``: a complete subtree, or a right edge (``hi`` the size)."""
        n = hi - lo
        level = n.bit_length() - 1
        if n == 1 << level and not lo & (n - 1):
            i = lo >> level
            at = (i & _MASK) * HASH_SIZE
            return self.levels[level][i >> CHUNK_BITS][at : at + HASH_SIZE]
        return self._edge(level + 1, lo, hi)

    def _edge(self, _level: int, lo: int, size: int) -> bytes:
        """The hash of the right-edge subtree over leaves ``[lo, size)``, kept per range."""
        key = (lo, size)
        h = self._edges.get(key)
        if h is None:
            levels = self.levels
            parts = []
            for lv, n in range_addresses(lo, size):
                at = (n & _MASK) * HASH_SIZE
                parts.append(levels[lv][n >> CHUNK_BITS][at : at + HASH_SIZE])
            h = combine(parts)
            if len(self._edges) >= 256:
                self._edges.clear()
            self._edges[key] = h
        return h


def inclusion_paths(index: int, size: int) -> list[list[Address]]:
    """The stored hashes of RFC 9162's PATH(index, D[size]) (``merkle.inclusion_path``), leaf
    sibling first: one address for each complete sibling subtree, and for the (at most one)
    incomplete sibling on the right edge the addresses of its complete parts, largest first
    (``range_addresses``), which ``combine`` hashes together."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is not in a tree of size {size}")
    return inclusion_path(index, size, lambda level, n: [(level, n)],
                          lambda _level, lo, hi: range_addresses(lo, hi))
