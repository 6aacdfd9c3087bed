// kv_write_micro.cu -- stand-alone probe of KV-write designs at the issue's
// 4096 tokens x 4096 (32 KV heads of 128, bf16 rows [q | k | v] of 12288,
// block size 16, contiguous slots), beside a copy kernel and cudaMemcpy of
// the same bytes. Not part of the engine: it decides which design goes
// into kernel_src/rope_kv_wide.cu. Each variant's cache is checked against
// a reference kernel (one element a thread) byte for byte.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o kv_write_micro bench/kv_write_micro.cu
//   ./kv_write_micro            (prints one row per variant)
#include <stdint.h>
#include <string.h>
#include "micro_common.cuh"

#define HD 128
#define BSZ 16

struct Args {
    const u16 *k, *v;
    long stride; // elements
    const int *slots;
    int T, nkv;
    u16 *kc, *vc;
};

__device__ __forceinline__ u32 saddr(const void *p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cpa16(u32 s, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cpa_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cpa_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void stg16(void *p, uint4 v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void mb_init(u32 bar, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(n) : "memory"); }
__device__ __forceinline__ void mb_arrive_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_wait(u32 bar, u32 par) {
    u32 done;
    do {
        asm volatile("{ .reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p; }\n"
                     : "=r"(done) : "r"(bar), "r"(par) : "memory");
    } while (!done);
}
__device__ __forceinline__ void bulk_g2s(u32 dst, const void *src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// reference: one element a thread
__global__ void kvw_ref(Args a) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long n = (long)a.T * a.nkv * HD;
    if (i >= n) return;
    int d = i % HD, h = (i / HD) % a.nkv, t = (int)(i / HD / a.nkv);
    int s = a.slots[t];
    if (s < 0) return;
    int b = s / BSZ, o = s % BSZ;
    long bstride = (long)a.nkv * HD * BSZ;
    a.kc[b * bstride + (((long)h * (HD / 8) + d / 8) * BSZ + o) * 8 + d % 8] = a.k[(long)t * a.stride + h * HD + d];
    a.vc[b * bstride + ((long)h * HD + d) * BSZ + o] = a.v[(long)t * a.stride + h * HD + d];
}

// copy of the same bytes (k and v parts of the rows -> linear), 4 vectors a thread in flight
__global__ void __launch_bounds__(256) copy_rows(Args a) {
    const long nv = (long)a.T * a.nkv * HD / 8; // 16-byte vectors of k (and of v)
    const int vpr = a.nkv * HD / 8;
    for (long i0 = ((long)blockIdx.x * 256 + threadIdx.x); i0 < 2 * nv; i0 += 4L * gridDim.x * 256) {
        uint4 x[4];
        long at[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            long i = i0 + (long)u * gridDim.x * 256;
            at[u] = -1;
            if (i < 2 * nv) {
                long j = i < nv ? i : i - nv;
                long t = j / vpr, c = j - t * vpr;
                x[u] = *(const uint4 *)((i < nv ? a.k : a.v) + t * a.stride + c * 8);
                at[u] = i;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (at[u] >= 0) stg16((at[u] < nv ? a.kc : a.vc) + (at[u] < nv ? at[u] : at[u] - nv) * 8, x[u]);
    }
}

// Units: (chunk of 16 tokens, HU consecutive heads); block b takes units
// [b * n / G, (b + 1) * n / G). Per head a stage holds 16 key rows then 16
// value rows of 256 bytes, 16-byte chunks swizzled: key row r chunk c at
// c ^ r (a quarter warp's 16-byte reads of one column, rows r..r+7, hit
// 8 different bank groups), value row r chunk c at c ^ ((r >> 3) << 1)
// (the two halves' 2-byte reads of 16 dims fall in different banks).
template <int HU, int NT>
__device__ __forceinline__ void store_unit(const Args &a, const unsigned char *st, int u, int ngr) {
    const int chunk = u / ngr, h0 = (u - chunk * ngr) * HU;
    const int b = a.slots[chunk * 16] / BSZ; // contiguous slots from a block start (the probe's case)
    const long bstride = (long)a.nkv * HD * BSZ;
    // keys: cell (h, g, o), o fastest
    for (int e = threadIdx.x; e < HU * 16 * 16; e += NT) {
        const int o = e & 15, g = (e >> 4) & 15, h = e >> 8;
        const uint4 x = *(const uint4 *)(st + ((h * 2) * 16 + o) * 256 + ((g ^ o) << 4));
        stg16(a.kc + b * bstride + ((long)(h0 + h) * 16 + g) * 128 + o * 8, x);
    }
    // values: (h, d, half), half fastest: 8 slots a vector
    for (int e = threadIdx.x; e < HU * HD * 2; e += NT) {
        const int gi = e & 1, d = (e >> 1) & (HD - 1), h = e >> 8;
        const int pos = (d >> 3) ^ (gi << 1);
        const unsigned char *base = st + ((h * 2 + 1) * 16 + gi * 8) * 256 + (pos << 4) + (d & 7) * 2;
        u32 w[4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            u32 lo = *(const u16 *)(base + (2 * q) * 256), hi = *(const u16 *)(base + (2 * q + 1) * 256);
            w[q] = lo | (hi << 16);
        }
        stg16(a.vc + b * bstride + ((long)(h0 + h) * HD + d) * 16 + gi * 8, make_uint4(w[0], w[1], w[2], w[3]));
    }
}

template <int NS, int HU, int NT, bool PDL = false>
__global__ void __launch_bounds__(NT) kvw_pipe(Args a) {
    extern __shared__ __align__(128) unsigned char sm[];
    constexpr int SB = HU * 2 * 16 * 256;
    if (PDL) asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
    const int ngr = a.nkv / HU, nunits = ((a.T + 15) / 16) * ngr;
    const int u0 = (int)((long)blockIdx.x * nunits / gridDim.x), u1 = (int)((long)(blockIdx.x + 1) * nunits / gridDim.x);
    const int n = u1 - u0;
    auto issue = [&](int i) {
        if (i < n) {
            const int u = u0 + i, chunk = u / ngr, h0 = (u - chunk * ngr) * HU;
            unsigned char *st = sm + (i % NS) * SB;
            for (int e = threadIdx.x; e < HU * 2 * 16 * 16; e += NT) {
                const int c = e & 15, r = (e >> 4) & 15, kv = (e >> 8) & 1, h = e >> 9;
                const int t = chunk * 16 + r;
                const u16 *src = (kv ? a.v : a.k) + (long)t * a.stride + (h0 + h) * HD + c * 8;
                const int pos = kv ? (c ^ ((r >> 3) << 1)) : (c ^ r);
                cpa16(saddr(st + ((h * 2 + kv) * 16 + r) * 256 + (pos << 4)), src);
            }
        }
        cpa_commit();
    };
    for (int i = 0; i < NS - 1; i++) issue(i);
    for (int i = 0; i < n; i++) {
        issue(i + NS - 1);
        cpa_wait<NS - 1>();
        __syncthreads();
        store_unit<HU, NT>(a, sm + (i % NS) * SB, u0 + i, ngr);
        __syncthreads();
    }
}

// The same with bulk copies (one 256-byte row a copy, issued by warp 0,
// completing on the stage's mbarrier). Rows padded instead of swizzled:
// key row r at r * 272, value row r at r * 272 + (r >> 3) * 32 (from the
// values' base); the store side reads them through the same offsets.
template <int HU, int NT>
__device__ __forceinline__ void store_unit_pad(const Args &a, const unsigned char *st, int u, int ngr) {
    const int chunk = u / ngr, h0 = (u - chunk * ngr) * HU;
    const int b = a.slots[chunk * 16] / BSZ;
    const long bstride = (long)a.nkv * HD * BSZ;
    constexpr int HB = 2 * 16 * 272 + 64; // a head's bytes
    for (int e = threadIdx.x; e < HU * 16 * 16; e += NT) {
        const int o = e & 15, g = (e >> 4) & 15, h = e >> 8;
        const uint4 x = *(const uint4 *)(st + h * HB + o * 272 + (g << 4));
        stg16(a.kc + b * bstride + ((long)(h0 + h) * 16 + g) * 128 + o * 8, x);
    }
    for (int e = threadIdx.x; e < HU * HD * 2; e += NT) {
        const int gi = e & 1, d = (e >> 1) & (HD - 1), h = e >> 8;
        const unsigned char *base = st + h * HB + 16 * 272 + gi * (8 * 272 + 32) + d * 2;
        u32 w[4];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            u32 lo = *(const u16 *)(base + (2 * q) * 272), hi = *(const u16 *)(base + (2 * q + 1) * 272);
            w[q] = lo | (hi << 16);
        }
        stg16(a.vc + b * bstride + ((long)(h0 + h) * HD + d) * 16 + gi * 8, make_uint4(w[0], w[1], w[2], w[3]));
    }
}

template <int NS, int HU, int NT>
__global__ void __launch_bounds__(NT) kvw_bulk(Args a) {
    extern __shared__ __align__(128) unsigned char sm[];
    constexpr int HB = 2 * 16 * 272 + 64, SB = HU * HB;
    __shared__ __align__(8) unsigned long long bars[NS];
    const int ngr = a.nkv / HU, nunits = ((a.T + 15) / 16) * ngr;
    const int u0 = (int)((long)blockIdx.x * nunits / gridDim.x), u1 = (int)((long)(blockIdx.x + 1) * nunits / gridDim.x);
    const int n = u1 - u0;
    if (threadIdx.x == 0) {
        for (int s = 0; s < NS; s++) mb_init(saddr(&bars[s]), 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    auto issue = [&](int i) {
        if (i < n && threadIdx.x < 32) {
            const int u = u0 + i, chunk = u / ngr, h0 = (u - chunk * ngr) * HU;
            const u32 bar = saddr(&bars[i % NS]);
            unsigned char *st = sm + (i % NS) * SB;
            if (threadIdx.x == 0) mb_arrive_tx(bar, HU * 2 * 16 * 256);
            __syncwarp();
            for (int e = threadIdx.x; e < HU * 2 * 16; e += 32) {
                const int r = e & 15, kv = (e >> 4) & 1, h = e >> 5;
                const int t = chunk * 16 + r;
                const u16 *src = (kv ? a.v : a.k) + (long)t * a.stride + (h0 + h) * HD;
                const int off = h * HB + kv * 16 * 272 + r * 272 + (kv ? (r >> 3) * 32 : 0);
                bulk_g2s(saddr(st + off), src, 256, bar);
            }
        }
    };
    for (int i = 0; i < NS - 1; i++) issue(i);
    for (int i = 0; i < n; i++) {
        issue(i + NS - 1);
        mb_wait(saddr(&bars[i % NS]), (u32)((i / NS) & 1));
        store_unit_pad<HU, NT>(a, sm + (i % NS) * SB, u0 + i, ngr);
        __syncthreads();
    }
}

typedef void (*kfn)(Args);
struct Variant {
    const char *name;
    kfn f;
    int nt, smem, pdl;
};

static int nsm;

struct Ctx {
    Args a[4];
    Variant v;
    int grid;
    void *cd[4], *cs[4];
    size_t cbytes;
};
static void launch_variant(Ctx *x, int s) { launch_k(x->v.f, x->grid, x->v.nt, x->v.smem, x->v.pdl != 0, x->a[s]); }
static void launch_memcpy(Ctx *x, int s) {
    CK(cudaMemcpyAsync(x->cd[s], x->cs[s], x->cbytes, cudaMemcpyDeviceToDevice, 0));
}
static float time_it(void (*launch)(Ctx *, int), Ctx *ctx, int sets) { return time_launches(launch, ctx, sets); }

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 4096, nkv = argc > 2 ? atoi(argv[2]) : 32;
    const long stride = (long)(32 + 2 * nkv) * HD; // q (32 heads) | k | v
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    const size_t rows_bytes = (size_t)T * stride * 2, cache_elems = (size_t)(T / 16) * nkv * HD * BSZ;
    Ctx c;
    memset(&c, 0, sizeof c);
    std::vector<u16> h((size_t)T * stride);
    int *slots;
    CK(cudaMalloc(&slots, 4 * T));
    {
        std::vector<int> s(T);
        for (int t = 0; t < T; t++) s[t] = t;
        CK(cudaMemcpy(slots, s.data(), 4 * T, cudaMemcpyHostToDevice));
    }
    u16 *kc, *vc, *rk, *rv;
    CK(cudaMalloc(&kc, cache_elems * 2));
    CK(cudaMalloc(&vc, cache_elems * 2));
    CK(cudaMalloc(&rk, cache_elems * 2));
    CK(cudaMalloc(&rv, cache_elems * 2));
    for (int s = 0; s < 4; s++) {
        srand(17 + s);
        for (size_t i = 0; i < h.size(); i++) h[i] = (u16)(rand() & 0xffff);
        u16 *x;
        CK(cudaMalloc(&x, rows_bytes));
        CK(cudaMemcpy(x, h.data(), rows_bytes, cudaMemcpyHostToDevice));
        c.a[s] = Args{x + 32 * HD, x + (32 + nkv) * HD, stride, slots, T, nkv, kc, vc};
    }
    const double bytes = 2.0 * 2.0 * T * nkv * HD * 2; // k and v, read once and written once
    // reference of set 0
    Args ra = c.a[0];
    ra.kc = rk, ra.vc = rv;
    kvw_ref<<<(unsigned)(((long)T * nkv * HD + 255) / 256), 256>>>(ra);
    CK(cudaDeviceSynchronize());
    std::vector<u16> href(cache_elems), hout(cache_elems);

    // memcpy of the same bytes, 4 sets
    c.cbytes = (size_t)(bytes / 2);
    for (int s = 0; s < 4; s++) {
        CK(cudaMalloc(&c.cs[s], c.cbytes));
        CK(cudaMalloc(&c.cd[s], c.cbytes));
    }
    float tm = time_it(launch_memcpy, &c, 4);
    const double ceil_bw = copy_ceiling();
    printf("T %d, %d KV heads, %.1f MB moved\n", T, nkv, bytes / 1e6);
    printf("%-28s %8.2f us %6.1f%%\n", "cudaMemcpy same bytes", tm, bytes / (tm * 1e-6) / ceil_bw * 100);

    Variant vs[] = {
        {"copy kernel (4 in flight)", copy_rows, 256, 0, 0},
        {"pipe NS4 HU2 NT256 PDL", kvw_pipe<4, 2, 256, true>, 256, 4 * 16384, 1},
        {"pipe NS4 HU1 NT128", kvw_pipe<4, 1, 128>, 128, 4 * 8192, 0},
        {"pipe NS6 HU1 NT128", kvw_pipe<6, 1, 128>, 128, 6 * 8192, 0},
        {"pipe NS3 HU2 NT256", kvw_pipe<3, 2, 256>, 256, 3 * 16384, 0},
        {"pipe NS4 HU2 NT256", kvw_pipe<4, 2, 256>, 256, 4 * 16384, 0},
        {"pipe NS6 HU2 NT256", kvw_pipe<6, 2, 256>, 256, 6 * 16384, 0},
        {"pipe NS8 HU1 NT128", kvw_pipe<8, 1, 128>, 128, 8 * 8192, 0},
        {"bulk NS4 HU1 NT128", kvw_bulk<4, 1, 128>, 128, 4 * (2 * 16 * 272 + 64), 0},
        {"bulk NS6 HU1 NT128", kvw_bulk<6, 1, 128>, 128, 6 * (2 * 16 * 272 + 64), 0},
        {"bulk NS4 HU2 NT256", kvw_bulk<4, 2, 256>, 256, 4 * 2 * (2 * 16 * 272 + 64), 0},
        {"bulk NS8 HU1 NT128", kvw_bulk<8, 1, 128>, 128, 8 * (2 * 16 * 272 + 64), 0},
    };
    for (auto &v : vs) {
        CK(cudaFuncSetAttribute(v.f, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem));
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.f, v.nt, v.smem));
        c.v = v;
        // persistent: occupancy x SMs (the copy kernel: that many blocks, grid-stride)
        for (int gm = 0; gm < 2; gm++) {
            c.grid = occ * nsm * (gm ? 4 : 1);
            CK(cudaMemset(kc, 0xff, cache_elems * 2));
            CK(cudaMemset(vc, 0xff, cache_elems * 2));
            launch_variant(&c, 0);
            CK(cudaDeviceSynchronize());
            bool ok = true;
            if (v.f != copy_rows) {
                CK(cudaMemcpy(href.data(), rk, cache_elems * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hout.data(), kc, cache_elems * 2, cudaMemcpyDeviceToHost));
                ok = ok && !memcmp(href.data(), hout.data(), cache_elems * 2);
                CK(cudaMemcpy(href.data(), rv, cache_elems * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hout.data(), vc, cache_elems * 2, cudaMemcpyDeviceToHost));
                ok = ok && !memcmp(href.data(), hout.data(), cache_elems * 2);
            }
            float t = time_it(launch_variant, &c, 4);
            printf("%-28s %8.2f us %6.1f%%  occ %d grid %d %s\n", v.name, t, bytes / (t * 1e-6) / ceil_bw * 100, occ, c.grid,
                   ok ? "ok" : "WRONG");
        }
    }
    return 0;
}
