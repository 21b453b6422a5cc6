"""Which GPU extra of kernel-ledger fits this machine's CUDA: the one place that picks it.

CuPy ships one wheel per CUDA major version (``cupy-cuda12x``, ``cupy-cuda13x``); pyproject.toml
has one extra for each (``gpu-cuda12``, ``gpu-cuda13``). The major version is read from the
toolkit found here: ``nvcc --version``, else ``ptxas --version`` (both print
``Cuda compilation tools, release 13.0, V13.0.88``), looked up on PATH and then under
``/usr/local/cuda*/bin``. Standard library only: ``scripts/setup.sh --gpu`` runs it before the
package is installed, and ``scripts/device_check.py`` imports it for its advice.

    python3 scripts/cuda_extra.py            # prints gpu-cuda13 (exit 0), or why not (exit 3)
    python3 scripts/cuda_extra.py --major    # prints 13

Exit status: 0 printed; 3 no CUDA toolkit found, or a major version no extra covers.
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys

EXTRAS = {12: "gpu-cuda12", 13: "gpu-cuda13"}  # CUDA major -> the extra in pyproject.toml
TOOLS = ("nvcc", "ptxas")
_RELEASE = re.compile(r"release (\d+)\.(\d+)")


class NoCuda(Exception):
    """No toolkit found, its version unreadable, or a major version no extra covers."""


def parse_major(version_text: str) -> int | None:
    """The CUDA major version in ``nvcc --version`` / ``ptxas --version`` output, or None."""
    m = _RELEASE.search(version_text)
    return int(m.group(1)) if m else None


def extra_for(major: int) -> str:
    """The pyproject extra for a CUDA major version; NoCuda when none covers it."""
    if major not in EXTRAS:
        known = ", ".join(str(k) for k in sorted(EXTRAS))
        raise NoCuda(f"CUDA {major} has no CuPy extra here (known: CUDA {known})")
    return EXTRAS[major]


def find_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for path in sorted(glob.glob(f"/usr/local/cuda*/bin/{name}"), reverse=True):
        return path
    return None


def installed_major() -> int:
    """The CUDA major version of the first toolkit program that answers; NoCuda otherwise."""
    tried: list[str] = []
    for name in TOOLS:
        exe = find_tool(name)
        if exe is None:
            tried.append(f"no {name}")
            continue
        try:
            out = subprocess.run(
                [exe, "--version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            tried.append(f"{name}: {e}")
            continue
        major = parse_major(out.stdout + out.stderr)
        if major is not None:
            return major
        tried.append(f"{name} --version names no release")
    raise NoCuda("no CUDA toolkit found (" + "; ".join(tried) + ")")


def gpu_extra() -> str:
    """The extra to install for this machine's CUDA (``gpu-cuda13`` where CUDA 13 is found)."""
    return extra_for(installed_major())


def main(argv: list[str]) -> int:
    try:
        major = installed_major()
        print(major if "--major" in argv else extra_for(major))
    except NoCuda as e:
        print(f"cuda_extra: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
