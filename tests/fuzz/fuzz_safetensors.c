/*
 * fuzz_safetensors.c -- libFuzzer target: arbitrary bytes as a safetensors
 * checkpoint. The first byte picks the layout:
 *   even: the rest is model.safetensors;
 *   odd:  the rest, split at each "--8<--", is model.safetensors.index.json
 *         followed by the shards a.safetensors, b.safetensors, c.safetensors.
 * The files go to a private temporary directory (the parser memory-maps a
 * path; there is no in-memory entry point) and kiln_checkpoint_open reads
 * them. Opening must fail with a clear error (a message, never
 * KILN_ERR_INTERNAL) or give a checkpoint whose every tensor lies inside its
 * shard's data section, shares no byte with another tensor, is found by name
 * and has nbytes = numel * dtype size.
 * Built by scripts/fuzz.sh (KILN_FUZZ_MAIN); replayed by
 * tests/test_model_files_fuzz_regress.c.
 */
#define _GNU_SOURCE /* memmem */
#include "kiln.h"
#include "model.h"
#include "fuzz_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KILN_FUZZ_ST_SEP "--8<--"

static const char *const kiln_fuzz_st_files[] = {"model.safetensors", "model.safetensors.index.json",
                                                 "a.safetensors", "b.safetensors", "c.safetensors"};
static char kiln_fuzz_st_dir[512];

static void kiln_fuzz_st_cleanup(void) {
    if (!kiln_fuzz_st_dir[0]) return;
    char path[600];
    for (size_t i = 0; i < sizeof kiln_fuzz_st_files / sizeof *kiln_fuzz_st_files; i++) {
        snprintf(path, sizeof path, "%s/%s", kiln_fuzz_st_dir, kiln_fuzz_st_files[i]);
        unlink(path);
    }
    rmdir(kiln_fuzz_st_dir);
    kiln_fuzz_st_dir[0] = 0;
}

static void kiln_fuzz_st_write(const char *name, const uint8_t *data, size_t size) {
    kiln_fuzz_write("fuzz_safetensors", kiln_fuzz_st_dir, name, data, size);
}

static void kiln_fuzz_st_check(const kiln_checkpoint *ck) {
    for (int i = 0; i < ck->n_tensors; i++) {
        const kiln_tensor_info *t = &ck->tensors[i];
        if (t->file < 0 || t->file >= ck->n_shards) abort();
        const kiln_shard *sh = &ck->shards[t->file];
        if (t->offset < sh->data_start || t->offset > sh->map.len || t->nbytes > sh->map.len - t->offset) abort();
        if (t->ndim < 0 || t->ndim > KILN_MAX_DIMS) abort();
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (numel * kiln_dtype_size(t->dtype) != t->nbytes) abort();
        if (t->nbytes) { /* touch both ends: out-of-map data faults here */
            volatile const char *p = t->data;
            (void)p[0];
            (void)p[t->nbytes - 1];
        }
        for (int j = 0; j < i; j++) { /* no two tensors share a byte */
            const kiln_tensor_info *u = &ck->tensors[j];
            if (u->file == t->file && t->nbytes && u->nbytes && t->offset < u->offset + u->nbytes &&
                u->offset < t->offset + t->nbytes)
                abort();
        }
        if (kiln_checkpoint_find(ck, t->name) != t) abort();
        const kiln_tensor_info *got = NULL;
        if (kiln_checkpoint_expect(ck, t->name, t->ndim, t->shape, &got) == KILN_OK && got != t) abort();
    }
}

int kiln_fuzz_safetensors_one(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!kiln_fuzz_st_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(kiln_fuzz_st_dir, sizeof kiln_fuzz_st_dir, "%s/kiln-fuzz-st-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(kiln_fuzz_st_dir)) {
            perror("fuzz_safetensors: mkdtemp");
            abort();
        }
        atexit(kiln_fuzz_st_cleanup);
    }
    char path[600];
    for (size_t i = 0; i < sizeof kiln_fuzz_st_files / sizeof *kiln_fuzz_st_files; i++) {
        snprintf(path, sizeof path, "%s/%s", kiln_fuzz_st_dir, kiln_fuzz_st_files[i]);
        unlink(path);
    }
    const uint8_t *p = data + 1, *end = data + size;
    if (!(data[0] & 1)) {
        kiln_fuzz_st_write("model.safetensors", p, (size_t)(end - p));
    } else {
        size_t seplen = strlen(KILN_FUZZ_ST_SEP);
        for (size_t part = 1; part < 5; part++) {
            const uint8_t *cut = memmem(p, (size_t)(end - p), KILN_FUZZ_ST_SEP, seplen);
            const uint8_t *stop = cut ? cut : end;
            kiln_fuzz_st_write(kiln_fuzz_st_files[part], p, (size_t)(stop - p));
            if (!cut) break;
            p = cut + seplen;
        }
    }
    kiln_checkpoint ck;
    kiln_status st = kiln_checkpoint_open(kiln_fuzz_st_dir, &ck);
    if (st == KILN_OK) {
        kiln_fuzz_st_check(&ck);
        kiln_checkpoint_close(&ck);
    } else {
        const char *msg = kiln_last_error();
        if (st == KILN_ERR_INTERNAL || !msg || !*msg) {
            fprintf(stderr, "fuzz_safetensors: %s without a clear message: %s\n", kiln_status_name(st),
                    msg ? msg : "(null)");
            abort();
        }
    }
    return 0;
}

#ifdef KILN_FUZZ_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return kiln_fuzz_safetensors_one(data, size); }
#endif
