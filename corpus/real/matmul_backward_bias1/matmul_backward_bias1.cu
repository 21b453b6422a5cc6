// Upstream: karpathy/llm.c, dev/cuda/matmul_backward_bias.cu @ f1e2ace651495b74ae22d45d1723443fd00ecd3a
// lines 73-97, verbatim below the prelude; licence: MIT (corpus/real/LICENSES/).
// Prelude (not upstream code): the includes and definitions the upstream file takes from
// its headers, so that this kernel compiles on its own.
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

__global__ void matmul_backward_bias_kernel1(floatX* dbias, const floatX* dout, int B, int T, int OC) {
    extern __shared__ float shared[];
    int o = blockIdx.x; // range [0, OC)
    int tid = threadIdx.x; // range [0, block_size)
    int block_size = blockDim.x;
    const floatX* x = dout + o;
    // thread coarsening
    float sum = 0.0;
    for (int i = tid; i < B * T; i += block_size) {
        sum += (float)x[i * OC];
    }
    shared[tid] = sum;
    __syncthreads();
    // reductions
    for (int stride = block_size / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (tid < stride) {
            shared[tid] += shared[tid + stride];
        }
    }
    // write the final result (at thread 0) to global memory
    if (tid == 0) {
        dbias[o] = (floatX)((float)dbias[o] + shared[0]);
    }
}
