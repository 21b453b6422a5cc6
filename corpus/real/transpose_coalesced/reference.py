"""Reference of transpose_coalesced: a numpy translation of the upstream CPU reference
(https://github.com/NVIDIA/cuda-samples/blob/c94ff366aed18c797b8a85dfaac7817b0228b420/Samples/6_Performance/transpose/transpose.cu), in float64."""

import numpy as np

def transposeCoalesced(inputs, sizes):
    w, h = sizes["width"], sizes["height"]
    return {"odata": inputs["idata"].reshape(h, w).T.ravel()}
