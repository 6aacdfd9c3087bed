// read_micro.cu -- how fast can one kernel launch read a weight matrix of
// a small projection (Llama-3-8B's o: 33.5 MB, qkv: 50.3 MB) when launched
// back to back (4 rotating copies so L2 does not flatter), as the kernel
// benchmark times the small-M GEMMs? A read-only kernel (each thread sums
// its 16-byte vectors, one word a block written), in several grids and
// loads in flight, plain and as a programmatic dependent launch whose
// first loads go out before griddepcontrol.wait; beside cudaMemcpy of the
// same bytes. The issue-5 target for the small-M GEMMs is 85% of the 2 GiB
// copy rate on the weight bytes.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o read_micro bench/read_micro.cu
#include <stdint.h>
#include "micro_common.cuh"

__device__ __forceinline__ uint4 ldnc(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// Each block reads a contiguous share of the vectors, U a thread in
// flight; PDL: the first round goes out before the dependency wait.
template <int U, bool PDL>
__global__ void __launch_bounds__(256) read_sum(const uint4 *w, long nv, unsigned *out) {
    const long per = (nv + gridDim.x - 1) / gridDim.x, b0 = (long)blockIdx.x * per, b1 = min(nv, b0 + per);
    unsigned acc = 0;
    long i = b0 + threadIdx.x;
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; u++) x[u] = i + u * 256 < b1 ? ldnc(w + i + u * 256) : make_uint4(0, 0, 0, 0);
    if (PDL) asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
    for (;;) {
#pragma unroll
        for (int u = 0; u < U; u++) acc += x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
        i += U * 256;
        if (i >= b1) break;
#pragma unroll
        for (int u = 0; u < U; u++) x[u] = i + u * 256 < b1 ? ldnc(w + i + u * 256) : make_uint4(0, 0, 0, 0);
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 16);
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

typedef void (*kfn)(const uint4 *, long, unsigned *);
struct Ctx {
    uint4 *w[4];
    long nv;
    unsigned *out;
    kfn f;
    int grid, pdl;
    void *cs[4], *cd[4];
    size_t cb;
};
static void launch(Ctx *c, int s) {
    if (!c->f) CK(cudaMemcpyAsync(c->cd[s], c->cs[s], c->cb, cudaMemcpyDeviceToDevice, 0));
    else launch_k(c->f, c->grid, 256, 0, c->pdl != 0, (const uint4 *)c->w[s], c->nv, c->out);
}
static float time_it(Ctx *c, int sets) { return time_launches(launch, c, sets); }

int main() {
    int nsm;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    const double ceil_bw = copy_ceiling();
    const size_t sizes[] = {(size_t)4096 * 4096 * 2, (size_t)6144 * 4096 * 2, (size_t)4096 * 14336 * 2};
    const char *names[] = {"o 33.5 MB", "qkv 50.3 MB", "down 117 MB"};
    for (int si = 0; si < 3; si++) {
        Ctx c = {};
        c.nv = (long)(sizes[si] / 16);
        for (int s = 0; s < 4; s++) {
            CK(cudaMalloc(&c.w[s], sizes[si]));
            CK(cudaMemset(c.w[s], s + 1, sizes[si]));
        }
        CK(cudaMalloc(&c.out, 4 * 64 * nsm));
        // cudaMemcpy of the same bytes read (half read, half written: the "copy" of this many bytes moved)
        c.cb = sizes[si] / 2;
        for (int s = 0; s < 4; s++) c.cs[s] = c.w[s], c.cd[s] = (char *)c.w[(s + 1) % 4] + c.cb;
        float t = time_it(&c, 4);
        printf("%-12s %-34s %7.2f us %6.1f%%\n", names[si], "cudaMemcpy (bytes moved = size)", t, sizes[si] / (t * 1e-6) / ceil_bw * 100);
        struct { const char *n; kfn f; int pdl; } ks[] = {
            {"read U4", read_sum<4, false>, 0},  {"read U8", read_sum<8, false>, 0},
            {"read U4 PDL", read_sum<4, true>, 1}, {"read U8 PDL", read_sum<8, true>, 1},
            {"read U16 PDL", read_sum<16, true>, 1},
        };
        for (auto &k : ks) {
            for (int gm : {1, 2, 4, 8}) {
                c.f = k.f, c.pdl = k.pdl, c.grid = gm * nsm;
                float tt = time_it(&c, 4);
                printf("%-12s %-22s grid %4d %7.2f us %6.1f%%\n", names[si], k.n, c.grid, tt,
                       sizes[si] / (tt * 1e-6) / ceil_bw * 100);
            }
        }
        for (int s = 0; s < 4; s++) CK(cudaFree(c.w[s]));
        CK(cudaFree(c.out));
    }
    return 0;
}
