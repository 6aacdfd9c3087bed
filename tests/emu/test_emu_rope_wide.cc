// test_emu_rope_wide.cc -- kernel_src/rope_kv_wide.cu (the rotary embedding and the paged KV-cache write of
// prefill-sized steps) under the CPU emulation of tests/emu/cuda_emu.h, one specialization a build (ACT,
// INTERLEAVED, KV). Every entry, at engine/cuda/ops_gpu.c's launch sizes for its wide paths (taken from
// $KILN_ELEM_WIDE_MIN tokens; run here at smaller T, as test_gpu_ops forces them): kiln_rope_wide
// (kiln_gpu_rope), kiln_kv_write_pipe / _tile / _wide (kiln_gpu_kv_write with $KILN_KV_TILE 2 -- the pipeline
// for 16-bit rows and caches -- 1 and 0), kiln_rope_kv_write_tile / _wide (kiln_gpu_rope_kv_write with
// $KILN_KV_TILE 1, and 0 or 2). The rope rows' head slots (head_slots) and the pipeline's grid from the SM
// count: an H200's 132 (one head a thread) and a 1-SM GPU's (four heads a thread, in rounds; a pipeline
// block taking several units through its stages). Two batches a specialization: a prefill of three
// sequences (one from position 0: a whole 16-token chunk of consecutive slots, then one whose 16th token is
// skipped; two from mid-block, an 8-slot run starting mid-chunk, a skipped token, ending mid-block; two
// padding rows: the last chunk partial) and a decode step (ten sequences, one of three tokens, at positions up to ~9000). Against
// emu_rope.h's check (rotated q / k within fp32 math and one rounding to ACT of a double reference, every
// other element of the rows and every cache cell not written untouched, every cell written holding the
// bits of KV(k / scale), KV(v / scale)). Exit 0 when every case passes.
#include "kiln_common.cuh"
#include ROPE_KV_WIDE_EMU_SRC
#include "emu_rope.h"

struct Args {
    RopeCase *c;
    int hs, hg, nbr;
};
static void body_rope_wide(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_rope_wide(c.rows(), c.row_stride, c.pos.data(), c.T, c.sp.nq, c.sp.nkv, c.sp.hd, c.sp.rot, c.inv_freq.data(),
                   c.sp.mscale, c.dyn(), c.dyn_max, c.dyn_base, c.dyn_factor, a->hs);
}
static void body_kv_write_wide(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_kv_write_wide(c.kc.data(), c.vc.data(), c.k_rows(), c.v_rows(), c.row_stride, c.slots.data(), c.T, c.sp.nkv,
                       c.sp.hd, c.sp.bs, c.k_scale, c.v_scale, a->hg, c.kv_scales());
}
static void body_kv_write_tile(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_kv_write_tile(c.kc.data(), c.vc.data(), c.k_rows(), c.v_rows(), c.row_stride, c.slots.data(), c.T, c.sp.nkv,
                       c.sp.hd, c.sp.bs, c.k_scale, c.v_scale, c.kv_scales());
}
static void body_kv_write_pipe(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_kv_write_pipe(c.kc.data(), c.vc.data(), c.k_rows(), c.v_rows(), c.row_stride, c.slots.data(), c.T, c.sp.nkv,
                       c.sp.hd, c.sp.bs);
}
static void body_rope_kv_write_wide(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_rope_kv_write_wide(c.rows(), c.row_stride, c.pos.data(), c.T, c.sp.nq, c.sp.nkv, c.sp.hd, c.sp.rot,
                            c.inv_freq.data(), c.sp.mscale, c.dyn(), c.dyn_max, c.dyn_base, c.dyn_factor, c.kc.data(),
                            c.vc.data(), c.slots.data(), c.sp.bs, c.k_scale, c.v_scale, a->hs, c.kv_scales(), a->nbr,
                            a->hg);
}
static void body_rope_kv_write_tile(void *p) {
    Args *a = static_cast<Args *>(p);
    RopeCase &c = *a->c;
    kiln_rope_kv_write_tile(c.rows(), c.row_stride, c.pos.data(), c.T, c.sp.nq, c.sp.nkv, c.sp.hd, c.sp.rot,
                            c.inv_freq.data(), c.sp.mscale, c.dyn(), c.dyn_max, c.dyn_base, c.dyn_factor, c.kc.data(),
                            c.vc.data(), c.slots.data(), c.sp.bs, c.k_scale, c.v_scale, a->hs, c.kv_scales(), a->nbr);
}

// engine/cuda/ops_gpu.c's sizing of the wide launches (RKV_THREADS 128, ROPE_RI 4, KV_KH 4, KV_TILE_WARPS 4,
// KV_PIPE_NS 4 stages of 16 KiB + 68 bytes, KV_PIPE_BPS 12 blocks an SM)
static const int RKV = 128;
static int rope_cols(const RopeCase &c) { // 16-byte columns of a head's rotated part
    const int ve = vec16<act_t>::N;
    return INTERLEAVED ? c.sp.rot / ve : c.sp.rot / (2 * ve);
}
static int head_slots(int T, int nh, int cols, int n_sms) {
    const long long cap = (long long)n_sms * 2048, want = (long long)T * nh * cols;
    const int items = (int)std::min(4LL, std::max(1LL, (want + cap - 1) / cap));
    int hs = (nh + items - 1) / items;
    if (cols == 8 || cols == 16) hs = (hs + 32 / cols - 1) / (32 / cols) * (32 / cols);
    return hs;
}
static long long rkv_blocks(long long n) { return (n + RKV - 1) / RKV; }
static int kv_heads_per_block(int nkv, int hd) {
    const int per_head = 16 * (2 * hd * (int)sizeof(act_t) + 20);
    return std::max(1, std::min(std::min(nkv, 4), (40960 - 64) / per_head));
}
static unsigned kv_block_smem(int hg, int hd) { return (unsigned)(64 + hg * 16 * (2 * hd * (int)sizeof(act_t) + 20)); }
static long long kv_blocks(int T, int nkv, int hg) { return (long long)((T + 15) / 16) * ((nkv + hg - 1) / hg); }
static long long kv_tile_smem(bool rope, int rot, int hd) {
    const long long row = (long long)hd * (long long)sizeof(act_t), warp = 128 + 16 * (row + 4) + (rope ? 16 * (row + 16) : 0);
    return (rope ? 16 * (long long)(rot / 2) * 8 : 0) + 4 * warp;
}
static long long kv_tile_blocks(int T, int nkv) { return (long long)((T + 15) / 16) * ((nkv + 3) / 4); }

static int setup_fail(const char *what) { return fprintf(stderr, "test setup: the host would not take %s here\n", what), 1; }

// kiln_gpu_rope (wide): T x hs x cols threads in blocks of RKV, no shared memory
static int run_rope_wide(RopeCase &c, int n_sms) {
    c.reset();
    const int cols = rope_cols(c);
    Args a{&c, head_slots(c.T, c.sp.nq + c.sp.nkv, cols, n_sms), 0, 0};
    const long long nb = rkv_blocks((long long)c.T * a.hs * cols);
    emu::launch(emu_dim3{(unsigned)nb, 1, 1}, RKV, 0, 0, body_rope_wide, &a);
    char what[80];
    snprintf(what, sizeof what, "kiln_rope_wide (%d SMs: %d head slots)", n_sms, a.hs);
    return c.check(what, true, false, true);
}
// kiln_gpu_kv_write, $KILN_KV_TILE 2 (kv_pipe_ok: 16-bit rows and cache, head_dim a power of two in [32, 256]):
// min(units, 12 blocks an SM) blocks of 256, 4 stages
static int run_kv_write_pipe(RopeCase &c, int n_sms) {
    c.reset();
    const int hd = c.sp.hd;
    if (sizeof(act_t) != 2 || sizeof(kv_t) != 2 || hd < 32 || hd > 256 || (hd & (hd - 1))) return setup_fail("kv_write_pipe");
    const long long units = (long long)((c.T + 15) / 16) * ((c.sp.nkv + 256 / hd - 1) / (256 / hd));
    const long long grid = std::min(units, 12LL * n_sms);
    Args a{&c, 0, 0, 0};
    emu::launch(emu_dim3{(unsigned)grid, 1, 1}, 256, 4 * (16384 + 68), 0, body_kv_write_pipe, &a);
    char what[80];
    snprintf(what, sizeof what, "kiln_kv_write_pipe (%d SMs: %lld blocks, %lld units)", n_sms, grid, units);
    return c.check(what, false, true, false);
}
// kiln_gpu_kv_write, $KILN_KV_TILE 1 (kv_tile_ok; 2 for FP8 caches): tile blocks of RKV, kv_tile_smem
static int run_kv_write_tile(RopeCase &c) {
    c.reset();
    const long long smem = kv_tile_smem(false, 0, c.sp.hd);
    if (smem > 96 * 1024) return setup_fail("kv_write_tile");
    Args a{&c, 0, 0, 0};
    emu::launch(emu_dim3{(unsigned)kv_tile_blocks(c.T, c.sp.nkv), 1, 1}, RKV, (size_t)smem, 0, body_kv_write_tile, &a);
    return c.check("kiln_kv_write_tile", false, true, false);
}
// kiln_gpu_kv_write, $KILN_KV_TILE 0 (kv_wide_ok): KV blocks of hg heads (kv_heads_per_block), kv_block_smem
static int run_kv_write_wide(RopeCase &c) {
    c.reset();
    if (kv_block_smem(1, c.sp.hd) > 40960) return setup_fail("kv_write_wide");
    Args a{&c, 0, kv_heads_per_block(c.sp.nkv, c.sp.hd), 0};
    emu::launch(emu_dim3{(unsigned)kv_blocks(c.T, c.sp.nkv, a.hg), 1, 1}, RKV, kv_block_smem(a.hg, c.sp.hd), 0,
                body_kv_write_wide, &a);
    char what[80];
    snprintf(what, sizeof what, "kiln_kv_write_wide (%d heads a KV block)", a.hg);
    return c.check(what, false, true, false);
}
// kiln_gpu_rope_kv_write, $KILN_KV_TILE 1 (kv_tile_ok): rope rows over the q heads (nbr blocks), then tile blocks
static int run_rope_kv_write_tile(RopeCase &c, int n_sms) {
    c.reset();
    const long long smem = kv_tile_smem(true, c.sp.rot, c.sp.hd);
    if (smem > 96 * 1024) return setup_fail("rope_kv_write_tile");
    const int cols = rope_cols(c), hs = c.sp.nq > 0 ? head_slots(c.T, c.sp.nq, cols, n_sms) : 1;
    const long long nbr = c.sp.nq > 0 ? rkv_blocks((long long)c.T * hs * cols) : 0, nb = nbr + kv_tile_blocks(c.T, c.sp.nkv);
    Args a{&c, hs, 0, (int)nbr};
    emu::launch(emu_dim3{(unsigned)nb, 1, 1}, RKV, (size_t)smem, 0, body_rope_kv_write_tile, &a);
    char what[80];
    snprintf(what, sizeof what, "kiln_rope_kv_write_tile (%d SMs: %d head slots)", n_sms, hs);
    return c.check(what, true, true, true);
}
// kiln_gpu_rope_kv_write, $KILN_KV_TILE 0 or 2 (kv_wide_ok): rope rows over the q heads (nbr blocks), then KV blocks
static int run_rope_kv_write_wide(RopeCase &c, int n_sms) {
    c.reset();
    if (kv_block_smem(1, c.sp.hd) > 40960) return setup_fail("rope_kv_write_wide");
    const int cols = rope_cols(c), hs = c.sp.nq > 0 ? head_slots(c.T, c.sp.nq, cols, n_sms) : 1;
    const int hg = kv_heads_per_block(c.sp.nkv, c.sp.hd);
    const long long nbr = c.sp.nq > 0 ? rkv_blocks((long long)c.T * hs * cols) : 0, nb = nbr + kv_blocks(c.T, c.sp.nkv, hg);
    Args a{&c, hs, hg, (int)nbr};
    emu::launch(emu_dim3{(unsigned)nb, 1, 1}, RKV, kv_block_smem(hg, c.sp.hd), 0, body_rope_kv_write_wide, &a);
    char what[80];
    snprintf(what, sizeof what, "kiln_rope_kv_write_wide (%d SMs: %d head slots, %d heads a KV block)", n_sms, hs, hg);
    return c.check(what, true, true, true);
}

int main() {
    const bool kv8 = sizeof(kv_t) == 1, f16 = std::is_same<act_t, fp16>::value, f32 = sizeof(act_t) == 4;
    // the shapes: Llama-3 (32 q / 8 KV heads of 128, bs 16), MHA fp16 (8 + 8 heads of 64, bs 32), FP8 caches: 24 /
    // 12 heads of 128 (bf16: KV blocks of 4 heads; fp32 rows: of 2, rope rows sharing cos / sin over 2 lanes) and
    // 4 / 2 heads of 64 (fp16)
    RopeSpec s{};
    if (!kv8) s.nq = f16 ? 8 : 32, s.nkv = 8, s.hd = f16 ? 64 : 128, s.bs = f16 ? 32 : 16;
    else s.nq = f16 ? 4 : 24, s.nkv = f16 ? 2 : 12, s.hd = f16 ? 64 : 128, s.bs = 16;
    if (f32) s.nq = 8, s.nkv = 6;
    const int ve = vec16<act_t>::N;
    s.rot = s.hd;
    s.row_pad = f16 ? ve : 0;
    s.mscale = 1.0f;
    int failures = 0;

    // a prefill: sequence 0 from position 0 (37 tokens: a whole 16-token chunk, one whose last token is
    // skipped, then mid-block), sequence 1 from 19 (token 38 skipped; positions 22-29: 8 consecutive slots not
    // from a multiple of 8; an 8-slot run from position 32 at token 50, lane 2 of a chunk), sequence 2 from 5
    // (bs 32: tokens 64-79, a whole chunk of consecutive slots not from a multiple of 8); two padding rows
    RopeSpec p = s;
    p.seqs = {{0, 37}, {19, 21}, {5, 25}};
    p.skip = {31, 38};
    p.n_pad = 2;
    p.llama3 = !f16;
    p.dyn = kv8;
    p.head_scales = !f16;
    if (f16) p.rot = kv8 ? s.hd / 2 : 3 * ve; // partial rotary (interleaved: an odd count of vectors)
    {
        RopeCase c(p, 3);
        failures += run_rope_wide(c, 1);
        if (!kv8 && !f32) failures += run_kv_write_pipe(c, 1);
        failures += run_kv_write_tile(c) + run_kv_write_wide(c);
        failures += run_rope_kv_write_tile(c, 1) + run_rope_kv_write_wide(c, 1);
    }
    // a decode step: ten sequences (one of three tokens), positions up to ~9000, one padding row
    RopeSpec d = s;
    d.seqs = {{0, 1}, {15, 1}, {16, 1}, {8999, 1}, {31, 1}, {100, 3}, {63, 1}, {1, 1}, {4095, 1}, {47, 1}};
    d.n_pad = 1;
    d.llama3 = f16;
    d.dyn = !kv8 && f16;
    d.head_scales = f16;
    d.mscale = kv8 ? 1.0f : 1.25f;
    {
        RopeCase c(d, 4);
        failures += run_rope_wide(c, 132);
        if (!kv8 && !f32) failures += run_kv_write_pipe(c, 132);
        failures += run_kv_write_tile(c) + run_kv_write_wide(c);
        failures += run_rope_kv_write_tile(c, 132) + run_rope_kv_write_wide(c, 132);
    }
    return failures ? 1 : 0;
}
