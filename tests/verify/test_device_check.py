"""scripts/device_check.py run as a real subprocess: interpreter-only table, --gpu without one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verify.gpu import probe

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device_check.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_interpreter_only_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "run.md"
    res = run("--interpreter-only", "--kernel", "vector_add", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "device_check: 2 runs, 0 disagreed or had findings" in res.stderr
    text = out.read_text(encoding="utf-8")
    assert text.startswith("Command: `.venv/bin/python scripts/device_check.py --interpreter-only")
    rows = [ln for ln in text.splitlines() if ln.startswith("| vector_add |")]
    assert [r.split(" | ")[1] for r in rows] == ["FALSIFY-VADD-001", "FALSIFY-VADD-002"]
    assert all(r.split(" | ")[3] == "0 ulp, abs 0" and r.endswith(" | ok |") for r in rows)


def test_gpu_required_without_a_device_exits_3() -> None:
    engine, why = probe()
    if engine is not None:
        pytest.skip("a CUDA device is present: the --gpu run is the device check itself")
    res = run("--gpu", "--kernel", "vector_add")
    assert res.returncode == 3
    first, *advice = res.stderr.strip().splitlines()
    assert first == f"device_check: --gpu given but no GPU engine: {why}"
    if "CuPy" in why:  # the wheel for this CUDA, as scripts/cuda_extra.py picks it
        assert len(advice) == 1 and advice[0].startswith("device_check: ")
        assert "gpu-cuda" in advice[0] or "no CuPy extra fits" in advice[0]
    else:
        assert advice == []
