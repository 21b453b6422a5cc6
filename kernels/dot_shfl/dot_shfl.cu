// dot_shfl: per-block partial dot products of two f32 vectors.
//
//   out[j] = sum_{i in [256 j, min(n, 256 (j+1)))} a[i] * b[i]     for j < ceil_div(n, 256)
//
// The host (or the reference) adds the partials; the kernel itself is deterministic (no atomics).
// Each thread forms one product (0 for i >= n), each warp reduces its 32 products with a
// butterfly of __shfl_xor_sync (shfl.sync.bfly), lane 0 of each of the 8 warps stores its sum in
// shared memory, and after one block-wide barrier warp 0 reduces the 8 warp sums the same way.
// Every thread of the block reaches the barrier and every shuffle (no early return), so the full
// mask 0xffffffff is always correct.
// Launch (contracts/dot_shfl.yaml): grid = ceil_div(n, 256), block = 256 exactly.

#define BLOCK 256u
#define WARPS (BLOCK / 32u)

extern "C" __global__ void dot_shfl(const float* __restrict__ a, const float* __restrict__ b,
                                    float* __restrict__ out, unsigned int n)
{
    __shared__ float warp_sums[WARPS];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * BLOCK + t;

    float v = 0.0f;
    if (i < n) {
        v = a[i] * b[i];
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    if ((t & 31u) == 0u) {
        warp_sums[t >> 5] = v;
    }
    __syncthreads();
    if (t < 32u) {
        float w = (t < WARPS) ? warp_sums[t] : 0.0f;
#pragma unroll
        for (int offset = 4; offset > 0; offset >>= 1) {
            w += __shfl_xor_sync(0xffffffffu, w, offset);
        }
        if (t == 0u) {
            out[blockIdx.x] = w;
        }
    }
}
