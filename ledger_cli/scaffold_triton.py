"""``ledger new DIR --triton FILE.py:KERNEL --signature TYPES [--constexpr NAME=VALUE ...]``: start
a bundle for a Triton kernel (docs/seal-your-own-kernel.md "Triton kernels").

1. refuse bad input (exit 2): DIR not empty; FILE missing, not ``.py``, too large, not UTF-8; no
   ``def KERNEL`` in it; a malformed signature or constexpr (``verify.triton_build.parse_build``);
2. Triton not installed beside this Python (the ``triton`` extra): exit 3;
3. compile with Triton for sm_86 (``verify/triton_driver.py``). Triton compiles by importing the
   file: where a sandbox runs, inside it at ``verify.confine.BUILD_DIR`` as ``rebuild.ptx`` will;
   else on this machine, unconfined: ``ledger new`` runs on the author's own machine with the
   author's own file, which the author runs anyway to launch the kernel;
4. read the entry from the PTX, name its parameters from the ``def`` (the runtime parameters in
   order, then Triton's two scratch pointers, described in the contract as one byte each),
   type them from the signature, and take the launch from the compile (``num_warps`` * 32
   threads, the dynamic shared memory Triton asks for);
5. write the scaffold like the CUDA path (``ledger_cli.scaffold``), with ``kernel.source`` the
   ``.py`` file and ``kernel.build`` the Triton build (version, target, signature, constexprs,
   warps, stages).
"""

from __future__ import annotations

import ast
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ledger.core.errors import BadInput, CannotCheck
from ledger_cli.scaffold import (
    MAX_CU_BYTES,
    TARGET,
    NewParam,
    Scaffold,
    _check_dir,
    _contract,
    _stem,
    _write,
    _yq,
)

# Triton signature types -> contract dtypes
_TYPES = {
    "fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64", "i8": "s8", "u8": "u8",
    "i16": "s32", "i32": "s32", "u32": "u32", "i64": "s64", "u64": "u64", "i1": "u8",
}  # fmt: skip
SCRATCH = ("global_scratch", "profile_scratch")


@dataclass(frozen=True)
class TritonOptions:
    kernel: str  # FILE.py:KERNEL
    signature: str
    constexprs: tuple[str, ...]
    num_warps: int
    num_stages: int


def _read_py(path: Path) -> str:
    if not path.is_file() or path.is_symlink():
        raise BadInput(f"--triton {path}: no such regular file")
    if path.suffix != ".py":
        raise BadInput(f"--triton {path}: expected a Python file (.py)")
    if path.stat().st_size > MAX_CU_BYTES:
        raise BadInput(f"--triton {path}: over the {MAX_CU_BYTES}-byte limit")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"--triton {path}: not UTF-8 (bad byte at offset {e.start})") from e


def _arg_names(source: str, kernel: str, where: str) -> list[str]:
    """The parameters of ``def kernel`` in the file, read without running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise BadInput(f"--triton {where}: not valid Python (line {e.lineno})") from e
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            return [a.arg for a in node.args.args]
    raise BadInput(f"--triton {where}: no function {kernel!r} in the file")


def _params(names: list[str], consts: dict[str, str], types: tuple[str, ...]) -> list[NewParam]:
    runtime = [n for n in names if n not in consts]
    if len(runtime) != len(types):
        raise BadInput(
            f"--signature gives {len(types)} types for {len(runtime)} runtime parameters "
            f"({', '.join(runtime)})"
        )
    out = []
    for name, t in zip(runtime, types, strict=True):
        dtype = _TYPES.get(t.lstrip("*"), "")
        guess = "" if dtype else f"Triton type {t} has no contract dtype: u8 is a placeholder; "
        if t.startswith("*"):
            out.append(NewParam(name, "ptr", dtype or "u8", "inout",
                                f"{guess}check: in, out or inout"))  # fmt: skip
        else:
            out.append(NewParam(name, "scalar", dtype or "u8", guessed=guess))
    return out


def _compile(work: Path, tb: object, site: str) -> tuple[bytes, dict[str, object]]:
    """Run the driver in ``work`` (sandboxed where possible); the PTX and the compile's facts."""
    from verify.confine import sandbox_status
    from verify.tools import run_tool
    from verify.triton_build import (
        DRIVER,
        DRIVER_AT,
        TritonBuild,
        confined_python_argv,
        driver_command,
        unconfined_env,
    )

    assert isinstance(tb, TritonBuild)
    bwrap, _ = sandbox_status()
    if bwrap is not None:
        argv = confined_python_argv(bwrap, work, site, driver_command(tb, site, DRIVER_AT))
        res = run_tool(argv, cwd=work, timeout=600)
    else:
        env = unconfined_env(work / ".triton-cache")
        res = run_tool(driver_command(tb, site, str(DRIVER)), cwd=work, timeout=600, env=env)
    out = work / tb.ptx
    if not res.ok or not out.is_file():
        lines = (res.stderr + res.stdout).strip().splitlines()
        why = "timed out" if res.timed_out else (lines[-1] if lines else "no message")[:300]
        raise BadInput(f"--triton {tb.kernel_file}:{tb.kernel_name}: Triton failed: {why}")
    info: dict[str, object] = {}
    for line in res.stdout.splitlines():
        if line.startswith("{"):
            info = json.loads(line)
    return out.read_bytes(), info


def _flow_item(word: str) -> str:
    """``word`` as an item of a YAML flow sequence (``*``, ``,`` ... quoted)."""
    return _yq(word) if re.fullmatch(r"[A-Za-z0-9_.=/+\-]+", word) else json.dumps(word)


def _scratch_lines() -> str:
    return "".join(
        f"    - {{name: {n}, ptr: u8, intent: in, shape: [1]}}  # Triton's {n.split('_')[0]} "
        "scratch pointer: 0 bytes asked (global/profile_scratch_size), never read\n"
        for n in SCRATCH
    )


def _triton_contract(sc: Scaffold, stem: str, has_domain: bool, build: list[str],
                     shared: int) -> str:
    """The CUDA scaffold's contract with the Triton source, build, scratch pointers and shared
    memory in place."""
    text = _contract(sc, stem, has_domain)
    text = text.replace(f"from {stem}.cu.", f"from {stem}.py (Triton).")
    text = text.replace(f'references: ["{stem}.cu"]', f'references: ["{stem}.py"]')
    text = text.replace(f"source: {stem}.cu", f"source: {stem}.py")
    old = f"build: [nvcc, -arch={TARGET}, -ptx, -o, {stem}.ptx, {stem}.cu]"
    text = text.replace(old, f"build: [{', '.join(_flow_item(a) for a in build)}]")
    text = text.replace("  launch:\n", _scratch_lines() + "  launch:\n", 1)
    text = text.replace("one thread per element assumed", "Triton's grid (programs)")
    return text.replace("    shared_bytes: 0\n", f"    shared_bytes: {shared}\n", 1)


def new_triton_bundle(directory: Path, opts: TritonOptions) -> Scaffold:
    """Write the scaffold of a Triton kernel (module docstring)."""
    from verify.ptx import parse_ptx, run_ptxas
    from verify.triton_build import TritonBuild, installed, parse_build

    _check_dir(directory)
    file, _, kernel = opts.kernel.rpartition(":")
    if not file or not re.fullmatch(r"[A-Za-z_]\w*", kernel):
        raise BadInput(f"--triton {opts.kernel!r}: expected FILE.py:KERNEL")
    path = Path(file)
    source = _read_py(path)
    names = _arg_names(source, kernel, file)
    here = installed()
    if here is None:
        raise CannotCheck("Triton is not installed: pip install -e '.[triton]' (the triton extra)")
    site, version = here
    stem = _stem(path)
    for c in opts.constexprs:
        if "=" not in c:
            raise BadInput(f"--constexpr {c[:60]!r}: expected NAME=VALUE")
    draft = TritonBuild(version, TARGET, f"{stem}.py", kernel, tuple(opts.signature.split(",")),
                        tuple(tuple(c.split("=", 1)) for c in opts.constexprs),  # type: ignore[misc]
                        opts.num_warps, opts.num_stages, f"{stem}.ptx")  # fmt: skip
    tb = parse_build(draft.argv(), draft.ptx, draft.kernel_file)  # the checks rebuild.ptx makes
    params = _params(names, dict(tb.constexprs), tb.signature)
    with tempfile.TemporaryDirectory(prefix="ledger-new-") as tmp:
        work = Path(tmp)
        (work / tb.kernel_file).write_text(source, encoding="utf-8")
        ptx, info = _compile(work, tb, site)
        entries = parse_ptx(ptx).entries
        if len(entries) != 1:
            raise BadInput(f"--triton {opts.kernel}: the PTX has {len(entries)} entries, not 1")
        registers = shared = None
        asm, stats = run_ptxas(work / tb.ptx, TARGET, work, False, 120)
        if asm.ok and stats:
            registers = stats[0].registers
    shared_raw = info.get("shared", 0)
    shared = shared_raw if isinstance(shared_raw, int) else 0
    todo = [f"kernel.params {p.name}: {p.guessed}" for p in params if p.guessed]
    todo.append("launch.grid: Triton's grid (one program per block of the output), size_domain")
    block = 32 * tb.num_warps
    sc = Scaffold(directory, entries[0].name, kernel.lstrip("_") or "kernel", params, block,
                  registers, shared, [], todo)  # fmt: skip
    _write(sc, stem, source, ptx,
           lambda has: _triton_contract(sc, stem, has, tb.argv(), shared or 0), tb.kernel_file)
    return sc
