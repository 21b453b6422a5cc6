"""Reference of shfl_scan: a numpy translation of the upstream CPU reference
(https://github.com/NVIDIA/cuda-samples/blob/c94ff366aed18c797b8a85dfaac7817b0228b420/Samples/2_Concepts_and_Techniques/shfl_scan/shfl_scan.cu), in float64."""

import numpy as np

def shfl_scan_test(inputs, sizes):
    n = sizes["n"]
    x = inputs["data"].astype(np.int64).reshape(n // 256, 256)
    c = np.cumsum(x, axis=1)
    return {"data": c.ravel(), "partial_sums": c[:, -1]}
