"""Reference of softmax_forward1: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/softmax_forward.cu), in float64."""

import numpy as np

def softmax_forward_kernel1(inputs, sizes):
    n, c = sizes["N"], sizes["C"]
    x = inputs["inp"].astype(np.float64).reshape(n, c)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": (e / e.sum(axis=1, keepdims=True)).ravel()}
