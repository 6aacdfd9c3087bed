// test_emu_embed.cc -- kernel_src/embed.cu under the CPU emulation of tests/emu/cuda_emu.h, one specialization a
// build: kiln_embed (ACT, W), kiln_gather_rows and kiln_gather_last (ACT), kiln_cast (SRC, DST), and with FEED=1
// alone (as the registry compiles it: no type defines) kiln_step_feed. Launched as engine/cuda/ops_gpu.c sizes
// them (kiln_gpu_embed: T blocks; kiln_gpu_gather_rows / _gather_last: a block a row; kiln_gpu_cast: grid_for's
// blocks, and grids smaller than the work for its grid-stride loop; kiln_gpu_step_feed: ceil(units / 256) blocks,
// at most 264, and past that cap; 256 threads each). Every output is checked bit for bit: the embedding rows
// (W's values converted to ACT), zero rows for ids outside the shard [vocab_start, vocab_start + V_local) (below,
// above, negative, INT_MAX / INT_MIN, a shard near INT_MAX), the gathered rows (the 16-byte path and the scalar
// one: odd dims, a misaligned out or x; rows of one fp32 holding token ids, as the executor feeds tokens without
// kiln_step_feed), the last rows of packed sequences, the casts (against the emulation's
// from_f32(to_f32()), so these check the indexing; the GPU test test_fp8_cast checks the conversions), the
// step's metadata block copied with the fed tokens res[feed[i]] in place (0, 1, 5, 8 fed; ending mid unit, at
// the block's end, past the 264-block cap, the feed list overlapping the tokens: read from the host block).
// Outputs are poisoned (0xff bytes: NaN in every float type) with guards before and after, which must stay
// untouched; inputs end at an inaccessible page (emu::Guarded: a read past them faults); 16-byte accesses must be
// aligned. (Sizes that are not whole 16-byte units: kiln_gpu_step_feed refuses them, the kernel never sees one.)
// copy_row (kiln_embed's rows of W = ACT, the gathers) copies in 16-byte pieces, COPY_V a thread, or zeros for a
// null source (H 40, 24, 256 and 8200: more than one round of pieces; H 1000 bf16 rows its element loop; fp32 ACT
// from bf16 W and the other mixed pairs kiln_embed's own element loop).
// Mutations of the transformed source (build/tests/emu/embed_emu.cu) this test fails: kiln_embed's `r < V_local`
// as `<=` and `r >= 0` dropped (a read past W faults), `- vocab_start` dropped, its stride `i += blockDim.x` as
// `i += 2 * blockDim.x`; copy_row's `(bytes & 15) == 0` as `1` (an odd row's last element left poison), its
// alignment test dropped (a misaligned st16) or dst's only (a misaligned ld16), `n = bytes / 16` one short, the
// scalar loop's `i < dim` as `i <= dim` (a read past x faults); gather_rows's `rows[i]` as `rows[i] + 1` (a fault);
// gather_last's `qstart[s + 1] - 1` as `qstart[s]` or `qstart[s + 1]` (a fault), its empty-sequence test dropped
// or `e > qstart[s]` as `e >= qstart[s]` (empty sequences' rows wrong); kiln_cast's stride doubled, its
// `i < n` as `i <= n` (a fault); kiln_step_feed's `k < n_feed` as `k <= n_feed` (a fault), `tok_end` not rounded up
// to the unit (5 fed: the fifth lost), the feed list read from dmeta, `res[feed[k]]` as `res[k]`, `k` one word on,
// `o >= tok_off` as `o > tok_off`, every unit taken from the thread's `first`, `u += stride` as `u += 2 * stride`,
// the first read without `u < units` (a read past the host block faults). Harmless, and surviving: `in ? r : 0` as
// `r` (nothing is read outside the shard), the strides shortened to 32 / blockDim.x (redundant copies of the same
// values), step_feed's `o == 16 * (...)` as `o == 0` (the unit read again), `t >= T` / `i >= n` loosened (the grid
// is exactly T / n blocks).
#include "kiln_common.cuh"
#include EMBED_EMU_SRC
#include <climits>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

static const int THREADS = 256; // every launch of these kernels in engine/cuda/ops_gpu.c
static const unsigned char POISON = 0xff;

template <class T> static const char *name() {
    return std::is_same<T, float>::value ? "fp32" : std::is_same<T, bf16>::value ? "bf16" : std::is_same<T, fp16>::value ? "fp16"
           : std::is_same<T, fp8_e4m3>::value ? "fp8_e4m3" : "fp8_e5m2";
}

// an output buffer: n elements at out, PRE elements before and POST after, all poisoned; out is 16-byte aligned
// (misalign: one element past that)
template <class T> struct Out {
    static constexpr size_t PRE = 32, POST = 64;
    std::vector<unsigned char> raw;
    T *out;
    size_t n;
    Out(size_t n_, bool misalign = false) : raw((PRE + n_ + POST + 1) * sizeof(T) + 16, POISON), n(n_) {
        unsigned char *b = raw.data() + (16 - ((uintptr_t)raw.data() & 15)) % 16;
        out = reinterpret_cast<T *>(b) + PRE + (misalign ? 1 : 0);
    }
    // the bytes of the guards still poison: how many differ
    int stray() const {
        int bad = 0;
        const unsigned char *lo = raw.data(), *o = reinterpret_cast<const unsigned char *>(out),
                            *e = reinterpret_cast<const unsigned char *>(out + n), *hi = raw.data() + raw.size();
        for (const unsigned char *p = lo; p < o; p++) bad += *p != POISON;
        for (const unsigned char *p = e; p < hi; p++) bad += *p != POISON;
        return bad;
    }
};

template <class T> static bool same(const T &a, const T &b) { return memcmp(&a, &b, sizeof(T)) == 0; }

static int report(bool ok, const char *what, int bad, int stray) {
    printf("%s %s: %d wrong, %d stray bytes\n", ok ? "ok  " : "FAIL", what, bad, stray);
    return !ok;
}

// ------------------------------------------------------------------------------------------------ kiln_embed
#if defined(ACT) && defined(W)
struct EmbedArgs {
    act_t *out;
    const int *ids;
    int T;
    const w_t *w;
    i64 V_local;
    int H;
    i64 vocab_start;
};
static void body_embed(void *p) {
    EmbedArgs *a = static_cast<EmbedArgs *>(p);
    kiln_embed(a->out, a->ids, a->T, a->w, a->V_local, a->H, a->vocab_start);
}

// ids: the given ones, then random ids around the shard up to T
static int embed_case(int T, int H, int V, i64 start, std::vector<int> ids_in, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    emu::Guarded<w_t> w((size_t)V * H);
    for (size_t i = 0; i < (size_t)V * H; i++) w[i] = from_f32<w_t>(u(rng));
    emu::Guarded<int> ids((size_t)T);
    for (int t = 0; t < T; t++) {
        const i64 lo = start - V / 4, span = V + V / 2; // a quarter of the shard's size either side
        ids[t] = t < (int)ids_in.size() ? ids_in[t] : (int)std::max<i64>(0, lo + (i64)(rng() % (u32)span));
    }
    Out<act_t> out((size_t)T * H);
    EmbedArgs a{out.out, ids.data(), T, w.data(), V, H, start};
    emu::launch(emu_dim3{(unsigned)T, 1, 1}, THREADS, 0, 0, body_embed, &a); // kiln_gpu_embed: T blocks of 256
    int bad = 0;
    for (int t = 0; t < T; t++) {
        const i64 r = (i64)ids[t] - start;
        const bool in = r >= 0 && r < V;
        for (int i = 0; i < H; i++) {
            const act_t e = from_f32<act_t>(in ? to_f32(w[(size_t)r * H + i]) : 0.0f);
            if (!same(out.out[(size_t)t * H + i], e)) {
                if (bad < 5) fprintf(stderr, "  embed t %d (id %d) [%d]: %g, expected %g\n", t, ids[t], i,
                                     to_f32(out.out[(size_t)t * H + i]), to_f32(e));
                bad++;
            }
        }
    }
    const int stray = out.stray();
    char what[160];
    snprintf(what, sizeof what, "embed act %s w %s: T %d H %d V %d vocab_start %lld", name<act_t>(), name<w_t>(), T, H,
             V, (long long)start);
    return report(!bad && !stray, what, bad, stray);
}
#endif

// --------------------------------------------------------------------------- kiln_gather_rows / gather_last
#ifdef ACT
struct GatherArgs {
    act_t *out;
    const act_t *x;
    const int *idx;
    int n, dim;
    bool last;
};
static void body_gather(void *p) {
    GatherArgs *a = static_cast<GatherArgs *>(p);
    if (a->last) kiln_gather_last(a->out, a->x, a->idx, a->n, a->dim);
    else kiln_gather_rows(a->out, a->x, a->idx, a->n, a->dim);
}

// gather_rows (last false: n random rows of `rows`, the first and last among them, row 0 first: where x is 16-byte
// aligned so is the first row's source, whatever dim) or gather_last (n packed sequences of 1..5 tokens, rows =
// their total); x_off / out_mis: x one element short of a 16-byte boundary, out one past one
static int gather_case(bool last, int rows, int n, int dim, bool x_off, bool out_mis, unsigned seed,
                       bool empties = false) {
    std::mt19937 rng(seed);
    std::vector<int> src(n), qs(n + 1, 0);
    if (last) { // empties: every third sequence (the first among them) has no tokens, its row zeros (src -1)
        for (int s = 0; s < n; s++) qs[s + 1] = qs[s] + (empties && s % 3 == 0 ? 0 : 1 + (int)(rng() % 5));
        rows = qs[n];
        for (int s = 0; s < n; s++) src[s] = qs[s + 1] > qs[s] ? qs[s + 1] - 1 : -1;
    } else {
        for (int i = 0; i < n; i++) src[i] = i == 0 ? 0 : i == 1 ? rows - 1 : (int)(rng() % (u32)rows);
    }
    const size_t nx = (size_t)rows * dim;
    emu::Guarded<act_t> xb(nx + (x_off ? 1 : 0)); // x_off: one element more, x its first (one short of 16 bytes)
    act_t *x = xb.data();
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (size_t i = 0; i < nx; i++) x[i] = from_f32<act_t>(u(rng));
    if (sizeof(act_t) == 4 && dim == 1) // token ids as fp32 (exec_gpu.c's feed without kiln_step_feed): subnormal bits
        for (size_t i = 0; i < nx; i++) {
            const u32 id = (u32)(i * 7919 % 128256);
            memcpy(&x[i], &id, 4);
        }
    emu::Guarded<int> idx(last ? (size_t)n + 1 : (size_t)n);
    for (int i = 0; i < (last ? n + 1 : n); i++) idx[i] = last ? qs[i] : src[i];
    Out<act_t> out((size_t)n * dim, out_mis);
    GatherArgs a{out.out, x, idx.data(), n, dim, last};
    emu::launch(emu_dim3{(unsigned)n, 1, 1}, THREADS, 0, 0, body_gather, &a); // a block a row (kiln_gpu_gather_*)
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++)
            if (!same(out.out[(size_t)i * dim + j], src[i] < 0 ? from_f32<act_t>(0.0f) : x[(size_t)src[i] * dim + j])) {
                if (bad < 5) fprintf(stderr, "  row %d (of x row %d) [%d] differs\n", i, src[i], j);
                bad++;
            }
    const int stray = out.stray();
    char what[160];
    snprintf(what, sizeof what, "%s act %s: %d rows of %d, dim %d%s%s%s", last ? "gather_last" : "gather_rows",
             name<act_t>(), n, rows, dim, x_off ? ", x misaligned" : "", out_mis ? ", out misaligned" : "",
             empties ? ", empty sequences" : "");
    return report(!bad && !stray, what, bad, stray);
}
#endif

// -------------------------------------------------------------------------------------------------- kiln_cast
#if defined(SRC) && defined(DST)
struct CastArgs {
    dst_t *dst;
    const src_t *src;
    i64 n;
};
static void body_cast(void *p) {
    CastArgs *a = static_cast<CastArgs *>(p);
    kiln_cast(a->dst, a->src, a->n);
}

// grid 0: grid_for(n, 256) as kiln_gpu_cast launches it
static int cast_case(i64 n, unsigned grid, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    emu::Guarded<src_t> src((size_t)n);
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-30f, 65504.0f, 70000.0f, 448.0f,
                                    500.0f, 57344.0f, 1e6f, -3e38f};
    for (i64 i = 0; i < n; i++) {
        const float v = i < (i64)(sizeof special / sizeof *special) ? special[i] : g(rng) * ldexpf(1.0f, (int)(rng() % 40) - 20);
        src[i] = from_f32<src_t>(v);
    }
    Out<dst_t> out((size_t)n);
    CastArgs a{out.out, src.data(), n};
    const unsigned blocks = grid ? grid : (unsigned)std::max<i64>(1, std::min<i64>((n + THREADS - 1) / THREADS, 132 * 16));
    emu::launch(emu_dim3{blocks, 1, 1}, THREADS, 0, 0, body_cast, &a);
    int bad = 0;
    for (i64 i = 0; i < n; i++) {
        const dst_t e = from_f32<dst_t>(to_f32(src[i]));
        if (!same(out.out[i], e)) {
            if (bad < 5) fprintf(stderr, "  cast [%lld]: %g, expected %g\n", (long long)i, to_f32(out.out[i]), to_f32(e));
            bad++;
        }
    }
    const int stray = out.stray();
    char what[160];
    snprintf(what, sizeof what, "cast %s -> %s: n %lld, %u blocks%s", name<src_t>(), name<dst_t>(), (long long)n, blocks,
             grid ? " (fewer than the work: the grid-stride loop)" : "");
    return report(!bad && !stray, what, bad, stray);
}
#endif

// -------------------------------------------------------------------------------------------- kiln_step_feed
#ifdef FEED
struct FeedArgs {
    char *dmeta;
    const char *hmeta;
    i64 n, tok_off, feed_off;
    int n_feed;
    const int *res;
};
static void body_feed(void *p) {
    FeedArgs *a = static_cast<FeedArgs *>(p);
    kiln_step_feed(a->dmeta, a->hmeta, a->n, a->tok_off, a->feed_off, a->n_feed, a->res);
}

// n bytes (a multiple of 16), tokens at tok_off, the feed list at feed_off, n_feed fed from res[16]
static int feed_case(i64 n, i64 tok_off, i64 feed_off, int n_feed, unsigned seed) {
    emu::Guarded<u32> h((size_t)n / 4); // the "pinned host" block (host memory here), ending at the guard page
    for (i64 i = 0; i < n / 4; i++) h[i] = (u32)(i * 2654435761u + seed);
    for (int i = 0; i < n_feed; i++) h[(size_t)feed_off / 4 + i] = (u32)((i * 5 + 3 + seed) % 16);
    emu::Guarded<int> res(16);
    for (int i = 0; i < 16; i++) res[i] = 1000 + 7 * i;
    Out<u32> d((size_t)n / 4);
    FeedArgs a{reinterpret_cast<char *>(d.out), reinterpret_cast<const char *>(h.data()), n, tok_off, feed_off, n_feed,
               res.data()};
    const i64 units = n / 16; // kiln_gpu_step_feed's grid (n > 0: it returns before launching for an empty block)
    const unsigned blocks = (unsigned)std::max<i64>(1, std::min<i64>((units + THREADS - 1) / THREADS, 264));
    emu::launch(emu_dim3{blocks, 1, 1}, THREADS, 0, 0, body_feed, &a);
    int bad = 0;
    for (i64 i = 0; i < n / 4; i++) {
        const i64 k = i - tok_off / 4;
        const u32 e = k >= 0 && k < n_feed ? (u32)res[h[(size_t)feed_off / 4 + k]] : h[i];
        if (d.out[i] != e) {
            if (bad < 5) fprintf(stderr, "  word %lld: %u, expected %u\n", (long long)i, d.out[i], e);
            bad++;
        }
    }
    const int stray = d.stray();
    char what[160];
    snprintf(what, sizeof what, "step_feed: %lld bytes (%u blocks), tokens at %lld, feed at %lld, %d fed", (long long)n,
             blocks, (long long)tok_off, (long long)feed_off, n_feed);
    return report(!bad && !stray, what, bad, stray);
}
#endif

int main() {
    int failures = 0;
#if defined(ACT) && defined(W)
    // the GPU test's shape: ids below and above the shard, its first and last rows and one past, negative, extreme
    failures += embed_case(37, 1000, 800, 100, {50, 950, 100, 899, 900, -7, INT_MAX, INT_MIN, 99}, 1);
    failures += embed_case(5, 40, 64, 0, {0, 63, 64, -1, 7}, 2);        // rows shorter than the block
    failures += embed_case(3, 256, 10, 0, {9, 0, 10}, 3);              // a row exactly the block
    failures += embed_case(6, 24, 16, 2147483640LL, {INT_MAX, 2147483640, 2147483639, 5, -1, INT_MIN}, 4); // near INT_MAX
    // 16-bit rows of 8200 (fp32 4100): 1025 16-byte pieces, past one round of EMB_V a thread (the copy's loop)
    failures += embed_case(3, 8200, 4, 0, {3, 4, 0}, 5);
#endif
#ifdef ACT
    const int e = vec16<act_t>::N; // elements a 16-byte unit
    for (int last = 0; last < 2; last++) {
        failures += gather_case(last, 48, 9, 1001, false, false, 10 + last);    // odd dim: the scalar path (x aligned)
        failures += gather_case(last, 40, 7, 300 * e, false, false, 12 + last); // 300 units a row: a second pass
        failures += gather_case(last, 20, 5, 3 * e, false, false, 14 + last);   // 3 units: fewer than the threads
        failures += gather_case(last, 30, 4, 40 * e, false, true, 16 + last);   // out misaligned: scalar
        failures += gather_case(last, 30, 4, 40 * e, true, false, 18 + last);   // x misaligned: scalar
        failures += gather_case(last, 8, 1, 2 * e + 1, false, false, 20 + last); // one row
        failures += gather_case(last, 64, 33, 1, false, false, 22 + last);        // rows of one element
        if (last) {
            failures += gather_case(true, 0, 7, 40 * e, false, false, 24, true); // empty sequences (the first one too)
            failures += gather_case(true, 0, 5, 1001, false, false, 25, true);   // ... on the scalar path
        }
    }
#endif
#if defined(SRC) && defined(DST)
    failures += cast_case(4099, 0, 30);  // 17 blocks, the last part full
    failures += cast_case(1, 0, 31);
    failures += cast_case(5000, 3, 32);  // 768 threads: the loop goes round 7 times
#endif
#ifdef FEED
    static const int counts[] = {5, 0, 8, 1};
    for (int ci = 0; ci < 4; ci++) failures += feed_case(64 * 1024 + 256, 1024, 256, counts[ci], (unsigned)ci); // the GPU test's
    failures += feed_case(4096 + 48, 4096 + 48 - 32, 0, 8, 7);   // the tokens the block's last two units
    failures += feed_case(4096 + 48, 4096 + 48 - 32, 16, 5, 8);  // ... ending mid unit
    failures += feed_case(16, 0, 0, 4, 9);                      // one unit, the feed list the tokens' own words
    failures += feed_case(16, 0, 0, 3, 10);
    // past the 264-block cap: the grid-stride loop, the tokens and the feed list in its second round (not a
    // thread's first unit)
    const i64 cap = 264 * THREADS;
    failures += feed_case(16 * (cap + 100), 16 * (cap + 7), 16 * (cap + 60), 5, 11);
#endif
    return failures ? 1 : 0;
}
