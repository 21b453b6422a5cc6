"""Bundle reference of the transpose_tiled kernel (numpy only): out = x^T, bit for bit."""

from __future__ import annotations

import numpy as np


def transpose(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    rows, cols = int(sizes["rows"]), int(sizes["cols"])
    x = np.asarray(inputs["x"], dtype=np.float32).reshape(rows, cols)
    return {"out": np.ascontiguousarray(x.T)}
