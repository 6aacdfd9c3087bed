/*
 * kv.c -- block pool accounting (see kv.h).
 */
#include "kv.h"

#include <stdlib.h>

kiln_status kiln_kv_manager_init(kiln_kv_manager *m, int num_blocks, int block_size, int max_blocks_per_seq) {
    memset(m, 0, sizeof *m);
    if (num_blocks < 1 || block_size < 1 || max_blocks_per_seq < 1)
        return KILN_FAIL(KILN_ERR_INVALID_ARGUMENT, "KV pool needs at least one block (got %d blocks of %d tokens)",
                         num_blocks, block_size);
    m->free_list = malloc(sizeof(int32_t) * (size_t)num_blocks);
    m->in_use = calloc((size_t)num_blocks, 1);
    if (!m->free_list || !m->in_use) {
        kiln_kv_manager_fini(m);
        return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (KV block list)");
    }
    m->num_blocks = num_blocks;
    m->block_size = block_size;
    m->max_blocks_per_seq = max_blocks_per_seq;
    /* pop order 0, 1, 2, ... */
    for (int i = 0; i < num_blocks; i++) m->free_list[i] = num_blocks - 1 - i;
    m->n_free = num_blocks;
    return KILN_OK;
}

void kiln_kv_manager_fini(kiln_kv_manager *m) {
    free(m->free_list);
    free(m->in_use);
    memset(m, 0, sizeof *m);
}

kiln_status kiln_kv_table_init(const kiln_kv_manager *m, kiln_kv_table *t) {
    t->n_blocks = 0;
    t->blocks = malloc(sizeof(int32_t) * (size_t)m->max_blocks_per_seq);
    if (!t->blocks) return KILN_FAIL(KILN_ERR_OUT_OF_MEMORY, "out of host memory (block table)");
    return KILN_OK;
}

void kiln_kv_table_fini(kiln_kv_manager *m, kiln_kv_table *t) {
    if (t->blocks) kiln_kv_release(m, t);
    free(t->blocks);
    t->blocks = NULL;
}

bool kiln_kv_grow(kiln_kv_manager *m, kiln_kv_table *t, int n_tokens) {
    int need = kiln_kv_blocks_for(m, n_tokens);
    if (need <= t->n_blocks) return true;
    if (need > m->max_blocks_per_seq || need - t->n_blocks > m->n_free) return false;
    while (t->n_blocks < need) {
        int32_t b = m->free_list[--m->n_free];
        m->in_use[b] = 1;
        t->blocks[t->n_blocks++] = b;
    }
    return true;
}

void kiln_kv_truncate(kiln_kv_manager *m, kiln_kv_table *t, int n_tokens) {
    int keep = kiln_kv_blocks_for(m, n_tokens);
    while (t->n_blocks > keep) {
        int32_t b = t->blocks[--t->n_blocks];
        m->in_use[b] = 0;
        m->free_list[m->n_free++] = b;
    }
}

void kiln_kv_release(kiln_kv_manager *m, kiln_kv_table *t) { kiln_kv_truncate(m, t, 0); }

kiln_kv_fit kiln_kv_admission(const kiln_kv_manager *m, int have, int need) {
    int blocks = kiln_kv_blocks_for(m, need);
    if (blocks > m->num_blocks || blocks > m->max_blocks_per_seq) return KILN_KV_NEVER_FITS;
    int extra = blocks - kiln_kv_blocks_for(m, have);
    return extra <= m->n_free ? KILN_KV_FITS_NOW : KILN_KV_FITS_LATER;
}
