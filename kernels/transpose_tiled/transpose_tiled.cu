// transpose_tiled: out = x^T for a row-major rows x cols f32 matrix (out is cols x rows),
// through a 32 x 33 shared-memory tile (the padding column puts the 32 elements of a tile column
// in 32 different banks, so the column reads do not conflict).
//
// Block (32, 8) owns the 32 x 32 tile at (row0, col0) = (32 by, 32 bx) of `x`:
//   1. thread (tx, ty) loads x[row0 + ty + 8 j, col0 + tx] into tile[ty + 8 j][tx], j = 0..3
//      (coalesced along rows of `x`), elements outside the matrix are skipped;
//   2. __syncthreads (bar.sync), outside every branch: the whole block arrives;
//   3. thread (tx, ty) stores tile[tx][ty + 8 j] to out[col0 + ty + 8 j, row0 + tx]
//      (coalesced along rows of `out`), again only inside the matrix.
// Each tile slot is written by one thread in step 1 and read by one thread in step 3, after the
// barrier (TransposeTiled.slot_owner_injective, .barrier_all_arrive).
// Launch (contracts/transpose_tiled.yaml): grid (ceil_div(cols, 32), ceil_div(rows, 32)),
// block (32, 8), 4224 bytes of static shared memory.

#define TILE 32u
#define ROWS_PER_PASS 8u

extern "C" __global__ void transpose_tiled(const float* __restrict__ x, float* __restrict__ out,
                                           unsigned int rows, unsigned int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    const unsigned int tx = threadIdx.x;
    const unsigned int ty = threadIdx.y;
    const unsigned int row0 = blockIdx.y * TILE;
    const unsigned int col0 = blockIdx.x * TILE;

    for (unsigned int j = 0; j < TILE; j += ROWS_PER_PASS) {
        const unsigned int r = row0 + ty + j;
        const unsigned int c = col0 + tx;
        if (r < rows && c < cols) {
            tile[ty + j][tx] = x[(size_t)r * cols + c];
        }
    }
    __syncthreads();
    for (unsigned int j = 0; j < TILE; j += ROWS_PER_PASS) {
        const unsigned int c = col0 + ty + j;  // row of out
        const unsigned int r = row0 + tx;      // column of out
        if (c < cols && r < rows) {
            out[(size_t)c * rows + r] = tile[tx][ty + j];
        }
    }
}
