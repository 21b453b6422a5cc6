"""``seal_many`` in forked worker processes (ledger/sealers.py, issue 12): the same entries as one
thread, in the same order; a refused entry or a dead worker stores nothing."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import audit as audit_mod
from ledger import log as log_mod
from ledger import sealers
from ledger.core.bundle import Bundle
from ledger.core.canonical import canonical_json, canonical_json_extend
from ledger.core.entries import (
    BatchEncoder,
    BundleHead,
    bundle_fields,
    chain_link,
    check_entry_shape,
)
from ledger.core.errors import BadInput, CannotCheck
from ledger.keys import load_node_secret
from ledger.log import Log
from tests.helpers.examples import examples
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
def twin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Log, Log]]:
    """Two copies of one ledger with a registered node key, the clock stopped (so the same batch
    makes the same bytes in both)."""
    monkeypatch.setattr(log_mod, "utc_now", lambda: "2026-12-01T00:00:00Z")
    a = new_ledger(tmp_path / "a")
    add_node(a)
    a.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    one, two = Log.open(tmp_path / "a"), Log.open(tmp_path / "b")
    yield one, two
    one.close()
    two.close()


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
    # the workers' full chunks store their subtrees a level at a time (Writer._put_hash_runs),
    # one thread a row per hash: the same rows
    hashes = "SELECT level, n, hash FROM hashes ORDER BY level, n"
    assert two.store.conn.execute(hashes).fetchall() == one.store.conn.execute(hashes).fetchall()
    assert audit_mod.audit(two.store, two.verifier).ok


def _refused_alike(twin: tuple[Log, Log], batch: list[tuple[Bundle, dict[str, Any]]]) -> str:
    """The refusal of ``batch`` on one thread and by the workers: the same message, and the
    workers' ledger left as it was (nothing of the batch stored)."""
    one, two = twin
    sk, _ = load_node_secret(one.keydir, "node")
    size = two.store.size()
    files = two.store.conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    with pytest.raises(BadInput) as alone:
        one.seal_many(batch, sk, workers=0)
    with pytest.raises(BadInput) as pooled:
        two.seal_many(batch, sk, workers=2)
    assert str(pooled.value) == str(alone.value)
    assert two.store.size() == size  # nothing of the batch was stored: no entry,
    # and none of the files the workers' path stores while the first chunks are made
    assert two.store.conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == files
    return str(pooled.value)


def test_tasks_and_chunks_larger_than_the_pipes_do_not_stall(
    twin: tuple[Log, Log], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each task (~1.5 MB) and each chunk that comes back is far larger than a pipe of one page:
    the storing thread writes the tasks as the pipes take them while it waits for a chunk, so
    a worker writing its chunk and the thread writing that worker's next task never wait on
    each other. The same entries as one thread."""
    monkeypatch.setattr(sealers, "_PIPE_BYTES", 4096)  # the smallest pipe Linux makes
    one, two = twin
    sk, _ = load_node_secret(one.keydir, "node")
    batch = items(4 * sealers.CHUNK + 3, "big")
    for _, fields in batch:
        fields["checks"] = [dict(fields["checks"][0], id=f"c{k}", detail="d" * 1500)
                            for k in range(4)]
    alone = one.seal_many(batch, sk, workers=0)
    pooled = two.seal_many(batch, sk, workers=2)
    assert [s.entry for s in pooled] == [s.entry for s in alone]
    assert two._sealers is not None and len(two._sealers.pids()) == 2


def test_a_worker_gone_between_batches_is_replaced(twin: tuple[Log, Log]) -> None:
    """Workers kept for the next batch are checked first: one that died since (killed, out of
    memory) makes the batch fork new ones, not fail."""
    _, two = twin
    sk, _ = load_node_secret(two.keydir, "node")
    two.seal_many(items(sealers.CHUNK + 1, "a"), sk, workers=2)
    assert two._sealers is not None
    first = two._sealers.pids()
    os.kill(first[0], signal.SIGKILL)
    while not _gone_or_zombie(first[0]):  # dead, not yet reaped: the pool reaps it
        time.sleep(0.01)
    assert len(two.seal_many(items(sealers.CHUNK + 1, "b"), sk, workers=2)) == sealers.CHUNK + 1
    again = two._sealers.pids()
    assert len(again) == 2 and not set(again) & set(first)
    assert all(_gone(pid) for pid in first)  # the old ones stopped and reaped


def test_the_workers_of_one_log_hold_no_pipe_of_another(twin: tuple[Log, Log]) -> None:
    """Two ledgers open in one process, each with its workers: the second's workers, forked
    after the first's, hold none of the first's pipes (else the first's workers would not see
    their pipes close when it closes), and closing the first stops and reaps its workers."""
    one, two = twin
    sk, _ = load_node_secret(one.keydir, "node")
    one.seal_many(items(sealers.CHUNK + 1, "o"), sk, workers=2)
    two.seal_many(items(sealers.CHUNK + 1, "t"), sk, workers=2)
    assert one._sealers is not None and two._sealers is not None
    first = one._sealers._workers or []
    theirs = {os.fstat(fd).st_ino for w in first for fd in (w.task_fd, w.result_fd)}
    for pid in two._sealers.pids():
        held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert not {f"pipe:[{ino}]" for ino in theirs} & held
    pids = one._sealers.pids()
    one.close()
    assert all(_gone(pid) for pid in pids)
    assert len(two.seal_many(items(5, "u"), sk, workers=2)) == 5


def test_a_fork_that_fails_is_cannot_check_and_leaves_nothing(
    twin: tuple[Log, Log], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No process to be had (EAGAIN, injected): ``CannotCheck`` with one line, nothing stored,
    no pipe left open, the first worker (forked before) stopped; the next batch forks anew."""
    import errno

    _, two = twin
    sk, _ = load_node_secret(two.keydir, "node")
    size = two.store.size()
    fds = set(os.listdir("/proc/self/fd"))
    real = os.fork
    forks: list[int] = []

    def second_fails() -> int:
        if forks:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        pid = real()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(sealers.os, "fork", second_fails)
    with pytest.raises(CannotCheck, match="cannot start the sealing workers"):
        two.seal_many(items(sealers.CHUNK + 1, "f"), sk, workers=2)
    assert two.store.size() == size and two._sealers is None
    assert set(os.listdir("/proc/self/fd")) <= fds and not sealers._LIVE_FDS
    assert _gone(forks[0])
    monkeypatch.setattr(sealers.os, "fork", real)
    assert len(two.seal_many(items(5, "g"), sk, workers=2)) == 5


def _gone_or_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_refused_entry_stops_the_batch_where_one_thread_would(twin: tuple[Log, Log]) -> None:
    _, two = twin
    sk, _ = load_node_secret(two.keydir, "node")
    batch = items(2 * sealers.CHUNK + 5, "y", bad=sealers.CHUNK + 3)
    assert "vouched" in _refused_alike(twin, batch)
    # the ledger takes the good part afterwards
    assert len(two.seal_many(batch[: sealers.CHUNK], sk, workers=2)) == sealers.CHUNK


def test_a_dead_worker_stores_nothing(
    twin: tuple[Log, Log], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, two = twin
    sk, _ = load_node_secret(two.keydir, "node")
    real = sealers.bundle_entries

    def dies(
        link: Mapping[str, Any], heads: Sequence[tuple[BundleHead, Mapping[str, Any]]],
        signer: bytes, sk64: bytes, now: Callable[[], str],
    ) -> tuple[list[tuple[bytes, bytes]], str | None]:
        if any(fields["kernel"]["name"] == "kz300" for _, fields in heads):  # the second chunk
            os._exit(9)  # as if killed: the worker is gone without a word
        return real(link, heads, signer, sk64, now)

    monkeypatch.setattr(sealers, "bundle_entries", dies)  # inherited by the forked workers
    size = two.store.size()
    with pytest.raises(CannotCheck, match="worker process died"):
        two.seal_many(items(2 * sealers.CHUNK, "z"), sk, workers=2)
    assert two.store.size() == size
    monkeypatch.setattr(sealers, "bundle_entries", real)
    assert len(two.seal_many(items(10, "w"), sk, workers=2)) == 10
    assert audit_mod.audit(two.store, two.verifier).ok


def test_an_entry_over_the_size_limit_stops_the_batch_where_one_thread_would(
    twin: tuple[Log, Log],
) -> None:
    batch = items(2 * sealers.CHUNK + 5, "s")
    big = batch[sealers.CHUNK + 7][1]
    big["checks"] = [dict(big["checks"][0], id=f"c{k}", detail="d" * 9000) for k in range(8)]
    assert "entry limit" in _refused_alike(twin, batch)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_workers_stay_for_the_next_batch_until_a_failure_or_close(
    twin: tuple[Log, Log],
) -> None:
    """The workers forked for a batch make the next batches of the same key too; a refused
    batch stops them (the next batch forks new ones); ``Log.close`` stops them."""
    one, two = twin
    sk, _ = load_node_secret(two.keydir, "node")
    two.seal_many(items(sealers.CHUNK + 3, "p"), sk, workers=2)
    assert two._sealers is not None
    first = two._sealers.pids()
    assert len(first) == 2
    two.seal_many(items(2 * sealers.CHUNK, "q"), sk, workers=2)
    assert two._sealers.pids() == first
    with pytest.raises(BadInput):
        two.seal_many(items(sealers.CHUNK + 9, "r", bad=4), sk, workers=2)
    assert two._sealers.pids() == []
    assert all(_gone(pid) for pid in first)
    two.seal_many(items(20, "t"), sk, workers=2)
    again = two._sealers.pids()
    assert len(again) == 2 and not set(again) & set(first)
    # the same entries as one thread, through every one of those pools
    for batch in (items(sealers.CHUNK + 3, "p"), items(2 * sealers.CHUNK, "q"), items(20, "t")):
        one.seal_many(batch, sk, workers=0)
    assert [one.store.entry(i) for i in range(one.store.size())] == [
        two.store.entry(i) for i in range(two.store.size())
    ]
    two.close()
    assert all(_gone(pid) for pid in again)


def test_worker_count_leaves_small_batches_on_one_thread() -> None:
    assert sealers.worker_count(sealers.MIN_BATCH - 1) == 0
    cpus = len(os.sched_getaffinity(0))
    assert sealers.worker_count(sealers.MIN_BATCH) == (cpus if cpus > 1 else 0)


_text = st.text(max_size=40)
_map = st.dictionaries(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,8}", fullmatch=True), _text,
                       max_size=4)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.fixed_dictionaries({"name": _text, "version": _text}),
    st.lists(st.fixed_dictionaries({"obligation": _text, "theorem": _text, "property": _text}),
             max_size=3),
    st.lists(st.fixed_dictionaries(
        {"id": _text, "status": st.sampled_from(["passed", "failed", "skipped"]),
         "detail": _text}, optional={"tool": _text, "version": _text}), max_size=4),
    st.integers(0, 2**60),
    st.text(min_size=1, max_size=30),
    st.binary(min_size=0, max_size=80),
    _map,
)
def test_the_batch_encoder_writes_what_canonical_json_writes(
    kernel: dict[str, str], obligations: list[dict[str, str]], checks: list[dict[str, str]],
    prev_size: int, origin: str, manifest: bytes, extra_kernel: dict[str, str],
) -> None:
    """``BatchEncoder`` (what seal_many signs) gives the bytes of ``canonical_json_extend`` of
    ``bundle_fields`` (what a single seal signs), with and without the signature, for any
    fields the shape rules take, a chain link beyond 2**53 included (then not plain)."""
    head = _Head(bytes(range(32)), manifest.decode("latin-1").encode("utf-8"))
    extra = {"kernel": {**extra_kernel, **kernel}, "obligations": obligations, "checks": checks}
    link = {"origin": origin, **chain_link(prev_size, bytes(32))}
    enc = BatchEncoder(link, b"\x01" * 8)
    fields = bundle_fields({**link, "time": "2026-12-01T00:00:00Z"}, head, extra, b"\x01" * 8)
    try:
        check_entry_shape(fields)
    except BadInput:
        with pytest.raises(BadInput):
            enc.encode("2026-12-01T00:00:00Z", head, extra)
        return
    try:
        want_body, want_with = canonical_json_extend(fields, "signature")
    except BadInput:  # no canonical form (a chain link beyond 2**53): refused alike
        with pytest.raises(BadInput):
            enc.encode("2026-12-01T00:00:00Z", head, extra)
        return
    body, with_signature = enc.encode("2026-12-01T00:00:00Z", head, extra)
    assert body == want_body == canonical_json(fields)
    assert with_signature("c2ln") == want_with("c2ln") == canonical_json(
        {**fields, "signature": "c2ln"})


@dataclass(frozen=True)
class _Head:
    digest: bytes
    manifest: bytes
