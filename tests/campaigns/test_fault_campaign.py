"""A bounded slice of scripts/fault_campaign.py (issue 9): kill -9 and ENOSPC injected with strace
at chosen steps of seal and init, the bundle-reader symlink race for a few seconds, and the planted
links. The full campaign is the documented command in docs/reliability.md."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.ledgers import REPO

pytestmark = pytest.mark.skipif(
    shutil.which("strace") is None, reason="strace is not installed: faults cannot be injected"
)


@pytest.fixture(scope="module")
def campaign() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fault_campaign", REPO / "scripts" / "fault_campaign.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fault_campaign"] = mod
    spec.loader.exec_module(mod)
    return mod


def _assert_clean(section: object) -> None:
    failures = section.failures  # type: ignore[attr-defined]
    assert section.runs > 0 and not failures, failures  # type: ignore[attr-defined]


def test_seal_killed_at_commit_and_receipt(campaign: ModuleType, tmp_path: Path) -> None:
    sec = campaign.Section("seal-kill")
    campaign.seal_points(False, tmp_path, sec, "kill", {"fsync": [1], "rename": [1]})
    _assert_clean(sec)


def test_seal_disk_full_at_receipt_and_output(campaign: ModuleType, tmp_path: Path) -> None:
    # every call of the receipt's write (its write, fchmod, fsync, rename: exit 4, the entry
    # committed, then a re-run exits 0 with the receipt) and the output's write (exit 3)
    sec = campaign.Section("seal-enospc")
    points = {"write": [1, 2], "fchmod": [1], "fsync": [1], "rename": [1]}
    campaign.seal_points(False, tmp_path, sec, "enospc", points)
    _assert_clean(sec)
    assert sec.outcomes["exit 4, sealed, receipt none"] == 4, sec.outcomes


def test_init_killed_and_disk_full(campaign: ModuleType, tmp_path: Path) -> None:
    for mode, only in (("kill", {"rename": [1]}),):
        sec = campaign.Section(f"init-{mode}")
        root = tmp_path / mode
        root.mkdir()
        campaign.init_points(False, root, sec, mode, only)
        _assert_clean(sec)


def test_bundle_reader_symlink_race(campaign: ModuleType, tmp_path: Path) -> None:
    sec = campaign.Section("reader-race")
    campaign.reader_race(True, tmp_path, sec, seconds=2)
    _assert_clean(sec)


def test_links_planted_at_every_name_the_ledger_writes(
    campaign: ModuleType, tmp_path: Path
) -> None:
    # each answer as the campaign expects it (export-tiles refuses a symlinked checkpoint: exit 2)
    sec = campaign.Section("planted-links")
    campaign.planted_links(tmp_path, sec)
    _assert_clean(sec)
