"""``ledger new`` element types (issue 32): ``__nv_bfloat16`` is ``bf16`` (also through a
``typedef``, and from the mangled entry name ``P13__nv_bfloat16`` when the source's type is a
template parameter or an alias the scaffold cannot see), with shape ``[n]`` (never ``u8`` of
``2 * n``); ``__half`` is ``f16``; an unknown element type is a clear TODO, never "f32 assumed".
Real nvcc builds each scaffold's PTX."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_cli.scaffold import _mangled_params, _typedefs, new_bundle
from verify.contract import load_contract
from verify.tools import find_tool

needs_nvcc = pytest.mark.skipif(find_tool("nvcc", cuda=True) is None, reason="no nvcc")

BF16 = """#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
__global__ void scale(const floatX* x, floatX* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(a * __bfloat162float(x[i]));
}
"""

TEMPLATE = """#include <cuda_bf16.h>
template <typename T> __global__ void copy(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
template __global__ void copy<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int);
"""

HALF = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void mix(const __half* x, const __nv_bfloat162* z, __half* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __hadd(x[i], __low2half(__float22half2_rn(__bfloat1622float2(z[i]))));
}
"""

UNKNOWN = """struct pair { float a, b; };
extern "C" __global__ void first(const pair* p, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = p[i].a;
}
"""


def scaffold(tmp_path: Path, src: str, name: str = "k.cu") -> tuple[dict[str, tuple[str, str]],
                                                                      list[str], str]:
    cu = tmp_path / name
    cu.write_text(src)
    sc = new_bundle(tmp_path / "bundle", cu)
    text = (tmp_path / "bundle" / "contract.yaml").read_text()
    c = load_contract(text.encode())
    assert c.kernel is not None
    params = {p.name: (p.dtype, ",".join(p.shape)) for p in c.kernel.params}
    return params, sc.todo, text


def test_mangled_parameter_types() -> None:
    assert _mangled_params("_Z2k1PK13__nv_bfloat16PS_fi") == [
        ("__nv_bfloat16", 1), ("__nv_bfloat16", 1), ("float", 0), ("int", 0)]
    assert _mangled_params("_Z4copyI13__nv_bfloat16EvPKT_PS1_i") == [
        ("__nv_bfloat16", 1), ("__nv_bfloat16", 1), ("int", 0)]
    assert _mangled_params("_Z4axpyIdEvT_PKS0_PS0_i")[1] == ("double", 1)
    assert _mangled_params("vector_add") == []
    assert _mangled_params("_Z1kPN3foo3barE") == []  # not understood: nothing, not a guess


def test_typedefs() -> None:
    assert _typedefs("typedef __nv_bfloat16 floatX;\nusing idx = unsigned int; // x\n") == {
        "floatX": "__nv_bfloat16", "idx": "unsigned int"}


@needs_nvcc
def test_bf16_through_a_typedef(tmp_path: Path) -> None:
    params, todo, text = scaffold(tmp_path, BF16)
    assert params["x"] == ("bf16", "n") and params["y"] == ("bf16", "n")
    assert params["a"][0] == "f32"
    assert "f32 assumed" not in text and not any("unknown" in t for t in todo)


@needs_nvcc
def test_bf16_template_from_the_mangled_name(tmp_path: Path) -> None:
    params, _, _ = scaffold(tmp_path, TEMPLATE)
    assert params["x"] == ("bf16", "n") and params["y"] == ("bf16", "n")


@needs_nvcc
def test_half_and_bf16_vectors(tmp_path: Path) -> None:
    params, _, _ = scaffold(tmp_path, HALF)
    assert params["x"] == ("f16", "n") and params["y"] == ("f16", "n")
    assert params["z"] == ("bf16", "2 * n")


@needs_nvcc
def test_unknown_element_type_is_a_clear_todo(tmp_path: Path) -> None:
    params, todo, text = scaffold(tmp_path, UNKNOWN)
    assert params["y"] == ("f32", "n")
    assert any("element type pair is unknown here: set ptr:" in t for t in todo)
    assert "f32 assumed" not in text and "TODO: TODO" not in text
