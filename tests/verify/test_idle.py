"""verify/idle.py: the idle-block warning of contract.lint (issue 34): 1-D and 2-D launches with
whole blocks that never touch an output at the author's and the verifier's sizes, a 2x
over-launch included; none for the shipped bundles, the real kernels of corpus/real and the
test fixtures (tiled, block-per-row, warp-per-row and grid-stride launches); a warning, never a
failure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.core.bundle import read_dir
from verify.contract import load_contract
from verify.contract_lint import lint_check
from verify.idle import idle_blocks, idle_warnings

ROOT = Path(__file__).resolve().parents[2]


def _contract(grid: str, shapes: str = "[n]", block: str = "[256, 1, 1]",
              params: str = "", sizes: str = "[{n: 1}, {n: 255}, {n: 257}, {n: 775}]",
              domain: str = "{n: {min: 1, max: 4096}}") -> bytes:
    return f"""metadata: {{version: "1", description: "t", references: [k.cu]}}
equations: {{k: {{formula: "y = x"}}}}
proof_obligations: []
kernel:
  name: k
  version: "1"
  entry: k
  ptx: k.ptx
  params:
    - {{name: y, ptr: f32, intent: out, shape: {shapes}}}
{params}    - {{name: n, scalar: s32, value: n}}
  launch: {{grid: {grid}, block: {block}, shared_bytes: 0}}
  size_domain: {domain}
falsification_tests:
  - id: FALSIFY-K-001
    rule: r
    prediction: p
    test: t
    if_fails: f
    sizes: {sizes}
    seed: 1
    inputs: {{low: -1.0, high: 1.0}}
    tolerance: {{ulp: 0}}
    properties: [coverage]
""".encode()


def _warn(grid: str, **kw: str) -> list[str]:
    return idle_warnings(load_contract(_contract(grid, **kw)))


def test_one_thread_per_element_is_no_warning() -> None:
    assert _warn('["ceil_div(n, 256)", 1, 1]') == []
    assert _warn('["(n + 255) // 256", 1, 1]') == []


def test_four_times_the_blocks_warns() -> None:
    got = _warn('["ceil_div(n, 64)", 1, 1]')
    assert any(w.startswith("at FALSIFY-K-001 sizes[3] (n=775) the launch runs 13 blocks of 256 "
                            "threads for at most 775 elements per buffer, which 4 blocks cover")
               for w in got), got
    assert any("the domain's maximum of n (n=4096)" in w for w in got)
    assert all("whole blocks never touch an output" in w for w in got)
    assert not any("sizes[0]" in w for w in got)  # one block rounding n=1 up is no waste


def test_twice_the_blocks_warns() -> None:
    """A 2x over-launch has whole idle blocks too (the first rule let it pass)."""
    got = _warn('["ceil_div(n, 128)", 1, 1]')
    assert any("sizes[3] (n=775) the launch runs 7 blocks of 256 threads" in w for w in got), got
    assert any("sizes[1] (n=255) the launch runs 2 blocks" in w for w in got), got


def test_several_elements_per_thread_is_no_warning() -> None:
    # a buffer larger than the thread count (4 elements per thread) fills every block
    assert _warn('["ceil_div(n, 64)", 1, 1]', shapes="[4 * n]") == []
    # a grid of fewer blocks than one thread per element needs
    assert _warn('["ceil_div(n, 1024)", 1, 1]') == []


TWO_D = dict(shapes="[rows, cols]", block="[16, 16, 1]",
             sizes="[{rows: 1, cols: 1}, {rows: 17, cols: 17}, {rows: 300, cols: 40}]",
             domain="{rows: {min: 1, max: 1024}, cols: {min: 1, max: 1024}}")


def _two_d(grid: str, **kw: str) -> list[str]:
    text = _contract(grid, **{**TWO_D, **kw}).decode()
    text = text.replace("    - {name: n, scalar: s32, value: n}\n",
                        "    - {name: rows, scalar: s32, value: rows}\n"
                        "    - {name: cols, scalar: s32, value: cols}\n")
    return idle_warnings(load_contract(text.encode()))


def test_two_d_launch_over_rows_warns() -> None:
    # 17 x 17 in 16 x 16 blocks: 2 x 2 blocks, each touches an element: no warning
    assert _two_d('["ceil_div(cols, 16)", "ceil_div(rows, 16)", 1]') == []
    got = _two_d('["ceil_div(cols, 16)", "ceil_div(rows, 4)", 1]')
    assert any("sizes[2] (rows=300, cols=40) the launch runs 3 x 75 blocks of 16 x 16 threads "
               "for at most 40 x 300 elements per buffer, which 3 x 19 blocks cover" in w
               for w in got), got
    assert any("sizes[1] (rows=17, cols=17) the launch runs 2 x 5 blocks" in w for w in got)
    assert not any("sizes[0]" in w for w in got)  # 1 x 1: one block, not idle


def test_tiles_rows_and_grid_stride_are_not_judged() -> None:
    # a tile of 32 x 32 elements per 32 x 8 threads (transpose), a block per row, a fixed grid
    assert _two_d('["ceil_div(cols, 32)", "ceil_div(rows, 32)", 1]', block="[32, 8, 1]") == []
    assert _two_d('[rows, 1, 1]', block="[256, 1, 1]") == []
    assert _warn('[64, 1, 1]') == []
    # a warp per row: the output has an axis (cols) the grid does not count
    assert _two_d('["ceil_div(rows, 4)", 1, 1]', block="[128, 1, 1]") == []


@pytest.mark.parametrize("path", sorted(ROOT.glob("bundles/*/contract.yaml"))
                         + sorted(ROOT.glob("corpus/real/*/contract.yaml"))
                         + sorted(ROOT.glob("tests/fixtures/planted/*/contract.yaml")),
                         ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_no_warning_on_shipped_and_real_kernels(path: Path) -> None:
    """corpus/real/layernorm_forward3 (a warp per row, grid ceil_div(N, 4)) warned under the
    first rule at the corner C = 1; no shipped or real kernel warns now."""
    assert idle_warnings(load_contract(path.read_bytes())) == []


def test_idle_blocks_names_the_dimensions() -> None:
    c = load_contract(_contract('["ceil_div(n, 64)", 1, 1]'))
    assert c.kernel is not None
    hit = idle_blocks(c.kernel, {"n": 775})
    assert hit is not None and (hit.blocks, hit.threads, hit.needed) == ((13,), (256,), (4,))
    assert idle_blocks(c.kernel, {"n": 1}) is None


def test_warning_passes_lint() -> None:
    """A warning, never a failure: bundles/saxpy with a launch of 4x the threads still passes
    every gate, and the detail says so."""
    files = read_dir(ROOT / "bundles" / "saxpy")
    assert lint_check(load_contract(files["contract.yaml"]), files).status == "passed"
    text = files["contract.yaml"].decode()
    wide = re.sub(r'grid: \["ceil_div\(n, 256\)"', 'grid: ["ceil_div(n, 64)"', text)
    assert wide != text
    files = {**files, "contract.yaml": wide.encode()}
    check = lint_check(load_contract(wide.encode()), files)
    assert check.status == "passed", check.detail
    assert "gates passed:" in check.detail and "; warning: at " in check.detail
    assert "whole blocks never touch an output" in check.detail
