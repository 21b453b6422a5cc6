"""``ledger new``: the command that starts a bundle, from CUDA (``ledger_cli.scaffold``) or
from a Triton kernel (``ledger_cli.scaffold_triton``); it imports both, neither imports it."""

from pathlib import Path
from typing import Annotated

import typer

from ledger.core.errors import BadInput
from ledger_cli.scaffold import new_bundle


def register(app: typer.Typer) -> None:
    """Add ``ledger new`` to the typer app (``ledger_cli``)."""
    from ledger_cli import output
    from ledger_cli.options import JsonOpt

    @app.command("new")
    def new(
        directory: Annotated[Path, typer.Argument(help="The bundle directory to create.")],
        cu: Annotated[
            Path | None, typer.Option("--cu", help="The kernel's CUDA source (.cu).")
        ] = None,
        entry: Annotated[
            str | None,
            typer.Option("--entry", help="The kernel (PTX entry or __global__ name)."),
        ] = None,
        nvcc_flag: Annotated[
            list[str] | None,
            typer.Option(
                "--nvcc-flag",
                help="An extra nvcc flag, recorded in kernel.build (repeatable; e.g. "
                "-use_fast_math, -lineinfo, -DN=4; the rebuild.ptx allow-list applies).",
            ),
        ] = None,
        size: Annotated[
            list[str] | None,
            typer.Option(
                "--size",
                help="A size variable that is no kernel parameter (e.g. nnz, cols): declared "
                "in size_domain with a TODO domain (repeatable).",
            ),
        ] = None,
        triton: Annotated[
            str | None,
            typer.Option("--triton", help="A Triton kernel instead: FILE.py:KERNEL."),
        ] = None,
        signature: Annotated[
            str | None,
            typer.Option("--signature", help='Triton: the runtime parameter types, "*fp32,i32".'),
        ] = None,
        constexpr: Annotated[
            list[str] | None,
            typer.Option("--constexpr", help="Triton: NAME=VALUE of a constexpr (repeat)."),
        ] = None,
        num_warps: Annotated[int, typer.Option("--num-warps", help="Triton: warps.")] = 4,
        num_stages: Annotated[int, typer.Option("--num-stages", help="Triton: stages.")] = 3,
        json_out: JsonOpt = False,
    ) -> None:
        """Start a bundle for any kernel: PTX, contract, reference/Lean/Futhark stubs."""
        if (cu is None) == (triton is None):
            raise BadInput("give exactly one of --cu FILE.cu and --triton FILE.py:KERNEL")
        if triton is not None:
            from ledger_cli.scaffold_triton import TritonOptions, new_triton_bundle

            opts = TritonOptions(triton, signature or "", tuple(constexpr or ()), num_warps,
                                 num_stages)  # fmt: skip
            sc = new_triton_bundle(directory, opts)
        else:
            assert cu is not None
            sc = new_bundle(directory, cu, entry, nvcc_flag or (), size or ())
        if json_out:
            output.emit_json(sc.to_json())
            return
        output.plain(f"wrote {directory} for kernel {sc.function} (PTX entry {sc.entry}):")
        if sc.max_registers:
            output.plain(
                f"  registers: ptxas measured {sc.registers}; max_registers {sc.max_registers} "
                "(+25 % headroom, a multiple of 8)"
            )
        for f in sc.files:
            output.plain(f"  {f}")
        output.plain("to do before `ledger check` can pass:")
        for t in sc.todo:
            output.plain(f"  - {t}")
