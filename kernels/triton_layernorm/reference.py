"""Bundle reference of the triton_layernorm kernel (numpy only), in float64, rounded once to f32:

    mean_r = mean_c x[r, c],  var_r = mean_c (x[r, c] - mean_r)^2,  rstd_r = 1 / sqrt(var_r + eps)
    y[r, c] = (x[r, c] - mean_r) * rstd_r * w[c] + b[c]
"""

from __future__ import annotations

import numpy as np


def layernorm(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rows, cols = int(sizes["rows"]), int(sizes["cols"])
    x = np.asarray(inputs["X"], dtype=np.float32).reshape(rows, cols).astype(np.float64)
    w = np.asarray(inputs["W"], dtype=np.float32).reshape(cols).astype(np.float64)
    b = np.asarray(inputs["B"], dtype=np.float32).reshape(cols).astype(np.float64)
    eps = float(np.asarray(inputs["eps"], dtype=np.float32))
    mean = x.mean(axis=1)
    var = ((x - mean[:, None]) ** 2).mean(axis=1)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
    return {
        "Y": y.astype(np.float32),
        "Mean": mean.astype(np.float32),
        "Rstd": rstd.astype(np.float32),
    }
