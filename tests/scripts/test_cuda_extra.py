"""scripts/cuda_extra.py: the one place the CuPy extra is chosen from the installed CUDA's major
version (docs/device-run.md, "Getting CuPy")."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cuda_extra.py"

NVCC_13 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
PTXAS_12 = """ptxas: NVIDIA (R) Ptx optimizing assembler
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Tue_Oct_29_23:47:23_PDT_2024
Cuda compilation tools, release 12.6, V12.6.85
Build cuda_12.6.r12.6/compiler.35059454_0
"""


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cuda_extra", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cx = _load()


def test_parse_major_of_real_version_texts() -> None:
    assert cx.parse_major(NVCC_13) == 13
    assert cx.parse_major(PTXAS_12) == 12
    assert cx.parse_major("nvcc: command not found") is None


def test_every_extra_exists_in_pyproject_with_the_matching_wheel() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for major, extra in cx.EXTRAS.items():
        assert extras[extra] == [f"cupy-cuda{major}x"]
    cupy_extras = {k for k, v in extras.items() if any(d.startswith("cupy") for d in v)}
    assert cupy_extras == set(cx.EXTRAS.values())  # no second place names a CuPy wheel


def test_a_major_version_without_an_extra_is_refused() -> None:
    assert cx.extra_for(13) == "gpu-cuda13"
    with pytest.raises(cx.NoCuda, match="CUDA 11 has no CuPy extra"):
        cx.extra_for(11)


def _fake_tool(bindir: Path, name: str, text: str) -> None:
    path = bindir / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False
    )


def test_the_script_follows_the_toolkit_on_path(tmp_path: Path) -> None:
    """A CUDA 12 nvcc first on PATH gives gpu-cuda12, whatever else is installed."""
    _fake_tool(tmp_path, "nvcc", PTXAS_12.replace("ptxas", "nvcc"))
    res = _run(f"{tmp_path}:{os.environ['PATH']}")
    assert (res.returncode, res.stdout, res.stderr) == (0, "gpu-cuda12\n", "")
    res = _run(f"{tmp_path}:{os.environ['PATH']}", "--major")
    assert (res.returncode, res.stdout) == (0, "12\n")


def test_an_unknown_major_exits_3_with_the_reason(tmp_path: Path) -> None:
    _fake_tool(tmp_path, "nvcc", NVCC_13.replace("release 13.0", "release 99.1"))
    res = _run(f"{tmp_path}:{os.environ['PATH']}")
    assert res.returncode == 3 and res.stdout == ""
    assert res.stderr == "cuda_extra: CUDA 99 has no CuPy extra here (known: CUDA 12, 13)\n"


def test_this_machine() -> None:
    """On the machine at hand: the extra named by the toolkit's own ``--version``."""
    exe = cx.find_tool("nvcc") or cx.find_tool("ptxas")
    if exe is None:
        pytest.skip("no CUDA toolkit (nvcc, ptxas) on this machine")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    major = cx.parse_major(out)
    assert major is not None
    res = _run(os.environ["PATH"])
    assert res.returncode == 0
    assert res.stdout == f"{cx.EXTRAS[major]}\n"


def test_setup_sh_takes_the_extra_from_the_script() -> None:
    text = (REPO / "scripts" / "setup.sh").read_text()
    assert "scripts/cuda_extra.py" in text and "--gpu)" in text
    assert "cupy-cuda" not in text  # no wheel named there: the script picks the extra


def test_setup_sh_refuses_an_unknown_option_before_doing_anything() -> None:
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.sh"), "--gpus"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert res.stderr == "setup: unknown option --gpus (options: --test, --gpu, --activate-line)\n"
