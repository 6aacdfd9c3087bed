// cuda_emu.h -- enough of CUDA's execution model on the CPU to run a kiln kernel's logic (its indexing, its
// shared-memory layout, its synchronisation) without a GPU. Every thread of a block is a coroutine with its
// own stack (x86-64: a 20-instruction context switch, no system call), all run by one host thread;
// warp-collective instructions (ldmatrix, mma.sync, __syncwarp) meet at a rendezvous of the warp's 32 lanes,
// __syncthreads at one of the block's threads, the cluster barrier at one of the cluster's (a thread waiting
// at one yields to the next; a pass in which no thread arrives anywhere is a deadlock and fails). The blocks of
// a cluster run at once (their shared memories reachable through cluster_map addresses), clusters one after
// another. cp.async copies land only when a cp.async.wait_group retires their group, so a stage read before
// its wait reads stale bytes. Shared memory starts as 0xa5 bytes. Timing, occupancy and the memory model's
// weaker orderings are not modelled. Used by tests/emu/test_emu_*.cc through the kiln_common.cuh and
// gemm_tc_common.cuh shims beside this file. Thread-safety: one launch at a time.
#pragma once
#include <sys/mman.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <vector>

#if !defined(__x86_64__)
#error "tests/emu: the coroutine switch is written for x86-64 (tests/emu/CMakeLists.txt builds nothing elsewhere)"
#endif
// emu_ctx_switch(save, to): push the callee-saved registers (and the x87 / SSE control words) on this stack,
// store the stack pointer at *save, continue on the stack `to` (saved the same way, or made by emu::Coro)
extern "C" void emu_ctx_switch(void **save, void *to);
asm(R"(
    .text
    .weak emu_ctx_switch
    .type emu_ctx_switch, @function
emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    fldcw (%rsp)
    ldmxcsr 8(%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_ctx_switch, .-emu_ctx_switch
)");

#include "kiln_types.cuh" // kernel_src's (the include path: tests/emu, then kernel_src)

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
struct uint2 {
    unsigned x, y;
};
struct emu_dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace emu {

inline void yield();
inline u64 progress = 0; // arrivals and exits: a scheduler pass without any is a deadlock

// n threads meet; the last to arrive runs `last` before any leaves
struct Barrier {
    int n, count = 0;
    u64 gen = 0;
    explicit Barrier(int n_) : n(n_) {}
    template <class F> void meet(F &&last) {
        const u64 g = gen;
        progress++;
        if (++count == n) {
            last();
            count = 0;
            gen++;
            return;
        }
        while (gen == g) yield();
    }
    void meet() {
        meet([] {});
    }
    // a thread that will never arrive (it exited): the others no longer wait for it
    void leave() {
        n--;
        progress++;
        if (count && count == n) count = 0, gen++;
    }
};

struct Warp {
    Barrier bar{32};
    u32 addr[32], out[32][4], a[32][4], b[32][2], sv[32], ssrc[32], sres[32];
    float d[32][4];
};
struct Cluster;
struct Block {
    std::vector<unsigned char> smem;
    std::vector<std::unique_ptr<Warp>> warps;
    std::unique_ptr<Barrier> bar;
    emu_dim3 idx;
    unsigned rank = 0;
    Cluster *cl = nullptr;
    int vote_or = 0, vote_res = 0; // __syncthreads_or
};
struct Cluster {
    std::vector<Block *> blocks;
    std::unique_ptr<Barrier> bar;
};
struct Copy {
    u32 dst;
    const void *src;
    int bytes; // of 16 read, the rest zero
};
struct Thread {
    Block *blk;
    emu_dim3 tidx;
    int lane, warp;
    std::vector<std::vector<Copy>> groups; // committed, oldest first
    std::vector<Copy> open;                // issued since the last commit
};
inline Thread *cur = nullptr;
inline emu_dim3 grid_dim, block_dim;
inline u64 ticks = 0; // clock64 / globaltimer: a count that only grows

[[noreturn]] inline void fail(const char *what) {
    if (cur) fprintf(stderr, "emu: %s (block %u,%u thread %u)\n", what, cur->blk->idx.x, cur->blk->idx.y, cur->tidx.x);
    else fprintf(stderr, "emu: %s\n", what);
    abort();
}

// shared-window addresses: offsets into this block's shared memory; cluster_map sets bit 31 and the rank in
// bits 24..30
inline unsigned char *sptr(u32 a, unsigned bytes) {
    Block *b = cur->blk;
    if (a & 0x80000000u) {
        const unsigned r = (a >> 24) & 0x7f;
        if (!b->cl || r >= b->cl->blocks.size()) fail("cluster address of a rank outside the cluster");
        b = b->cl->blocks[r];
        a &= 0xffffffu;
    }
    if ((u64)a + bytes > b->smem.size()) fail("shared-memory access past the block's dynamic shared memory");
    return b->smem.data() + a;
}
inline u32 saddr(const void *p) {
    const unsigned char *q = static_cast<const unsigned char *>(p), *base = cur->blk->smem.data();
    if (q < base || q > base + cur->blk->smem.size()) fail("generic pointer outside shared memory");
    return (u32)(q - base);
}
inline unsigned char *block_smem() { return cur->blk->smem.data(); }
// a kernel's static shared array of n bytes (emu_transform.cmake): the emulated block's shared memory, which the
// launch must make at least that large
inline unsigned char *static_smem(size_t n) {
    if (cur->blk->smem.size() < n) fail("static shared array larger than the launch's shared memory");
    return cur->blk->smem.data();
}

inline void syncwarp() { cur->blk->warps[cur->warp]->bar.meet(); }
inline void syncthreads() { cur->blk->bar->meet(); }
// __syncthreads_or: the barrier, and whether any thread's predicate was non-zero
inline int syncthreads_or(int pred) {
    Block &b = *cur->blk;
    if (pred) b.vote_or = 1;
    b.bar->meet([&] { b.vote_res = b.vote_or, b.vote_or = 0; });
    return b.vote_res;
}
inline void cluster_barrier() {
    if (!cur->blk->cl) fail("cluster barrier outside a cluster launch");
    cur->blk->cl->bar->meet();
}

inline void cp_async(u32 dst, const void *src, int bytes) {
    if (((uintptr_t)src & 15) || (dst & 15)) fail("cp.async of a 16-byte chunk not 16-byte aligned");
    sptr(dst, 16);
    cur->open.push_back(Copy{dst, src, bytes});
}
inline void cp_commit() {
    cur->groups.push_back(std::move(cur->open));
    cur->open.clear();
}
inline void cp_wait(int n) {
    while ((int)cur->groups.size() > n) {
        for (const Copy &c : cur->groups.front()) {
            unsigned char *d = sptr(c.dst, 16);
            memset(d, 0, 16);
            if (c.bytes > 0) memcpy(d, c.src, (size_t)c.bytes);
        }
        cur->groups.erase(cur->groups.begin());
    }
}

// ldmatrix .x4 / .x2: lane L gives the row address of matrix L / 8 (row L % 8); matrix i reaches lane L as
// the 32-bit word L % 4 of its row L / 4
inline void ldsm(u32 *r, int nmat, u32 a) {
    Warp &w = *cur->blk->warps[cur->warp];
    const int lane = cur->lane;
    w.addr[lane] = a;
    w.bar.meet([&] {
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < nmat; i++) {
                const u32 row = w.addr[8 * i + (l >> 2)];
                if (row & 15) fail("ldmatrix row address not 16-byte aligned");
                memcpy(&w.out[l][i], sptr(row, 16) + 4 * (l & 3), 4);
            }
    });
    for (int i = 0; i < nmat; i++) r[i] = w.out[lane][i]; // (no lane's next collective completes before this)
}

// __shfl_*_sync: lane L gets the 32-bit value of lane src (its own where src is outside the warp)
inline u32 shfl(u32 v, int src) {
    Warp &w = *cur->blk->warps[cur->warp];
    const int lane = cur->lane;
    w.sv[lane] = v, w.ssrc[lane] = (u32)src;
    w.bar.meet([&] {
        for (int l = 0; l < 32; l++) w.sres[l] = w.sv[w.ssrc[l] < 32 ? w.ssrc[l] : (u32)l];
    });
    return w.sres[lane];
}

// movmatrix.sync.aligned.m8n8.trans.b16: lane (g, t) holding (row g, cols 2t, 2t + 1) of an 8 x 8 b16 matrix
// gets (row g, cols 2t, 2t + 1) of its transpose
inline u32 movtrans(u32 v) {
    Warp &w = *cur->blk->warps[cur->warp];
    const int lane = cur->lane;
    w.sv[lane] = v;
    w.bar.meet([&] {
        u16 M[8][8];
        for (int l = 0; l < 32; l++)
            for (int h = 0; h < 2; h++) M[l >> 2][2 * (l & 3) + h] = (u16)(w.sv[l] >> (16 * h));
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, t = l & 3;
            w.sres[l] = (u32)M[2 * t][g] | (u32)M[2 * t + 1][g] << 16;
        }
    });
    return w.sres[lane];
}

// __ballot_sync: bit l set where lane l's predicate is non-zero, in every lane (all 32 lanes arrive); __any_sync
// and __all_sync through it
inline u32 warp_ballot(int pred) {
    Warp &w = *cur->blk->warps[cur->warp];
    const int lane = cur->lane;
    w.sv[lane] = pred != 0;
    w.bar.meet([&] {
        u32 a = 0;
        for (int l = 0; l < 32; l++) a |= w.sv[l] << l;
        for (int l = 0; l < 32; l++) w.sres[l] = a;
    });
    return w.sres[lane];
}

// mma.sync.m16n8k16.row.col.f32 (bf16 or f16 in): lane L = 4 g + t holds A[g][2t..], A[g + 8][2t..],
// A[g][2t + 8..], A[g + 8][2t + 8..] (a0..a3), B[2t..][g], B[2t + 8..][g] (b0, b1), C / D[g][2t], [g][2t + 1],
// [g + 8][2t], [g + 8][2t + 1]
template <class CVT> inline void mma(float d[4], const u32 a[4], const u32 b[2], CVT to_float) {
    Warp &w = *cur->blk->warps[cur->warp];
    const int lane = cur->lane;
    memcpy(w.a[lane], a, 16);
    memcpy(w.b[lane], b, 8);
    memcpy(w.d[lane], d, 16);
    w.bar.meet([&] {
        float A[16][16], B[16][8], C[16][8];
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, t = l & 3;
            for (int h = 0; h < 2; h++) {
                A[g][2 * t + h] = to_float((u16)(w.a[l][0] >> (16 * h)));
                A[g + 8][2 * t + h] = to_float((u16)(w.a[l][1] >> (16 * h)));
                A[g][2 * t + 8 + h] = to_float((u16)(w.a[l][2] >> (16 * h)));
                A[g + 8][2 * t + 8 + h] = to_float((u16)(w.a[l][3] >> (16 * h)));
                B[2 * t + h][g] = to_float((u16)(w.b[l][0] >> (16 * h)));
                B[2 * t + 8 + h][g] = to_float((u16)(w.b[l][1] >> (16 * h)));
            }
            C[g][2 * t] = w.d[l][0], C[g][2 * t + 1] = w.d[l][1], C[g + 8][2 * t] = w.d[l][2], C[g + 8][2 * t + 1] = w.d[l][3];
        }
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                float s = C[i][j];
                for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j];
                C[i][j] = s;
            }
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, t = l & 3;
            w.d[l][0] = C[g][2 * t], w.d[l][1] = C[g][2 * t + 1], w.d[l][2] = C[g + 8][2 * t], w.d[l][3] = C[g + 8][2 * t + 1];
        }
    });
    memcpy(d, w.d[lane], 16);
}

// a GPU thread: its stack (256 KiB, a guard page below) and saved stack pointer
struct Coro {
    static constexpr size_t STACK = 256 << 10, GUARD = 4096;
    void *sp = nullptr;
    unsigned char *mem = nullptr;
    Thread *t = nullptr;
    bool done = false;
};
inline void *sched_sp;
inline Coro *running;
inline void (*run_body)(void *);
inline void *run_ctx;
inline void yield() { emu_ctx_switch(&running->sp, sched_sp); }
inline void coro_entry() {
    run_body(run_ctx);
    if (!cur->open.empty() || !cur->groups.empty()) cp_wait(0); // (a kernel may exit with copies in flight)
    Block *b = cur->blk; // an exited thread is no longer waited for at barriers (as on the GPU)
    b->warps[cur->warp]->bar.leave();
    b->bar->leave();
    if (b->cl) b->cl->bar->leave();
    running->done = true;
    progress++;
    emu_ctx_switch(&running->sp, sched_sp);
    abort(); // never resumed
}
// the stacks of finished blocks' threads, which the next blocks' threads take: no mapping, unmapping or first-touch
// page faults a thread (they were most of the time of a launch of many blocks); a stack keeps its last thread's
// bytes, as the GPU's registers and local memory do
inline std::vector<unsigned char *> stack_pool;
inline void coro_init(Coro &c) {
    if (!stack_pool.empty()) {
        c.mem = stack_pool.back();
        stack_pool.pop_back();
    } else {
        c.mem = static_cast<unsigned char *>(mmap(nullptr, Coro::STACK + Coro::GUARD, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (c.mem == MAP_FAILED) fail("mmap of a thread's stack");
        mprotect(c.mem, Coro::GUARD, PROT_NONE);
    }
    // the frame emu_ctx_switch pops: control words, r15 .. rbp, the return address (coro_entry), which it
    // enters with the stack 8 past a 16-byte boundary, as after a call
    uintptr_t top = ((uintptr_t)c.mem + Coro::STACK + Coro::GUARD) & ~(uintptr_t)15;
    u64 *sp = reinterpret_cast<u64 *>(top - 80);
    sp[0] = 0x037f, sp[1] = 0x1f80;
    for (int i = 2; i < 8; i++) sp[i] = 0;
    sp[8] = (u64)(uintptr_t)&coro_entry;
    c.sp = sp;
}

// The order in which launch runs a grid's clusters (one at a time, each to its end): 0 by z, then x, then y
// (y fastest), 1 reversed, other values a shuffle seeded by the value -- for kernels
// whose blocks meet through global memory (the last to arrive finishes), which must not depend on it.
inline u64 block_order = 0;

// run body(ctx) as every thread of grid (x, y, z) of `threads`-thread blocks with smem bytes of dynamic shared
// memory each, in clusters of (1, cluster_y, 1) (0 or 1: no cluster)
inline void launch(emu_dim3 grid, int threads, size_t smem, int cluster_y, void (*body)(void *), void *ctx) {
    if (threads % 32) fail("block size not a multiple of 32");
    const int cy = cluster_y > 1 ? cluster_y : 1;
    if (grid.y % cy) fail("grid not a whole number of clusters");
    grid_dim = grid;
    block_dim = emu_dim3{(unsigned)threads, 1, 1};
    run_body = body, run_ctx = ctx;
    const unsigned gzn = grid.z ? grid.z : 1;
    // the clusters (blocks), in grid order or the order block_order asks for
    std::vector<emu_dim3> order;
    for (unsigned gz = 0; gz < gzn; gz++)
        for (unsigned gx = 0; gx < grid.x; gx++)
            for (unsigned gy = 0; gy < grid.y; gy += cy) order.push_back(emu_dim3{gx, gy, gz});
    if (block_order == 1) std::reverse(order.begin(), order.end());
    else if (block_order > 1) {
        u64 r = block_order; // a fixed xorshift shuffle of the seed
        for (size_t i = order.size(); i > 1; i--) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            std::swap(order[i - 1], order[(size_t)(r % i)]);
        }
    }
    for (const emu_dim3 &o : order) {
        const unsigned gx = o.x, gy = o.y, gz = o.z;
        {
            Cluster cl;
            std::vector<std::unique_ptr<Block>> blocks;
            for (int r = 0; r < cy; r++) {
                auto b = std::make_unique<Block>();
                b->smem.assign(smem, 0xa5);
                for (int w = 0; w < threads / 32; w++) b->warps.push_back(std::make_unique<Warp>());
                b->bar = std::make_unique<Barrier>(threads);
                b->idx = emu_dim3{gx, gy + r, gz};
                b->rank = (unsigned)r;
                b->cl = cluster_y > 1 ? &cl : nullptr;
                cl.blocks.push_back(b.get());
                blocks.push_back(std::move(b));
            }
            cl.bar = std::make_unique<Barrier>(threads * cy);
            std::vector<Thread> ts((size_t)threads * cy);
            std::vector<Coro> cs(ts.size());
            for (size_t i = 0; i < ts.size(); i++) {
                const int tid = (int)(i % threads);
                ts[i].blk = blocks[i / threads].get();
                ts[i].tidx = emu_dim3{(unsigned)tid, 0, 0};
                ts[i].lane = tid & 31, ts[i].warp = tid >> 5;
                cs[i].t = &ts[i];
                coro_init(cs[i]);
            }
            for (size_t live = cs.size(); live;) {
                const u64 before = progress;
                for (Coro &c : cs) {
                    if (c.done) continue;
                    running = &c, cur = c.t;
                    emu_ctx_switch(&sched_sp, c.sp);
                    live -= c.done;
                }
                cur = nullptr;
                if (live && progress == before) fail("deadlock: every live thread waits at a barrier no other reaches");
            }
            for (Coro &c : cs) stack_pool.push_back(c.mem);
        }
    }
}

// n elements of T for a kernel to read that end where a page no access reaches begins: a read past the end
// faults (the test dies of SIGSEGV). The elements start 16-byte aligned where n * sizeof(T) is a multiple of 16.
template <class T> struct Guarded {
    T *p;
    size_t n, len;
    unsigned char *map;
    explicit Guarded(size_t n_) : n(n_) {
        const size_t bytes = n * sizeof(T), page = 4096;
        len = (bytes + page - 1) / page * page + page;
        map = static_cast<unsigned char *>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (map == MAP_FAILED) fail("mmap of a guarded buffer");
        mprotect(map + len - page, page, PROT_NONE);
        p = reinterpret_cast<T *>(map + len - page - bytes);
    }
    Guarded(const Guarded &) = delete;
    Guarded &operator=(const Guarded &) = delete;
    ~Guarded() { munmap(map, len); }
    T *data() const { return p; }
    T &operator[](size_t i) const { return p[i]; }
};

} // namespace emu

#define threadIdx (emu::cur->tidx)
#define blockIdx (emu::cur->blk->idx)
#define gridDim (emu::grid_dim)
#define blockDim (emu::block_dim)
#define __syncwarp() emu::syncwarp()
#define __syncthreads() emu::syncthreads()
#define __syncthreads_or(p) emu::syncthreads_or(p)
#define __any_sync(mask, p) (emu::warp_ballot(p) != 0)
#define __ballot_sync(mask, p) emu::warp_ballot(p)
#define __all_sync(mask, p) (emu::warp_ballot(p) == 0xffffffffu)
#define __shared__ static // (per kernel, not per block: right while blocks run one at a time -- no cluster)
#define __trap() emu::fail("__trap")
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 900
#endif
