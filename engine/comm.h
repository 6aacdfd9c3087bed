/*
 * comm.h -- collectives between the tensor-parallel ranks of one process.
 * A group has one member per rank; ranks run on their own threads and call
 * each collective together, in the same order.
 *
 * Host memory (the CPU backend, which also simulates tensor parallelism so
 * shard arithmetic is tested without GPUs): a shared-memory implementation
 * with barriers; sums run in rank order, so results are deterministic.
 * Device memory (the GPU backend): NCCL (and the one-shot all-reduce over
 * peer memory) through the runtime façade; the group only carries the
 * communicators, and exchanges their ids and handles at set-up.
 *
 * Ownership: the group owns its members, barrier and scratch.
 * Thread-safety: each member is used by its rank's thread only; the group's
 * barrier synchronises them.
 */
#ifndef KILN_COMM_H
#define KILN_COMM_H

#include "kiln_base.h"

#include <pthread.h>

typedef struct kiln_comm_group kiln_comm_group;
typedef struct kiln_comm kiln_comm;

kiln_status kiln_comm_group_create(int n_ranks, kiln_comm_group **out);
void kiln_comm_group_destroy(kiln_comm_group *g);
kiln_comm *kiln_comm_group_member(kiln_comm_group *g, int rank);

int kiln_comm_rank(const kiln_comm *c);
int kiln_comm_size(const kiln_comm *c);
/* All ranks wait for each other. Returns false when the group was aborted
 * (a rank failed): callers stop with an error. */
bool kiln_comm_barrier(kiln_comm *c);
/* Make every barrier return false from now on (a rank failed). */
void kiln_comm_abort(kiln_comm *c);

/* In-place sum of n floats across ranks (host memory). */
kiln_status kiln_comm_all_reduce_f32(kiln_comm *c, float *buf, size_t n);
/* recv[rows, n_ranks * cols] = per row, the ranks' send[rows, cols] side by
 * side in rank order (vocabulary-parallel logits). */
kiln_status kiln_comm_all_gather_cols_f32(kiln_comm *c, const float *send, float *recv, size_t rows, size_t cols);

/* Copy n bytes from rank 0's buf into every rank's buf (host memory). */
kiln_status kiln_comm_broadcast(kiln_comm *c, void *buf, size_t n);
/* recv[n_ranks * n] = every rank's n bytes of send, in rank order (host
 * memory; exchanging device handles at set-up). */
kiln_status kiln_comm_all_gather(kiln_comm *c, const void *send, void *recv, size_t n);

/* The device communicator of this member (GPU backend), or NULL. */
void *kiln_comm_device(const kiln_comm *c);
void kiln_comm_set_device(kiln_comm *c, void *dev_comm);

#endif
