"""Reference of matmul_forward1: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/matmul_forward.cu), in float64."""

import numpy as np

def matmul_forward_kernel1(inputs, sizes):
    bt, c, oc = sizes["BT"], sizes["C"], sizes["OC"]
    x = inputs["inp"].astype(np.float64).reshape(bt, c)
    w = inputs["weight"].astype(np.float64).reshape(oc, c)
    out = x @ w.T
    if inputs.get("bias") is not None:
        out = out + inputs["bias"].astype(np.float64)[None, :]
    return {"out": out.ravel()}
