"""The collector paused for a batch (ledger.core.gcpause): a batch leaves it as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.core.bundle import Bundle
from ledger.core.gcpause import collector_paused
from tests.helpers.ledgers import add_node, fake_fields, new_ledger


def _bundle(salt: str) -> Bundle:
    files = {"contract.yaml": salt.encode(), "k.ptx": b"p", "p.lean": b"l", "s.fut": b"f"}
    return Bundle.from_files(files)


@pytest.fixture()
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_then_back_on(collector_on: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_on_after_an_error(collector_on: None) -> None:
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_what_the_batch_made_goes_to_the_oldest_generation_unwalked(collector_on: None) -> None:
    """The batch's objects are moved whole to the oldest generation (no young collection walks
    them after the batch); objects the process froze itself stay frozen."""
    with collector_paused():
        made = [[i] for i in range(1000)]
    assert gc.get_count()[0] < 700  # no young collection is due
    assert any(o is made for o in gc.get_objects(generation=2))
    import threading

    if threading.active_count() > 1:  # the freeze count is process-wide
        pytest.skip("another thread of this test worker (a server or cosigner an earlier test "
                    "file left) may move objects: the freeze count cannot be pinned")
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            later = [[i] for i in range(10)]
        assert gc.get_freeze_count() == frozen  # not thawed: nothing moved this time
        assert any(o is later for o in gc.get_objects(generation=0))
    finally:
        gc.unfreeze()


def test_a_caller_that_turned_it_off_keeps_it_off(collector_on: None) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_batch_leaves_the_collector_as_it_was(tmp_path: Path, collector_on: None) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    seen = []

    def probe() -> None:  # called while the batch stores its entries
        seen.append(gc.isenabled())

    items = [(_bundle(str(i)), fake_fields(str(i))) for i in range(3)]
    orig = log.store.writer

    def writer(**kw: object):  # type: ignore[no-untyped-def]
        probe()
        return orig(**kw)  # type: ignore[arg-type]

    log.store.writer = writer  # type: ignore[method-assign]
    log.seal_many(items, sk, workers=0)
    assert seen == [False]
    assert gc.isenabled()
    gc.disable()
    log.seal_many([(_bundle("off"), fake_fields())], sk, workers=0)
    assert not gc.isenabled()
