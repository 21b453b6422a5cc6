"""The committed PTX fixtures are exactly what nvcc emits for the committed .cu files
(tests/fixtures/ptxsim/README.md gives the command), so the interpreter is tested on real
compiler output. Skipped only where nvcc is absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ptxsim"
SOURCES = sorted(FIX.glob("*.cu"))
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda-13.0/bin/nvcc" if Path("/usr/local/cuda-13.0/bin/nvcc").exists() else None)


def test_every_source_has_its_ptx() -> None:
    assert len(SOURCES) >= 6
    for cu in SOURCES:
        assert cu.with_suffix(".ptx").is_file(), cu.name


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("cu", SOURCES, ids=[p.stem for p in SOURCES])
def test_ptx_regenerates_identically(cu: Path, tmp_path: Path) -> None:
    assert NVCC is not None
    out = tmp_path / (cu.stem + ".ptx")
    subprocess.run([NVCC, "-arch=sm_86", "-ptx", "-o", str(out), str(cu)], check=True,
                   capture_output=True, timeout=300)
    assert out.read_bytes() == cu.with_suffix(".ptx").read_bytes()


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("flag", ["-lineinfo", "-G"])
def test_debug_and_lineinfo_ptx_run(flag: str, tmp_path: Path) -> None:
    """PTX with .loc/.file directives and DWARF .section blocks runs the same."""
    import numpy as np

    from verify.ptxsim import Buffer, Scalar, launch, load_module

    assert NVCC is not None
    out_ptx = tmp_path / "reduce.ptx"
    subprocess.run([NVCC, "-arch=sm_86", "-ptx", flag, "-o", str(out_ptx),
                    str(FIX / "reduce.cu")], check=True, capture_output=True, timeout=300)
    m = load_module(out_ptx.read_bytes())
    x = np.arange(512, dtype=np.float32)
    out = np.zeros(2, np.float32)
    args: list[Buffer | Scalar] = [Buffer(x, "in", "x"), Buffer(out, "out", "out"),
                                   Scalar(512, ".s32")]
    r = launch(m, "block_sum", (2, 1, 1), (256, 1, 1), args)
    assert r.findings == () and list(out) == [x[:256].sum(), x[256:].sum()]
    r = launch(m, "block_sum_race", (2, 1, 1), (256, 1, 1), args)
    assert [f.kind for f in r.findings] == ["race"]
