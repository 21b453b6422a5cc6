"""The WAL checkpoint of a large write transaction, done on a thread beside the next one (issue 12).

SQLite in WAL mode commits by appending the transaction's pages to ``ledger.db-wal`` and syncing
that file (``synchronous=FULL``): the commit is durable then. Copying those pages back into
``ledger.db`` (a *checkpoint*) is a second step that durability does not wait for; by default the
connection that committed does it at once, inside ``COMMIT``, whenever the WAL holds more than
1,000 pages. For a batch append of 10,000 entries (~10 MB of pages) that copy and its ``fsync``
are 20-30 ms of a 60-70 ms commit, while every sealing worker is idle (docs/benchmarks.md).

A ``Checkpointer`` takes that copy off the committing thread: ``Store.writer(checkpoint_later=
True)`` commits with the connection's automatic checkpoint off, then wakes the checkpointer,
whose own connection runs a ``PASSIVE`` checkpoint (it never blocks a writer or a reader) while
the caller goes on. A checkpoint interrupted by a crash is one SQLite recovers from; a request
that comes while one runs is merged into the next; the last connection to close the database
checkpoints whatever is left, as always. Only the big batch paths ask for it (``Log.seal_many``
and a mirror's batches); every other commit checkpoints as before.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class Checkpointer:
    """One thread and one connection that checkpoint ``path``'s WAL when asked."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wake = threading.Condition()
        self._asked = False
        self._closing = False
        self._running = False
        self._thread: threading.Thread | None = None
        self.done = 0  # checkpoints completed (tests, benchmarks)

    def request(self) -> None:
        """Checkpoint soon, on the checkpointer's thread (started at the first request)."""
        with self._wake:
            if self._closing:
                return
            self._asked = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-wal-checkpoint", daemon=True
                )
                self._thread.start()
            self._wake.notify_all()

    def wait(self) -> None:
        """Return once no checkpoint is asked for or running (benchmarks: a batch's rate with
        its checkpoint counted)."""
        with self._wake:
            while self._asked or self._running:
                self._wake.wait()

    def close(self) -> None:
        """Finish the checkpoint asked for, if any, and stop the thread."""
        with self._wake:
            self._closing = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None)
        except sqlite3.Error:
            # no connection of its own: the committing connections checkpoint as SQLite does by
            # default (their next large commit, or the last close)
            with self._wake:
                self._asked = False
                self._closing = True
                self._wake.notify_all()
            return
        try:
            while True:
                with self._wake:
                    while not self._asked and not self._closing:
                        self._wake.wait()
                    if not self._asked:
                        return
                    self._asked = False
                    self._running = True
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.done += 1
                except sqlite3.Error:
                    # busy or failing: the next commit's own checkpoint, or the last close, copies
                    # the pages instead; nothing committed depends on this copy
                    pass
                finally:
                    with self._wake:
                        self._running = False
                        self._wake.notify_all()
        finally:
            conn.close()
