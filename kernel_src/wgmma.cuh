// wgmma.cuh -- Hopper warpgroup MMA (wgmma) helpers shared by the kernels
// compiled for sm_90a (kernel_src/attn_prefill_wg.cu, gemm_sk_wg.cu,
// gemm_sk_tma.cu): the shared-memory matrix descriptor of a SWIZZLE_128B
// K-major operand, the fence / commit / wait of a warpgroup's asynchronous
// MMAs, the proxy fence between cp.async writes and wgmma reads, mbarriers,
// TMA tensor-map loads, and the accumulator operand lists of their asm
// statements. Device code only; its functions are used only where
// __CUDA_ARCH_FEAT_SM90_ALL is defined (gemm_sk.cu also includes it
// elsewhere for tmap_t, the type of its SK_TMA kernel's parameters).
#pragma once
#include "kiln_common.cuh"

// Matrix descriptor of a K-major SWIZZLE_128B operand whose 8-row groups are
// 1024 bytes apart (start address >> 4 in bits 0-13, leading byte offset
// unused (1), stride byte offset 1024 >> 4 in bits 32-45, layout 1 in bits
// 62-63). The k-step s of 16 elements inside an atom starts 32 s bytes on.
KILN_DEV u64 wg_desc(u32 saddr) { return (u64)((saddr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62); }

KILN_DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
KILN_DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> KILN_DEV void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
// cp.async (generic proxy) writes -> wgmma (async proxy) reads
KILN_DEV void wg_fence_proxy() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// mbarriers (shared::cta, 32-bit shared-window addresses)
KILN_DEV void mb_init(u32 bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
KILN_DEV void mb_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// wait until the phase of parity `parity` has completed (acquire)
KILN_DEV void mb_wait(u32 bar, u32 parity) {
    u32 done;
    do {
        asm volatile("{ .reg .pred p;\n"
                     "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p; }\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
// ------------------------------------------------- TMA (the tensor memory accelerator)
// A tensor map (CUtensorMap, encoded on the host by cuTensorMapEncodeTiled)
// as a __grid_constant__ kernel parameter: its generic address is what the
// copies name
struct __align__(64) tmap_t {
    u64 v[16];
};
KILN_DEV u64 tmap_addr(const tmap_t &m) { return reinterpret_cast<u64>(&m); }
KILN_DEV void tmap_prefetch(const tmap_t &m) { asm volatile("prefetch.tensormap [%0];" ::"l"(tmap_addr(m)) : "memory"); }
// this thread's arrival on bar, adding `bytes` to the transaction count the phase waits for
KILN_DEV void mb_arrive_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// mbarrier inits -> the async proxy (TMA's complete_tx) and the rest of the block
KILN_DEV void mb_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// the 2-D box at (c0 (innermost), c1) of m into shared memory at dst; its
// bytes complete a transaction on bar (this block's shared memory)
KILN_DEV void tma_load_2d(u32 dst, const tmap_t &m, int c0, int c1, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(tmap_addr(m)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// The accumulator operands of a wgmma m64nN (N / 2 floats a thread: 4 .. 64):
// the register list of its asm string (WG_R<n>) and the "+f" operands of the
// d fragment (WG_D<n>(d))
#define WG_R4 "%0, %1, %2, %3"
#define WG_R8 WG_R4 ", %4, %5, %6, %7"
#define WG_R16 WG_R8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define WG_R32 WG_R16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_R64                                                                                                  \
    WG_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, " \
           "%51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_D4(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define WG_D8(d) WG_D4(d), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define WG_D16(d)                                                                                                  \
    WG_D8(d), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define WG_D32(d)                                                                                                  \
    WG_D16(d), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),          \
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),    \
        "+f"(d[31])
#define WG_D64(d)                                                                                                  \
    WG_D32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]),         \
        "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]),  \
        "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),  \
        "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),  \
        "+f"(d[63])
