"""The verifier's trusted reference registry (SPEC 8, ``falsify.<TEST-ID>``; issue 4).

A contract names its reference (``kernel.reference``); the falsification runner looks the name up
here and compares the kernel's outputs with what the reference computes from the same inputs.
References are code the verifier trusts, so they live here and never come from a bundle.

Each reference takes the kernel's inputs by parameter name (numpy arrays, any shape with the
element count the contract gives) and the size bindings of the test, and returns the kernel's
outputs by parameter name, shaped as in the contract and in the output parameter's dtype.
Floating-point results are computed in float64 (the better truth) and cast once; the f16
conversion uses numpy's float32 -> float16 cast, which rounds to nearest even.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

# numpy is imported by the functions that compute, not with the registry: ``contract.lint`` reads
# only the registry's names, and numpy is a sixth of ``ledger verify``'s imports
if TYPE_CHECKING:
    import numpy as np

    Inputs = Mapping[str, np.ndarray]  # the kernel's input arrays by parameter name
    Sizes = Mapping[str, int]  # the test's size bindings
    Outputs = dict[str, np.ndarray]  # the kernel's output arrays by parameter name
    Reference = Callable[[Inputs, Sizes], Outputs]

DOT_BLOCK = 256  # threads per block of kernels/dot_shfl: one partial per block


def _f64(x: np.ndarray, *shape: int) -> np.ndarray:
    import numpy as np

    return np.asarray(x, dtype=np.float64).reshape(shape)


def _to_f32(x: np.ndarray) -> np.ndarray:
    import numpy as np

    with np.errstate(over="ignore"):  # overflow to inf is the IEEE result, not an error
        return x.astype(np.float32)


def vector_add_f32(inputs: Inputs, sizes: Sizes) -> Outputs:
    """``c[i] = a[i] + b[i]``: the float64 sum of two f32 values rounds to the f32 sum exactly."""
    n = sizes["n"]
    return {"c": _to_f32(_f64(inputs["a"], n) + _f64(inputs["b"], n))}


def f32_to_f16_rne(inputs: Inputs, sizes: Sizes) -> Outputs:
    """``y[i] = f16(x[i])``, round to nearest even, overflow to inf, f16 subnormals kept."""
    import numpy as np

    n = sizes["n"]
    x = np.asarray(inputs["x"], dtype=np.float32).reshape(n)
    with np.errstate(over="ignore"):
        return {"y": x.astype(np.float16)}


def dot_partials_f32_b256(inputs: Inputs, sizes: Sizes) -> Outputs:
    """``out[j]`` = sum of ``a[i] * b[i]`` over block ``j`` of 256 indices (the last one ragged)."""
    import numpy as np

    n = sizes["n"]
    blocks = -(-n // DOT_BLOCK)
    prod = np.zeros(blocks * DOT_BLOCK, dtype=np.float64)
    prod[:n] = _f64(inputs["a"], n) * _f64(inputs["b"], n)
    return {"out": _to_f32(prod.reshape(blocks, DOT_BLOCK).sum(axis=1))}


def softmax_rows_f32(inputs: Inputs, sizes: Sizes) -> Outputs:
    """``y[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r)`` for each row."""
    import numpy as np

    rows, cols = sizes["rows"], sizes["cols"]
    x = _f64(inputs["x"], rows, cols)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": _to_f32(e / e.sum(axis=1, keepdims=True))}


def gemm_f32(inputs: Inputs, sizes: Sizes) -> Outputs:
    """``C = A @ B`` for row-major f32 ``A`` (m x k) and ``B`` (k x n)."""
    m, n, k = sizes["m"], sizes["n"], sizes["k"]
    return {"c": _to_f32(_f64(inputs["a"], m, k) @ _f64(inputs["b"], k, n))}


def gemm_f16_f32acc(inputs: Inputs, sizes: Sizes) -> Outputs:
    """``C = A @ B`` for row-major f16 ``A`` (m x k) and ``B`` (k x n), result f32."""
    import numpy as np

    m, n, k = sizes["m"], sizes["n"], sizes["k"]
    a = np.asarray(inputs["a"], dtype=np.float16).astype(np.float64).reshape(m, k)
    b = np.asarray(inputs["b"], dtype=np.float16).astype(np.float64).reshape(k, n)
    return {"c": _to_f32(a @ b)}


REFERENCES: dict[str, Reference] = {
    "vector_add_f32": vector_add_f32,
    "f32_to_f16_rne": f32_to_f16_rne,
    "dot_partials_f32_b256": dot_partials_f32_b256,
    "softmax_rows_f32": softmax_rows_f32,
    "gemm_f32": gemm_f32,
    "gemm_f16_f32acc": gemm_f16_f32acc,
}
