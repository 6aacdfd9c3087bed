// test_emu_rope.cc -- kernel_src/rope_kv.cu (the rotary embedding and the paged KV-cache write of decode-sized
// steps) under the CPU emulation of tests/emu/cuda_emu.h, one specialization a build (ACT, INTERLEAVED, KV).
// Every entry the engine launches, at engine/cuda/ops_gpu.c's launch sizes: kiln_rope (kiln_gpu_rope below
// $KILN_ELEM_WIDE_MIN tokens), kiln_kv_write (kiln_gpu_kv_write's last path: 16 tokens and one KV head a
// block), kiln_rope_kv_write (kiln_gpu_rope_kv_write's last path) and kiln_rope_kv_write_dec (its path up to
// $KILN_ROPE_DEC_MAX tokens). Tokens per block from tokens_per_block on an H200 (132 SMs: one token a
// block at these sizes) and on smaller GPUs (2 and 8 SMs: 16 and 4 tokens a block, the last block partial). Two batches a specialization: a prefill of three sequences (one from
// position 0, two from mid-block, ending mid-block; a skipped token; padding rows) and a decode step (ten
// sequences, one of them three tokens, at positions up to ~9000; a padding row). kiln_rope_kv_write_dec (a
// block a token) on the decode step, and on the prefill where it rotates part of the dims (fp16 specs). Against emu_rope.h's check:
// rotated q / k within fp32 math and one rounding to ACT of a double reference (kiln_rope_kv_write_dec:
// also bit for bit against rope_rot's float operations), every other element of the rows and every cache
// cell not written untouched, every cell written holding the bits of KV(k / scale), KV(v / scale). Exit 0
// when every case passes.
#include "kiln_common.cuh"
#include ROPE_KV_EMU_SRC
#include "emu_rope.h"

struct Args {
    RopeCase *c;
    int tt;
};
static void body_rope(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_rope(c.rows(), c.row_stride, c.pos.data(), c.T, c.sp.nq, c.sp.nkv, c.sp.hd, c.sp.rot, c.inv_freq.data(),
              c.sp.mscale, c.dyn(), c.dyn_max, c.dyn_base, c.dyn_factor, a->tt);
}
static void body_kv_write(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_kv_write(c.kc.data(), c.vc.data(), c.k_rows(), c.v_rows(), c.row_stride, c.slots.data(), c.T, c.sp.nkv,
                  c.sp.hd, c.sp.bs, c.k_scale, c.v_scale, a->tt, c.kv_scales());
}
static void body_rope_kv_write(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_rope_kv_write(c.rows(), c.row_stride, c.pos.data(), c.T, c.sp.nq, c.sp.nkv, c.sp.hd, c.sp.rot,
                       c.inv_freq.data(), c.sp.mscale, c.dyn(), c.dyn_max, c.dyn_base, c.dyn_factor, c.kc.data(),
                       c.vc.data(), c.slots.data(), c.sp.bs, c.k_scale, c.v_scale, a->tt, c.kv_scales());
}
static void body_dec(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_rope_kv_write_dec(c.rows(), c.row_stride, c.pos.data(), c.T, c.sp.nq, c.sp.nkv, c.sp.hd, c.sp.rot,
                           c.inv_freq.data(), c.sp.mscale, c.dyn(), c.dyn_max, c.dyn_base, c.dyn_factor, c.kc.data(),
                           c.vc.data(), c.slots.data(), c.sp.bs, c.k_scale, c.v_scale, c.kv_scales());
}

// engine/cuda/ops_gpu.c tokens_per_block: halve 16 until the blocks reach twice the SMs
static int tokens_per_block(int T, int n_sms) {
    int tt = 16;
    while (tt > 1 && (T + tt - 1) / tt < 2 * n_sms) tt /= 2;
    return tt;
}
// engine/cuda/ops_gpu.c kv_smem: V staging of nh heads (VT_STRIDE 18, VT_BUDGET 40960)
static unsigned kv_smem(int nh, int hd) {
    int row = hd * 18 * (int)sizeof(act_t), hg = std::max(1, 40960 / row);
    return (unsigned)(std::min(nh, hg) * row);
}

// kiln_gpu_rope (not wide): ceil(T / tt) blocks of 256, tt * rot / 2 float2 of cos / sin
static int run_rope(RopeCase &c, int n_sms) {
    c.reset();
    Args a{&c, tokens_per_block(c.T, n_sms)};
    const unsigned smem = (unsigned)(a.tt * c.sp.rot / 2 * 8);
    emu::launch(emu_dim3{(unsigned)((c.T + a.tt - 1) / a.tt), 1, 1}, 256, smem, 0, body_rope, &a);
    char what[64];
    snprintf(what, sizeof what, "kiln_rope (%d SMs: %d tokens a block)", n_sms, a.tt);
    return c.check(what, true, false, true);
}
// kiln_gpu_kv_write (not wide): tt = min(16, T) tokens, grid (ceil(T / tt), nkv), 128 threads, one head's V staging
static int run_kv_write(RopeCase &c) {
    c.reset();
    Args a{&c, std::min(16, std::max(1, c.T))};
    emu::launch(emu_dim3{(unsigned)((c.T + a.tt - 1) / a.tt), (unsigned)c.sp.nkv, 1}, 128, kv_smem(1, c.sp.hd), 0,
                body_kv_write, &a);
    return c.check("kiln_kv_write", false, true, false);
}
// kiln_gpu_rope_kv_write (last path): ceil(T / tt) blocks of 256, max(the cos / sin table, all heads' V staging)
static int run_rope_kv_write(RopeCase &c, int n_sms) {
    c.reset();
    Args a{&c, tokens_per_block(c.T, n_sms)};
    const unsigned smem = std::max((unsigned)(a.tt * c.sp.rot / 2 * 8), kv_smem(c.sp.nkv, c.sp.hd));
    emu::launch(emu_dim3{(unsigned)((c.T + a.tt - 1) / a.tt), 1, 1}, 256, smem, 0, body_rope_kv_write, &a);
    char what[64];
    snprintf(what, sizeof what, "kiln_rope_kv_write (%d SMs: %d tokens a block)", n_sms, a.tt);
    return c.check(what, true, true, true);
}
// kiln_gpu_rope_kv_write (T <= rope_dec_max): a block a token, a thread an item, rounded up to whole warps
static int run_dec(RopeCase &c) {
    c.reset();
    const int ve = vec16<act_t>::N, hd = c.sp.hd, rot = c.sp.rot;
    const int per = (INTERLEAVED ? rot / ve : rot / 2 / ve) + (hd - rot) / ve;
    const int items = (c.sp.nq + c.sp.nkv) * per + c.sp.nkv * (hd / ve);
    if (items > 1024) return fprintf(stderr, "test setup: %d items a token (the host takes another kernel)\n", items), 1;
    Args a{&c, 0};
    emu::launch(emu_dim3{(unsigned)c.T, 1, 1}, (items + 31) / 32 * 32, 0, 0, body_dec, &a);
    return c.check("kiln_rope_kv_write_dec", true, true, true);
}

int main() {
    const bool kv8 = sizeof(kv_t) == 1, f16 = std::is_same<act_t, fp16>::value;
    // the shapes: Llama-3 (32 q / 8 KV heads of 128, bs 16), MHA fp16 (8 + 8 heads of 64, bs 32), FP8 caches: 24 /
    // 12 heads of 128 (bf16: two V staging groups of 8 in kiln_rope_kv_write) and 4 / 2 heads of 64 (fp16)
    RopeSpec s{};
    if (!kv8) s.nq = f16 ? 8 : 32, s.nkv = 8, s.hd = f16 ? 64 : 128, s.bs = f16 ? 32 : 16;
    else s.nq = f16 ? 4 : 24, s.nkv = f16 ? 2 : 12, s.hd = f16 ? 64 : 128, s.bs = 16;
    const int ve = vec16<act_t>::N;
    s.rot = s.hd;
    s.row_pad = f16 ? ve : 0;
    s.mscale = 1.0f;
    int failures = 0;

    // a prefill: sequence 0 from position 0 (37 tokens: a whole 16-token run, one ending in a skipped token,
    // then mid-block), sequence 1 from 19 (a skipped token; positions 22-29: 8 consecutive slots not from a
    // multiple of 8), sequence 2 from 5 (25 tokens); two padding rows
    RopeSpec p = s;
    p.seqs = {{0, 37}, {19, 21}, {5, 25}};
    p.skip = {31, 38};
    p.n_pad = 2;
    p.llama3 = !f16;
    p.dyn = kv8;         // FP8 specs: dynamic NTK (sequence 0 and 1 past dyn_max 36, sequence 2 not)
    p.head_scales = !f16;
    if (f16) p.rot = kv8 ? s.hd / 2 : 3 * ve; // partial rotary (interleaved: an odd count of vectors)
    {
        RopeCase c(p, 1);
        failures += run_rope(c, 2) + run_rope(c, 8);
        failures += run_kv_write(c);
        failures += run_rope_kv_write(c, 2) + run_rope_kv_write(c, 8);
        if (f16) failures += run_dec(c); // (its items past rot_dim: the decode step rotates every dim)
    }
    // a decode step: ten sequences (one of three tokens: a speculative step), positions up to ~9000, one padding row
    RopeSpec d = s;
    d.seqs = {{0, 1}, {15, 1}, {16, 1}, {8999, 1}, {31, 1}, {100, 3}, {63, 1}, {1, 1}, {4095, 1}, {47, 1}};
    d.n_pad = 1;
    d.llama3 = f16;
    d.dyn = !kv8 && f16;
    d.head_scales = f16;
    d.mscale = kv8 ? 1.0f : 1.25f;
    {
        RopeCase c(d, 2);
        failures += run_rope(c, 132);
        failures += run_kv_write(c);
        failures += run_rope_kv_write(c, 132);
        failures += run_dec(c);
    }
    return failures ? 1 : 0;
}
