// norm_fold.cuh -- the batch-1 residual add + RMSNorm folded into the GEMMs around it: the producer's store
// (kernel_src/gemv.cu and gemm_skx.cu NOUT). asm-free (the CPU emulation of tests/emu includes it as it is);
// after kiln_common.cuh.
#pragma once

// kernel_src/gemv.cu and gemm_skx.cu NOUT: output n's sum v (bias added) into the residual as add_rmsnorm
// stores it -- h = residual + v, each rounded to act -- and h * nw rounded into out[n]; returns h^2 for the
// block's sum of squares (res and nwr: residual[n] and nw[n] as loaded before)
template <class A, class O> KILN_DEV float nout_put(A *residual, O *out, int n, float v, float res, float nwr) {
    const A h = from_f32<A>(res + to_f32(from_f32<A>(v)));
    residual[n] = h;
    const float hf = to_f32(h);
    out[n] = from_f32<O>(hf * nwr);
    return hf * hf;
}
