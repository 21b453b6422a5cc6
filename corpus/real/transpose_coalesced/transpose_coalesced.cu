// Upstream: NVIDIA/cuda-samples, Samples/6_Performance/transpose/transpose.cu @ c94ff366aed18c797b8a85dfaac7817b0228b420
// lines 56-57 139-162, verbatim below the prelude; licence: BSD-3-Clause (corpus/real/LICENSES/).
// Prelude (not upstream code): the includes and definitions the upstream file takes from
// its headers, so that this kernel compiles on its own.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define TILE_DIM   32
#define BLOCK_ROWS 16

__global__ void transposeCoalesced(float *odata, float *idata, int width, int height)
{
    // Handle to thread block group
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float tile[TILE_DIM][TILE_DIM];

    int xIndex   = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex   = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + (yIndex)*width;

    xIndex        = blockIdx.y * TILE_DIM + threadIdx.x;
    yIndex        = blockIdx.x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + (yIndex)*height;

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    }

    cg::sync(cta);

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
    }
}
