"""Merkle tree maths of the log: RFC 6962 / RFC 9162 with SHA-256 (SPEC 4, 6).

Leaf hash = SHA-256(0x00 || entry), node hash = SHA-256(0x01 || left || right), the empty tree's
root = SHA-256(""). Pure functions, no I/O: the store hands in a ``GetStored`` callable.

Addressing of stored hashes: ``(level, n)`` is the hash of the *complete* subtree over leaves
``[n * 2**level, (n + 1) * 2**level)``; level 0 is the leaf hash. A store that appends with
``Frontier.append`` holds exactly these hashes and nothing else.

Every "leaf" argument below is a 32-byte *leaf hash* (``leaf_hash(entry)``), never entry bytes,
as in the SPEC's proof JSON (``leaf_hash``) and transparency-dev/merkle.

Proof generation follows RFC 9162 2.1.3.1 / 2.1.4.1 (PATH / SUBPROOF) in one place:
``inclusion_path`` / ``consistency_path`` walk the tree over any reader of hashes
(``inclusion_proof`` / ``consistency_proof`` over a ``GetStored``,
``ledger.core.hashlevels.HashLevels`` from memory, the store's batched read through the
addresses ``range_addresses`` gives and ``combine``). Verification follows the numbered
algorithms of RFC 9162 2.1.3.2 / 2.1.4.2.
Each subtree hash a proof needs costs O(log n) reads, so a proof costs O(log² n) reads at worst
and O(log n) for the common aligned cases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TypeVar

from ledger.core.encoding import hex_encode
from ledger.core.errors import BadInput, ProofError

HASH_SIZE = 32
EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()

GetStored = Callable[[int, int], bytes]
Address = tuple[int, int]  # a stored hash: (level, n)
T = TypeVar("T")

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"


def leaf_hash(entry: bytes) -> bytes:
    """SHA-256(0x00 || entry)."""
    return hashlib.sha256(_LEAF_PREFIX + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_from_leaf_hashes(leaves: Sequence[bytes]) -> bytes:
    """Reference MTH over a list of leaf hashes, O(n) hashing: for tests and audit."""
    if not leaves:
        return EMPTY_ROOT
    level = list(leaves)
    # Bottom-up pairing; an odd last node is carried up unchanged, which equals RFC 6962's
    # recursive definition (split at the largest power of two below n).
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def subtree_hash(lo: int, hi: int, get: GetStored) -> bytes:
    """MTH(leaves[lo:hi]) from stored hashes.

    With ``lo`` aligned to the largest power of two not above ``hi - lo`` (the case of every range
    a proof asks for) this reads one stored hash per set bit of ``hi - lo``.
    """
    if not 0 <= lo < hi:
        raise BadInput(f"empty or negative leaf range [{lo}, {hi})")
    n = hi - lo
    if n & (n - 1) == 0 and lo % n == 0:
        level = n.bit_length() - 1
        return get(level, lo >> level)
    k = _split(n)
    return node_hash(subtree_hash(lo, lo + k, get), subtree_hash(lo + k, hi, get))


def tree_root(size: int, get: GetStored) -> bytes:
    """The root hash of the tree of the first ``size`` leaves."""
    if size < 0:
        raise BadInput(f"negative tree size {size}")
    if size == 0:
        return EMPTY_ROOT
    return subtree_hash(0, size, get)


def inclusion_path(
    index: int, size: int, complete: Callable[[int, int], T], edge: Callable[[int, int, int], T]
) -> list[T]:
    """RFC 9162 2.1.3.1 PATH(index, D[size]), the leaf's sibling first, over any reader of
    hashes: the one inclusion proof walk. ``complete(level, n)`` reads the stored hash of a
    complete sibling subtree; ``edge(level, lo, size)`` the hash of the (at most one) sibling
    cut by the tree's right edge, leaves ``[lo, size)`` below ``level``.

    Bottom up: at level ``k`` the leaf's subtree is ``index >> k``; its sibling ``s`` covers
    leaves ``[s << k, (s + 1) << k)`` of which those below ``size`` count; an empty sibling adds
    nothing (RFC 6962's split promotes the node)."""
    if not 0 <= index < size:
        raise BadInput(f"leaf index {index} is not in a tree of size {size}")
    out: list[T] = []
    level = 0
    while (size - 1) >> level:  # the root's level not reached
        s = (index >> level) ^ 1
        lo = s << level
        if lo < size:
            out.append(complete(level, s) if lo + (1 << level) <= size else edge(level, lo, size))
        level += 1
    return out


def consistency_path(old: int, new: int, subtree: Callable[[int, int], T]) -> list[T]:
    """RFC 9162 2.1.4.1 PROOF(old, D[new]) over any reader of hashes: the one consistency proof
    walk (SUBPROOF's loop). ``subtree(lo, hi)`` reads MTH(leaves[lo:hi]), a complete subtree or
    one cut by the right edge (``lo`` a multiple of its largest part). Empty when ``old`` is 0
    or equals ``new``."""
    if not 0 <= old <= new:
        raise BadInput(f"no consistency proof from size {old} to size {new}")
    if old == 0 or old == new:
        return []
    out: list[T] = []
    lo, hi, m = 0, new, old
    complete = True  # SUBPROOF's flag b: is the old tree the whole current subtree so far
    while True:
        n = hi - lo
        if m == n:
            if not complete:
                out.append(subtree(lo, hi))
            break
        k = _split(n)
        if m <= k:
            out.append(subtree(lo + k, hi))
            hi = lo + k
        else:
            out.append(subtree(lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    out.reverse()
    return out


def range_addresses(lo: int, hi: int) -> list[Address]:
    """The stored hashes whose ``combine`` is MTH(leaves[lo:hi]) for a range a proof asks for
    (``lo`` a multiple of its largest part): one complete subtree per set bit of ``hi - lo``,
    largest first."""
    out: list[Address] = []
    n = hi - lo
    for level in range(n.bit_length() - 1, -1, -1):
        if n >> level & 1:
            out.append((level, lo >> level))
            lo += 1 << level
    return out


def combine(parts: Sequence[bytes]) -> bytes:
    """The root over complete subtrees side by side, largest (leftmost) first: the hash of a
    right-edge subtree from ``range_addresses``' hashes, or a tree's root from its right edge
    (``EMPTY_ROOT`` for none)."""
    if not parts:
        return EMPTY_ROOT
    h = parts[-1]
    for left in reversed(parts[:-1]):
        h = node_hash(left, h)
    return h


def inclusion_proof(index: int, size: int, get: GetStored) -> list[bytes]:
    """RFC 9162 2.1.3.1 PATH(index, D[size]), the leaf's sibling first, from stored hashes."""
    return inclusion_path(index, size, get, lambda _level, lo, hi: subtree_hash(lo, hi, get))


def consistency_proof(old: int, new: int, get: GetStored) -> list[bytes]:
    """RFC 9162 2.1.4.1 PROOF(old, D[new]) from stored hashes; empty when ``old`` is 0 or equals
    ``new``."""
    return consistency_path(old, new, lambda lo, hi: subtree_hash(lo, hi, get))


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes, expected {HASH_SIZE}")


def root_from_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """RFC 9162 2.1.3.2 steps 1-4: the root that ``proof`` implies for leaf hash ``leaf``."""
    if size <= 0 or not 0 <= index < size:
        raise ProofError(f"leaf index {index} is out of range for tree size {size}")
    _check_hash(leaf, "leaf hash")
    for i, p in enumerate(proof):
        _check_hash(p, f"inclusion proof hash {i}")
    fn, sn = index, size - 1
    r = leaf
    for p in proof:
        if sn == 0:
            raise ProofError(
                f"inclusion proof for index {index} in size {size} is too long ({len(proof)})"
            )
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(
            f"inclusion proof for index {index} in size {size} is too short ({len(proof)})"
        )
    return r


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Raise ProofError unless ``proof`` shows leaf hash ``leaf`` at ``index`` under ``root``."""
    _check_hash(root, "root hash")
    got = root_from_inclusion(leaf, index, size, proof)
    if got != root:
        raise ProofError(
            f"inclusion proof for index {index} in size {size} gives root {hex_encode(got)}, "
            f"expected {hex_encode(root)}"
        )


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 2.1.4.2; raise ProofError unless the tree of size ``old`` is a prefix of ``new``.

    ``old == new`` needs an empty proof and equal roots. ``old == 0`` needs an empty proof and
    ``old_root == EMPTY_ROOT`` (stricter than transparency-dev/merkle, which ignores the roots).
    """
    if old < 0 or new < old:
        raise ProofError(f"no consistency from size {old} to size {new}")
    _check_hash(old_root, "old root hash")
    _check_hash(new_root, "new root hash")
    for i, p in enumerate(proof):
        _check_hash(p, f"consistency proof hash {i}")
    if old == 0 or old == new:
        if proof:
            raise ProofError(
                f"consistency proof from size {old} to {new} must be empty, has {len(proof)}"
            )
        expected = EMPTY_ROOT if old == 0 else new_root
        if old_root != expected:
            raise ProofError(f"old root of size {old} does not match, {hex_encode(old_root)}")
        return
    if not proof:
        raise ProofError(f"consistency proof from size {old} to {new} is empty")
    path = list(proof)
    # Step 2: if old is a power of two, the old tree is a stored subtree: its root leads the path.
    if old & (old - 1) == 0:
        path.insert(0, old_root)
    fr, sr = consistency_roots(old, new, path)
    if fr != old_root:
        raise ProofError(f"consistency proof does not lead to the old root of size {old}")
    if sr != new_root:
        raise ProofError(f"consistency proof does not lead to the new root of size {new}")


def consistency_roots(old: int, new: int, path: Sequence[bytes]) -> tuple[bytes, bytes]:
    """The (old, new) roots a consistency path leads to (RFC 9162 2.1.4.2 steps 3-7), for
    0 < old < new, where ``path`` is the proof with the old tree's root leading it when ``old``
    is a power of two. A path of the wrong length is a ``ProofError``; comparing the roots with
    trusted ones is the caller's job (``verify_consistency``)."""
    if not path:
        raise ProofError(f"consistency proof from size {old} to {new} is empty")
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError(f"consistency proof from size {old} to {new} is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"consistency proof from size {old} to {new} is too short")
    return fr, sr

class Frontier:
    """The right edge of the tree: the roots of its complete subtrees, largest first.

    Appending needs no reads: each ``append`` returns the stored hashes it creates.
    """

    __slots__ = ("_edge", "size")

    def __init__(self) -> None:
        self.size: int = 0
        self._edge: list[tuple[int, bytes]] = []  # (level, hash), levels strictly decreasing

    @classmethod
    def from_store(cls, size: int, get: GetStored) -> Frontier:
        """Load the frontier of a tree of ``size`` leaves: one read per set bit of ``size``."""
        if size < 0:
            raise BadInput(f"negative tree size {size}")
        f = cls()
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                f._edge.append((level, get(level, start >> level)))
                start += 1 << level
        f.size = size
        return f

    @classmethod
    def from_edge(cls, size: int, edge: Sequence[tuple[int, bytes]]) -> Frontier:
        """The frontier of a tree of ``size`` leaves whose right edge (``edge()``) is ``edge``."""
        if sum(1 << level for level, _ in edge) != size:
            raise ValueError(f"an edge that is not of a tree of size {size}")
        f = cls()
        f._edge = list(edge)
        f.size = size
        return f

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Append leaf hash ``leaf``; return the new stored hashes ``(level, n, hash)``."""
        if len(leaf) != HASH_SIZE:
            raise BadInput(f"leaf hash must be {HASH_SIZE} bytes, got {len(leaf)}")
        index = self.size
        out = [(0, index, leaf)]
        self._fold(index, 0, leaf, out)
        self.size = index + 1
        return out

    def _fold(self, index: int, level: int, h: bytes, out: list[tuple[int, int, bytes]]) -> None:
        """Put the root ``h`` of a complete subtree at ``level`` (its first leaf ``index``) on
        the edge, hashing it with the edge's subtrees of its size as they complete larger ones
        (added to ``out``)."""
        while self._edge and self._edge[-1][0] == level:
            _, left = self._edge.pop()
            h = node_hash(left, h)
            level += 1
            out.append((level, index >> level, h))
        self._edge.append((level, h))

    def append_subtree(self, levels: Sequence[Sequence[bytes]]) -> list[tuple[int, int, bytes]]:
        """Append the ``2**k`` leaves of a perfect subtree at once, given all its levels
        (``perfect_levels``: ``levels[0]`` the leaf hashes, ``levels[k]`` its root), when the
        tree's size is a multiple of ``2**k``; return the new stored hashes ``(level, n, hash)``:
        the subtree's own and those its root completes above it."""
        k = len(levels) - 1
        width = 1 << k
        if k < 0 or len(levels[0]) != width or self.size % width:
            raise ValueError(f"a subtree of {len(levels[0])} leaves at size {self.size}")
        index = self.size
        out = [(level, (index >> level) + j, h) for level, row in enumerate(levels)
               for j, h in enumerate(row)]
        self._fold(index, k, levels[k][0], out)
        self.size = index + width
        return out

    def append_joined(self, levels: Sequence[bytes]) -> list[tuple[int, int, bytes]]:
        """``append_subtree`` of a subtree whose levels come each joined into one string
        (``levels[l]``: the ``2**(k-l)`` hashes of level ``l`` end to end, ``levels[k]`` the
        root): the caller stores those as they are (``ledger.store.writer.Writer``: one statement
        per
        level, not a row per hash); return only the stored hashes the root completes above the
        subtree."""
        k = len(levels) - 1
        width = 1 << k
        if k < 0 or self.size % width or any(
            len(row) != HASH_SIZE << (k - level) for level, row in enumerate(levels)
        ):
            raise ValueError(f"not the levels of a subtree of {width} leaves at size {self.size}")
        index = self.size
        out: list[tuple[int, int, bytes]] = []
        self._fold(index, k, levels[k], out)
        self.size = index + width
        return out

    def root(self) -> bytes:
        """The root hash of the tree so far."""
        return edge_root(self._edge)

    def edge(self) -> tuple[tuple[int, bytes], ...]:
        """The right edge as it is now (immutable): ``edge_root`` of it is the root at this size,
        computed only when someone asks for it."""
        return tuple(self._edge)


def perfect_levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the perfect tree over ``leaves`` (a power of two of them): the leaf
    hashes first, the root last (``Frontier.append_subtree``)."""
    if not leaves or len(leaves) & (len(leaves) - 1):
        raise ValueError(f"{len(leaves)} leaves are not a perfect tree")
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        row = levels[-1]
        levels.append([node_hash(row[i], row[i + 1]) for i in range(0, len(row), 2)])
    return levels


def joined_levels(levels: Sequence[Sequence[bytes]]) -> list[bytes]:
    """``perfect_levels`` with each level's hashes joined end to end
    (``Frontier.append_joined``)."""
    return [b"".join(row) for row in levels]


def edge_within(
    edge: Sequence[tuple[int, bytes]], levels: Sequence[Sequence[bytes]], offset: int
) -> list[tuple[int, bytes]]:
    """The right edge of the tree of ``offset`` more leaves than the tree whose edge is
    ``edge``, where ``levels`` (``perfect_levels``) is the perfect subtree those leaves begin
    (``0 <= offset <= 2**k``, the tree before it a multiple of ``2**k`` leaves): ``edge_root`` of
    it is the root at that size, with no hashing but the fold."""
    out = list(edge)
    pos = 0
    for level in range(len(levels) - 1, -1, -1):
        if offset >> level & 1:
            out.append((level, levels[level][pos >> level]))
            pos += 1 << level
    return out


def edge_root(edge: Sequence[tuple[int, bytes]]) -> bytes:
    """The root of the tree whose right edge (``Frontier.edge``) is ``edge``."""
    return combine([h for _, h in edge])
