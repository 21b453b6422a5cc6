"""The kernel author's loop (issue 34), through the real CLI with real nvcc and ptxas:
``ledger new --nvcc-flag`` recorded in ``kernel.build`` and honoured by ``rebuild.ptx``;
``ledger rebuild DIR`` after an edit of the ``.cu``; the scaffold's register headroom; extra size
variables (``--size``) and every integer scalar as a size; the elements per thread read from the
source; the idle-block warning of ``contract.lint`` under ``ledger check``'s verdict
(tests/verify/test_idle.py tests the rule); a usage error naming the subcommand's ``--help``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ledger_cli.scaffold import per_thread, register_budget
from tests.helpers.ledgers import assert_one_error_line, cli_json, run_cli
from verify.confine import sandbox_status
from verify.tools import find_tool

needs_nvcc = pytest.mark.skipif(find_tool("nvcc", cuda=True) is None, reason="no nvcc")
BWRAP, WHY = sandbox_status()
needs_sandbox = pytest.mark.skipif(BWRAP is None, reason=WHY)

SCALE = """__global__ void scale(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
"""

QUAD = """__global__ void quad(const float* x, float* y, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  for (int k = 0; k < 4; ++k)
    if (i + k < n) y[i + k] = 2.0f * x[i + k];
}
"""


def _new(tmp: Path, src: str, name: str, *extra: str) -> tuple[Path, dict[str, object]]:
    cu = tmp / f"{name}.cu"
    cu.write_text(src)
    out = cli_json("new", str(tmp / name), "--cu", str(cu), *extra)
    return tmp / name, out


def _checks(d: Path) -> dict[str, dict[str, str]]:
    rep = cli_json("check", str(d), "--no-gpu", ok=(0, 1))
    return {c["id"]: c for c in rep["checks"]}


def test_register_budget() -> None:
    assert register_budget(30) == 40  # 30 + 8 = 38 -> 40
    assert register_budget(8) == 16
    assert register_budget(1) == 8
    assert register_budget(250) == 255
    assert register_budget(255) == 255
    assert all(register_budget(r) >= r + 1 for r in range(1, 255))


def test_per_thread_from_source() -> None:
    assert per_thread(SCALE) == 1
    assert per_thread(QUAD) == 4
    assert per_thread("int t = threadIdx.x + blockIdx.x * blockDim.x; int i = t * 2;") == 2
    assert per_thread("int i = (blockIdx.x * blockDim.x + threadIdx.x) << 3;") == 8
    assert per_thread("int i = 1000 * (blockIdx.x * blockDim.x + threadIdx.x);") == 1


@needs_nvcc
@needs_sandbox
def test_flags_headroom_and_rebuild(tmp_path: Path) -> None:
    d, out = _new(
        tmp_path,
        SCALE,
        "scale",
        "--nvcc-flag",
        "-use_fast_math",
        "--nvcc-flag",
        "-DN=4",
        "--nvcc-flag",
        "-lineinfo",
    )
    res = out["resources"]
    assert isinstance(res, dict) and res["max_registers"] == register_budget(res["registers"])
    doc = yaml.safe_load((d / "contract.yaml").read_text())
    assert doc["kernel"]["build"] == [
        "nvcc",
        "-arch=sm_86",
        "-ptx",
        "-use_fast_math",
        "-DN=4",
        "-lineinfo",
        "-o",
        "scale.ptx",
        "scale.cu",
    ]
    assert doc["kernel"]["resources"]["max_registers"] == res["max_registers"]
    assert "budget leaves headroom" in (d / "contract.yaml").read_text()
    assert '.file\t1 "/build/bundle/scale.cu"' in (d / "scale.ptx").read_text()
    st = _checks(d)
    assert st["rebuild.ptx"]["status"] == "passed", st["rebuild.ptx"]["detail"]

    # the plain summary says the headroom
    plain = run_cli("new", str(tmp_path / "again"), "--cu", str(tmp_path / "scale.cu"))
    assert plain.returncode == 0 and "+25 % headroom" in plain.stdout

    # nothing to do: unchanged
    same = cli_json("rebuild", str(d))
    assert same["changed"] is False
    # edit the source: the check says what to run, `ledger rebuild` refreshes the PTX
    (d / "scale.cu").write_text(SCALE.replace("a * x[i]", "a * x[i] + 1.0f"))
    st = _checks(d)
    assert st["rebuild.ptx"]["status"] == "failed"
    assert "run `ledger rebuild DIR`" in st["rebuild.ptx"]["detail"]
    before = (d / "scale.ptx").read_bytes()
    got = cli_json("rebuild", str(d))
    assert got["changed"] is True and got["build"] == doc["kernel"]["build"]
    assert "first difference at line" in str(got["difference"])
    assert (d / "scale.ptx").read_bytes() != before
    assert _checks(d)["rebuild.ptx"]["status"] == "passed"
    text = run_cli("rebuild", str(d))
    assert text.returncode == 0 and "scale.ptx unchanged" in text.stdout
    # the plain output names the two sides old and new
    (d / "scale.cu").write_text(SCALE.replace("a * x[i]", "a * x[i] - 1.0f"))
    text = run_cli("rebuild", str(d))
    assert text.returncode == 0 and "rewrote scale.ptx" in text.stdout, text.stderr
    assert re.search(r"  first difference at line \d+: old '.*', new '", text.stdout), text.stdout


@needs_nvcc
def test_refused_flags_and_rebuild_bad_input(tmp_path: Path) -> None:
    cu = tmp_path / "scale.cu"
    cu.write_text(SCALE)
    for flag, want in (
        ("-Xcompiler=-fPIC", "not allowed in a rebuild"),
        ("--output-file=/tmp/x.ptx", "--nvcc-flag: kernel.build"),
        ("-I/usr/include", "bad value"),
        ("-G", "embeds absolute paths"),
    ):
        line = assert_one_error_line(
            run_cli("new", str(tmp_path / "b"), "--cu", str(cu), f"--nvcc-flag={flag}"), 2
        )
        assert want in line, line
        assert not (tmp_path / "b").exists()
    line = assert_one_error_line(run_cli("rebuild", str(tmp_path / "nope")), 2)
    assert "not a bundle directory" in line
    (tmp_path / "empty").mkdir()
    line = assert_one_error_line(run_cli("rebuild", str(tmp_path / "empty")), 2)
    assert "no contract.yaml" in line


@needs_nvcc
@needs_sandbox
def test_rebuild_compile_error_changes_nothing(tmp_path: Path) -> None:
    d, _ = _new(tmp_path, SCALE, "scale")
    before = (d / "scale.ptx").read_bytes()
    (d / "scale.cu").write_text(SCALE.replace("a * x[i]", "a * undefined_name"))
    line = assert_one_error_line(run_cli("rebuild", str(d)), 2)
    assert "no PTX written" in line and "undefined_name" in line
    assert (d / "scale.ptx").read_bytes() == before


@needs_nvcc
def test_extra_sizes_and_per_thread_launch(tmp_path: Path) -> None:
    d, out = _new(tmp_path, QUAD, "quad", "--size", "cols")
    doc = yaml.safe_load((d / "contract.yaml").read_text())
    k = doc["kernel"]
    assert k["launch"]["grid"][0] == "ceil_div(n, 1024)"  # 4 elements per thread, block 256
    assert k["size_domain"]["cols"] == {"min": 1, "max": 1048576}
    assert doc["falsification_tests"][0]["sizes"][0] == {"n": 1, "cols": 1}
    todo = out["todo"]
    assert isinstance(todo, list) and any("size cols" in t for t in todo)
    text = (d / "contract.yaml").read_text()
    assert "# TODO: its domain; name it in the shape" in text
    line = assert_one_error_line(
        run_cli("new", str(tmp_path / "c"), "--cu", str(tmp_path / "quad.cu"), "--size", "n"), 2
    )
    assert "--size n: already a kernel parameter" in line


ROWSCALE = """// y[i] = x[i] * s[i % cols] for i < total
__global__ void rowscale(const float* x, const float* s, float* y, int total, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] * s[i % cols];
}
"""


@needs_nvcc
@needs_sandbox
def test_every_integer_scalar_is_a_declared_and_bound_size(tmp_path: Path) -> None:
    """A second integer scalar (``cols``) is a size like the first: declared in the size domain
    with a TODO, bound in the test sizes, carried by the Futhark stub; with its shape named and
    the TODOs done, ``ledger check`` runs the kernel at both sizes."""
    d, out = _new(tmp_path, ROWSCALE, "rowscale")
    text = (d / "contract.yaml").read_text()
    doc = yaml.safe_load(text)
    k = doc["kernel"]
    assert k["size_domain"] == {"total": {"min": 1, "max": 1048576},
                                "cols": {"min": 1, "max": 1048576}}  # fmt: skip
    assert doc["falsification_tests"][0]["sizes"][3] == {"total": 775, "cols": 775}
    assert "cols: {min: 1, max: 1048576}  # TODO: its domain" in text
    assert re.search(r"\{name: cols, scalar: s32, value: cols\}  # TODO: a second size", text)
    assert 'value: "rows * cols"' in text
    todo = out["todo"]
    assert isinstance(todo, list) and any("size cols" in t for t in todo)
    fut = (d / "rowscale.fut").read_text()
    assert "entry rowscale [total] (x: [total]f32) (s: [total]f32) (cols: i32) : [total]f32" in fut
    assert "make it a size parameter [cols]" in fut

    # filled in: s has cols elements, the reference, every TODO gone, cols bound small
    text = "\n".join(text.splitlines()[2:]) + "\n"
    text = text.replace("{name: s, ptr: f32, intent: in, shape: [total]}",
                        "{name: s, ptr: f32, intent: in, shape: [cols]}")  # fmt: skip
    text = re.sub(r"\s+# TODO\b.*$", "", text, flags=re.M)
    text = re.sub(r"sizes: \[.*\]", "sizes: [{total: 1, cols: 1}, {total: 775, cols: 3}]", text)
    (d / "contract.yaml").write_text(text)
    (d / "reference.py").write_text(
        "import numpy as np\n\n\ndef rowscale(inputs, sizes):\n"
        '    t, c = sizes["total"], sizes["cols"]\n'
        '    x, s = inputs["x"].astype(np.float64), inputs["s"].astype(np.float64)\n'
        '    return {"y": x[:t] * s[np.arange(t) % c]}\n'
    )
    f = _checks(d)["falsify.FALSIFY-ROWSCALE-001"]
    assert f["status"] == "passed", f["detail"]
    assert "total=1,cols=1; total=775,cols=3; seed 1; chosen (total,cols)=" in f["detail"]


def test_check_prints_the_idle_warning_under_the_verdict(tmp_path: Path) -> None:
    """The idle-block warning of contract.lint is a passed check's detail, so ``ledger check``
    also prints it as a ``warning:`` line under the verdict, where a reader sees it."""
    import shutil

    d = tmp_path / "saxpy"
    root = Path(__file__).resolve().parents[2] / "bundles" / "saxpy"
    shutil.copytree(root, d, ignore=shutil.ignore_patterns("ledger-receipt*"))
    text = (d / "contract.yaml").read_text()
    (d / "contract.yaml").write_text(text.replace('grid: ["ceil_div(n, 256)"',
                                                  'grid: ["ceil_div(n, 128)"'))  # fmt: skip
    r = run_cli("check", str(d), "--no-gpu")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("verdict: "))
    warns = [ln for ln in lines[at + 1 :] if ln.startswith("warning: ")]
    assert warns and all("whole blocks never touch an output" in w for w in warns), lines[at:]
    assert "warning: contract.lint: at FALSIFY-SAXPY-001" in warns[0], warns[0]
    as_shipped = run_cli("check", str(root), "--no-gpu")
    assert as_shipped.returncode == 0 and "\nwarning: " not in as_shipped.stdout


def test_usage_error_names_subcommand_help() -> None:
    r = run_cli("new", "--no-such-option")
    assert r.returncode == 2
    assert "ledger new --help" in r.stderr, r.stderr


@needs_nvcc
@needs_sandbox
def test_per_thread_launch_covers_every_element(tmp_path: Path) -> None:
    """The scaffold's grid for a 4-elements-per-thread kernel (ceil_div(n, 1024)) launches
    enough threads and no 4x surplus: the falsification test (coverage: each element written
    once) passes at the scaffold's edge sizes with the author's reference filled in."""
    d, _ = _new(tmp_path, QUAD, "quad")
    (d / "reference.py").write_text(
        "import numpy as np\n\n\ndef quad(inputs, sizes):\n"
        '    return {"y": 2.0 * inputs["x"].astype(np.float64)[: sizes["n"]]}\n'
    )
    st = _checks(d)
    f = st["falsify.FALSIFY-QUAD-001"]
    assert f["status"] == "passed", f["detail"]
    assert "n=1,1023,1025,3079" in f["detail"]
    assert "warning:" not in st["contract.lint"]["detail"]
