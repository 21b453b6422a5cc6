"""A real PostgreSQL server for the tests and benchmarks (issue 13): Debian's ``postgresql``
binaries, ``initdb`` on a temporary data directory, ``postgres`` on a free loopback port, run as an
unprivileged user (``nobody`` when we are root: PostgreSQL refuses to run as root), stopped and
removed afterwards. ``pg_server`` is the session-scoped pytest fixture; where the server cannot be
started the tests that use it are skipped with the reason, never passed.

The server trusts loopback connections (``--auth=trust``) and has two roles: ``admin``, the
superuser that created the cluster, and ``ledger``, an ordinary role that owns each test database,
as a ledger's application role would.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

APP_ROLE = "ledger"
ADMIN = "admin"


def _bindir() -> Path | None:
    for cand in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(cand, "initdb"), os.X_OK):
            return Path(cand)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """``PgServer().start()`` ... ``stop()``; ``new_database()`` returns a fresh database's URL.

    ``fsync`` off suits the tests (they kill clients, never the server); the benchmarks keep the
    server's durable default, like SQLite's ``synchronous=FULL`` in the ledger."""

    def __init__(self, fsync: bool = True) -> None:
        self.fsync = fsync
        self.bindir = _bindir()
        self.root: Path | None = None
        self.port = 0
        self._names = itertools.count()
        self._prefix = f"t{os.getpid()}_"

    def _as_user(self) -> list[str]:
        if os.geteuid() != 0:
            return []
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("running as root and no setpriv to drop to an unprivileged user")
        return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

    def start(self) -> PgServer:
        """Start the server; raise RuntimeError with the reason where it cannot."""
        if self.bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (Debian package postgresql)")
        try:
            import psycopg  # noqa: F401
        except ImportError as e:
            raise RuntimeError(f"psycopg is not installed ({e})") from e
        as_user = self._as_user()
        # a directory under /tmp itself: the server's user must be able to reach it
        self.root = Path(tempfile.mkdtemp(prefix="ledger-pg-", dir="/tmp"))
        data = self.root / "data"
        data.mkdir()
        if as_user:
            os.chmod(self.root, 0o755)
            shutil.chown(data, "nobody", "nogroup")
        run = subprocess.run(
            [*as_user, str(self.bindir / "initdb"), "-D", str(data), "-U", ADMIN,
             "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            capture_output=True, text=True, timeout=120,
        )
        if run.returncode != 0:
            self._remove()
            raise RuntimeError(f"initdb failed: {(run.stderr or run.stdout).strip()[-300:]}")
        last = ""
        for _ in range(3):
            self.port = _free_port()
            opts = (
                f"-h 127.0.0.1 -p {self.port} -k {data} -c fsync={'on' if self.fsync else 'off'} "
                "-c max_connections=60 -c shared_buffers=64MB"
            )
            run = subprocess.run(
                [*as_user, str(self.bindir / "pg_ctl"), "-D", str(data), "-l",
                 str(data / "server.log"), "-o", opts, "-w", "-t", "60", "start"],
                capture_output=True, text=True, timeout=90,
            )
            if run.returncode == 0:
                break
            last = (data / "server.log").read_text(errors="replace")[-300:]
        else:
            self._remove()
            raise RuntimeError(f"postgres did not start: {last.strip()}")
        self.admin_execute(f"CREATE ROLE {APP_ROLE} LOGIN")
        return self

    def url(self, db: str = "postgres", user: str = APP_ROLE) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def admin_execute(self, sql: str, db: str = "postgres") -> list[Any]:
        import psycopg

        with psycopg.connect(self.url(db, ADMIN), autocommit=True) as conn:
            cur = conn.execute(sql)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def new_database(self) -> str:
        """A fresh, empty database owned by the ordinary role; its URL."""
        name = f"{self._prefix}{next(self._names)}"
        self.admin_execute(f"CREATE DATABASE {name} OWNER {APP_ROLE}")
        return self.url(name)

    def stop(self) -> None:
        if self.root is None:
            return
        data = self.root / "data"
        if (data / "postmaster.pid").exists() and self.bindir is not None:
            subprocess.run(
                [*self._as_user(), str(self.bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                 "-w", "stop"],
                capture_output=True, timeout=60,
            )
        self._remove()

    def _remove(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole session (per xdist worker); skipped with the reason
    where it cannot start."""
    server = PgServer(fsync=False)
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"PostgreSQL could not be started: {e}")
    try:
        yield server
    finally:
        server.stop()
