// gemm_tc_common.cuh (emulation) -- kernel_src/gemm_tc_common.cuh's m16n8k16 MMA on the CPU (cuda_emu.h's
// warp rendezvous), with its act / out types (kernel_src/gemm_types.cuh), for the tensor-core GEMMs tested
// under emulation.
#pragma once
#include "kiln_common.cuh"
#include "gemm_types.cuh" // kernel_src's

// d += a (16 x 16: W rows x k) * b (16 x 8: k x x rows), fp32 accumulation
KILN_DEV void mma_act(float d[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    const u32 a[4] = {a0, a1, a2, a3}, b[2] = {b0, b1};
    emu::mma(d, a, b, [](u16 h) { return mma_kind<act_t>::f16 ? emu_half_to_float(h) : __uint_as_float((u32)h << 16); });
}
