"""Reference of permute: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/permute.cu), in float64."""

import numpy as np

def permute_kernel(inputs, sizes):
    d = (sizes["dim1"], sizes["dim2"], sizes["dim3"], sizes["dim4"])
    m = inputs["matrix"].reshape(d)
    return {"out_matrix": np.transpose(m, (3, 2, 0, 1)).ravel()}
