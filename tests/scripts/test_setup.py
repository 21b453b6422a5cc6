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
    venv_bin = REPO.resolve() / ".venv" / "bin"  # as `pwd -P` gives it (.venv may be a link)
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


def _last_lines(path: str) -> list[str]:
    """What setup.sh prints at its very end (``ready_message``), read by sourcing the script,
    which defines its functions and installs nothing."""
    res = subprocess.run(["bash", "-c", f"source {SETUP} && ready_message"], capture_output=True,
                         text=True, env={"PATH": path}, cwd=REPO, timeout=60, check=False)
    assert res.returncode == 0 and res.stdout == "", res.stderr
    return res.stderr.splitlines()


def test_setup_ends_with_the_activate_line() -> None:
    """Without the venv on PATH, the last line setup.sh prints is the activate line (so it is what
    a person sees last); with it, the last line says ``ledger`` is on PATH."""
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    line = subprocess.run(["bash", str(SETUP), "--activate-line"], capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()
    lines = _last_lines("/usr/bin:/bin")
    assert lines[0] == "setup: ready (.venv)"
    assert lines[-1].strip() == line, lines
    assert lines[-3].strip() == f"source {REPO.resolve() / '.venv' / 'bin' / 'activate'}"
    venv_bin = REPO.resolve() / ".venv" / "bin"
    if (venv_bin / "ledger").exists():
        assert _last_lines(f"{venv_bin}:/usr/bin:/bin")[-1] == "setup: `ledger` is on PATH"
