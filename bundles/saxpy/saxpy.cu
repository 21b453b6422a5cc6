// saxpy: y[i] = alpha * x[i] + y[i] for every i < n, in f32, with an f32 scalar alpha.
//
// nvcc contracts alpha * x[i] + y[i] into one fused multiply-add (fma.rn.f32: the exact
// alpha * x[i] + y[i] rounded once to nearest even); the contract allows 1 ulp against a float64
// reference rounded to f32, which covers the double rounding of that reference.
// Launch (contracts/saxpy.yaml): grid = ceil_div(n, 256), block = 256, no shared memory.
// Thread t of block b owns the single index i = b * 256 + t (Saxpy.index_injective /
// Saxpy.index_cover); threads with i >= n do nothing (Saxpy.guard_in_bounds). y is read and
// written by its owner only (intent inout). n <= 2^20 (the contract's size domain).

#define BLOCK 256u

extern "C" __global__ void saxpy(float alpha, const float* __restrict__ x, float* __restrict__ y,
                                 unsigned int n)
{
    unsigned int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i] + y[i];
    }
}
