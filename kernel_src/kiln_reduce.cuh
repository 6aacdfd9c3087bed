// kiln_reduce.cuh -- sums and maxima over a warp and over a block (kiln_common.cuh's reductions). asm-free:
// the CPU emulation of tests/emu includes it as it is, after its own shuffles and barriers.
#pragma once

KILN_DEV float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
KILN_DEV float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// A reduction over the block (warp_op over each warp, the warps' results through scratch -- 32 floats --
// and warp_op again, idle for the lanes past the warps); every thread gets the result.
template <class WarpOp> KILN_DEV float block_reduce(float v, float *scratch, float idle, WarpOp warp_op) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_op(v);
    __syncthreads();
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : idle;
    return warp_op(v);
}
KILN_DEV float block_sum(float v, float *scratch) { return block_reduce(v, scratch, 0.0f, [](float a) { return warp_sum(a); }); }
KILN_DEV float block_max(float v, float *scratch) { return block_reduce(v, scratch, -KILN_INF, [](float a) { return warp_max(a); }); }
