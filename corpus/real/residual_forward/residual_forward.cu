// Upstream: karpathy/llm.c, dev/cuda/residual_forward.cu @ f1e2ace651495b74ae22d45d1723443fd00ecd3a
// lines 33-38, verbatim below the prelude; licence: MIT (corpus/real/LICENSES/).
// Prelude (not upstream code): the includes and definitions the upstream file takes from
// its headers, so that this kernel compiles on its own.
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

__global__ void residual_forward_kernel1(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        out[idx] = (floatX)((float)inp1[idx] + (float)inp2[idx]);
    }
}
