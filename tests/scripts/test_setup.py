"""scripts/setup.sh leaves ``ledger`` runnable (issue 34): ``--activate-line`` prints the line
that puts this checkout's ``.venv/bin`` on PATH (installing nothing), the README's "Set up" names
it, and the line, run by a fresh bash with a PATH that lacks the venv, makes ``ledger`` the
checkout's own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.ledgers import REPO

SETUP = REPO / "scripts" / "setup.sh"


def test_activate_line_puts_the_checkouts_ledger_on_path(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    line = subprocess.run(["bash", str(SETUP), "--activate-line"], capture_output=True,
                          text=True, check=True, timeout=60).stdout
    venv_bin = (REPO / ".venv" / "bin").resolve()
    assert line.strip() == f'export PATH={venv_bin}:"$PATH"'
    if not (venv_bin / "ledger").exists():
        pytest.skip(f"no {venv_bin / 'ledger'}: scripts/setup.sh has not been run here")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    res = subprocess.run(
        ["bash", "-c", f'eval "$(bash {SETUP} --activate-line)"; command -v ledger; '
         "ledger --version"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    found, version = res.stdout.splitlines()[:2]
    assert Path(found) == venv_bin / "ledger" and version.strip()


def test_readme_names_the_activate_line() -> None:
    readme = (REPO / "README.md").read_text()
    assert "## Set up" in readme
    assert 'eval "$(scripts/setup.sh --activate-line)"' in readme
    assert "source .venv/bin/activate" in readme
    assert os.access(SETUP, os.R_OK)
