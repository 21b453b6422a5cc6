"""PTX built by the real nvcc for the tests (``-arch=sm_86 -ptx``), or the test skipped when this
machine has no nvcc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from verify.tools import find_tool

NVCC = find_tool("nvcc", cuda=True)


def build_ptx(cu: Path, out_dir: Path) -> bytes:
    """The PTX of ``cu`` (built in ``out_dir``); skips the test without nvcc."""
    if NVCC is None:
        pytest.skip("no nvcc: cannot build the kernel's PTX")
    out = out_dir / cu.with_suffix(".ptx").name
    subprocess.run([NVCC, "-arch=sm_86", "-ptx", "-o", str(out), str(cu)],
                   check=True, capture_output=True, timeout=300)
    return out.read_bytes()
