"""psycopg is the optional ``postgres`` extra (ledger.store.pgdriver): without it, a
``postgresql://`` ledger is one clear line naming the extra, exit 3, nothing changed; a SQLite
ledger never imports it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.errors import CannotCheck
from ledger.store import pgdriver
from tests.helpers.ledgers import REPO, assert_one_error_line
from tests.helpers.postgres import PgServer, pg_server

__all__ = ["pg_server"]  # the session fixture, used by name below

URL = "postgresql://ledger@127.0.0.1:1/kernels"  # never reached: the driver is missing first


def _without_psycopg(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``import psycopg`` fails as on an install without the extra: a
    package of that name first on the path that raises ImportError (the fault injected)."""
    shadow = tmp_path / "shadow" / "psycopg"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named psycopg')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), str(REPO)])
    env.pop("LEDGER_DEBUG", None)
    return env


def _ledger(env: dict[str, str], home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger_cli", *args],
        cwd=REPO,
        env={**env, "LEDGER_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_init_on_postgres_without_the_driver(tmp_path: Path) -> None:
    env = _without_psycopg(tmp_path)
    home = tmp_path / "home"
    res = _ledger(env, home, "init", "--origin", "o.example/x", "--db", URL)
    line = assert_one_error_line(res, 3)
    assert "install kernel-ledger[postgres]" in line
    assert not home.exists() or list(home.iterdir()) == []


def test_a_ledger_naming_a_database_without_the_driver(tmp_path: Path) -> None:
    """A home whose ``db.url`` names PostgreSQL (made where the driver was): every command that
    opens it says what to install."""
    env = _without_psycopg(tmp_path)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "db.url").write_text(URL + "\n")
    (home / "db.url").chmod(0o600)
    before = sorted(p.name for p in home.iterdir())
    res = _ledger(env, home, "log", "--json")
    line = assert_one_error_line(res, 3)
    assert "install kernel-ledger[postgres]" in line
    assert sorted(p.name for p in home.iterdir()) == before


def test_db_copy_without_the_driver(tmp_path: Path) -> None:
    env = _without_psycopg(tmp_path)
    home = tmp_path / "home"
    assert _ledger(env, home, "init", "--origin", "o.example/x").returncode == 0
    before = _ledger(env, home, "log", "--json").stdout
    res = _ledger(env, home, "db", "copy", "--to", URL)
    line = assert_one_error_line(res, 3)
    assert "install kernel-ledger[postgres]" in line
    assert not (home / "db.url").exists()  # still the SQLite ledger, unchanged
    after = _ledger(env, home, "log", "--json")
    assert after.returncode == 0 and after.stdout == before


def test_import_psycopg_in_process() -> None:
    try:
        import psycopg
    except ImportError:
        with pytest.raises(CannotCheck, match=r"install kernel-ledger\[postgres\]"):
            pgdriver.import_psycopg()
    else:
        assert pgdriver.import_psycopg() is psycopg


def test_with_the_driver_a_postgres_ledger_works(pg_server: PgServer, tmp_path: Path) -> None:
    """The same commands with the extra installed (the driver found through ``import_psycopg``)."""
    home = tmp_path / "home"
    url = pg_server.new_database()
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DEBUG"}
    res = _ledger(env, home, "init", "--origin", "o.example/x", "--db", url)
    assert res.returncode == 0, res.stderr
    assert (home / "db.url").is_file()
    res = _ledger(env, home, "log", "--json")
    assert res.returncode == 0, res.stderr


def test_with_the_driver_db_copy_works(pg_server: PgServer, tmp_path: Path) -> None:
    """``ledger db copy`` reaches the driver through ``import_psycopg`` at both of its sites."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DEBUG"}
    assert _ledger(env, home, "init", "--origin", "o.example/x").returncode == 0
    before = _ledger(env, home, "log", "--json").stdout
    res = _ledger(env, home, "db", "copy", "--to", pg_server.new_database())
    assert res.returncode == 0, res.stderr
    assert (home / "db.url").is_file()
    after = _ledger(env, home, "log", "--json")
    assert after.returncode == 0 and after.stdout == before
