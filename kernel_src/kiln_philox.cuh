// kiln_philox.cuh -- Philox-4x32-10 and its unit float, for the sampling kernels (kernel_src/sample.cu).
// Asm-free, included by kiln_common.cuh and by the CPU emulation's shim (tests/emu/kiln_common.cuh), so the
// emulated sampler draws the same numbers. The host's twin: runtime/base/util.c kiln_philox4x32.
#pragma once
// Philox-4x32-10: the same stream as kiln_philox4x32 on the host.
KILN_DEV void philox4x32(u64 key, u64 ctr_hi, u64 ctr_lo, u32 out[4]) {
    u32 c0 = (u32)ctr_lo, c1 = (u32)(ctr_lo >> 32), c2 = (u32)ctr_hi, c3 = (u32)(ctr_hi >> 32);
    u32 k0 = (u32)key, k1 = (u32)(key >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        u32 n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}
KILN_DEV float u32_to_unit(u32 x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
