"""Triton kernels (issue 32): the ``kernel.build`` argv of a Triton compile
(verify/triton_build.py), ``rebuild.ptx`` rerunning it in the sandbox (verify/rebuild_triton.py)
and ``ledger new --triton`` (ledger_cli/scaffold_triton.py). Tests that compile are skipped with
the reason where Triton (the ``triton`` extra) or a sandbox is missing."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput
from tests.helpers.ledgers import assert_one_error_line, run_cli
from verify import rebuild
from verify.confine import sandbox_status
from verify.context import Context, Options
from verify.contract import load_contract
from verify.triton_build import DRIVER, driver_command, installed, parse_build, unconfined_env

ROOT = Path(__file__).resolve().parents[2]
TRITON_BUNDLES = ("triton_softmax", "triton_layernorm", "triton_matmul")
SOFTMAX = ROOT / "bundles" / "triton_softmax"
TRITON = installed()
needs_triton = pytest.mark.skipif(TRITON is None, reason="triton is not importable here "
                                  "(the triton extra: scripts/setup.sh --test installs it)")
BWRAP, WHY = sandbox_status()
needs_sandbox = pytest.mark.skipif(BWRAP is None, reason=WHY)


def build_of(name: str) -> list[str]:
    doc = yaml.safe_load((ROOT / "bundles" / name / "contract.yaml").read_bytes())
    return list(doc["kernel"]["build"])


# --- the build argv -------------------------------------------------------------------------


@pytest.mark.parametrize("name", TRITON_BUNDLES)
def test_bundled_builds_parse_and_round_trip(name: str) -> None:
    argv = build_of(name)
    tb = parse_build(argv, f"{name}.ptx", f"{name}.py")
    assert tb.argv() == argv
    assert tb.target == "sm_86" and tb.kernel_file == f"{name}.py"
    assert tb.version and tb.num_warps == 4 and tb.signature


BASE = build_of("triton_softmax")


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["nvcc", *BASE[1:]], "must start with 'triton'"),
        ([*BASE[:-1], "other.ptx"], "must end with -o triton_softmax.ptx"),
        ([*BASE[:3], "--python=/usr/bin/python3", *BASE[3:]], "not a Triton build option"),
        ([b.replace("triton_softmax.py:", "../x.py:") if b.startswith("--kernel") else b
          for b in BASE], "--kernel"),
        ([b.replace("triton_softmax.py:", "other.py:") if b.startswith("--kernel") else b
          for b in BASE], "not the kernel's source"),
        ([b.replace("*fp32", "*float", 1) if b.startswith("--signature") else b for b in BASE],
         "not a Triton type"),
        ([b.replace("=256", "=os.system") if b.startswith("--constexpr") else b for b in BASE],
         "expected NAME=NUMBER"),
        ([b for b in BASE if not b.startswith("--num-warps")], "has no --num-warps"),
        ([b.replace("=4", "=400") if b.startswith("--num-warps") else b for b in BASE],
         "an integer in [1, 32]"),
        ([*BASE[:2], BASE[1], *BASE[2:]], "given twice"),
    ],
)
def test_refused_builds(argv: list[str], why: str) -> None:
    with pytest.raises(BadInput, match=None) as e:
        parse_build(argv, "triton_softmax.ptx", "triton_softmax.py")
    assert why in str(e.value)


def test_contract_reader_and_lint_take_a_triton_build() -> None:
    from verify.contract_lint import _build_problems

    c = load_contract((SOFTMAX / "contract.yaml").read_bytes())
    assert c.kernel is not None and c.kernel.build[0] == "triton"
    assert _build_problems(c.kernel) == []
    other = dataclasses.replace(c.kernel, target="sm_90")
    assert _build_problems(other) == [
        "kernel.build --target=sm_86 does not match kernel.target sm_90"
    ]


# --- rebuild.ptx ----------------------------------------------------------------------------


def rebuild_check(bundle: Path, **opts: object) -> tuple[str, str]:
    ctx = Context(Bundle.from_dir(bundle), Options(**opts))  # type: ignore[arg-type]
    ctx.contract = load_contract((bundle / "contract.yaml").read_bytes())
    try:
        [c] = rebuild.run(ctx)
    finally:
        ctx.close()
    assert c.id == "rebuild.ptx" and c.tool == "triton"
    return c.status, c.detail


@needs_triton
@needs_sandbox
@pytest.mark.parametrize("name", TRITON_BUNDLES)
def test_shipped_triton_bundles_rebuild_byte_for_byte(name: str) -> None:
    status, detail = rebuild_check(ROOT / "bundles" / name)
    assert status == "passed", detail
    assert "equals the bundle's PTX" in detail and "(built at /build/bundle)" in detail


@needs_triton
@needs_sandbox
def test_a_changed_ptx_fails_with_the_first_difference(tmp_path: Path) -> None:
    copy = tmp_path / "b"
    shutil.copytree(SOFTMAX, copy)
    ptx = copy / "triton_softmax.ptx"
    ptx.write_text(ptx.read_text().replace("max.f32", "min.f32", 1))
    status, detail = rebuild_check(copy)
    assert status == "failed"
    assert "differs from the bundle's; first difference at line" in detail
    assert "sealed" not in detail  # a checked bundle may never have been sealed
    assert "min.f32" in detail and "max.f32" in detail


@needs_triton
def test_no_sandbox_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_SANDBOX", "off")
    status, detail = rebuild_check(SOFTMAX)
    assert status == "skipped"
    assert "importing the bundle's Python file: it runs only in a sandbox" in detail


@needs_triton
def test_another_triton_version_is_skipped(tmp_path: Path) -> None:
    copy = tmp_path / "b"
    shutil.copytree(SOFTMAX, copy)
    text = (copy / "contract.yaml").read_text()
    (copy / "contract.yaml").write_text(text.replace("--version=3.", "--version=0.", 1))
    status, detail = rebuild_check(copy)
    assert status == "skipped" and "is installed here" in detail


@needs_triton
@needs_sandbox
def test_the_kernel_file_cannot_read_this_machine(tmp_path: Path) -> None:
    """The bundle's Python runs in bubblewrap: a file outside the bundle is not there to quote."""
    secret = tmp_path / "log.key"
    secret.write_text("PRIVATE+KEY+zQuotedSecretPart\n")
    copy = tmp_path / "b"
    shutil.copytree(SOFTMAX, copy)
    src = copy / "triton_softmax.py"
    src.write_text(f"raise SystemExit(open({str(secret)!r}).read())\n" + src.read_text())
    status, detail = rebuild_check(copy)
    assert status == "failed" and "no PTX written" in detail
    assert "zQuotedSecretPart" not in detail
    assert "No such file" in detail or "FileNotFoundError" in detail


@needs_triton
def test_two_compiles_in_different_directories_give_the_bundled_bytes(tmp_path: Path) -> None:
    """Reproducible: no line information (paths), a fresh cache each time, unconfined here and
    in the sandbox (rebuild test above) alike."""
    tb = parse_build(BASE, "triton_softmax.ptx", "triton_softmax.py")
    assert TRITON is not None
    outs = []
    for d in ("one", "two/deeper"):
        work = tmp_path / d
        work.mkdir(parents=True)
        shutil.copy(SOFTMAX / "triton_softmax.py", work)
        res = subprocess.run(
            driver_command(tb, TRITON[0], str(DRIVER)), cwd=work, capture_output=True,
            text=True, check=False, env=unconfined_env(work / ".cache"),
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        outs.append((work / "triton_softmax.ptx").read_bytes())
    assert outs[0] == outs[1] == (SOFTMAX / "triton_softmax.ptx").read_bytes()
    assert b".file" not in outs[0] and str(tmp_path).encode() not in outs[0]


# --- ledger new --triton --------------------------------------------------------------------


@needs_triton
def test_ledger_new_triton_scaffolds_the_bundle(tmp_path: Path) -> None:
    out = tmp_path / "nb"
    res = run_cli("new", str(out), "--triton",
                  str(ROOT / "kernels/triton_softmax/triton_softmax.py") + ":softmax_kernel",
                  "--signature", "*fp32,*fp32,i32,i32,i32",
                  "--constexpr", "BLOCK_SIZE=256")  # fmt: skip
    assert res.returncode == 0, res.stderr
    ptx = (out / "triton_softmax.ptx").read_bytes()
    assert ptx == (SOFTMAX / "triton_softmax.ptx").read_bytes()
    c = load_contract((out / "contract.yaml").read_bytes())
    k = c.kernel
    assert k is not None and k.entry == "softmax_kernel" and k.source == "triton_softmax.py"
    assert list(k.build) == BASE
    names = [p.name for p in k.params]
    assert names == ["output_ptr", "input_ptr", "input_row_stride", "output_row_stride",
                     "n_cols", "global_scratch", "profile_scratch"]  # fmt: skip
    assert k.launch is not None and k.launch.block == ("128", "1", "1")
    assert k.launch.shared_bytes == "16"
    assert "LEDGER-NEW: UNFINISHED" in (out / "contract.yaml").read_text()


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--triton", "nope.py:k", "--signature", "i32"], "no such regular file"),
        (["--triton", "kernels/triton_softmax/triton_softmax.py:nope", "--signature", "i32"],
         "no function 'nope'"),
        (["--triton", "kernels/triton_softmax/triton_softmax.py", "--signature", "i32"],
         "expected FILE.py:KERNEL"),
        (["--cu", "x.cu", "--triton", "x.py:k"], "exactly one of --cu"),
    ],
)
def test_ledger_new_triton_bad_input(tmp_path: Path, args: list[str], why: str) -> None:
    res = run_cli("new", str(tmp_path / "nb"), *args)
    assert why in assert_one_error_line(res, 2)
    assert not (tmp_path / "nb").exists()


@needs_triton
def test_ledger_new_triton_signature_count_is_checked(tmp_path: Path) -> None:
    res = run_cli("new", str(tmp_path / "nb"), "--triton",
                  "kernels/triton_softmax/triton_softmax.py:softmax_kernel",
                  "--signature", "*fp32,i32", "--constexpr", "BLOCK_SIZE=256")  # fmt: skip
    line = assert_one_error_line(res, 2)
    assert "--signature gives 2 types for 5 runtime parameters" in line


@needs_triton
@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["--constexpr", "BLOCK_SIZE"], "--constexpr 'BLOCK_SIZE': expected NAME=VALUE"),
        (["--constexpr", "BLOCK_SIZE=256", "--num-warps", "0"], "an integer in [1, 32]"),
        (["--constexpr", "BLOCK_SIZE=100"], "Triton failed: arange's range must be a power of 2"),
    ],
)
def test_ledger_new_triton_refuses_bad_options(tmp_path: Path, extra: list[str],
                                               why: str) -> None:
    res = run_cli("new", str(tmp_path / "nb"), "--triton",
                  "kernels/triton_softmax/triton_softmax.py:softmax_kernel",
                  "--signature", "*fp32,*fp32,i32,i32,i32", *extra)  # fmt: skip
    assert why in assert_one_error_line(res, 2)
    assert not (tmp_path / "nb").exists()


def test_without_triton_the_rebuild_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A verifier without the triton extra (scripts/setup.sh, scripts/demo.sh) says so."""
    import verify.rebuild_triton as rt

    monkeypatch.setattr(rt, "installed", lambda: None)
    status, detail = rebuild_check(SOFTMAX)
    assert status == "skipped" and "Triton is not installed beside the verifier" in detail
