/*
 * nccl.c -- NCCL communicators for tensor parallelism (libnccl.so.2 loaded
 * with dlopen): unique id, one communicator per rank, sum all-reduce and
 * all-gather on a kiln stream. NVLink multicast (NVLS) is kept off.
 *
 * Ownership: kiln_rt_comm_create returns owned (kiln_rt_comm_destroy).
 * Thread-safety: one thread per communicator; comm_create is collective.
 */
#include "rt_internal.h"

#include <stdlib.h>

struct kiln_rt_comm {
    kiln_rt_device *dev;
    ncclComm_t comm;
    int n_ranks, rank;
};

_Static_assert(sizeof(ncclUniqueId) == KILN_RT_NCCL_ID_BYTES, "NCCL unique id size");

kiln_status kiln_rt_nccl_get_id(uint8_t id[KILN_RT_NCCL_ID_BYTES]) {
    kiln_status st = KILN_OK;
    ncclUniqueId u;
    KILN_TRY(kiln_rt_load_nccl());
    KILN_CHECK_NCCL(kiln_nc.ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
fail:
    return st;
}

kiln_status kiln_rt_comm_create(kiln_rt_device *d, const uint8_t id[KILN_RT_NCCL_ID_BYTES], int n_ranks, int rank,
                                kiln_rt_comm **out) {
    kiln_status st = KILN_OK;
    ncclUniqueId u;
    kiln_rt_comm *c = calloc(1, sizeof *c);
    KILN_CHECK_ALLOC(c);
    KILN_TRY(kiln_rt_load_nccl());
    KILN_TRY(kiln_rt_device_make_current(d));
    memcpy(&u, id, sizeof u);
    c->dev = d;
    c->n_ranks = n_ranks;
    c->rank = rank;
    KILN_CHECK_NCCL(kiln_nc.ncclCommInitRank(&c->comm, n_ranks, u, rank));
    *out = c;
    return KILN_OK;
fail:
    free(c);
    return st;
}

void kiln_rt_comm_destroy(kiln_rt_comm *c) {
    if (!c) return;
    if (c->comm) kiln_nc.ncclCommDestroy(c->comm);
    free(c);
}

static kiln_status nccl_type(kiln_dtype dt, ncclDataType_t *t) {
    switch (dt) {
    case KILN_DTYPE_F32: *t = ncclFloat32; return KILN_OK;
    case KILN_DTYPE_F16: *t = ncclFloat16; return KILN_OK;
    case KILN_DTYPE_BF16: *t = ncclBfloat16; return KILN_OK;
    default: return KILN_FAIL(KILN_ERR_UNSUPPORTED, "NCCL collectives on %s", kiln_dtype_name(dt));
    }
}

kiln_status kiln_rt_all_reduce_sum(kiln_rt_comm *c, kiln_devptr buf, size_t n, kiln_dtype dt, kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    ncclDataType_t t = ncclFloat32;
    KILN_TRY(nccl_type(dt, &t));
    KILN_CHECK_NCCL(kiln_nc.ncclAllReduce((const void *)(uintptr_t)buf, (void *)(uintptr_t)buf, n, t, ncclSum, c->comm,
                                          kiln__stream(s)));
fail:
    return st;
}

kiln_status kiln_rt_all_gather(kiln_rt_comm *c, kiln_devptr send, kiln_devptr recv, size_t n, kiln_dtype dt,
                               kiln_rt_stream *s) {
    kiln_status st = KILN_OK;
    ncclDataType_t t = ncclFloat32;
    KILN_TRY(nccl_type(dt, &t));
    KILN_CHECK_NCCL(kiln_nc.ncclAllGather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, n, t, c->comm,
                                          kiln__stream(s)));
fail:
    return st;
}
