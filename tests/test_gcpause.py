"""The collector paused for a batch (ledger.gcpause) and bytes bound without an adapter search
(ledger.store): each leaves the process as it found it."""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.bundle import Bundle
from ledger.gcpause import collector_paused
from ledger.store import Store, _bind_bytes_directly
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


@pytest.fixture()
def no_bytes_adapter() -> Iterator[None]:
    key = (bytes, sqlite3.PrepareProtocol)
    saved = sqlite3.adapters.pop(key, None)
    yield
    sqlite3.adapters.pop(key, None)
    if saved is not None:
        sqlite3.adapters[key] = saved


def test_bytes_bind_as_the_same_blob(no_bytes_adapter: None, tmp_path: Path) -> None:
    _bind_bytes_directly()
    conn = sqlite3.connect(":memory:")
    value = bytes(range(256))
    assert conn.execute("SELECT typeof(?), ?", (value, value)).fetchone() == ("blob", value)
    # a subclass of bytes is not the registered type: it binds as SQLite always bound it
    class Sub(bytes):
        pass

    assert conn.execute("SELECT typeof(?)", (Sub(b"ab"),)).fetchone() == ("blob",)


def test_an_adapter_registered_before_stays(no_bytes_adapter: None, tmp_path: Path) -> None:
    def theirs(b: bytes) -> bytes:
        return b

    sqlite3.register_adapter(bytes, theirs)
    log = new_ledger(tmp_path / "home")
    Store.open(log.home).close()
    assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)] is theirs
