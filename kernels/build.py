"""Build the example bundles from kernels/ and contracts/, reproducibly (SPEC 2, 3; issue 4).

    .venv/bin/python kernels/build.py            # (re)write bundles/<name>/ for every kernel
    .venv/bin/python kernels/build.py --check    # rebuild in memory, compare with bundles/
    .venv/bin/python kernels/build.py --planted [--check]   # the planted-bug fixtures instead

For each kernel ``kernels/<name>/`` (holding ``<name>.cu``, ``.lean``, ``.fut``, and the
``reference.py`` a contract names as ``kernel.reference: {file, function}``) with a contract
``contracts/<name>.yaml``:

1. read ``kernel.build`` from the contract: the exact nvcc argv (first item ``nvcc``), run in a
   fresh temporary directory that holds only the source, so the PTX depends on nothing else;
2. collect the bundle: ``contract.yaml`` (the contract, byte for byte), the PTX, the ``.cu``,
   ``.lean`` and ``.fut`` files, the bundle reference file if any, and ``BUILD-INFO.txt``
   (kernel, argv, nvcc release line);
3. write ``bundles/<name>/`` (replacing its files) or, with ``--check``, compare and report.

The planted-bug fixtures ``tests/fixtures/planted/<bug>/`` are their own sources: the build
regenerates the PTX and ``BUILD-INFO.txt`` inside each directory from its ``contract.yaml``.

nvcc's PTX is deterministic, so rebuilding gives the same bytes. Without nvcc, ``--check``
compares every file except the PTX and BUILD-INFO.txt, says so, and exits 0 when those agree.
Exit codes: 0 built / up to date, 1 differences found, 2 bad input (missing file, bad contract),
3 nvcc missing or failed when building.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
CONTRACTS = ROOT / "contracts"
BUNDLES = ROOT / "bundles"
PLANTED = ROOT / "tests" / "fixtures" / "planted"
BUILD_INFO = "BUILD-INFO.txt"
NVCC_TIMEOUT = 300


class BuildError(Exception):
    """A kernel cannot be built; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Spec:
    """One bundle to build: where it goes, its contract bytes and its source files."""

    name: str
    out_dir: Path
    contract: bytes
    sources: dict[str, bytes]  # bundle path -> bytes (.cu, .lean, .fut, bundle reference)
    ptx: str  # bundle path of the PTX
    argv: tuple[str, ...]  # kernel.build
    kernel_id: str  # "name version"


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for d in sorted(glob.glob("/usr/local/cuda*/bin"), reverse=True):
        cand = os.path.join(d, "nvcc")
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def nvcc_release(nvcc: str) -> str:
    """nvcc's release line, e.g. 'Cuda compilation tools, release 13.0, V13.0.88'."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if "release" in line:
            return line.strip()
    raise BuildError(f"{nvcc} --version printed no release line", 3)


def _kernel_section(contract: bytes, where: str) -> dict[str, object]:
    try:
        doc = yaml.safe_load(contract)
    except yaml.YAMLError as e:
        raise BuildError(f"{where}: not valid YAML: {e}") from e
    kernel = doc.get("kernel") if isinstance(doc, dict) else None
    if not isinstance(kernel, dict):
        raise BuildError(f"{where}: no kernel section")
    return kernel


def _spec(name: str, out_dir: Path, contract_path: Path, source_dir: Path) -> Spec:
    contract = contract_path.read_bytes()
    kernel = _kernel_section(contract, str(contract_path))
    argv = kernel.get("build")
    ptx = kernel.get("ptx")
    source = kernel.get("source")
    if not (isinstance(argv, list) and argv and argv[0] in ("nvcc", "triton")):
        raise BuildError(f"{contract_path}: kernel.build must be an argv starting with nvcc/triton")
    if not (isinstance(ptx, str) and isinstance(source, str)):
        raise BuildError(f"{contract_path}: kernel.ptx and kernel.source are required")
    wanted = [source, str(kernel.get("futhark", ""))]
    reference = kernel.get("reference")
    if isinstance(reference, dict):  # a bundle reference {file, function} travels with the bundle
        wanted.append(str(reference.get("file", "")))
    wanted += [p.name for p in sorted(source_dir.glob("*.lean"))]
    sources: dict[str, bytes] = {}
    for rel in wanted:
        path = source_dir / rel
        if not rel or not path.is_file():
            raise BuildError(f"{name}: missing source file {path}")
        sources[rel] = path.read_bytes()
    kernel_id = f"{kernel.get('name', name)} {kernel.get('version', '')}".strip()
    return Spec(name, out_dir, contract, sources, ptx, tuple(str(a) for a in argv), kernel_id)


def bundle_specs() -> list[Spec]:
    specs = []
    # a CUDA kernel's <name>.cu, or a Triton kernel's <name>.py (docs/kernels.md "Triton kernels")
    for cu in sorted([*KERNELS.glob("*/*.cu"), *KERNELS.glob("*/*.py")]):
        name = cu.parent.name
        if cu.stem != name:
            continue
        contract = CONTRACTS / f"{name}.yaml"
        if not contract.is_file():
            raise BuildError(f"{name}: no contract {contract}")
        specs.append(_spec(name, BUNDLES / name, contract, cu.parent))
    return specs


def planted_specs() -> list[Spec]:
    if not PLANTED.is_dir():
        raise BuildError(f"no planted fixtures under {PLANTED}")
    return [
        _spec(d.name, d, d / "contract.yaml", d)
        for d in sorted(PLANTED.iterdir())
        if (d / "contract.yaml").is_file()
    ]


def triton_release() -> str | None:
    """The installed Triton's version (the ``triton`` extra), or None."""
    from verify.triton_build import installed

    here = installed()
    return here[1] if here else None


def _triton_argv(spec: Spec) -> tuple[list[str], dict[str, str]]:
    """The driver's argv for a Triton build (verify.triton_build), unconfined: these are the
    project's own sources."""
    from verify.triton_build import DRIVER, driver_command, installed, parse_build

    here = installed()
    if here is None:
        raise BuildError(f"{spec.name}: Triton is not installed (the triton extra)", 3)
    try:
        tb = parse_build(spec.argv, spec.ptx, tb_source(spec))
    except Exception as e:  # BadInput: the contract's build is malformed
        raise BuildError(f"{spec.name}: {e}") from e
    if tb.version != here[1]:
        raise BuildError(f"{spec.name}: built with Triton {tb.version}, {here[1]} installed", 3)
    env = {"TRITON_DISABLE_LINE_INFO": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return driver_command(tb, here[0], str(DRIVER)), env


def tb_source(spec: Spec) -> str:
    return next(r for r in spec.sources if r.endswith(".py") and r != "reference.py")


def compile_ptx(spec: Spec, nvcc: str) -> bytes:
    """Run the contract's argv in a temporary directory holding only the sources."""
    with tempfile.TemporaryDirectory(prefix="kbuild-") as tmp:
        for rel, data in spec.sources.items():
            (Path(tmp) / rel).write_bytes(data)
        argv = [nvcc, *spec.argv[1:]]
        env = None
        if spec.argv[0] == "triton":
            argv, env = _triton_argv(spec)
            env["TRITON_CACHE_DIR"] = str(Path(tmp) / ".triton-cache")
            env["HOME"] = tmp
        try:
            res = subprocess.run(
                argv, cwd=tmp, capture_output=True, text=True, timeout=NVCC_TIMEOUT, check=False,
                env=env,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildError(f"{spec.name}: nvcc did not run: {e}", 3) from e
        if res.returncode != 0:
            raise BuildError(f"{spec.name}: nvcc failed:\n{res.stderr.strip()}", 3)
        out = Path(tmp) / spec.ptx
        if not out.is_file():
            raise BuildError(f"{spec.name}: nvcc wrote no {spec.ptx}", 3)
        return out.read_bytes()


def expected_files(spec: Spec, nvcc: str | None, release: str, planted: bool) -> dict[str, bytes]:
    """The bundle's files; without nvcc the PTX and BUILD-INFO.txt are left out."""
    files = {} if planted else {"contract.yaml": spec.contract, **spec.sources}
    if spec.argv[0] == "triton":
        version = triton_release()
        if version is not None:
            files[spec.ptx] = compile_ptx(spec, "triton")
            info = f"kernel: {spec.kernel_id}\nbuild: {' '.join(spec.argv)}\ntriton: {version}\n"
            files[BUILD_INFO] = info.encode()
        return files
    if nvcc is not None:
        files[spec.ptx] = compile_ptx(spec, nvcc)
        info = f"kernel: {spec.kernel_id}\nbuild: {' '.join(spec.argv)}\nnvcc: {release}\n"
        files[BUILD_INFO] = info.encode()
    return files


def current_files(out_dir: Path) -> dict[str, bytes]:
    if not out_dir.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(out_dir.iterdir()) if p.is_file()}


def compare(spec: Spec, want: dict[str, bytes], have: dict[str, bytes], full: bool) -> list[str]:
    """Differences between the files built and the committed ones, one line each."""
    problems = []
    for rel, data in sorted(want.items()):
        if rel not in have:
            problems.append(f"{spec.name}: {rel} missing from {spec.out_dir}")
        elif have[rel] != data:
            problems.append(f"{spec.name}: {rel} differs ({len(have[rel])} vs {len(data)} bytes)")
    if full:
        for rel in sorted(set(have) - set(want)):
            if rel.startswith("ledger-receipt") and rel.endswith(".json"):
                continue  # a receipt `ledger seal` wrote; not part of the bundle (SPEC 3)
            if not (
                rel.endswith((".cu", ".lean", ".fut")) or rel in ("contract.yaml", *spec.sources)
            ):
                problems.append(f"{spec.name}: {rel} in {spec.out_dir} is not a build output")
            elif spec.out_dir.parent == BUNDLES:
                problems.append(f"{spec.name}: {rel} in {spec.out_dir} has no source")
    return problems


def write(spec: Spec, want: dict[str, bytes], planted: bool) -> None:
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    if not planted:
        for old in spec.out_dir.iterdir():
            if old.is_file() and old.name not in want:
                old.unlink()
    for rel, data in want.items():
        target = spec.out_dir / rel
        if target.is_file() and target.read_bytes() == data:
            continue
        tmp = target.with_name(f".{rel}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files")
    ap.add_argument("--planted", action="store_true", help="the planted-bug fixtures")
    args = ap.parse_args(argv)
    try:
        specs = planted_specs() if args.planted else bundle_specs()
        nvcc = find_nvcc()
        if nvcc is None and not args.check:
            raise BuildError("nvcc not found on PATH or under /usr/local/cuda*", 3)
        release = nvcc_release(nvcc) if nvcc else ""
        problems: list[str] = []
        for spec in specs:
            want = expected_files(spec, nvcc, release, args.planted)
            if args.check:
                full = spec.ptx in want if spec.argv[0] == "triton" else nvcc is not None
                problems += compare(spec, want, current_files(spec.out_dir), full)
            elif spec.argv[0] == "triton" and spec.ptx not in want:
                print(f"skipped {spec.name}: Triton is not installed (the triton extra)")
            else:
                write(spec, want, args.planted)
                print(f"built {spec.out_dir.relative_to(ROOT)} ({len(want)} files)")
    except BuildError as e:
        print(f"build: {e}", file=sys.stderr)
        return e.code
    if args.check:
        if nvcc is None:
            print("nvcc not found: PTX and BUILD-INFO.txt were not rebuilt; other files compared")
        for p in problems:
            print(p)
        print(f"{len(specs)} bundles checked, {len(problems)} differences")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
