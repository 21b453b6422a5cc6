// Upstream: karpathy/llm.c, dev/cuda/gelu_forward.cu @ f1e2ace651495b74ae22d45d1723443fd00ecd3a
// lines 29-29 43-50, verbatim below the prelude; licence: MIT (corpus/real/LICENSES/).
// Prelude (not upstream code): the includes and definitions the upstream file takes from
// its headers, so that this kernel compiles on its own.
#include <cmath>
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

__global__ void gelu_forward_kernel1(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}
