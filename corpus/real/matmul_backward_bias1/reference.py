"""Reference of matmul_backward_bias1: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/matmul_backward_bias.cu), in float64."""

import numpy as np

def matmul_backward_bias_kernel1(inputs, sizes):
    b, t, oc = sizes["B"], sizes["T"], sizes["OC"]
    d = inputs["dout"].astype(np.float64).reshape(b * t, oc)
    return {"dbias": inputs["dbias"].astype(np.float64) + d.sum(axis=0)}
