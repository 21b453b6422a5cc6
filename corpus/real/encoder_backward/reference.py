"""Reference of encoder_backward: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/encoder_backward.cu), in float64."""

import numpy as np

def encoder_backward_kernel1(inputs, sizes):
    b, t, c, v = sizes["B"], sizes["T"], sizes["C"], sizes["V"]
    dwte = inputs["dwte"].astype(np.float64).reshape(v, c).copy()
    dwpe = inputs["dwpe"].astype(np.float64).reshape(t, c).copy()
    dout = inputs["dout"].astype(np.float64).reshape(b, t, c)
    ix = inputs["inp"].astype(np.int64).reshape(b, t)
    for bb in range(b):
        for tt in range(t):
            dwte[ix[bb, tt]] += dout[bb, tt]
            dwpe[tt] += dout[bb, tt]
    return {"dwte": dwte.ravel(), "dwpe": dwpe.ravel()}
