"""Issue 9, items 2, 22 and 25 applied to the witness's own directory (the same class as the
ledger's home): created 0700 whatever the umask, refused when others may write it, its key and
state files read with a size limit, its lock file never followed through a planted symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ledger.core.errors import BadInput
from ledger.witness import KEY_FILE, MAX_STATE_FILE, Witness, _state_lock


def test_witness_home_is_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        Witness.init(tmp_path / "w", "witness.example")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "w").st_mode) == 0o700


def test_witness_home_writable_by_others_is_refused(tmp_path: Path) -> None:
    Witness.init(tmp_path / "w", "witness.example")
    os.chmod(tmp_path / "w", 0o777)
    with pytest.raises(BadInput, match="writable by group or others"):
        Witness(tmp_path / "w")


def test_huge_witness_key_file_is_refused_unread(tmp_path: Path) -> None:
    Witness.init(tmp_path / "w", "witness.example")
    with open(tmp_path / "w" / KEY_FILE, "r+b") as f:
        f.truncate(MAX_STATE_FILE + 1)
    with pytest.raises(BadInput, match="larger than"):
        Witness(tmp_path / "w")


def test_state_lock_symlink_is_not_followed(tmp_path: Path) -> None:
    Witness.init(tmp_path / "w", "witness.example")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"untouched")
    os.symlink(target, tmp_path / "w" / ".state.lock")
    with pytest.raises(OSError), _state_lock(tmp_path / "w"):
        pass
    assert target.read_bytes() == b"untouched"
