// scan_block_u32: inclusive prefix sums of u32 values (mod 2^32) within blocks of 256 elements,
//
//   out[i] = sum_{j = 256 floor(i / 256)}^{i} x[j]  mod 2^32        for i < n
//
// (the per-block step of a multi-pass scan: a second pass would add the block totals).
// Block b of 256 threads = 8 warps; thread t owns element i = 256 b + t (0 past n).
//   1. each warp scans its 32 values with five __shfl_up_sync steps (shfl.sync.up.b32,
//      offsets 1, 2, 4, 8, 16); lane l adds the value from lane l - o only when l >= o;
//   2. lane 31 of warp w stores the warp total in warp_tot[w]; __syncthreads (outside every
//      branch: all 256 threads arrive);
//   3. thread t adds warp_tot[0..w) (slots written before the barrier) and stores out[i], i < n.
// Integer adds wrap mod 2^32 exactly as the reference's, so the result is exact.
// Launch (contracts/scan_block_u32.yaml): grid = ceil_div(n, 256), block = 256, 32 bytes of
// static shared memory.

#define BLOCK 256u
#define WARPS (BLOCK / 32u)
#define FULL_MASK 0xffffffffu

extern "C" __global__ void scan_block_u32(const unsigned int* __restrict__ x,
                                          unsigned int* __restrict__ out, unsigned int n)
{
    __shared__ unsigned int warp_tot[WARPS];
    const unsigned int t = threadIdx.x;
    const unsigned int lane = t & 31u;
    const unsigned int w = t >> 5;
    const unsigned int i = blockIdx.x * BLOCK + t;

    unsigned int v = (i < n) ? x[i] : 0u;
#pragma unroll
    for (unsigned int o = 1u; o < 32u; o <<= 1) {
        const unsigned int u = __shfl_up_sync(FULL_MASK, v, o);
        if (lane >= o) {
            v += u;
        }
    }
    if (lane == 31u) {
        warp_tot[w] = v;
    }
    __syncthreads();
    unsigned int prefix = 0u;
    for (unsigned int k = 0u; k < w; ++k) {
        prefix += warp_tot[k];
    }
    if (i < n) {
        out[i] = v + prefix;
    }
}
