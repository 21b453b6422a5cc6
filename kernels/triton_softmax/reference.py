"""Bundle reference of the triton_softmax kernel (numpy only), in float64, rounded once to f32:

    y[r, c] = exp(x[r, c] - max_k x[r, k]) / sum_k exp(x[r, k] - max_k x[r, k])
"""

from __future__ import annotations

import numpy as np


def softmax(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rows, cols = int(sizes["rows"]), int(sizes["cols"])
    x = np.asarray(inputs["input_ptr"], dtype=np.float32).reshape(rows, cols).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"output_ptr": (e / e.sum(axis=1, keepdims=True)).astype(np.float32)}
