"""Reference of encoder_forward: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/encoder_forward.cu), in float64."""

import numpy as np

def encoder_forward_kernel2(inputs, sizes):
    b, t, c = sizes["B"], sizes["T"], sizes["C"]
    v = sizes["V"]
    ix = inputs["inp"].astype(np.int64).reshape(b, t)
    wte = inputs["wte"].astype(np.float64).reshape(v, c)
    wpe = inputs["wpe"].astype(np.float64).reshape(t, c)
    return {"out": (wte[ix] + wpe[None, :, :]).ravel()}
