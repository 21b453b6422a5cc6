"""Triton builds: the ``kernel.build`` argv of a Triton kernel, and running it in the sandbox
(docs/kernels.md "Triton kernels", contracts/README.md ``kernel.build``).

A Triton kernel's ``kernel.build`` is an argv whose first item is ``triton``::

    [triton, --version=3.9.0, --target=sm_86, --kernel=softmax.py:softmax_kernel,
     --signature=*fp32,*fp32,i32,i32,i32, --constexpr=BLOCK_SIZE=1024,
     --num-warps=4, --num-stages=3, -o, softmax.ptx]

Every item is required except ``--constexpr`` (once per constexpr parameter). Nothing in it is
a command: ``triton`` names this module's driver (``verify/triton_driver.py``), which the
verifier runs with the Python that runs it and the ``triton`` package installed beside it
(the ``triton`` extra), never a program the contract names.

The driver imports the kernel's file, which is bundle code: the verifier runs it only inside
bubblewrap (``confined_python_argv``: ``/usr``, the Python installation, the directory holding
``triton`` read-only, the scratch copy of the bundle at ``verify.confine.BUILD_DIR``, a private
``/tmp``, no network, no home directory). ``ledger new --triton`` builds the same way when a
sandbox runs, else on the author's own machine with the author's own file.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.core.bundle import check_path
from ledger.core.errors import BadInput, BundleError
from verify.confine import BUILD_DIR, base_argv, private_dirs

DRIVER = Path(__file__).resolve().parent / "triton_driver.py"
DRIVER_AT = "/ledger/triton_driver.py"  # where the sandbox sees the driver (read-only)
TRITON_TMP_BYTES = 1 << 30  # Triton's cache and ptxas' files in the sandbox's /tmp
_TYPE = re.compile(r"\*?(?:fp8e4nv|fp8e5|bf16|fp16|fp32|fp64|i1|i8|i16|i32|i64|u8|u16|u32|u64)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_CONST = re.compile(r"([A-Za-z_]\w*)=(-?[0-9][0-9.eE+\-]*|True|False)")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9A-Za-z+]+)*")
_TARGET = re.compile(r"sm_[0-9]{2,3}")


@dataclass(frozen=True)
class TritonBuild:
    """One Triton compile, as ``kernel.build`` records it."""

    version: str
    target: str
    kernel_file: str  # bundle-relative .py
    kernel_name: str
    signature: tuple[str, ...]  # the runtime parameters' Triton types, in order
    constexprs: tuple[tuple[str, str], ...]  # (name, value) as written
    num_warps: int
    num_stages: int
    ptx: str

    def argv(self) -> list[str]:
        """``kernel.build`` for this compile."""
        out = [
            "triton", f"--version={self.version}", f"--target={self.target}",
            f"--kernel={self.kernel_file}:{self.kernel_name}",
            f"--signature={','.join(self.signature)}",
        ]  # fmt: skip
        out += [f"--constexpr={k}={v}" for k, v in self.constexprs]
        out += [f"--num-warps={self.num_warps}", f"--num-stages={self.num_stages}", "-o", self.ptx]
        return out

    def driver_args(self, site: str) -> list[str]:
        """The driver's arguments (after the script's path)."""
        out = ["--site", site, "--kernel", f"{self.kernel_file}:{self.kernel_name}",
               "--signature", ",".join(self.signature)]  # fmt: skip
        for k, v in self.constexprs:
            out += ["--constexpr", f"{k}={v}"]
        return [*out, "--num-warps", str(self.num_warps), "--num-stages", str(self.num_stages),
                "--target", self.target, "-o", self.ptx]  # fmt: skip


def is_triton(build: Sequence[str]) -> bool:
    return bool(build) and build[0] == "triton"


def _int(value: str, what: str, low: int, high: int) -> int:
    if not value.isdigit() or not low <= int(value) <= high:
        raise BadInput(f"kernel.build {what}={value[:20]!r}: an integer in [{low}, {high}]")
    return int(value)


def _signature(text: str) -> tuple[str, ...]:
    types = tuple(text.split(","))
    for t in types:
        if not _TYPE.fullmatch(t):
            raise BadInput(
                f"kernel.build --signature: {t[:20]!r} is not a Triton type (*fp32, i32 …)"
            )
    return types


def _kernel(text: str, source: str) -> tuple[str, str]:
    path, _, name = text.rpartition(":")
    if not path.endswith(".py") or not _NAME.fullmatch(name):
        raise BadInput(f"kernel.build --kernel={text[:60]!r}: expected FILE.py:NAME")
    try:
        check_path(path)
    except BundleError as e:
        raise BadInput(f"kernel.build --kernel: {e}") from e
    if path != source:
        raise BadInput(f"kernel.build compiles {path!r}, not the kernel's source {source!r}")
    return path, name


def parse_build(build: Sequence[str], ptx: str, source: str) -> TritonBuild:
    """The Triton build ``build`` describes; ``BadInput`` naming the first refused item."""
    if not is_triton(build):
        raise BadInput("kernel.build must start with 'triton'")
    seen: dict[str, str] = {}
    consts: list[tuple[str, str]] = []
    items = list(build[1:])
    if items[-2:-1] != ["-o"] or items[-1] != ptx:
        raise BadInput(f"kernel.build must end with -o {ptx} (the kernel's PTX)")
    for i, item in enumerate(items[:-2], start=1):
        key, eq, value = item.partition("=")
        if not eq or key not in ("--version", "--target", "--kernel", "--signature",
                                 "--constexpr", "--num-warps", "--num-stages"):
            raise BadInput(f"kernel.build[{i}] {item[:60]!r}: not a Triton build option")
        if key == "--constexpr":
            m = _CONST.fullmatch(value)
            if m is None:
                raise BadInput(f"kernel.build[{i}] {item[:60]!r}: expected NAME=NUMBER")
            consts.append((m.group(1), m.group(2)))
        elif key in seen:
            raise BadInput(f"kernel.build[{i}]: {key} given twice")
        else:
            seen[key] = value
    missing = [k for k in ("--version", "--target", "--kernel", "--signature", "--num-warps",
                           "--num-stages") if k not in seen]  # fmt: skip
    if missing:
        raise BadInput(f"kernel.build has no {missing[0]}")
    if not _VERSION.fullmatch(seen["--version"]) or not _TARGET.fullmatch(seen["--target"]):
        raise BadInput("kernel.build --version / --target: not a plain version / sm_NN")
    path, name = _kernel(seen["--kernel"], source)
    return TritonBuild(
        seen["--version"], seen["--target"], path, name, _signature(seen["--signature"]),
        tuple(consts), _int(seen["--num-warps"], "--num-warps", 1, 32),
        _int(seen["--num-stages"], "--num-stages", 1, 8), ptx,
    )  # fmt: skip


def installed() -> tuple[str, str] | None:
    """(the directory holding the ``triton`` package, its version), or None when Triton is not
    installed beside this Python. Triton itself is not imported (seconds)."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None
    return str(Path(spec.origin).resolve().parent.parent), version


def python_exe() -> str:
    """The interpreter that runs the driver: this one's real binary (``-I -S``: no venv, no
    ``.pth`` files; the driver adds only Triton's directory to its path)."""
    import sys

    return str(Path(sys.executable).resolve())


def driver_command(tb: TritonBuild, site: str, driver: str) -> list[str]:
    return [python_exe(), "-I", "-S", driver, *tb.driver_args(site)]


def confined_python_argv(
    bwrap: str, work: Path, site: str, command: Sequence[str]
) -> list[str]:
    """``command`` (``driver_command`` with the driver at ``DRIVER_AT``) in bubblewrap: ``/usr``
    and the Python installation read-only (``base_argv``), ``site`` (Triton's directory) and the
    driver read-only, ``work`` read-write at ``BUILD_DIR``, a private ``/tmp``."""
    env = {"TRITON_CACHE_DIR": "/tmp/triton-cache", "TRITON_DISABLE_LINE_INFO": "1"}
    argv = base_argv(bwrap, env, python=True)
    argv += private_dirs(TRITON_TMP_BYTES)
    argv += ["--ro-bind", site, site, "--ro-bind", str(DRIVER), DRIVER_AT]
    argv += ["--bind", str(work.resolve()), BUILD_DIR, "--chdir", BUILD_DIR]
    return argv + list(command)


def unconfined_env(cache: Path) -> dict[str, str]:
    """The driver's extra environment outside a sandbox (``ledger new`` on the author's machine,
    or ``--trust-bundle-code``): a fresh Triton cache, no line information."""
    return {"TRITON_CACHE_DIR": str(cache), "TRITON_DISABLE_LINE_INFO": "1"}
