// histogram_u32: per-block 256-bin histograms of u32 values, binned by their low 8 bits.
//
//   out[b, k] = #{ i in [1024 b, min(n, 1024 (b + 1))) : (x[i] & 255) == k }     k < 256
//
// The host (or the reference) adds the per-block rows for the full histogram; the kernel has no
// global atomics, so it needs no zeroed output and its result does not depend on the schedule.
// Block b of 256 threads: thread t zeroes bin t of a shared histogram, barrier, then counts the
// elements i = 1024 b + t + 256 j (j < 4, i < n) with a shared-memory atomicAdd
// (atom.shared.add.u32 / red.shared.add.u32), barrier, then writes bin t of row b.
// Every __syncthreads is outside every branch; the counting loop has the same 4 trips for
// every thread (the i < n test is inside it).
// Launch (contracts/histogram_u32.yaml): grid = ceil_div(n, 1024), block = 256, 1 KiB static
// shared memory.

#define BINS 256u
#define PER_THREAD 4u
#define CHUNK (BINS * PER_THREAD)

extern "C" __global__ void histogram_u32(const unsigned int* __restrict__ x,
                                         unsigned int* __restrict__ out, unsigned int n)
{
    __shared__ unsigned int hist[BINS];
    const unsigned int t = threadIdx.x;
    hist[t] = 0u;
    __syncthreads();
    const unsigned int base = blockIdx.x * CHUNK + t;
#pragma unroll
    for (unsigned int j = 0; j < PER_THREAD; ++j) {
        const unsigned int i = base + j * BINS;
        if (i < n) {
            atomicAdd(&hist[x[i] & (BINS - 1u)], 1u);
        }
    }
    __syncthreads();
    out[(size_t)blockIdx.x * BINS + t] = hist[t];
}
