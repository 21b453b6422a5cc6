// gemm_tiled: C = A * B in f32, row-major A (m x k), B (k x n), C (m x n), with 16 x 16
// shared-memory tiles.
//
// Block (16, 16) computes the 16 x 16 tile of C at (blockIdx.y * 16, blockIdx.x * 16). For each
// of the ceil_div(k, 16) steps, thread (tx, ty) loads A[row][kt*16 + tx] into As[ty][tx] and
// B[kt*16 + ty][col] into Bs[ty][tx] (0 outside the matrices, so ragged m, n, k are allowed),
// the block synchronises, each thread accumulates 16 products with fma, and the block
// synchronises again before the next step overwrites the tiles. Both barriers sit outside every
// branch: the trip count depends on k only. The result is stored only when row < m, col < n.
// Launch (contracts/gemm_tiled.yaml): grid = (ceil_div(n,16), ceil_div(m,16)), block = (16,16).

#define TILE 16u

extern "C" __global__ void gemm_tiled(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, unsigned int m, unsigned int n,
                                      unsigned int k)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const unsigned int tx = threadIdx.x;
    const unsigned int ty = threadIdx.y;
    const unsigned int row = blockIdx.y * TILE + ty;
    const unsigned int col = blockIdx.x * TILE + tx;
    const unsigned int tiles = (k + TILE - 1) / TILE;

    float acc = 0.0f;
    for (unsigned int kt = 0; kt < tiles; ++kt) {
        const unsigned int ka = kt * TILE + tx;  // column of A this thread loads
        const unsigned int kb = kt * TILE + ty;  // row of B this thread loads
        As[ty][tx] = (row < m && ka < k) ? a[(size_t)row * k + ka] : 0.0f;
        Bs[ty][tx] = (kb < k && col < n) ? b[(size_t)kb * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (unsigned int p = 0; p < TILE; ++p) {
            acc = fmaf(As[ty][p], Bs[p][tx], acc);
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        c[(size_t)row * n + col] = acc;
    }
}
