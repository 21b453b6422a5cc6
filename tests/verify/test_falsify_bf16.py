"""bf16 as a contract element type (issue 32): a contract with ``ptr: bf16`` loads, lints and
schema-checks; inputs are real bf16 values inside the range (never arbitrary bit patterns: no
NaN, Inf or 3e38 from a range of -4 .. 4); outputs are compared in bf16 terms (one ulp is one
step of the bf16 encoding, not 255 in a low byte); and a kernel built by the real nvcc
(tests/fixtures/bf16/axpy_bf16.cu, ``typedef __nv_bfloat16 floatX``) passes at 0 ulp while its
twin that rounds toward zero fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.nvcc import build_ptx
from verify import bfloat16
from verify.compare import compare_output
from verify.contract import load_contract
from verify.contract_lint import schema_errors
from verify.falsify import InterpreterEngine, edge_values, random_values, run_test
from verify.model import Tolerance
from verify.references import REFERENCES

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "bf16"

CONTRACT = """
metadata: {version: "1.0.0", description: "bf16 axpy"}
equations:
  axpy: {formula: "y_i = bf16(alpha * x_i + y_i)"}
proof_obligations:
  - {type: invariant, property: "rounded once to nearest even"}
kernel:
  name: axpy_bf16
  version: "1.0.0"
  entry: ENTRY
  ptx: axpy_bf16.ptx
  reference: test_axpy_bf16
  params:
    - {name: x, ptr: bf16, intent: in, shape: [n]}
    - {name: y, ptr: bf16, intent: inout, shape: [n]}
    - {name: alpha, scalar: f32, value: random}
    - {name: n, scalar: s32, value: n}
  launch: {grid: ["ceil_div(n, 128)", 1, 1], block: [128, 1, 1]}
  size_domain:
    n: {min: 1, max: 4096}
falsification_tests:
  - id: FALSIFY-AXPY-BF16-001
    rule: "matches reference"
    prediction: "y == bf16(fma(alpha, x, y)) exactly (0 ulp)"
    sizes: [{n: 1}, {n: 1000}]
    seed: 3
    inputs: {low: -4.0, high: 4.0}
    tolerance: {ulp: 0}
    properties: [reference, coverage, bounds]
"""


def axpy_reference(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """The kernel's float arithmetic: one fma in float32 (exact in float64, rounded once)."""
    x, y = inputs["x"], inputs["y"]
    assert x.dtype == np.float32 and y.dtype == np.float32  # bf16 inputs arrive as values
    f = (np.float64(inputs["alpha"]) * x.astype(np.float64) + y.astype(np.float64))
    return {"y": f.astype(np.float32)}


def test_contract_with_bf16_loads_and_fits_the_schema() -> None:
    import yaml
    text = CONTRACT.replace("ENTRY", "axpy_bf16")
    c = load_contract(text.encode())
    assert c.kernel is not None
    assert [p.dtype for p in c.kernel.params] == ["bf16", "bf16", "f32", "s32"]
    assert schema_errors(yaml.safe_load(text)) == []


def test_inputs_are_bf16_values_inside_the_range() -> None:
    bits = random_values(np.random.default_rng(1), "bf16", 20000, -4.0, 4.0)
    assert bits.dtype == np.uint16
    v = bfloat16.decode(bits)
    assert np.isfinite(v).all() and v.min() >= -4.0 and v.max() <= 4.0
    assert np.unique(bits).size > 1000  # real draws, not a handful of patterns
    edges = bfloat16.decode(edge_values("bf16", -4.0, 4.0))
    assert edges.tolist() == [4.0, 0.0, -0.0, -4.0]
    assert np.signbit(edges[2])


def test_tolerance_is_in_bf16_ulps_not_bytes() -> None:
    got = np.array([0x3F80, 0x3F80, 0x4000], np.uint16)  # 1.0, 1.0, 2.0
    want = np.array([bfloat16.decode(np.uint16(0x3F7F)).item(), 1.0, 2.0])  # 1 ulp below 1.0
    c = compare_output("y", got, want, "bf16", Tolerance(ulp=1))
    assert c.bad == 0 and c.max_ulp == 1.0  # the low byte differs by 0x81, the value by 1 ulp
    c0 = compare_output("y", got, want, "bf16", Tolerance(ulp=0))
    assert c0.bad == 1 and "y[0]: got 1.0" in c0.first and "(1 ulp)" in c0.first
    # abs / rel on the decoded value
    c_abs = compare_output("y", got, want, "bf16", Tolerance(abs=0.004))
    assert c_abs.bad == 0
    # a reference value between two bf16s is rounded to nearest even first
    near = compare_output("y", np.array([0x3F80], np.uint16), np.array([1.0 + 2**-9]), "bf16",
                          Tolerance(ulp=0))
    assert near.bad == 0


def test_encode_rounds_once_to_nearest_even() -> None:
    x = np.array([1.0 + 2**-8, 1.0 + 2**-8 + 2**-30, 1.0 + 3 * 2**-8, 3.4e38, -0.0, np.nan])
    assert [hex(int(b)) for b in bfloat16.encode(x)] == [
        "0x3f80", "0x3f81", "0x3f82", "0x7f80", "0x8000", "0x7fc0"]


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return build_ptx(FIX / "axpy_bf16.cu", tmp_path_factory.mktemp("bf16"))


@pytest.mark.parametrize(("entry", "status"), [("axpy_bf16", "passed"),
                                               ("axpy_bf16_rz", "failed")])
def test_nvcc_bf16_kernel_and_its_twin(ptx: bytes, entry: str, status: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REFERENCES, "test_axpy_bf16", axpy_reference)
    c = load_contract(CONTRACT.replace("ENTRY", entry).encode())
    assert c.kernel is not None
    check = run_test(c.kernel, c.falsification[0], ptx, 3, InterpreterEngine(), run_seed=5)
    assert check.status == status, check.detail
    if status == "failed":
        assert "ulp" in check.detail and "elements of y outside 0 ulp" in check.detail


def test_cupy_path_with_a_fake_device(ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify.gpu passes bf16 buffers as their uint16 bits and scalars through ``cast_to`` (a
    bf16 scalar as its bit pattern). No GPU here: the fake CuPy of tests/verify/test_falsify.py
    runs the PTX with the interpreter."""
    import sys
    from typing import Any

    from tests.verify.test_falsify import FakeDeviceArray, FakeKernel, fake_cupy
    from verify import gpu
    from verify.compare import cast_to

    seen: list[tuple[Any, ...]] = []
    original = FakeKernel.__call__

    def record(self: FakeKernel, grid: Any, block: Any, args: tuple[Any, ...],
               shared_mem: int = 0) -> None:
        seen.append(args)
        original(self, grid, block, args, shared_mem)

    monkeypatch.setattr(FakeKernel, "__call__", record)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(1))
    monkeypatch.setitem(REFERENCES, "test_axpy_bf16", axpy_reference)
    engine, why = gpu.probe()
    assert engine is not None, why
    c = load_contract(CONTRACT.replace("ENTRY", "axpy_bf16").encode())
    assert c.kernel is not None
    check = run_test(c.kernel, c.falsification[0], ptx, 3, engine, run_seed=5)
    assert check.status == "passed", check.detail
    assert check.detail.startswith("cupy 99.0 on Fake GPU 9000 (GPU)")
    x, y, alpha, n = seen[0]
    assert isinstance(x, FakeDeviceArray) and x.host.dtype == np.uint16
    assert isinstance(y, FakeDeviceArray) and y.host.dtype == np.uint16
    assert isinstance(alpha, np.float32) and isinstance(n, np.int32)
    bits = cast_to("bf16", [1.5])
    assert bits.dtype == np.uint16 and int(bits[0]) == 0x3FC0
