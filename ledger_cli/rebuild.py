"""``ledger rebuild DIR [--json]``: re-run the contract's build and refresh the bundle's PTX
(issue 34, the author's loop; guide: docs/seal-your-own-kernel.md).

1. read the bundle directory (``ledger.core.bundle.read_dir``: its limits, no symlinks) and its
   ``contract.yaml``; the kernel must name a ``source`` and a ``build`` (else exit 2);
2. check the build against ``rebuild.ptx``'s allow-list (``verify.rebuild.check_build``);
3. run it exactly as ``rebuild.ptx`` does: in a scratch copy of the bundle without the PTX, in
   the bubblewrap sandbox, bound at the fixed path ``verify.confine.BUILD_DIR``; no sandbox or
   no nvcc: exit 3, nothing changed; the source does not compile: exit 2 with nvcc's errors;
4. write the new PTX into ``DIR`` (atomically) when it differs, and say what changed.

It edits the working bundle only: a sealed entry lives in the log and is not touched, and the
next ``ledger check DIR`` finds ``rebuild.ptx`` passing against the new PTX.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ledger.core.errors import BadInput, BundleError, CannotCheck, ContractError

if TYPE_CHECKING:  # types only: verify loads when the command runs
    from verify.model import Kernel


@dataclass(frozen=True)
class Rebuilt:
    directory: Path
    ptx: str
    argv: tuple[str, ...]
    changed: bool
    old_bytes: int
    new_bytes: int
    difference: str  # the first differing line, "" when unchanged

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "ptx": self.ptx,
            "build": list(self.argv),
            "changed": self.changed,
            "old_bytes": self.old_bytes,
            "new_bytes": self.new_bytes,
            "difference": self.difference,
        }


def _load(directory: Path) -> "tuple[dict[str, bytes], Kernel]":
    """The bundle's files and its contract's kernel; ``BadInput`` when either is unusable."""
    from ledger.core.bundle import read_dir
    from verify.contract import load_contract

    if not directory.is_dir() or directory.is_symlink():
        raise BadInput(f"{directory}: not a bundle directory")
    try:
        files = read_dir(directory)
    except BundleError as e:
        raise BadInput(f"{directory}: {e}") from e
    if "contract.yaml" not in files:
        raise BadInput(f"{directory}: no contract.yaml")
    try:
        contract = load_contract(files["contract.yaml"])
    except ContractError as e:
        raise BadInput(f"{directory}/contract.yaml: {e}") from e
    k = contract.kernel
    if k is None or not k.source or not k.build:
        raise BadInput(f"{directory}/contract.yaml: the kernel names no source and build")
    if k.source not in files:
        raise BadInput(f"{directory}: kernel.source {k.source!r} is not in the bundle")
    return files, k


def rebuild_bundle(directory: Path) -> Rebuilt:
    """Rebuild ``directory``'s PTX (module docstring); raises ``BadInput`` / ``CannotCheck``."""
    from ledger.core.fsutil import write_atomic
    from verify.confine import BUILD_DIR, confined_argv, sandbox_status
    from verify.ptxdiff import first_difference
    from verify.rebuild import check_build
    from verify.tools import find_tool, run_tool

    files, k = _load(directory)
    args = check_build(k.build, k.ptx, k.source)
    nvcc = find_tool("nvcc", cuda=True)
    if nvcc is None:
        raise CannotCheck("no nvcc on PATH or in the CUDA locations: cannot rebuild the PTX")
    bwrap, why = sandbox_status()
    if bwrap is None:
        raise CannotCheck(f"nvcc runs only in a sandbox (as rebuild.ptx does), and here: {why}")
    with tempfile.TemporaryDirectory(prefix="ledger-rebuild-") as tmp:
        work = Path(tmp)
        for rel, data in files.items():
            if rel != k.ptx:
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_bytes(data)
        argv = [nvcc, *args]
        res = run_tool(confined_argv(bwrap, nvcc, work, argv, at=BUILD_DIR), cwd=work)
        target = work / k.ptx
        if not res.ok or not target.is_file():
            msgs = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if "error" in ln]
            err = "timed out" if res.timed_out else (" / ".join(msgs)[:400] or "no diagnostics")
            raise BadInput(f"{' '.join(k.build)}: exit {res.returncode}, no PTX written: {err}")
        new = target.read_bytes()
    old = files.get(k.ptx, b"")
    changed = new != old
    if changed:
        write_atomic(directory / k.ptx, new, exclusive=False)
    diff = first_difference(old, new) if changed else ""
    return Rebuilt(directory, k.ptx, tuple(k.build), changed, len(old), len(new), diff)


def register(app: typer.Typer) -> None:
    """Add ``ledger rebuild`` to the typer app (``ledger_cli``)."""
    from ledger_cli import output
    from ledger_cli.options import JsonOpt

    @app.command("rebuild")
    def rebuild(
        directory: Annotated[Path, typer.Argument(help="The bundle directory.")],
        json_out: JsonOpt = False,
    ) -> None:
        """Re-run the contract's nvcc build (sandboxed, as rebuild.ptx) and refresh the PTX."""
        r = rebuild_bundle(directory)
        if json_out:
            output.emit_json(r.to_json())
            return
        cmd = " ".join(r.argv)
        if not r.changed:
            output.plain(f"{cmd}: {r.ptx} unchanged ({r.new_bytes} bytes)")
            return
        output.plain(f"{cmd}: rewrote {r.ptx} ({r.old_bytes} -> {r.new_bytes} bytes)")
        said = r.difference.replace(": bundle's ", ": old ", 1).replace(", rebuilt ", ", new ", 1)
        output.plain(f"  {said}")
        output.plain(f"  next: ledger check {directory}")
