// test_emu_sk_rope.cc -- kernel_src/gemm_sk.cu's ROPE epilogue (kiln_gemm_sk_rope: the qkv projection of a decode
// step of M sequences with the rotary embedding and the KV-cache write, mma.sync path) under the CPU emulation of
// tests/emu/cuda_emu.h, one specialization a build (ACT MAXM WARPS STAGES CL ROPE=1 HD KV on the command line).
// emu_rope_epi.h's small-integer inputs (every GEMM sum exact in any order) and bit-for-bit check of the outputs
// and cache cells (rope_rot's roundings).
// Ragged K (the last 64-wide chunk partial; CL slices of 3 chunks), rows 1, 2, MAXM / 2 + 1, MAXM, GQA (4 q / 2 kv
// heads, then six full batches of 8 / 4), a bias and mscale on some cases. Fails (every build) when the epilogue's
// rotation is left to the compiler's contraction as it was (plain x0 c - x1 s: the emulator rounds each product
// and the sum), its partner taken from the wrong warp (`pw` as `warp`), the second half's sign flipped, a k head
// cached unrotated, or a slot of -1 written (a store before the caches: the process aborts).
#include "gemm_tc_common.cuh"
#include GEMM_SK_EMU_SRC
#include <algorithm>
#include "emu_rope_epi.h"

static void body(void *p) {
    RopeEpiCase *c = static_cast<RopeEpiCase *>(p);
    const int nchunks = (c->K + 63) / 64, cps = (nchunks + CL - 1) / CL;
    kiln_gemm_sk_rope(c->out.data(), c->ldo, c->x.data(), c->w.data(), c->with_bias ? c->bias.data() : nullptr, c->M,
                      c->N, c->K, cps, nullptr, c->nq, c->nkv, c->pos.data(), c->inv.data(), c->mscale, c->kc.data(),
                      c->vc.data(), c->slots.data(), c->bs);
}

static int run_case(int M, int nq, int nkv, bool with_bias, float mscale, unsigned seed) {
    RopeEpiCase c(M, MAXM, nq, nkv, 64 * 3 * CL - 40, 5, 6, 10000.0f, seed); // K: CL slices of 3 chunks, ragged
    c.with_bias = with_bias, c.mscale = mscale;
    std::mt19937 rng(seed);
    std::vector<int> perm(c.nb * c.bs);
    for (int i = 0; i < c.nb * c.bs; i++) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int m = 0; m < M; m++) c.pos[m] = (int)(rng() % 8192), c.slots[m] = m == 1 ? -1 : perm[m]; // row 1: not cached
    emu::launch(emu_dim3{(unsigned)(c.N / HD), (unsigned)CL, 1}, THREADS, SMEM_BYTES, CL > 1 ? CL : 0, body, &c);
    int bad, badk, badv;
    const bool ok = c.check(bad, badk, badv);
    printf("%s gemm_sk_rope MAXM=%d WARPS=%d STAGES=%d CL=%d HD=%d act %s: M %d, %d q / %d kv heads, K %d, bias %d, "
           "mscale %g: %d outputs, %d key / %d value cells not the expected bits\n",
           ok ? "ok  " : "FAIL", MAXM, WARPS, STAGES, CL, HD, mma_kind<act_t>::f16 ? "fp16" : "bf16", M, nq, nkv, c.K,
           with_bias, mscale, bad, badk, badv);
    return !ok;
}

int main() {
    int failures = 0;
    const int Ms[] = {1, 2, MAXM / 2 + 1, MAXM};
    for (int mi = 0; mi < 4; mi++)
        failures += run_case(Ms[mi], 4, 2, mi % 2 == 0, mi == 2 ? 1.25f : 1.0f, 100 + mi);
    // more rotated values (8 q / 4 kv heads, full batches): enough that a rounding left to contraction shows
    for (int c = 0; c < 6; c++) failures += run_case(MAXM, 8, 4, c % 2 == 1, 1.0f, 200 + c);
    return failures ? 1 : 0;
}
