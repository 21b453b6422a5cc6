// layernorm_rows: layer normalisation of each row of a row-major rows x cols f32 matrix,
//
//   mean_r = (1/cols) sum_c x[r, c]
//   var_r  = (1/cols) sum_c (x[r, c] - mean_r)^2          (two passes: no cancellation)
//   y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + 1e-5) * gamma[c] + beta[c]
//
// The mean is carried as two floats (corrected two-pass algorithm: Chan, Golub & LeVeque 1983,
// "Algorithms for computing the sample variance", eq. 1.7): m = fl(sum / cols), then the second
// pass sums the residuals r = sum_c (x - m) beside q = sum_c (x - m)^2, so that
// m_lo = r / cols is the rounding error of m, var = (q - r * m_lo) / cols, and each output uses
// (x - m) - m_lo. Without m_lo, x - m is off by m's rounding and summation error (at least
// ulp(|mean|) / 2), which gamma / sqrt(var + 1e-5) magnifies: on rows whose spread is small
// against their mean, outputs near 0 were off by up to 7e-4 against the tolerance of 1e-5 (a
// fresh seed found it at rows=270, cols=2, two close values; issue 15). With m_lo that error is
// relative to the row's spread, not to its mean (docs/kernels.md "layernorm_rows").
//
// One warp per row, four rows (warps) per block of (32, 4) threads. Lane l handles the columns
// c = l, l + 32, ... < cols; each sum is reduced across the warp by a butterfly of five
// __shfl_xor_sync (shfl.sync.bfly.b32, offsets 16, 8, 4, 2, 1), after which every lane holds the
// same total. A warp whose row is past `rows` returns as a whole (the row test is warp-uniform),
// so every shuffle runs with all 32 lanes and the full mask is right. No shared memory and no
// barrier. rstd = 1 / sqrtf(var + eps) uses the IEEE sqrt.rn and div.rn.
// Launch (contracts/layernorm_rows.yaml): grid ceil_div(rows, 4), block (32, 4).

#define WARP 32u
#define ROWS_PER_BLOCK 4u
#define FULL_MASK 0xffffffffu
#define EPS 1.0e-5f

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(FULL_MASK, v, offset);
    }
    return v;
}

extern "C" __global__ void layernorm_rows(const float* __restrict__ x,
                                          const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float* __restrict__ y,
                                          unsigned int rows, unsigned int cols)
{
    const unsigned int lane = threadIdx.x;
    const unsigned int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y;
    if (row >= rows) {
        return;  // the whole warp: threadIdx.y is the same for its 32 lanes
    }
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;

    float s = 0.0f;
    for (unsigned int c = lane; c < cols; c += WARP) {
        s += xr[c];
    }
    const float mean = warp_sum(s) / (float)cols;

    float r = 0.0f;  // residuals about the rounded mean: their mean is its rounding error
    float q = 0.0f;
    for (unsigned int c = lane; c < cols; c += WARP) {
        const float d = xr[c] - mean;
        r += d;
        q += d * d;
    }
    const float rsum = warp_sum(r);
    const float mean_lo = rsum / (float)cols;
    // sum (x - mu)^2 = sum (x - m)^2 - cols (m - mu)^2; never below 0 (a constant row: q ~ r m_lo)
    const float var = fmaxf(warp_sum(q) - rsum * mean_lo, 0.0f) / (float)cols;
    const float rstd = 1.0f / sqrtf(var + EPS);

    for (unsigned int c = lane; c < cols; c += WARP) {
        yr[c] = ((xr[c] - mean) - mean_lo) * rstd * gamma[c] + beta[c];
    }
}
