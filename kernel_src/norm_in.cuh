// norm_in.cuh -- the batch-1 norm fold's consumer side (kernel_src/gemv.cu NIN, kernel_src/gemm_skx.cu NIN):
// 1 / rms of the residual row from the producer's partial sums of squares. asm-free (the CPU emulation of
// tests/emu includes it as it is); after kiln_common.cuh (warp_sum).
#pragma once

// NIN's scale (above): the producer's partial sums of squares, their count, epsilon
struct NormIn {
    const float *part;
    int npart;
    float eps;
};
// this warp's 1 / rms of the residual row of K elements from the npart
// partials: 16 a lane in flight at a time (four 16-byte loads where whole),
// summed in a fixed order
__device__ __forceinline__ float nin_rrms(const NormIn &ni, int K, int lane) {
    float s = 0.0f;
    for (int i0 = 0; i0 < ni.npart; i0 += 32 * 16) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int i = i0 + (u * 32 + lane) * 4;
            if (i + 3 < ni.npart) v[u] = *reinterpret_cast<const float4 *>(ni.part + i);
            else {
                v[u].x = i < ni.npart ? ni.part[i] : 0.0f;
                v[u].y = i + 1 < ni.npart ? ni.part[i + 1] : 0.0f;
                v[u].z = i + 2 < ni.npart ? ni.part[i + 2] : 0.0f;
                v[u].w = 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++) s += ((v[u].x + v[u].y) + v[u].z) + v[u].w;
    }
    return rsqrtf(warp_sum(s) / (float)K + ni.eps);
}
