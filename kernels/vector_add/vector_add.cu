// vector_add: c[i] = a[i] + b[i] for every i < n, in f32 (one IEEE add per element, 0 ulp).
//
// Launch (contracts/vector_add.yaml): grid = ceil_div(n, 256), block = 256, no shared memory.
// Thread t of block b owns the single index i = b * 256 + t (VectorAdd.index_injective /
// VectorAdd.index_cover); threads with i >= n do nothing (VectorAdd.guard_in_bounds).
// n < 2^32 - 256 so that the u32 index cannot wrap.

#define BLOCK 256u

extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, unsigned int n)
{
    unsigned int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
