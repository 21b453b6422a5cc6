// softmax_rows: numerically stable softmax of each row of a row-major f32 matrix.
//
//   y[r, c] = exp(x[r, c] - max_r) / sum_{c'} exp(x[r, c'] - max_r),   max_r = max_{c'} x[r, c']
//
// One block of 256 threads per row (grid = rows exactly). Thread t handles the columns
// c = t, t + 256, t + 512, ... < cols. Two shared-memory tree reductions (max, then sum) combine
// the per-thread values; every __syncthreads (bar.sync) sits outside every branch, so all 256
// threads reach each one whatever cols is (threads with no column contribute -inf / 0).
// exp(v) is computed as exp2f(v * log2(e)) (mul.f32 + ex2.approx.f32, 2 ulp), the form
// FlashAttention uses; with the rounding of x - max and of the product it stays within 5e-6
// relative of the exact softmax for |x| <= 20. Division is IEEE (div.rn.f32).
// Launch (contracts/softmax_rows.yaml): grid = rows, block = 256, 1 KiB static shared memory.

#define BLOCK 256u
#define LOG2E 1.4426950408889634f

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                        unsigned int rows, unsigned int cols)
{
    __shared__ float red[BLOCK];
    const unsigned int t = threadIdx.x;
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    // 1. row maximum
    float m = -INFINITY;
    for (unsigned int c = t; c < cols; c += BLOCK) {
        m = fmaxf(m, xr[c]);
    }
    red[t] = m;
    __syncthreads();
    for (unsigned int s = BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) {
            red[t] = fmaxf(red[t], red[t + s]);
        }
        __syncthreads();
    }
    const float row_max = red[0];
    __syncthreads();  // every thread has read red[0] before the sum overwrites it

    // 2. sum of exponentials
    float sum = 0.0f;
    for (unsigned int c = t; c < cols; c += BLOCK) {
        sum += exp2f((xr[c] - row_max) * LOG2E);
    }
    red[t] = sum;
    __syncthreads();
    for (unsigned int s = BLOCK / 2; s > 0; s >>= 1) {
        if (t < s) {
            red[t] += red[t + s];
        }
        __syncthreads();
    }
    const float total = red[0];

    // 3. normalise
    for (unsigned int c = t; c < cols; c += BLOCK) {
        yr[c] = exp2f((xr[c] - row_max) * LOG2E) / total;
    }
}
