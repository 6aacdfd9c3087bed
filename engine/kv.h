/*
 * kv.h -- the blocked KV cache manager: a pool of fixed-size blocks
 * (block_size tokens each, shared by every layer), per-sequence block tables
 * grown on demand as tokens are appended, released when a request finishes,
 * is cancelled or is preempted, and truncated when speculative tokens are
 * rejected. It only does the accounting: the cache memory itself belongs to
 * the backend (layout in ops_cpu.h).
 *
 * Ownership: the manager owns the free list; each kiln_kv_table owns its
 * block array (allocated once at max_blocks capacity) and holds blocks
 * borrowed from the manager until released.
 * Thread-safety: none; used by the engine thread only.
 */
#ifndef KILN_KV_H
#define KILN_KV_H

#include "kiln_base.h"

typedef struct kiln_kv_manager {
    int num_blocks;
    int block_size;
    int max_blocks_per_seq;
    int32_t *free_list; /* stack of free block ids */
    int n_free;
    uint8_t *in_use;    /* [num_blocks] 1 while some table holds the block */
} kiln_kv_manager;

typedef struct kiln_kv_table {
    int32_t *blocks;    /* [max_blocks_per_seq] */
    int n_blocks;
} kiln_kv_table;

typedef enum kiln_kv_fit { KILN_KV_FITS_NOW, KILN_KV_FITS_LATER, KILN_KV_NEVER_FITS } kiln_kv_fit;

kiln_status kiln_kv_manager_init(kiln_kv_manager *m, int num_blocks, int block_size, int max_blocks_per_seq);
void kiln_kv_manager_fini(kiln_kv_manager *m);

kiln_status kiln_kv_table_init(const kiln_kv_manager *m, kiln_kv_table *t);
void kiln_kv_table_fini(kiln_kv_manager *m, kiln_kv_table *t); /* releases its blocks */

static inline int kiln_kv_blocks_for(const kiln_kv_manager *m, int n_tokens) {
    return (n_tokens + m->block_size - 1) / m->block_size;
}
/* Make t hold n_tokens. False (and no change) when the pool lacks blocks. */
bool kiln_kv_grow(kiln_kv_manager *m, kiln_kv_table *t, int n_tokens);
/* Keep only the blocks needed for n_tokens. */
void kiln_kv_truncate(kiln_kv_manager *m, kiln_kv_table *t, int n_tokens);
void kiln_kv_release(kiln_kv_manager *m, kiln_kv_table *t);
/* Could a table growing from `have` to `need` tokens be served? */
kiln_kv_fit kiln_kv_admission(const kiln_kv_manager *m, int have, int need);
/* Cache slot of token position pos. */
static inline int32_t kiln_kv_slot(const kiln_kv_manager *m, const kiln_kv_table *t, int pos) {
    return t->blocks[pos / m->block_size] * m->block_size + pos % m->block_size;
}

#endif
