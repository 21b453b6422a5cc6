"""rebuild.ptx (verify/rebuild.py): the argv policy, and real nvcc rebuilds in a scratch copy.

The sealed PTX is produced in the test by the nvcc installed on the machine, so the
equal-rebuild case does not depend on the committed fixture's compiler version.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

import verify.rebuild as rebuild
from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput
from verify.confine import confined_argv, sandbox_status, tool_dirs
from verify.context import Context, Options
from verify.model import Contract, Kernel, Param
from verify.ptxdiff import first_difference
from verify.rebuild import check_build
from verify.report import Check
from verify.tools import find_tool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ptx"
NVCC = find_tool("nvcc", cuda=True)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")
BWRAP, WHY = sandbox_status()
needs_sandbox = pytest.mark.skipif(BWRAP is None, reason=WHY)
BUILD = ("nvcc", "-arch=sm_86", "-ptx", "-o", "vector_add.ptx", "vector_add.cu")
KERNEL = Kernel(
    name="vector_add",
    version="1.0.0",
    entry="vector_add",
    ptx="vector_add.ptx",
    source="vector_add.cu",
    build=BUILD,
    params=(
        Param("a", "ptr", "f32"),
        Param("b", "ptr", "f32"),
        Param("c", "ptr", "f32"),
        Param("n", "scalar", "u32"),
    ),
)
CONTRACT_YAML = b"""metadata: {version: "1.0.0", description: "f32 vector add"}
equations: {vector_add: {formula: "c_i = a_i + b_i"}}
kernel:
  name: vector_add
  version: "1.0.0"
  entry: vector_add
  ptx: vector_add.ptx
  source: vector_add.cu
  build: [nvcc, -arch=sm_86, -ptx, -o, vector_add.ptx, vector_add.cu]
"""


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """PTX of the fixture source, built by the machine's nvcc in another directory."""
    if NVCC is None:
        pytest.skip("no nvcc on this machine")
    d = tmp_path_factory.mktemp("seal")
    (d / "vector_add.cu").write_bytes((FIX / "vector_add.cu").read_bytes())
    subprocess.run([NVCC, *BUILD[1:]], cwd=d, check=True, capture_output=True)
    return (d / "vector_add.ptx").read_bytes()


def check(
    ptx: bytes,
    kernel: Kernel | None,
    source: bytes | None = None,
    loaded: bool = True,
    options: Options | None = None,
) -> Check:
    files = {
        "contract.yaml": CONTRACT_YAML,
        "Proof.lean": b"theorem t : True := trivial\n",
        "spec.fut": b"entry f (x: i32) = x\n",
        "vector_add.ptx": ptx,
        "vector_add.cu": (FIX / "vector_add.cu").read_bytes() if source is None else source,
    }
    ctx = Context(Bundle.from_files(files), options or Options())
    if loaded:
        ctx.contract = Contract("vector_add", "1.0.0", "f32 vector add", kernel)
    try:
        [c] = rebuild.run(ctx)
    finally:
        ctx.close()
    assert c.id == "rebuild.ptx"
    return c


@needs_nvcc
def test_rebuild_equal(sealed: bytes) -> None:
    c = check(sealed, KERNEL)
    assert c.status == "passed", c.detail
    assert f"equals the bundle's PTX ({len(sealed)} bytes)" in c.detail
    assert "sealed" not in c.detail  # a checked bundle may never have been sealed
    assert c.tool == "nvcc" and "release" in c.version


@needs_nvcc
def test_rebuild_different_source(sealed: bytes) -> None:
    src = (FIX / "vector_add.cu").read_bytes().replace(b"a[i] + b[i]", b"a[i] - b[i]")
    c = check(sealed, KERNEL, source=src)
    assert c.status == "failed"
    assert "rebuilt vector_add.ptx differs from the bundle's" in c.detail
    assert "ledger rebuild DIR" in c.detail
    assert "first difference at line" in c.detail and "sub.f32" in c.detail
    assert "sealed" not in c.detail


@needs_nvcc
def test_rebuild_different_compiler_comment(sealed: bytes) -> None:
    older = sealed.replace(b"release 13.", b"release 11.", 1)
    assert older != sealed
    c = check(older, KERNEL)
    assert c.status == "failed"
    assert "the bundle's PTX was written by a different nvcc" in c.detail


@needs_nvcc
def test_rebuild_with_flags_and_include(sealed: bytes) -> None:
    src = b'#include "inc/scale.h"\n' + (FIX / "vector_add.cu").read_bytes()
    k = dataclasses.replace(
        KERNEL,
        build=(
            "nvcc",
            "-arch=sm_86",
            "-O3",
            "-DSCALE=2",
            "-Iinc",
            "--std=c++17",
            "-ptx",
            "--output-file",
            "vector_add.ptx",
            "vector_add.cu",
        ),
    )
    files = {
        "contract.yaml": CONTRACT_YAML,
        "Proof.lean": b"x\n",
        "spec.fut": b"x\n",
        "vector_add.cu": src,
        "inc/scale.h": b"#define HALF 0.5f\n",
    }
    # Seal with the same command in a directory of our own, then check the rebuild.
    ctx = Context(Bundle.from_files({**files, "vector_add.ptx": sealed}))
    d = ctx.scratch()
    assert NVCC is not None
    subprocess.run([NVCC, *k.build[1:]], cwd=d, check=True, capture_output=True)
    fresh = (d / "vector_add.ptx").read_bytes()
    ctx.close()
    ctx = Context(Bundle.from_files({**files, "vector_add.ptx": fresh}))
    ctx.contract = Contract("v", "1", "d", k)
    try:
        [c] = rebuild.run(ctx)
    finally:
        ctx.close()
    assert c.status == "passed", c.detail


@needs_nvcc
def test_rebuild_compile_error() -> None:
    c = check(b"x", KERNEL, source=b"this is not CUDA\n")
    assert c.status == "failed"
    assert "exit 1" in c.detail and "no PTX written" in c.detail and "error" in c.detail


def test_rebuild_refused_build_fails() -> None:
    k = dataclasses.replace(KERNEL, build=("/usr/bin/nvcc", *BUILD[1:]))
    if NVCC is None:
        pytest.skip("no nvcc: the argv is only judged when a rebuild could run")
    c = check(b"x", k)
    assert c.status == "failed"
    assert "refused build command: kernel.build must start with 'nvcc'" in c.detail


def test_rebuild_skips() -> None:
    c = check(b"x", dataclasses.replace(KERNEL, source="", build=()))
    assert c.status == "skipped" and "no .cu source and build command" in c.detail
    c = check(b"x", None, loaded=False)
    assert c.status == "skipped" and "contract not loaded" in c.detail
    c = check(b"x", None)
    assert c.status == "skipped" and "no kernel section" in c.detail


def test_rebuild_skipped_without_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rebuild, "find_tool", lambda name, cuda=False: None)  # no toolkit
    c = check(b"x", KERNEL)
    assert c.status == "skipped" and "no nvcc" in c.detail


def test_rebuild_missing_source_fails() -> None:
    k = dataclasses.replace(KERNEL, source="kernel.cu")
    c = check(b"x", k)
    assert c.status == "failed" and "kernel.source 'kernel.cu' is not in the bundle" in c.detail


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("/usr/local/cuda/bin/nvcc", "-ptx", "-o", "k.ptx", "k.cu"), "must start with 'nvcc'"),
        (("gcc", "-o", "k.ptx", "k.cu"), "must start with 'nvcc'"),
        ((), "must start with 'nvcc'"),
        (("nvcc", "-ccbin", "evil", "-ptx", "-o", "k.ptx", "k.cu"), "'-ccbin': nvcc option not"),
        (("nvcc", "-Xcompiler", "-fplugin=p.so", "-ptx", "-o", "k.ptx", "k.cu"), "'-Xcompiler'"),
        (("nvcc", "--options-file", "opts", "-ptx", "-o", "k.ptx", "k.cu"), "--options-file"),
        (("nvcc", "--run", "-ptx", "-o", "k.ptx", "k.cu"), "'--run': nvcc option not"),
        (("nvcc", "-odir=/tmp", "-ptx", "-o", "k.ptx", "k.cu"), "'-odir=/tmp'"),
        (("nvcc", "-ptx", "-o", "other.ptx", "k.cu"), "writes 'other.ptx', not the kernel's"),
        (("nvcc", "-ptx", "k.cu"), "writes None"),
        (("nvcc", "-ptx", "k.cu", "-o"), "ends with -o"),
        (("nvcc", "-o", "k.ptx", "k.cu"), "does not ask for PTX"),
        (("nvcc", "-ptx", "-o", "k.ptx", "other.cu"), "does not compile the kernel's source"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "/etc/passwd"), "'/etc/passwd': not a plain"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "../k.cu"), "'../k.cu': not a plain"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "$(id)"), "not a plain value"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "-I/usr/include"), "bad value"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "-DX=$(id)"), "bad value"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "-arch=sm_86;id"), "value is not plain"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "-G"), "embeds absolute paths"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "--device-debug"), "embeds absolute paths"),
        (("nvcc", "-ptx", "-o", "k.ptx", "k.cu", "--a b"), "not a plain flag"),
    ],
)
def test_check_build_refuses(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(BadInput) as e:
        check_build(argv, "k.ptx", "k.cu")
    assert message in str(e.value), str(e.value)


def test_check_build_accepts() -> None:
    argv = (
        "nvcc",
        "-arch",
        "sm_86",
        "--gpu-architecture=sm_86",
        "-O3",
        "-DN=256",
        "-D",
        "M",
        "-UNDEBUG",
        "-Iinc/sub",
        "-I",
        "inc",
        "-std=c++17",
        "--use_fast_math",
        "-maxrregcount=64",
        "-ptx",
        "--output-file=k.ptx",
        "src/k.cu",
    )
    assert check_build(argv, "k.ptx", "src/k.cu") == list(argv[1:])


def test_first_difference() -> None:
    assert (
        first_difference(b"a\nb\nc\n", b"a\nx\nc\n")
        == "first difference at line 2: bundle's 'b', rebuilt 'x'"
    )
    assert (
        first_difference(b"a", b"a\n")
        == "one is a prefix of the other: bundle's 1 bytes, rebuilt 2"
    )


# the nvcc-built bundles (the Triton ones rebuild with Triton: tests/ledger_cli/test_triton.py)
BUNDLES = sorted(
    p
    for p in (Path(__file__).resolve().parents[2] / "bundles").glob("*/contract.yaml")
    if "build: [triton," not in p.read_text(encoding="utf-8")
)


@needs_nvcc
@pytest.mark.parametrize("contract", BUNDLES, ids=lambda p: p.parent.name)
def test_shipped_bundles_rebuild(contract: Path) -> None:
    """Equal when this machine's nvcc is the release that wrote the sealed PTX, else the hint."""
    from verify.contract import load_contract
    from verify.tools import tool_release

    ctx = Context(Bundle.from_dir(contract.parent))
    ctx.contract = load_contract(contract.read_bytes())
    k = ctx.contract.kernel
    assert k is not None and NVCC is not None
    same_nvcc = tool_release(NVCC).encode() in ctx.bundle.file(k.ptx)
    try:
        [c] = rebuild.run(ctx)
    finally:
        ctx.close()
    if same_nvcc:
        assert c.status == "passed", c.detail
    else:
        assert c.status == "failed" and "different nvcc" in c.detail


# A log key's shape (ledger/keys.py): what an #include of it puts in front of nvcc's front end,
# whose diagnostics name each identifier it cannot resolve.
SECRET = "PRIVATE+KEY+example.com/log+1a2b3c4d+zQuotedSecretPart/xAnotherSecretPart=\n"


def _stealing_source(secret: Path) -> bytes:
    src = (FIX / "vector_add.cu").read_bytes()
    return src + f'__global__ void steal(int *x) {{ auto v =\n#include "{secret}"\n; }}\n'.encode()


@needs_nvcc
@needs_sandbox
def test_an_include_of_a_file_of_this_machine_finds_nothing_in_the_sandbox(
    sealed: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source includes a key-shaped file of the verifying machine by its absolute path.
    Without the sandbox nvcc's diagnostics quote the file's identifiers into the detail (which
    a seal signs into the public log); in it the file does not exist."""
    secret = tmp_path / "log.key"
    secret.write_text(SECRET)
    c = check(sealed, KERNEL, source=_stealing_source(secret))
    assert c.status == "failed", c.detail
    assert "no PTX written" in c.detail and "log.key" in c.detail
    for part in ("PRIVATE", "zQuotedSecretPart", "xAnotherSecretPart"):
        assert part not in c.detail, c.detail
    assert "without a sandbox" not in c.detail
    # the channel the sandbox closes: the same bundle, trusted and run without one
    monkeypatch.setenv("LEDGER_SANDBOX", "off")
    c = check(sealed, KERNEL, source=_stealing_source(secret),
              options=Options(trust_bundle_code=True))
    assert c.status == "failed" and 'identifier "PRIVATE" is undefined' in c.detail, c.detail
    assert c.detail.endswith("(nvcc ran without a sandbox: --trust-bundle-code)")


@needs_nvcc
def test_without_a_sandbox_rebuild_is_skipped_unless_trusted(
    sealed: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_SANDBOX", "off")
    c = check(sealed, KERNEL)
    assert c.status == "skipped"
    assert "an #include in it can read any file of this machine" in c.detail
    assert "here there is sandbox: turned off (LEDGER_SANDBOX=off)" in c.detail
    assert "--trust-bundle-code runs it without one" in c.detail
    c = check(sealed, KERNEL, options=Options(trust_bundle_code=True))
    assert c.status == "passed", c.detail
    assert c.detail.endswith("(nvcc ran without a sandbox: --trust-bundle-code)")


def test_the_sandbox_binds_a_cuda_installation_by_its_parts(tmp_path: Path) -> None:
    """An nvcc outside /usr (``~/cuda/bin/nvcc``, ``~/bin/nvcc``) brings only the parts of a
    CUDA layout into its sandbox, never the directory above them, where a ledger may live."""
    home = tmp_path / "home"
    for d in ("bin", "include", "nvvm", ".ledger"):
        (home / d).mkdir(parents=True)
    (home / "bin" / "nvcc").write_bytes(b"")
    (home / ".ledger" / "log.key").write_text(SECRET)
    assert tool_dirs(str(home / "bin" / "nvcc")) == [home / "bin", home / "nvvm", home / "include"]
    wheel = tmp_path / "site-packages" / "nvidia" / "cu13" / "bin"
    wheel.mkdir(parents=True)
    (wheel / "nvcc").write_bytes(b"")
    assert tool_dirs(str(wheel / "nvcc")) == [tmp_path / "site-packages" / "nvidia"]
    assert tool_dirs("/usr/local/cuda-13.0/bin/nvcc") == []  # /usr is bound whole
    argv = confined_argv("bwrap", str(home / "bin" / "nvcc"), tmp_path, ["nvcc", "-ptx"])
    bound = {argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind")}
    assert str(home) not in bound and str(home / ".ledger") not in bound
    assert argv.index("--tmpfs") < argv.index(str(home / "bin"))  # not hidden by /tmp
    assert argv[-2:] == ["nvcc", "-ptx"] and "--clearenv" in argv


# ---------------------------------------------------------------- rebuild from any directory
# nvcc names internal-linkage symbols (_INTERNAL_<id>_) with a module id hashed from the source's
# absolute path; `ledger new` and rebuild.ptx both build at verify.confine.BUILD_DIR inside the
# sandbox, so a cooperative-groups bundle copied to any directory rebuilds byte for byte (issue 32)
TILES = Path(__file__).resolve().parents[1] / "fixtures" / "redteam" / "tiles.cu"


def _rebuild_dir(directory: Path) -> Check:
    from verify.contract import load_contract

    bundle = Bundle.from_dir(directory)
    ctx = Context(bundle, Options())
    ctx.contract = load_contract(bundle.file("contract.yaml"))
    try:
        [c] = rebuild.run(ctx)
    finally:
        ctx.close()
    return c


@needs_nvcc
@needs_sandbox
def test_a_cooperative_groups_bundle_rebuilds_byte_for_byte_from_anywhere(tmp_path: Path) -> None:
    import shutil

    from ledger_cli.scaffold import new_bundle

    cu = tmp_path / "tiles.cu"
    cu.write_bytes(TILES.read_bytes())
    new_bundle(tmp_path / "made", cu, entry="tile_sum")
    ptx = (tmp_path / "made" / "tiles.ptx").read_bytes()
    assert b"_INTERNAL_" in ptx  # the module id is in the sealed PTX
    for where in (tmp_path / "one", tmp_path / "two" / "much" / "deeper"):
        shutil.copytree(tmp_path / "made", where)
        c = _rebuild_dir(where)
        assert c.status == "passed", c.detail
        assert c.detail.endswith(f"equals the bundle's PTX ({len(ptx)} bytes) (built at "
                                 "/build/bundle)")


@needs_nvcc
@needs_sandbox
def test_a_ptx_built_elsewhere_is_still_only_skipped(tmp_path: Path) -> None:
    """An author's own build in their directory has another module id: equal up to the id,
    which is no byte-for-byte equality, and no failure either."""
    import shutil

    from ledger_cli.scaffold import new_bundle

    cu = tmp_path / "tiles.cu"
    cu.write_bytes(TILES.read_bytes())
    new_bundle(tmp_path / "made", cu, entry="tile_sum")
    assert NVCC is not None
    subprocess.run([NVCC, "-arch=sm_86", "-ptx", "-o", "tiles.ptx", "tiles.cu"],
                   cwd=tmp_path / "made", check=True, capture_output=True)
    shutil.copytree(tmp_path / "made", tmp_path / "copy")
    c = _rebuild_dir(tmp_path / "copy")
    assert c.status == "skipped", c.detail
    assert "the bundle's PTX was not built at /build/bundle" in c.detail
