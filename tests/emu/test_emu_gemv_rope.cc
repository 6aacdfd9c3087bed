// test_emu_gemv_rope.cc -- kernel_src/gemv.cu's kiln_gemv_rope (the qkv GEMV of a batch-1 decode step with the
// rotary embedding and the KV-cache write as its epilogue) under the CPU emulation of tests/emu/cuda_emu.h, one
// specialization a build (ACT UNROLL KSPLIT ROPE=1 RR HD KV on the command line). emu_rope_epi.h's small-integer
// inputs (every dot product exact in any order) and bit-for-bit check of the outputs and cache cells (rope_rot's
// roundings). GQA (4 q / 2 kv heads, then
// Llama-3-8B's 32 / 8 at eight more positions), a K of vectors past whole unrolled steps, a bias and mscale on
// some cases. Fails when the rotation is left to the compiler's contraction (plain x0 c - x1 s: after the rounding
// to act only 1-2 of the ~50,000 rotated values a build differ, so two of the four builds fail), the pair's rows
// swapped, or the key cache written unrotated.
#include GEMV_EMU_SRC
#include "emu_rope_epi.h"

static void body(void *p) {
    RopeEpiCase *c = static_cast<RopeEpiCase *>(p);
    kiln_gemv_rope(c->out.data(), c->x.data(), c->w.data(), c->with_bias ? c->bias.data() : nullptr, c->N, c->K, c->nq,
                   c->nkv, c->pos.data(), c->inv.data(), c->mscale, c->kc.data(), c->vc.data(), c->slots.data(), c->bs,
                   nullptr, 0, 0.0f);
}

static int run_case(int nq, int nkv, int slot, bool with_bias, float mscale, int pos0, unsigned seed) {
    // K: vectors past whole unrolled steps
    RopeEpiCase c(1, 1, nq, nkv, vec16<act_t>::N * (32 * UNROLL * KSPLIT + 24), 0, 4, 500000.0f, seed);
    c.with_bias = with_bias, c.mscale = mscale, c.pos[0] = pos0, c.slots[0] = slot;
    const int per_block = RR == 2 ? WARPS / KSPLIT : WARPS / KSPLIT / 2; // row pairs a block (ops_gpu.c)
    emu::launch(emu_dim3{(unsigned)((c.N / 2 + per_block - 1) / per_block), 1, 1}, 256, 0, 0, body, &c);
    int bad, badk, badv;
    const bool ok = c.check(bad, badk, badv);
    printf("%s gemv_rope UNROLL=%d KSPLIT=%d RR=%d HD=%d act %s: %d q / %d kv heads, K %d, slot %d, pos %d, bias %d, "
           "mscale %g: %d outputs, %d key / %d value cells not the expected bits\n",
           ok ? "ok  " : "FAIL", UNROLL, KSPLIT, RR, HD, std::is_same<act_t, fp16>::value ? "fp16" : "bf16", nq, nkv, c.K,
           slot, pos0, with_bias, mscale, bad, badk, badv);
    return !ok;
}

int main() {
    int failures = 0;
    failures += run_case(4, 2, 37, true, 1.0f, 130, 1);
    failures += run_case(4, 2, -1, false, 1.0f, 7, 2); // not cached
    failures += run_case(4, 2, 63, false, 1.25f, 8190, 3);
    failures += run_case(4, 2, 0, true, 1.0f, 0, 4);
    // Llama-3-8B's heads at more positions: enough rotated values that a rounding left to contraction shows
    for (int c = 0; c < 8; c++) failures += run_case(32, 8, 5 + 7 * c, c % 2 == 0, c == 3 ? 1.25f : 1.0f, 97 + 1013 * c, 10 + c);
    return failures ? 1 : 0;
}
