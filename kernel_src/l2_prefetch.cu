// l2_prefetch.cu -- L2 prefetch of a weight matrix ahead of a GEMM that
// cannot load its weights before its predecessor has ended.
//
// kiln's own GEMMs issue their first weight tiles before griddepcontrol.wait
// (programmatic dependent launch), so their weight stream starts under the
// kernel before them. cuBLASLt's kernels may not be launched that way (they
// read their input before waiting: bench/RESULTS.md, Engine, fourteenth
// session), so each starts with the memory system idle for its own ramp.
// This kernel, launched between the producer of the GEMM's input and the
// GEMM, asks L2 for the first bytes of the GEMM's weights so that they
// stream in under the producer's tail and the GEMM's launch and ramp. It
// reads and writes nothing the program computes; it waits on its
// predecessor before it ends, so the stream order of what follows holds.
//
//   kiln_l2_prefetch(base, pitch, row_bytes, rows, after_wait): for r in
//   [0, rows): bytes [0, row_bytes) of the row at base + r * pitch; issued
//   before the wait on the previous kernel, or after it (after_wait != 0:
//   nothing competes with the predecessor's own traffic). base, pitch and
//   row_bytes are multiples of 16.
#include "kiln_common.cuh"

#define PIECE 16384 // bytes a prefetch instruction asks for

KILN_DEV void prefetch_piece(const char *p, u32 bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
    for (u32 o = 0; o < bytes; o += 128) prefetch_l2(p + o);
#endif
}

KILN_DEV void issue(const char *base, i64 pitch, i64 row_bytes, int rows) {
    const i64 pieces = (row_bytes + PIECE - 1) / PIECE; // a row's pieces
    const i64 total = pieces * rows;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const i64 r = i / pieces, c = i - r * pieces;
        const i64 off = c * PIECE;
        const i64 n = row_bytes - off < PIECE ? row_bytes - off : PIECE;
        prefetch_piece(base + r * pitch + off, (u32)n);
    }
}

extern "C" __global__ void kiln_l2_prefetch(const char *base, i64 pitch, i64 row_bytes, int rows, int after_wait) {
    if (after_wait) pdl_wait();
    issue(base, pitch, row_bytes, rows);
    if (!after_wait) pdl_wait();
    pdl_launch();
}
