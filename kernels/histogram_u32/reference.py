"""Bundle reference of the histogram_u32 kernel (numpy only): one 256-bin histogram of the low
8 bits of x per chunk of 1024 elements (the last chunk may be short)."""

from __future__ import annotations

import numpy as np

BINS = 256
CHUNK = 1024


def histogram(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    n = int(sizes["n"])
    x = np.asarray(inputs["x"], dtype=np.uint32).reshape(-1)[:n]
    blocks = (n + CHUNK - 1) // CHUNK
    out = np.zeros((blocks, BINS), dtype=np.uint32)
    for b in range(blocks):
        chunk = x[b * CHUNK : (b + 1) * CHUNK] & np.uint32(BINS - 1)
        out[b] = np.bincount(chunk.astype(np.int64), minlength=BINS).astype(np.uint32)
    return {"out": out}
