"""Bubblewrap for the verifier's children: whether it runs here, the part of its command line every
sandbox shares, and the sandbox a compiler runs a bundle's files in (docs/external-tools.md,
"nvcc runs in a sandbox").

A compiler reads more than its input: nvcc's preprocessor opens whatever file an ``#include``
names, ``/home/…/.ledger/log.key`` included, and its diagnostics quote what they read (``error:
identifier "KEY" is undefined``), which the check's detail, and so the signed entry, would carry.
``confined_argv`` runs such a tool where the only files are ``/usr`` (read-only), the tool's own
installation (read-only), a private ``/tmp`` and the scratch copy of the bundle (read-write, the
one place it writes): no home directory, no ``LEDGER_HOME``, no ``/etc``, no network, a cleared
environment. Its limits (timeout, memory, output) are ``verify.tools.RunningTool``'s as before.

This module imports nothing heavy: ``verify.sandbox`` (a bundle's Python reference, numpy and
seccomp) builds on it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def sandbox_status() -> tuple[str | None, str]:
    """(bwrap path, "bubblewrap X.Y.Z") when a trial sandbox runs here, else (None, why not)."""
    if os.environ.get("LEDGER_SANDBOX", "").lower() == "off":
        return None, "no sandbox: turned off (LEDGER_SANDBOX=off)"
    return _probe()


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str | None, str]:
    if not sys.platform.startswith("linux"):
        return None, f"no sandbox on {sys.platform} (bubblewrap needs Linux)"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "no sandbox: bubblewrap (bwrap) is not installed"
    try:
        ver = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=20, check=False
        ).stdout.strip()
        argv = [*base_argv(bwrap, {}), *private_dirs(64 << 20), "/bin/true"]
        trial = subprocess.run(
            argv, capture_output=True, text=True, timeout=20, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"no sandbox: bwrap could not run ({e})"
    if trial.returncode != 0:
        why = (trial.stderr.strip().splitlines() or ["no message"])[-1][:200]
        return None, f"no sandbox: bwrap cannot set up its namespaces here ({why})"
    return bwrap, ver or "bubblewrap"


def base_argv(bwrap: str, env: dict[str, str], python: bool = True) -> list[str]:
    """New namespaces of every kind (the network one holds only its own loopback), no
    capabilities, its own session, dies with its parent; the environment cleared to ``HOME=/tmp``,
    ``LANG`` and ``env``; ``/usr`` read-only with the top-level links into it (``/bin``,
    ``/lib`` ...), and (``python``) the Python interpreter's prefix where it lies outside
    ``/usr``."""
    argv = [
        bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
        "--setenv", "LANG", "C.UTF-8",
    ]  # fmt: skip
    for k, v in env.items():
        argv += ["--setenv", k, v]
    argv += ["--ro-bind", "/usr", "/usr"]
    for d in ("/bin", "/lib", "/lib64", "/sbin"):
        p = Path(d)
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            argv += ["--ro-bind", d, d]
    if not python:
        return argv
    prefix = Path(sys.base_prefix).resolve()
    if not prefix.is_relative_to("/usr"):
        argv += ["--ro-bind", str(prefix), str(prefix)]
    exe = Path(sys.executable).resolve()
    if not (exe.is_relative_to("/usr") or exe.is_relative_to(prefix)):
        argv += ["--ro-bind", str(exe), str(exe)]
    return argv


def private_dirs(tmp_bytes: int) -> list[str]:
    """A fresh ``/proc`` and ``/dev``, and a private ``/tmp`` of at most ``tmp_bytes``."""
    return ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]


# What a CUDA installation holds, by the directory above nvcc's ``bin``: only these are bound, so
# an nvcc found in ``~/bin`` brings ``~/bin``, ``~/lib`` ... into the sandbox, never the home
# directory itself (and ``~/.ledger`` with it).
TOOL_LAYOUT = ("bin", "nvvm", "include", "lib", "lib64", "targets")


def tool_dirs(tool: str) -> list[Path]:
    """The parts of the installation a compiler binary belongs to, bound read-only into its
    sandbox: for the PyPI wheels (``site-packages/nvidia/cu13/bin/nvcc``) the whole ``nvidia``
    directory, whose packages share headers; else the ``TOOL_LAYOUT`` entries of the directory
    above its ``bin`` (``/usr/local/cuda-13.0``), nothing where that lies in ``/usr``."""
    root = Path(tool).resolve().parent.parent
    if root.parent.name == "nvidia":
        return [root.parent]
    if root.is_relative_to("/usr"):
        return []
    return [root / name for name in TOOL_LAYOUT if (root / name).exists()]


TOOL_TMP_BYTES = 1 << 30  # nvcc's intermediate files in /tmp (cicc's output, the preprocessed text)


# Where a bundle's source is compiled inside the sandbox, whatever directory holds it: nvcc names
# internal-linkage symbols (``_INTERNAL_<id>_``, e.g. what <cooperative_groups.h> pulls in) with a
# module id hashed from the source's absolute path, and from nothing else (measured with CUDA
# 13.0: same path -> same id whatever the content or the directory it ran in). ``ledger new``
# and ``rebuild.ptx`` both build here, so a bundle copied anywhere rebuilds byte for byte.
BUILD_DIR = "/build/bundle"


def confined_argv(bwrap: str, tool: str, work: Path, command: Sequence[str],
                  at: str | None = None) -> list[str]:
    """``command`` (whose first item is ``tool``) run by bubblewrap in ``work``: the files it
    sees are ``/usr`` and the tool's installation (``tool_dirs``), read-only; ``work``
    read-write at its own path (so paths in the tool's output are what they would be without the
    sandbox), or at ``at`` (``BUILD_DIR``: a fixed path, so the output does not depend on where
    ``work`` lies); a private ``/tmp``. PATH is the tool's ``bin`` and ``/usr/bin``."""
    work = work.resolve()
    path = f"{Path(tool).resolve().parent}:/usr/bin:/bin"
    argv = base_argv(bwrap, {"PATH": path, "TMPDIR": "/tmp"}, python=False)
    argv += private_dirs(TOOL_TMP_BYTES)
    # after the private /tmp, which would hide what lies beneath it
    for d in tool_dirs(tool):
        argv += ["--ro-bind", str(d), str(d)]
    inside = at or str(work)
    argv += ["--bind", str(work), inside, "--chdir", inside]
    return argv + list(command)
