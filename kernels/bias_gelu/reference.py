"""Bundle reference of the bias_gelu kernel (numpy only).

    v = f32(x[r, c] + bias[c])          (the kernel's single f32 add, reproduced exactly)
    y[r, c] = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))      in float64, rounded to f32

The tanh form is evaluated directly in float64 (the kernel uses the identity
0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) in f32; the two agree within the contract's tolerance).
"""

from __future__ import annotations

import numpy as np


def bias_gelu(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rows, cols = int(sizes["rows"]), int(sizes["cols"])
    x = np.asarray(inputs["x"], dtype=np.float32).reshape(rows, cols)
    bias = np.asarray(inputs["bias"], dtype=np.float32).reshape(cols)
    v = (x + bias[np.newaxis, :]).astype(np.float32).astype(np.float64)
    u = np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)
    y = 0.5 * v * (1.0 + np.tanh(u))
    return {"y": y.astype(np.float32)}
