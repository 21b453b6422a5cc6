"""ledger.core.merkle against the RFC 6962 reference tree of transparency-dev/merkle.

Vectors copied from transparency-dev/merkle proof/verify_test.go (commit 02194e9a):
https://github.com/transparency-dev/merkle/blob/main/proof/verify_test.go
(``leaves``, ``roots``, ``inclusionProofs``, ``consistencyProofs``; its inclusion ``leaf`` field is
1-based). Stored-node shapes from proof/proof_test.go (TestInclusion / TestConsistency).
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import merkle
from ledger.core.errors import BadInput, ProofError

LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
ROOTS = [
    bytes.fromhex(h)
    for h in [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]
# (1-based leaf, size, proof)
INCLUSION = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        2,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


class Store:
    """An in-memory store filled only through Frontier.append, recording every read."""

    def __init__(self, leaves: list[bytes]) -> None:
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.reads: list[tuple[int, int]] = []
        f = merkle.Frontier()
        for leaf in leaves:
            for level, n, h in f.append(merkle.leaf_hash(leaf)):
                self.nodes[(level, n)] = h
        self.frontier = f

    def get(self, level: int, n: int) -> bytes:
        self.reads.append((level, n))
        return self.nodes[(level, n)]


@pytest.fixture
def store() -> Store:
    return Store(LEAVES)


def test_hash_primitives() -> None:
    assert merkle.EMPTY_ROOT.hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert merkle.leaf_hash(b"") == hashlib.sha256(b"\x00").digest() == ROOTS[0]
    a, b = merkle.leaf_hash(b"a"), merkle.leaf_hash(b"b")
    assert merkle.node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()


def test_every_reference_root(store: Store) -> None:
    hashes = [merkle.leaf_hash(x) for x in LEAVES]
    assert merkle.root_from_leaf_hashes([]) == merkle.EMPTY_ROOT
    assert merkle.tree_root(0, store.get) == merkle.EMPTY_ROOT
    for size in range(1, 9):
        assert merkle.root_from_leaf_hashes(hashes[:size]) == ROOTS[size - 1]
        assert merkle.tree_root(size, store.get) == ROOTS[size - 1]
    f = merkle.Frontier()
    assert f.root() == merkle.EMPTY_ROOT
    for size, h in enumerate(hashes, start=1):
        f.append(h)
        assert f.root() == ROOTS[size - 1]
        assert merkle.Frontier.from_store(size, store.get).root() == ROOTS[size - 1]


@pytest.mark.parametrize(("leaf", "size", "proof"), INCLUSION)
def test_reference_inclusion(store: Store, leaf: int, size: int, proof: list[str]) -> None:
    want = [bytes.fromhex(p) for p in proof]
    assert merkle.inclusion_proof(leaf - 1, size, store.get) == want
    lh = merkle.leaf_hash(LEAVES[leaf - 1])
    root = ROOTS[size - 1]
    assert merkle.root_from_inclusion(lh, leaf - 1, size, want) == root
    merkle.verify_inclusion(lh, leaf - 1, size, want, root)
    # The corrupted probes of transparency-dev's corruptInclusionProof.
    bad: list[tuple[int, int, bytes, list[bytes], bytes]] = [
        (leaf - 2, size, lh, want, root),
        (leaf, size, lh, want, root),
        ((leaf - 1) ^ 2, size, lh, want, root),
        (leaf - 1, size * 2, lh, want, root),
        (leaf - 1, size // 2, lh, want, root),
        (leaf - 1, size, merkle.leaf_hash(b"WrongLeaf"), want, root),
        (leaf - 1, size, lh, want, merkle.EMPTY_ROOT),
        (leaf - 1, size, lh, want, SOME_HASH),
        (leaf - 1, size, lh, [*want, b""], root),
        (leaf - 1, size, lh, [*want, root], root),
        (leaf - 1, size, lh, [b"", *want], root),
        (leaf - 1, size, lh, [root, *want], root),
    ]
    for i in range(len(want)):
        flipped = list(want)
        flipped[i] = bytes([flipped[i][0] ^ 8]) + flipped[i][1:]
        bad.append((leaf - 1, size, lh, flipped, root))
    if want:
        bad.append((leaf - 1, size, lh, want[:-1], root))
    if len(want) > 1:
        bad.append((leaf - 1, size, lh, [want[0], SOME_HASH, *want[1:]], root))
    for index, sz, lf, pr, rt in bad:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(lf, index, sz, pr, rt)


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_reference_consistency(store: Store, old: int, new: int, proof: list[str]) -> None:
    want = [bytes.fromhex(p) for p in proof]
    assert merkle.consistency_proof(old, new, store.get) == want
    r1, r2 = ROOTS[old - 1], ROOTS[new - 1]
    merkle.verify_consistency(old, new, r1, r2, want)
    if not want:
        return
    bad: list[tuple[int, int, bytes, bytes, list[bytes]]] = [
        (old - 1, new, r1, r2, want),
        (old + 1, new, r1, r2, want),
        (old ^ 2, new, r1, r2, want),
        (old, new * 2, r1, r2, want),
        (old, new // 2, r1, r2, want),
        (old, new, SOME_HASH, r2, want),
        (old, new, r1, SOME_HASH, want),
        (old, new, r2, r1, want),
        (old, new, r1, r2, []),
        (old, new, r1, r2, [*want, b""]),
        (old, new, r1, r2, [*want, r1]),
        (old, new, r1, r2, [*want, r2]),
        (old, new, r1, r2, [b"", *want]),
        (old, new, r1, r2, [r1, *want]),
        (old, new, r1, r2, [r2, *want]),
        (old, new, r1, r2, [want[0], *want]),
        (old, new, r1, r2, want[:-1]),
    ]
    for i in range(len(want)):
        flipped = list(want)
        flipped[i] = bytes([flipped[i][0] ^ 16]) + flipped[i][1:]
        bad.append((old, new, r1, r2, flipped))
    for o, n, a, b, pr in bad:
        with pytest.raises(ProofError):
            merkle.verify_consistency(o, n, a, b, pr)


def test_trivial_consistency_cases() -> None:
    # transparency-dev TestVerifyConsistency, with our stricter size-0 root rule.
    e = merkle.EMPTY_ROOT
    merkle.verify_consistency(0, 0, e, e, [])
    merkle.verify_consistency(0, 1, e, ROOTS[0], [])
    merkle.verify_consistency(1, 1, ROOTS[0], ROOTS[0], [])
    for old, new, r1, r2, proof in [
        (1, 1, ROOTS[0], ROOTS[1], []),  # same size, different roots
        (1, 0, ROOTS[0], e, []),  # time travel
        (2, 1, ROOTS[1], ROOTS[0], []),
        (1, 2, ROOTS[0], ROOTS[1], []),  # empty proof
        (0, 0, e, e, [e]),  # roots match but proof not empty
        (0, 1, e, e, [e]),
        (1, 1, e, e, [e]),
        (0, 5, SOME_HASH, ROOTS[4], []),  # size 0 must have the empty root
    ]:
        with pytest.raises(ProofError):
            merkle.verify_consistency(old, new, r1, r2, proof)


def test_single_entry_and_bad_ranges() -> None:
    h = merkle.leaf_hash(b"data")
    merkle.verify_inclusion(h, 0, 1, [], h)
    for leaf, root in [(h, b""), (b"", h), (b"", b"")]:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(leaf, 0, 1, [], root)
    for index, size in [(0, 0), (1, 0), (2, 1), (-1, 4)]:
        with pytest.raises(ProofError, match="out of range"):
            merkle.verify_inclusion(SOME_HASH, index, size, [], merkle.EMPTY_ROOT)
    store = Store(LEAVES)
    for index, size in [(0, 0), (1, 1), (8, 7), (-1, 3)]:
        with pytest.raises(BadInput):
            merkle.inclusion_proof(index, size, store.get)
    for old, new in [(5, 0), (9, 8), (-1, 3)]:
        with pytest.raises(BadInput):
            merkle.consistency_proof(old, new, store.get)
    with pytest.raises(BadInput):
        merkle.Frontier().append(b"entry bytes, not a hash")


def test_proofs_read_stored_nodes_of_transparency_dev_shapes() -> None:
    # proof_test.go TestInclusion / TestConsistency: the stored nodes a proof is made of.
    s = Store([bytes([i]) for i in range(8)])
    s.reads.clear()
    merkle.inclusion_proof(3, 5, s.get)
    assert sorted(s.reads) == sorted([(0, 4), (1, 0), (0, 2)])  # c g e
    s.reads.clear()
    merkle.inclusion_proof(4, 7, s.get)
    assert sorted(s.reads) == sorted([(0, 5), (0, 6), (2, 0)])  # f j k
    s.reads.clear()
    merkle.consistency_proof(5, 7, s.get)
    assert sorted(s.reads) == sorted([(0, 4), (0, 5), (0, 6), (2, 0)])  # e f j k
    s.reads.clear()
    merkle.consistency_proof(2, 8, s.get)
    assert sorted(s.reads) == sorted([(1, 1), (2, 1)])  # h l


def test_frontier_emits_stored_hashes_level_zero_first() -> None:
    f = merkle.Frontier()
    hs = [merkle.leaf_hash(bytes([i])) for i in range(4)]
    assert f.append(hs[0]) == [(0, 0, hs[0])]
    h01 = merkle.node_hash(hs[0], hs[1])
    assert f.append(hs[1]) == [(0, 1, hs[1]), (1, 0, h01)]
    assert f.append(hs[2]) == [(0, 2, hs[2])]
    h23 = merkle.node_hash(hs[2], hs[3])
    assert f.append(hs[3]) == [(0, 3, hs[3]), (1, 1, h23), (2, 0, merkle.node_hash(h01, h23))]
    assert f.size == 4


# --- properties -----------------------------------------------------------------------------

_ENTRIES = [b"entry-%d" % i for i in range(1100)]
_HASHES = [merkle.leaf_hash(e) for e in _ENTRIES]
_BIG = Store(_ENTRIES)


@st.composite
def _size_and_index(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(min_value=1, max_value=len(_ENTRIES)))
    return size, draw(st.integers(min_value=0, max_value=size - 1))


@st.composite
def _old_new(draw: st.DrawFn) -> tuple[int, int]:
    new = draw(st.integers(min_value=1, max_value=len(_ENTRIES)))
    return draw(st.integers(min_value=1, max_value=new)), new


@settings(max_examples=200)
@given(_size_and_index())
def test_inclusion_proofs_verify_against_reference_root(si: tuple[int, int]) -> None:
    size, index = si
    root = merkle.root_from_leaf_hashes(_HASHES[:size])
    assert merkle.tree_root(size, _BIG.get) == root
    proof = merkle.inclusion_proof(index, size, _BIG.get)
    merkle.verify_inclusion(_HASHES[index], index, size, proof, root)
    if size > 1:
        other = (index + 1) % size
        with pytest.raises(ProofError):
            merkle.verify_inclusion(_HASHES[other], index, size, proof, root)


@settings(max_examples=200)
@given(_old_new())
def test_consistency_proofs_verify_against_reference_roots(on: tuple[int, int]) -> None:
    old, new = on
    r1 = merkle.root_from_leaf_hashes(_HASHES[:old])
    r2 = merkle.root_from_leaf_hashes(_HASHES[:new])
    proof = merkle.consistency_proof(old, new, _BIG.get)
    merkle.verify_consistency(old, new, r1, r2, proof)
    if old < new:
        with pytest.raises(ProofError):
            merkle.verify_consistency(old, new, r2, r2, proof)


@settings(max_examples=300)
@given(_size_and_index(), st.data())
def test_any_flipped_byte_in_leaf_or_proof_is_rejected(
    si: tuple[int, int], data: st.DataObject
) -> None:
    size, index = si
    root = merkle.root_from_leaf_hashes(_HASHES[:size])
    proof = merkle.inclusion_proof(index, size, _BIG.get)
    parts = [_HASHES[index], *proof]
    which = data.draw(st.integers(min_value=0, max_value=len(parts) - 1))
    pos = data.draw(st.integers(min_value=0, max_value=31))
    bit = data.draw(st.integers(min_value=1, max_value=255))
    flipped = bytearray(parts[which])
    flipped[pos] ^= bit
    parts[which] = bytes(flipped)
    with pytest.raises(ProofError):
        merkle.verify_inclusion(parts[0], index, size, parts[1:], root)


@settings(max_examples=200)
@given(_old_new(), st.data())
def test_any_flipped_byte_in_consistency_proof_is_rejected(
    on: tuple[int, int], data: st.DataObject
) -> None:
    old, new = on
    proof = merkle.consistency_proof(old, new, _BIG.get)
    if not proof:
        return
    r1 = merkle.root_from_leaf_hashes(_HASHES[:old])
    r2 = merkle.root_from_leaf_hashes(_HASHES[:new])
    which = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
    pos = data.draw(st.integers(min_value=0, max_value=31))
    flipped = bytearray(proof[which])
    flipped[pos] ^= data.draw(st.integers(min_value=1, max_value=255))
    bad = [*proof[:which], bytes(flipped), *proof[which + 1 :]]
    with pytest.raises(ProofError):
        merkle.verify_consistency(old, new, r1, r2, bad)


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=300))
def test_frontier_appends_exactly_the_stored_hashes(start: int, more: int) -> None:
    size = start + more
    produced: dict[tuple[int, int], bytes] = {}
    f = merkle.Frontier.from_store(start, _BIG.get)
    assert f.size == start and f.root() == merkle.root_from_leaf_hashes(_HASHES[:start])
    for i in range(start, size):
        out = f.append(_HASHES[i])
        assert [lv for lv, _, _ in out] == list(range(len(out)))  # level 0 first
        for level, n, h in out:
            assert (level, n) not in produced
            produced[(level, n)] = h
    # Exactly the complete subtrees that end in [start, size).
    want = {
        (level, n): merkle.root_from_leaf_hashes(_HASHES[n << level : (n + 1) << level])
        for level in range(12)
        for n in range(size >> level)
        if ((n + 1) << level) > start
    }
    assert produced == want
    assert f.size == size and f.root() == merkle.root_from_leaf_hashes(_HASHES[:size])


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=30), st.integers(min_value=0, max_value=5))
def test_a_perfect_subtree_appends_as_its_leaves_would(blocks: int, k: int) -> None:
    """``Frontier.append_subtree`` of a whole aligned subtree stores the same hashes, and leaves
    the same frontier, as appending its leaves one by one."""
    width = 1 << k
    start = blocks * width
    leaves = _HASHES[start : start + width]
    one, whole = merkle.Frontier.from_store(start, _BIG.get), merkle.Frontier.from_store(
        start, _BIG.get)
    rows = [row for leaf in leaves for row in one.append(leaf)]
    got = whole.append_subtree(merkle.perfect_levels(leaves))
    assert sorted(got) == sorted(rows)
    assert whole.edge() == one.edge() and whole.size == one.size == start + width
    # the same subtree with each level joined: only the hashes above it come back
    joined = merkle.Frontier.from_store(start, _BIG.get)
    above = joined.append_joined(merkle.joined_levels(merkle.perfect_levels(leaves)))
    assert sorted(above) == sorted(r for r in rows if r[0] > k)
    assert joined.edge() == one.edge() and joined.size == one.size
    with pytest.raises(ValueError):  # a level of the wrong length
        merkle.Frontier.from_store(start, _BIG.get).append_joined(
            [*merkle.joined_levels(merkle.perfect_levels(leaves))[:-1], b"short"])
    if start % (2 * width) == width and k < 5:  # misaligned for a subtree twice as wide
        with pytest.raises(ValueError):
            merkle.Frontier.from_store(start, _BIG.get).append_subtree(
                merkle.perfect_levels(_HASHES[: 2 * width]))
    with pytest.raises(ValueError):
        merkle.perfect_levels(_HASHES[:3])
