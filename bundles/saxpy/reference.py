"""Bundle reference of the saxpy kernel (numpy only): y = alpha * x + y in f32.

The product and sum are formed in float64 (the product of two f32 values is exact there) and
rounded once to f32; the kernel's fma rounds the exact value once, so the two can differ by the
float64 rounding of the sum: at most 1 ulp of f32, which the contract's tolerance allows.
"""

from __future__ import annotations

import numpy as np


def saxpy(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    n = int(sizes["n"])
    alpha = np.float64(np.asarray(inputs["alpha"], dtype=np.float32))
    x = np.asarray(inputs["x"], dtype=np.float32).reshape(-1)[:n].astype(np.float64)
    y = np.asarray(inputs["y"], dtype=np.float32).reshape(-1)[:n].astype(np.float64)
    return {"y": (alpha * x + y).astype(np.float32)}
