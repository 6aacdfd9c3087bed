// wgmma.cuh -- Hopper warpgroup MMA (wgmma) helpers shared by the kernels
// compiled for sm_90a (kernel_src/attn_prefill_wg.cu, gemm_sk_wg.cu): the
// shared-memory matrix descriptor of a SWIZZLE_128B K-major operand, the
// fence / commit / wait of a warpgroup's asynchronous MMAs, and the proxy
// fence between cp.async writes and wgmma reads. Device code only; include
// only where __CUDA_ARCH_FEAT_SM90_ALL is defined.
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
