"""Reference of crossentropy_softmax_backward: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/crossentropy_softmax_backward.cu), in float64."""

import numpy as np

def crossentropy_softmax_backward_kernel1(inputs, sizes):
    b, t, v = sizes["B"], sizes["T"], sizes["V"]
    d = inputs["dlogits"].astype(np.float64).reshape(b * t, v)
    p = inputs["probs"].astype(np.float64).reshape(b * t, v)
    ind = np.zeros((b * t, v))
    ind[np.arange(b * t), inputs["targets"].astype(np.int64)] = 1.0
    dl = inputs["dlosses"].astype(np.float64)[:, None]
    return {"dlogits": (d + (p - ind) * dl).ravel()}
