"""Reference of crossentropy_forward: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/crossentropy_forward.cu), in float64."""

import numpy as np

def crossentropy_forward_kernel1(inputs, sizes):
    b, t, v = sizes["B"], sizes["T"], sizes["V"]
    probs = inputs["probs"].astype(np.float64).reshape(b * t, v)
    ix = inputs["targets"].astype(np.int64)
    return {"losses": -np.log(probs[np.arange(b * t), ix])}
