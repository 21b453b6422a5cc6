"""BLAKE3's official test vectors (tests/vectors/blake3.json, copied from BLAKE3-team/BLAKE3
test_vectors/test_vectors.json, its "hash" field only) through the ``blake3`` package the ledger
hashes bundles with, and through Debian's ``b3sum`` whose manifest format SPEC 3 fixes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import blake3
import pytest

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "vectors" / "blake3.json").read_text()
)["cases"]


def _input(length: int) -> bytes:
    return bytes(i % 251 for i in range(length))


def test_vector_file_is_complete() -> None:
    lengths = [c["input_len"] for c in VECTORS]
    assert lengths == sorted(lengths) and len(lengths) == 22
    assert {0, 1, 1024, 1025, 102400} <= set(lengths)
    assert all(len(c["hash"]) == 2 * 131 for c in VECTORS)


@pytest.mark.parametrize("case", VECTORS, ids=lambda c: str(c["input_len"]))
def test_blake3_package(case: dict[str, Any]) -> None:
    data = _input(case["input_len"])
    h = blake3.blake3(data)
    assert h.hexdigest() == case["hash"][:64]
    assert h.digest(length=131).hex() == case["hash"]
    # Incremental updates give the same digest.
    inc = blake3.blake3()
    for i in range(0, len(data), 1000):
        inc.update(data[i : i + 1000])
    assert inc.hexdigest() == case["hash"][:64]


def test_b3sum(tmp_path: Path) -> None:
    b3sum = shutil.which("b3sum")
    if b3sum is None:
        pytest.skip("b3sum is not on PATH")
    for case in VECTORS:
        f = tmp_path / f"in{case['input_len']}"
        f.write_bytes(_input(case["input_len"]))
    out = subprocess.run(
        [b3sum, *[f"in{c['input_len']}" for c in VECTORS]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    want = "".join(f"{c['hash'][:64]}  in{c['input_len']}\n" for c in VECTORS)
    assert out == want
