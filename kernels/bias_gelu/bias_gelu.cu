// bias_gelu: the bias + GELU epilogue of a linear layer, over a row-major rows x cols matrix:
//
//   v = x[r, c] + bias[c]                                  (one f32 add)
//   y[r, c] = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))   (tanh-approximate GELU)
//
// 0.5 (1 + tanh(u)) is computed through the exact identity 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)),
// so y = v / (1 + expf(-2u)): no cancellation in 1 + tanh(u) for negative v, and for v -> -inf
// expf overflows to +inf and y is -0 (the limit), for v -> +inf y = v.
// Launch (contracts/bias_gelu.yaml): block (32, 8), grid (ceil_div(cols, 32), ceil_div(rows, 8));
// thread (tx, ty) of block (bx, by) owns element (r, c) = (8 by + ty, 32 bx + tx) when r < rows
// and c < cols (BiasGelu.owner_injective / BiasGelu.grid_covers / BiasGelu.access_in_bounds).

#define BX 32u
#define BY 8u
#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_C 0.044715f

extern "C" __global__ void bias_gelu(const float* __restrict__ x, const float* __restrict__ bias,
                                     float* __restrict__ y, unsigned int rows, unsigned int cols)
{
    const unsigned int c = blockIdx.x * BX + threadIdx.x;
    const unsigned int r = blockIdx.y * BY + threadIdx.y;
    if (r < rows && c < cols) {
        const size_t i = (size_t)r * cols + c;
        const float v = x[i] + bias[c];
        const float u = SQRT_2_OVER_PI * (v + GELU_C * v * v * v);
        y[i] = v / (1.0f + expf(-2.0f * u));
    }
}
