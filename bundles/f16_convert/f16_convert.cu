// f16_convert: y[i] = (f16) x[i], IEEE round-to-nearest-even (cvt.rn.f16.f32), for every i < n.
//
// Overflow rounds to +-inf, values below the f16 subnormal range round to +-0, subnormal f16
// results are produced exactly (no flush to zero), NaN stays NaN. The output is stored as the
// 16-bit pattern of the f16 value.
// Launch (contracts/f16_convert.yaml): grid = ceil_div(n, 256), block = 256, no shared memory.

#include <cuda_fp16.h>

#define BLOCK 256u

extern "C" __global__ void f16_convert(const float* __restrict__ x, __half* __restrict__ y,
                                       unsigned int n)
{
    unsigned int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {
        y[i] = __float2half_rn(x[i]);
    }
}
