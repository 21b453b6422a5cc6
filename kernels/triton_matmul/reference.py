"""Bundle reference of the triton_matmul kernel (numpy only): C = A B for f16 A (M × K) and
B (K × N), computed in float64 and rounded once to f16 (the kernel accumulates in f32)."""

from __future__ import annotations

import numpy as np


def matmul(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    m, n, k = int(sizes["M"]), int(sizes["N"]), int(sizes["K"])
    a = np.asarray(inputs["a_ptr"], dtype=np.float16).reshape(m, k).astype(np.float64)
    b = np.asarray(inputs["b_ptr"], dtype=np.float16).reshape(k, n).astype(np.float64)
    return {"c_ptr": (a @ b).astype(np.float16)}
