// Upstream: karpathy/llm.c, dev/cuda/encoder_forward.cu @ f1e2ace651495b74ae22d45d1723443fd00ecd3a
// lines 69-88, verbatim below the prelude; licence: MIT (corpus/real/LICENSES/).
// Prelude (not upstream code): the includes and definitions the upstream file takes from
// its headers, so that this kernel compiles on its own.
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

__global__ void encoder_forward_kernel2(floatX* out,
                               const int* inp, const floatX* wte, const floatX* wpe,
                               int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;

    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;

        int ix = inp[b * T + t];

        floatX* out_btc = out + b * T * C + t * C + c;
        const floatX* wte_ix = wte + ix * C + c;
        const floatX* wpe_tc = wpe + t * C + c;
        *out_btc = (floatX)((float)*wte_ix + (float)*wpe_tc);
    }
}
