"""Reference of gelu_forward: a numpy translation of the upstream CPU reference
(https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/dev/cuda/gelu_forward.cu), in float64."""

import numpy as np

def gelu_forward_kernel1(inputs, sizes):
    x = inputs["inp"].astype(np.float64)
    k = np.sqrt(2.0 / np.pi)
    return {"out": 0.5 * x * (1.0 + np.tanh(k * (x + 0.044715 * x ** 3)))}
