"""The WAL checkpoint a large batch leaves to a thread (ledger/store/walcheckpoint.py, issue 12):
the
commit is durable without it, the thread copies the pages into ``ledger.db``, ``close`` waits for
it, and a checkpointer that cannot open the database leaves the default path in charge."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

from ledger import sealers
from ledger.core.bundle import Bundle
from ledger.log import Log
from ledger.store.common import DB_NAME
from ledger.store.walcheckpoint import Checkpointer
from tests.helpers.ledgers import add_node, fake_fields, new_ledger

REPO = Path(__file__).resolve().parents[3]
FILES = {"k.ptx": b"p", "p.lean": b"l", "s.fut": b"f"}


def _items(n: int, salt: str) -> list[tuple[Bundle, dict[str, Any]]]:
    return [
        (Bundle.from_files({"contract.yaml": f"{salt}{i}".encode(), **FILES}),
         fake_fields(f"{salt}{i}"))
        for i in range(n)
    ]


def _size_in_file_alone(home: Path, tmp: Path) -> int:
    """The entries ``ledger.db`` holds by itself, without its WAL (a copy of the file alone)."""
    alone = tmp / "alone.db"
    shutil.copyfile(home / DB_NAME, alone)
    conn = sqlite3.connect(alone)
    try:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
    finally:
        conn.close()


def test_a_large_batch_is_checkpointed_by_the_thread(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    before = log.store.size()
    log.seal_many(_items(sealers.MIN_BATCH, "a"), sk, workers=0)
    checkpointer = log.store._checkpointer
    assert checkpointer is not None  # the batch asked for the thread
    log.store.wait_checkpoint()
    assert checkpointer.done >= 1
    # the pages are in the database file itself now, not only in the WAL
    assert _size_in_file_alone(log.home, tmp_path) == before + sealers.MIN_BATCH
    thread = checkpointer._thread
    assert thread is not None and thread.is_alive()
    log.close()
    assert not thread.is_alive()  # close finished it


def test_a_small_commit_checkpoints_as_before(tmp_path: Path) -> None:
    log = new_ledger(tmp_path / "home")
    sk = add_node(log)
    log.seal_many(_items(3, "s"), sk)
    assert log.store._checkpointer is None
    log.close()


def test_the_commit_is_durable_before_the_checkpoint(tmp_path: Path) -> None:
    """A process that dies right after a ``checkpoint_later`` commit (no checkpoint, no close)
    leaves every entry of the batch in the ledger, and the ledger audits clean."""
    log = new_ledger(tmp_path / "home")
    add_node(log)
    size = log.store.size()
    log.close()
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from ledger.keys import load_node_secret
        from ledger.log import Log
        from ledger.store import walcheckpoint
        from tests.ledger.store.test_walcheckpoint import _items
        walcheckpoint.Checkpointer.request = lambda self: None  # the thread never runs
        log = Log.open(Path({str(tmp_path / "home")!r}))
        sk, _ = load_node_secret(log.keydir, "node")
        log.seal_many(_items({sealers.MIN_BATCH}, "d"), sk, workers=0)
        os._exit(0)  # as if killed: no checkpoint, no close
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert os.path.getsize(tmp_path / "home" / (DB_NAME + "-wal")) > 0
    log = Log.open(tmp_path / "home")
    try:
        assert log.store.size() == size + sealers.MIN_BATCH
        from ledger import audit

        assert audit.audit(log.store, log.verifier).ok
    finally:
        log.close()


def test_a_checkpointer_without_a_database_gives_up_quietly(tmp_path: Path) -> None:
    c = Checkpointer(tmp_path / "missing" / "ledger.db")
    c.request()
    c.wait()  # returns: the thread could not connect and said so by stopping
    c.request()  # ignored from then on
    c.wait()
    c.close()
    assert c.done == 0
    assert not any(t.name == "ledger-wal-checkpoint" for t in threading.enumerate())


def test_batches_back_to_back_keep_the_wal_bounded(tmp_path: Path, monkeypatch: Any) -> None:
    """A checkpoint thread slower than the batches: each batch that finds the WAL over the limit
    waits for it, so the WAL starts over instead of growing by a batch every batch, and a WAL
    that grew is cut back to the limit by the commit after it starts over."""
    from ledger.store import sqlite as store_mod

    limit = 256 << 10
    monkeypatch.setattr(store_mod, "WAL_LIMIT_BYTES", limit)
    real_connect = sqlite3.connect

    class SlowCheckpoint:  # the checkpointer's connection: each checkpoint takes 0.3 s longer
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def execute(self, sql: str) -> sqlite3.Cursor:
            if "wal_checkpoint" in sql:
                threading.Event().wait(0.3)
            return self.conn.execute(sql)

        def close(self) -> None:
            self.conn.close()

    def connect(*args: Any, **kw: Any) -> Any:
        conn = real_connect(*args, **kw)
        return SlowCheckpoint(conn) if threading.current_thread().name == (
            "ledger-wal-checkpoint") else conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    log = new_ledger(tmp_path / "home")
    store = log.store
    wal = log.home / (DB_NAME + "-wal")
    sizes = []
    for k in range(6):  # ~1 MB of new pages per transaction
        with store.writer(checkpoint_later=True) as w:
            w.put_blobs(
                [(os.urandom(32), os.urandom(64 << 10)) for _ in range(16)], index=k
            )
        sizes.append(wal.stat().st_size)
    one = sizes[0]
    # without the wait every transaction would begin while the slow thread still copied the one
    # before, and each would append to the WAL: six transactions, six times the first one's size
    assert max(sizes) < 2 * one + limit, sizes
    store.wait_checkpoint()
    with store.writer() as w:  # a small commit after the WAL starts over: the file is cut back
        w.put_blobs([(os.urandom(32), b"x")], index=7)
    assert wal.stat().st_size <= max(limit, 64 << 10)
    log.close()
