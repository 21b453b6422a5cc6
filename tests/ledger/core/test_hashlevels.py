"""ledger.core.hashlevels (issue 12): proofs from the stored hashes held in memory equal RFC 9162's
PATH / PROOF computed by ledger.core.merkle, for every index and size up to a few hundred, with the
lower levels left out by a small budget (then read through the store), and as the tree grows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core import merkle
from ledger.core.errors import BadInput
from ledger.core.hashlevels import HashLevels, combine, inclusion_paths, lowest_level
from ledger.store import create_store
from ledger.store.base import PRELOAD_AFTER_PROOFS


def stored_tree(size: int) -> dict[tuple[int, int], bytes]:
    f = merkle.Frontier()
    out: dict[tuple[int, int], bytes] = {}
    for i in range(size):
        for level, n, h in f.append(merkle.leaf_hash(b"e%d" % i)):
            out[(level, n)] = h
    return out


def reader(tree: dict[tuple[int, int], bytes]):  # type: ignore[no-untyped-def]
    def read(level: int, start: int, end: int) -> list[bytes]:
        return [tree[(level, n)] for n in range(start, end) if (level, n) in tree]

    return read


def test_paths_equal_rfc_path_for_every_index() -> None:
    tree = stored_tree(300)
    for size in [*range(1, 70), 127, 128, 129, 255, 256, 257, 300]:
        for index in range(size):
            want = merkle.inclusion_proof(index, size, lambda lv, n: tree[(lv, n)])
            got = [combine([tree[a] for a in p]) for p in inclusion_paths(index, size)]
            assert got == want, (index, size)


def test_levels_proofs_equal_rfc_proofs() -> None:
    """HashLevels' own inclusion and consistency proofs (the whole tree held), every index and
    old size of trees up to 130 leaves and a few larger ones, against ledger.core.merkle."""
    tree = stored_tree(300)
    levels = HashLevels()
    levels.fill(300, reader(tree))

    def get(lv: int, n: int) -> bytes:
        return tree[(lv, n)]

    for size in [*range(1, 131), 255, 256, 257, 300]:
        for i in range(size):
            assert levels.inclusion_proof(i, size) == merkle.inclusion_proof(i, size, get)
        for old in range(size + 1):
            assert levels.consistency_proof(old, size) == merkle.consistency_proof(old, size, get)
    assert levels.inclusion_proof(0, 301) is None and levels.consistency_proof(1, 301) is None
    assert levels.inclusion_proof(5, 5) is None and levels.consistency_proof(6, 5) is None


def test_levels_fill_grow_and_budget() -> None:
    tree = stored_tree(1000)
    levels = HashLevels(budget=40 * 32)  # room for levels 5 and up of 1,000 leaves only
    levels.fill(700, reader(tree))
    assert levels.low == lowest_level(700, 40 * 32) > 0
    assert levels.get(0, 3) is None and levels.get(levels.low, 0) == tree[(levels.low, 0)]
    levels.fill(1000, reader(tree))  # grows: reads the new rows only
    top = (1000).bit_length() - 1
    assert levels.get(top, 0) == tree[(top, 0)]
    assert levels.get(levels.low, (1000 >> levels.low)) is None  # beyond the tree
    step = HashLevels()
    calls = 0
    while not step.fill(1000, reader(tree), max_rows=300):
        calls += 1
        assert step.size == 0 and step.inclusion_proof(5, 1000) is None
    assert calls >= 6 and step.size == 1000 and step.nbytes() == len(tree) * 32
    whole = HashLevels()
    whole.fill(1000, reader(tree))
    assert whole.low == 0 and whole.nbytes() == len(tree) * 32
    del tree[(3, 50)]
    with pytest.raises(LookupError):
        HashLevels().fill(1000, reader(tree))


@pytest.mark.parametrize(("budget", "fill_rows"), [(64 * 32, 1 << 16), (1 << 20, 1 << 16),
                                                   (1 << 20, 37)])
def test_store_proofs_from_memory_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int, fill_rows: int
) -> None:
    """A Store past PRELOAD_AFTER_PROOFS answers from memory (the whole tree, or with a small
    budget the upper levels and the lowest ones in one batched read; filled a few rows per proof
    meanwhile), and follows the tree as it grows."""
    import ledger.core.hashlevels as hl
    import ledger.store.base as store_mod

    monkeypatch.setattr(hl, "HASH_CACHE_BYTES", budget)
    monkeypatch.setattr(store_mod, "FILL_ROWS", fill_rows)
    store = create_store(tmp_path / "h", "test.example/levels")
    try:
        for part in (range(0, 200), range(200, 333)):
            with store.writer() as w:
                for i in part:
                    w.append_bundle(b"e%d" % i, bytes(32))
            size = store.size()
            leaves = [merkle.leaf_hash(b"e%d" % i) for i in range(size)]
            root = merkle.root_from_leaf_hashes(leaves)
            for i in range(size):  # more than PRELOAD_AFTER_PROOFS
                merkle.verify_inclusion(leaves[i], i, size, store.inclusion_proof(i, size), root)
            for old in range(1, size, 7):
                merkle.verify_consistency(
                    old, size, merkle.root_from_leaf_hashes(leaves[:old]), root,
                    store.consistency_proof(old, size),
                )
            assert store._levels is not None
            assert (store._levels.low > 0) == (budget < 1 << 20)
            assert store._levels.size == size  # filled by now, 37 rows per proof or at once
        assert store._proofs > PRELOAD_AFTER_PROOFS
        with pytest.raises(BadInput):
            store.inclusion_proof(size, size)
    finally:
        store.close()
