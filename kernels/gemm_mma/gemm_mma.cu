// gemm_mma: C = A * B on tensor cores, f16 inputs, f32 accumulation, row-major A (m x k),
// B (k x n), C (m x n, f32).
//
// Block tile 32 x 32 (BM x BN), k step 16 (BK), 128 threads = 4 warps in a 2 x 2 grid; each warp
// owns a 16 x 16 sub-tile, i.e. two m16n8 accumulators. Per k step and per 8-wide k slice:
//   - A fragment (16 x 8): ldmatrix.sync.aligned.m8n8.x2.shared.b16 (rows 0-7 and 8-15);
//   - B fragments (8 x 8, two n tiles): ldmatrix...x2.trans (B is row-major k x n in shared
//     memory; .trans yields the "col" operand layout mma expects);
//   - two mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32.
// Global -> shared copies use cp.async.cg.shared.global (16 bytes per thread per k step:
// threads 0-63 one chunk of the 32 x 16 A tile, threads 64-127 one chunk of the 16 x 32 B tile)
// into two stages: step kt computes from stage kt % 2 while step kt + 1 loads into the other
// (commit_group / wait_group 1 / __syncthreads; a second __syncthreads ends each step before
// its stage is refilled).
//
// Sizes: m % 32 == 0, n % 32 == 0, k % 16 == 0, k >= 16; A and B 16-byte aligned.
// Launch (contracts/gemm_mma.yaml): grid = (n / 32, m / 32), block = 128, 4 KiB static shared.

#include <cuda_fp16.h>

#define BM 32u
#define BN 32u
#define BK 16u
#define THREADS 128u

static __device__ __forceinline__ unsigned int smem_addr(const void* p)
{
    return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

static __device__ __forceinline__ void cp_async_16(void* dst, const void* src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src)
                 : "memory");
}

static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

static __device__ __forceinline__ void cp_async_wait_all_but_one()
{
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// Copy k step kt of the A and B block tiles into one stage: one 16-byte chunk per thread.
static __device__ __forceinline__ void load_stage(__half (*as)[BK], __half (*bs)[BN],
                                                  const __half* a, const __half* b,
                                                  unsigned int n, unsigned int k, unsigned int bm,
                                                  unsigned int bn, unsigned int kt,
                                                  unsigned int tid)
{
    if (tid < 64u) {
        const unsigned int row = tid >> 1, col = (tid & 1u) * 8u;
        cp_async_16(&as[row][col], a + (size_t)(bm + row) * k + kt * BK + col);
    } else {
        const unsigned int chunk = tid - 64u;
        const unsigned int row = chunk >> 2, col = (chunk & 3u) * 8u;
        cp_async_16(&bs[row][col], b + (size_t)(kt * BK + row) * n + bn + col);
    }
}

static __device__ __forceinline__ void mma_16x8x8(float (&d)[4], unsigned int a0, unsigned int a1,
                                                  unsigned int b0)
{
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(b0));
}

extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_mma(const __half* __restrict__ a, const __half* __restrict__ b, float* __restrict__ c,
             unsigned int m, unsigned int n, unsigned int k)
{
    __shared__ __align__(16) __half As[2][BM][BK];
    __shared__ __align__(16) __half Bs[2][BK][BN];
    const unsigned int tid = threadIdx.x;
    const unsigned int lane = tid & 31u, warp = tid >> 5;
    const unsigned int wm = warp >> 1, wn = warp & 1u;  // the warp's 16 x 16 sub-tile
    const unsigned int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const unsigned int tiles = k / BK;

    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};

    load_stage(As[0], Bs[0], a, b, n, k, bm, bn, 0u, tid);
    cp_async_commit();
    for (unsigned int kt = 0; kt < tiles; ++kt) {
        if (kt + 1u < tiles) {
            load_stage(As[(kt + 1u) & 1u], Bs[(kt + 1u) & 1u], a, b, n, k, bm, bn, kt + 1u, tid);
        }
        cp_async_commit();            // possibly empty group: keeps the group count uniform
        cp_async_wait_all_but_one();  // this thread's copies of step kt have landed
        __syncthreads();              // ... and every other thread's
        const unsigned int s = kt & 1u;
#pragma unroll
        for (unsigned int ks = 0; ks < BK; ks += 8u) {
            unsigned int a0, a1, b0, b1;
            // lanes 0-7 address rows 0-7, lanes 8-15 rows 8-15 of the warp's A rows
            // (lanes 16-31 repeat them; .x2 reads addresses from lanes 0-15 only)
            const unsigned int a_row = wm * 16u + (lane & 15u);
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                         : "=r"(a0), "=r"(a1)
                         : "r"(smem_addr(&As[s][a_row][ks])));
            // lanes 0-7: k rows of the first n tile, lanes 8-15: the same rows, second n tile
            const unsigned int b_row = ks + (lane & 7u);
            const unsigned int b_col = wn * 16u + ((lane >> 3) & 1u) * 8u;
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                         : "=r"(b0), "=r"(b1)
                         : "r"(smem_addr(&Bs[s][b_row][b_col])));
            mma_16x8x8(acc[0], a0, a1, b0);
            mma_16x8x8(acc[1], a0, a1, b1);
        }
        __syncthreads();  // stage s is refilled by step kt + 2's copies only after this
    }

    // accumulator layout of m16n8: c0, c1 at (g, 2 tg + {0,1}), c2, c3 at (g + 8, 2 tg + {0,1})
    const unsigned int g = lane >> 2, tg = lane & 3u;
    const unsigned int row = bm + wm * 16u + g;
#pragma unroll
    for (unsigned int nt = 0; nt < 2u; ++nt) {
        const unsigned int col = bn + wn * 16u + nt * 8u + tg * 2u;
        c[(size_t)row * n + col] = acc[nt][0];
        c[(size_t)row * n + col + 1u] = acc[nt][1];
        c[(size_t)(row + 8u) * n + col] = acc[nt][2];
        c[(size_t)(row + 8u) * n + col + 1u] = acc[nt][3];
    }
}
