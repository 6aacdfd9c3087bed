// label: unit
/* test_kv.c -- block accounting: a property test drives random growth,
 * truncation and release across many tables and checks after every
 * operation that no block is leaked or held by two tables. */
#include "kv.h"
#include "kt.h"

#include <stdlib.h>

static uint64_t rng = 88172645463325252ULL;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static bool invariants(const kiln_kv_manager *m, const kiln_kv_table *t, const int *tokens, int n) {
    int *owner = calloc((size_t)m->num_blocks, sizeof(int));
    int held = 0;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (t[i].n_blocks != kiln_kv_blocks_for(m, tokens[i])) ok = false;
        for (int b = 0; b < t[i].n_blocks; b++) {
            int id = t[i].blocks[b];
            if (id < 0 || id >= m->num_blocks || owner[id]) ok = false; /* shared or bad id */
            else owner[id] = i + 1;
            if (!m->in_use[id]) ok = false;
            held++;
        }
    }
    if (held + m->n_free != m->num_blocks) ok = false; /* leaked */
    for (int f = 0; f < m->n_free; f++)
        if (owner[m->free_list[f]] || m->in_use[m->free_list[f]]) ok = false;
    free(owner);
    return ok;
}

KT_TEST(test_kv_property) {
    kiln_kv_manager m;
    KT_OK(kiln_kv_manager_init(&m, 97, 8, 40));
    enum { N = 24 };
    kiln_kv_table t[N];
    int tokens[N] = {0};
    for (int i = 0; i < N; i++) KT_OK(kiln_kv_table_init(&m, &t[i]));
    int grow_fail = 0;
    for (int it = 0; it < 200000; it++) {
        int i = (int)(next_u32() % N);
        uint32_t op = next_u32() % 10;
        if (op < 6) { /* append 1..40 tokens */
            int want = tokens[i] + 1 + (int)(next_u32() % 40);
            int before = t[i].n_blocks, free_before = m.n_free;
            if (kiln_kv_grow(&m, &t[i], want))
                tokens[i] = want;
            else {
                grow_fail++;
                KT_REQUIRE(t[i].n_blocks == before && m.n_free == free_before); /* no partial grow */
            }
        } else if (op < 8) { /* spec-decoding rollback */
            tokens[i] = tokens[i] ? (int)(next_u32() % (uint32_t)tokens[i]) : 0;
            kiln_kv_truncate(&m, &t[i], tokens[i]);
        } else { /* finish or cancel */
            kiln_kv_release(&m, &t[i]);
            tokens[i] = 0;
        }
        if (it % 97 == 0) KT_REQUIRE(invariants(&m, t, tokens, N));
    }
    KT_CHECK(invariants(&m, t, tokens, N));
    KT_CHECK(grow_fail > 0); /* the pool did run out */
    for (int i = 0; i < N; i++) kiln_kv_table_fini(&m, &t[i]);
    KT_CHECK(m.n_free == m.num_blocks);
    kiln_kv_manager_fini(&m);
}

KT_TEST(test_kv_admission) {
    kiln_kv_manager m;
    KT_OK(kiln_kv_manager_init(&m, 10, 16, 8));
    KT_CHECK(kiln_kv_admission(&m, 0, 160) == KILN_KV_NEVER_FITS); /* more than max blocks per seq */
    KT_CHECK(kiln_kv_admission(&m, 0, 128) == KILN_KV_FITS_NOW);
    kiln_kv_table a;
    KT_OK(kiln_kv_table_init(&m, &a));
    KT_CHECK(kiln_kv_grow(&m, &a, 100));
    KT_CHECK(kiln_kv_admission(&m, 0, 100) == KILN_KV_FITS_LATER);
    KT_CHECK(kiln_kv_admission(&m, 0, 40) == KILN_KV_FITS_NOW);
    KT_CHECK(kiln_kv_slot(&m, &a, 17) == a.blocks[1] * 16 + 1);
    kiln_kv_table_fini(&m, &a);
    KT_CHECK(m.n_free == 10);
    kiln_kv_manager_fini(&m);
    KT_ERR(kiln_kv_manager_init(&m, 0, 16, 4), KILN_ERR_INVALID_ARGUMENT, "at least one block");
}

KT_MAIN(KT_CASE(test_kv_property), KT_CASE(test_kv_admission))
