"""Reference of adamw2: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/adamw.cu), in float64."""

import numpy as np

def adamw_kernel2(inputs, sizes):
    f = np.float32
    p = inputs["params_memory"].astype(np.float64)
    g = inputs["grads_memory"].astype(np.float64)
    m = inputs["m_memory"].astype(np.float64)
    v = inputs["v_memory"].astype(np.float64)
    b1, b2 = float(f(0.9)), float(f(0.999))
    m2 = b1 * m + (1.0 - b1) * g
    v2 = b2 * v + (1.0 - b2) * g * g
    step = (m2 / float(f(0.1))) / (np.sqrt(v2 / float(f(0.001))) + float(f(1e-8)))
    p2 = p - float(f(0.001)) * (step + float(f(0.01)) * p)
    return {"params_memory": p2, "m_memory": m2, "v_memory": v2}
