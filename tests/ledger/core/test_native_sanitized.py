"""scripts/sanitize_native.py (docs/reliability.md, "Sanitizers"): its quick run, under
AddressSanitizer and UBSan, on this checkout's compiled module; its refusals; and the example
counts it scales (tests/helpers/examples.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.examples import examples
from tests.helpers.ledgers import REPO

SCRIPT = REPO / "scripts" / "sanitize_native.py"


@pytest.mark.parametrize(
    ("raw", "want"), [(None, 7), ("10", 70), ("1", 7), ("0", 7), ("-3", 7), ("x", 7), ("", 7)]
)
def test_examples_scale_only_by_a_positive_whole_number(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, want: int
) -> None:
    if raw is None:
        monkeypatch.delenv("LEDGER_HYPOTHESIS_SCALE", raising=False)
    else:
        monkeypatch.setenv("LEDGER_HYPOTHESIS_SCALE", raw)
    assert examples(7) == want


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900, env=env, check=False)


def test_a_scale_below_one_is_refused() -> None:
    res = _run("--scale", "0")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["sanitize_native: --scale must be 1 or more"]


def test_without_gcc_it_says_it_cannot_run(tmp_path: os.PathLike[str]) -> None:
    res = _run("--quick", env={**os.environ, "PATH": str(tmp_path)})
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sanitize_native: cannot run here: gcc")


def test_the_quick_campaign_finds_the_module_clean() -> None:
    """The four quick test files on the module built with the sanitizers: every test passes and
    no report is printed (a report or a failed test is exit 1)."""
    res = _run("--quick")
    if res.returncode == 2:
        pytest.skip(f"the sanitizer campaign cannot run here: {res.stderr.strip()}")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "sanitized module (address):" in res.stdout and "scale 1; 4 test files" in res.stdout
    assert "sanitize_native: clean" in res.stdout
    assert "runtime error" not in res.stdout and "AddressSanitizer" not in res.stdout
