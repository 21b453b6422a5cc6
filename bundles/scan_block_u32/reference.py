"""Bundle reference of the scan_block_u32 kernel (numpy only): inclusive prefix sums within
blocks of 256 elements, mod 2^32 (summed in uint64, then reduced)."""

from __future__ import annotations

import numpy as np

BLOCK = 256


def scan_blocks(inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    n = int(sizes["n"])
    x = np.asarray(inputs["x"], dtype=np.uint32).reshape(-1)[:n].astype(np.uint64)
    out = np.empty(n, dtype=np.uint64)
    for start in range(0, n, BLOCK):
        out[start : start + BLOCK] = np.cumsum(x[start : start + BLOCK], dtype=np.uint64)
    return {"out": (out % np.uint64(1 << 32)).astype(np.uint32)}
