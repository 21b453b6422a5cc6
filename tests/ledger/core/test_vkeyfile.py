"""``ledger.core.vkeyfile``: the one size-bounded reader of verifier-key files (issue 30)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.core.errors import BadInput
from ledger.core.note import NoteSigner
from ledger.core.vkeyfile import MAX_VKEY_FILE, read_vkey, read_vkey_file

VKEY = NoteSigner("log.example/l", b"", bytes(range(32))).verifier.vkey


def test_a_key_or_a_file_holding_one(tmp_path: Path) -> None:
    f = tmp_path / "log.vkey"
    f.write_text(f"\n  {VKEY}\n")
    assert read_vkey(VKEY).vkey == VKEY
    assert read_vkey(str(f)).vkey == VKEY
    assert read_vkey_file(f).vkey == VKEY


@pytest.mark.parametrize("content", [b"x" * (MAX_VKEY_FILE + 1), b"\xff\xfe not utf-8",
                                     b"not a key", b""])
def test_a_bad_file_is_bad_input(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "bad.vkey"
    f.write_bytes(content)
    with pytest.raises(BadInput):
        read_vkey(str(f))


def test_a_pipe_is_not_read_to_its_end(tmp_path: Path) -> None:
    """/dev/zero never ends: the bound stops the read."""
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero on this system")
    with pytest.raises(BadInput):
        read_vkey_file(Path("/dev/zero"))


def test_a_name_too_long_for_a_file_is_bad_input() -> None:
    with pytest.raises(BadInput):
        read_vkey("x" * 5000)
