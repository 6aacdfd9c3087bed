// gemm_types.cuh -- the tensor-core GEMMs' input and output types from their specialization defines (ACT,
// OUT; default bf16 in, act out) and which MMA kind the input takes. No includes: after kiln_common.cuh
// (or, in the CPU emulation of kernels, tests/emu's kiln_common.cuh).
#pragma once

#ifndef ACT
#define ACT bf16
#endif
#ifndef OUT
#define OUT ACT
#endif
typedef ACT act_t;
typedef OUT out_t;

template <class T> struct mma_kind;
template <> struct mma_kind<bf16> { static constexpr bool f16 = false; };
template <> struct mma_kind<fp16> { static constexpr bool f16 = true; };
