"""``seal_many`` in forked worker processes (ledger/sealers.py, issue 12): the same entries as one
thread, in the same order; a refused entry or a dead worker stores nothing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ledger import audit as audit_mod
from ledger import log as log_mod
from ledger import sealers
from ledger.bundle import Bundle
from ledger.entries import BundleHead
from ledger.errors import BadInput, CannotCheck
from ledger.keys import load_node_secret
from ledger.log import Log
from tests.helpers.ledgers import add_node, fake_fields, new_ledger

FILES = {"k.ptx": b"p", "p.lean": b"l", "s.fut": b"f"}


def items(n: int, salt: str, bad: int | None = None) -> list[tuple[Bundle, dict[str, Any]]]:
    out = []
    for i in range(n):
        fields = fake_fields(f"{salt}{i}")
        if i == bad:
            fields["checks"][0]["status"] = "vouched"  # not a check status: the rules refuse it
        out.append((Bundle.from_files({"contract.yaml": f"{salt}{i}".encode(), **FILES}), fields))
    return out


@pytest.fixture()
def twin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Log, Log]:
    """Two copies of one ledger with a registered node key, the clock stopped (so the same batch
    makes the same bytes in both)."""
    monkeypatch.setattr(log_mod, "utc_now", lambda: "2026-12-01T00:00:00Z")
    a = new_ledger(tmp_path / "a")
    add_node(a)
    a.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    return Log.open(tmp_path / "a"), Log.open(tmp_path / "b")


def test_workers_make_the_same_entries_in_the_same_order(twin: tuple[Log, Log]) -> None:
    one, two = twin
    sk, _ = load_node_secret(one.keydir, "node")
    batch = items(3 * sealers.CHUNK + 17, "x")  # chunks of both workers, a short last one
    alone = one.seal_many(batch, sk, workers=0)
    pooled = two.seal_many(batch, sk, workers=2)
    assert [s.entry for s in pooled] == [s.entry for s in alone]
    assert [s.index for s in pooled] == [s.index for s in alone]
    assert one.store.root(one.store.size()) == two.store.root(two.store.size())
    assert [two.store.entry(s.index) for s in pooled] == [s.entry for s in pooled]
    assert audit_mod.audit(two.store, two.verifier).ok


def test_a_refused_entry_stops_the_batch_where_one_thread_would(twin: tuple[Log, Log]) -> None:
    one, two = twin
    sk, _ = load_node_secret(one.keydir, "node")
    batch = items(2 * sealers.CHUNK + 5, "y", bad=sealers.CHUNK + 3)
    size = two.store.size()
    with pytest.raises(BadInput) as alone:
        one.seal_many(batch, sk, workers=0)
    with pytest.raises(BadInput) as pooled:
        two.seal_many(batch, sk, workers=2)
    assert str(pooled.value) == str(alone.value)
    assert "vouched" in str(pooled.value)
    assert two.store.size() == size  # nothing of the batch was stored
    # the ledger takes the good part afterwards
    assert len(two.seal_many(batch[: sealers.CHUNK], sk, workers=2)) == sealers.CHUNK


def test_a_dead_worker_stores_nothing(
    twin: tuple[Log, Log], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, two = twin
    sk, _ = load_node_secret(two.keydir, "node")
    real = sealers.bundle_entry

    def dies(
        chain: Mapping[str, Any], head: BundleHead, fields: Mapping[str, Any], signer: bytes,
        sk64: bytes,
    ) -> bytes:
        if fields["kernel"]["name"] == "kz300":  # in the second chunk
            os._exit(9)  # as if killed: the worker is gone without a word
        return real(chain, head, fields, signer, sk64)

    monkeypatch.setattr(sealers, "bundle_entry", dies)  # inherited by the forked workers
    size = two.store.size()
    with pytest.raises(CannotCheck, match="worker process died"):
        two.seal_many(items(2 * sealers.CHUNK, "z"), sk, workers=2)
    assert two.store.size() == size
    monkeypatch.setattr(sealers, "bundle_entry", real)
    assert len(two.seal_many(items(10, "w"), sk, workers=2)) == 10
    assert audit_mod.audit(two.store, two.verifier).ok


def test_worker_count_leaves_small_batches_on_one_thread() -> None:
    assert sealers.worker_count(sealers.MIN_BATCH - 1) == 0
    cpus = len(os.sched_getaffinity(0))
    assert sealers.worker_count(sealers.MIN_BATCH) == (cpus if cpus > 1 else 0)
