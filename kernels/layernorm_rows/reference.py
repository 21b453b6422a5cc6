"""Bundle reference of the layernorm_rows kernel (numpy only), in float64, rounded once to f32:

    mean_r = mean_c x[r, c],  var_r = mean_c (x[r, c] - mean_r)^2  (population variance)
    y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + 1e-5) * gamma[c] + beta[c]
"""

from __future__ import annotations

import numpy as np

EPS = 1.0e-5


def layernorm(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rows, cols = int(sizes["rows"]), int(sizes["cols"])
    x = np.asarray(inputs["x"], dtype=np.float32).reshape(rows, cols).astype(np.float64)
    gamma = np.asarray(inputs["gamma"], dtype=np.float32).reshape(cols).astype(np.float64)
    beta = np.asarray(inputs["beta"], dtype=np.float32).reshape(cols).astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + EPS) * gamma[np.newaxis, :] + beta[np.newaxis, :]
    return {"y": y.astype(np.float32)}
