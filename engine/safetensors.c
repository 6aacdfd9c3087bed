/*
 * safetensors.c -- memory-mapped safetensors checkpoints: one file or shards
 * listed by model.safetensors.index.json. Every header is validated: length
 * within the file, JSON well-formed, known dtypes, shapes whose byte size
 * matches the offsets, offsets inside the data section and not overlapping.
 * Ownership: the checkpoint owns its maps and tensor table.
 * Thread-safety: immutable after open.
 */
#include "model.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#define ST_MAX_HEADER (100u * 1024u * 1024u)

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const kiln_tensor_info *)a)->name, ((const kiln_tensor_info *)b)->name);
}

typedef struct span {
    uint64_t begin, end;
    const char *name;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

kiln_status kiln_checkpoint_add_file(kiln_checkpoint *ck, const char *path) {
    kiln_status st = KILN_OK;
    json_t *hdr = NULL;
    span *spans = NULL;
    kiln_shard sh = {0};
    sh.map.fd = -1;
    size_t n_added = 0, old_n = (size_t)ck->n_tensors;
    sh.path = kiln_strdup(path);
    KILN_CHECK_ALLOC(sh.path);
    KILN_TRY(kiln_mmap_open(path, &sh.map));
    KILN_CHECK(sh.map.len >= 8, KILN_ERR_FORMAT,
               "%s: truncated safetensors file (%zu bytes, the 8-byte header length is missing)", path,
               sh.map.len);
    uint64_t hlen = 0; /* little-endian u64, whatever this machine's order */
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | ((const unsigned char *)sh.map.data)[i];
    KILN_CHECK(hlen <= sh.map.len - 8, KILN_ERR_FORMAT,
               "%s: header length %llu is larger than the file (%zu bytes): truncated or not safetensors", path,
               (unsigned long long)hlen, sh.map.len);
    KILN_CHECK(hlen <= ST_MAX_HEADER, KILN_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit", path,
               (unsigned long long)hlen);
    sh.data_start = 8 + hlen;
    uint64_t data_len = sh.map.len - sh.data_start;
    json_error_t jerr;
    hdr = json_loadb((const char *)sh.map.data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    KILN_CHECK(hdr, KILN_ERR_FORMAT, "%s: malformed safetensors header JSON: %s (at byte %d)", path, jerr.text,
               jerr.position);
    KILN_CHECK(json_is_object(hdr), KILN_ERR_FORMAT, "%s: safetensors header must be a JSON object", path);

    size_t n = json_object_size(hdr);
    /* never realloc to 0 bytes: that frees the table and returns NULL */
    kiln_tensor_info *nt = realloc(ck->tensors, (old_n + n + 1) * sizeof *nt);
    KILN_CHECK_ALLOC(nt);
    ck->tensors = nt;
    spans = calloc(n ? n : 1, sizeof *spans);
    KILN_CHECK_ALLOC(spans);
    int file_idx = ck->n_shards;
    const char *key;
    json_t *val;
    json_object_foreach(hdr, key, val) {
        if (!strcmp(key, "__metadata__")) continue;
        KILN_CHECK(json_is_object(val), KILN_ERR_FORMAT, "%s: tensor \"%s\": entry must be an object", path, key);
        json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
               *jo = json_object_get(val, "data_offsets");
        KILN_CHECK(json_is_string(jd), KILN_ERR_FORMAT, "%s: tensor \"%s\": missing or non-string \"dtype\"", path, key);
        KILN_CHECK(json_is_array(js), KILN_ERR_FORMAT, "%s: tensor \"%s\": missing or non-array \"shape\"", path, key);
        KILN_CHECK(json_is_array(jo) && json_array_size(jo) == 2, KILN_ERR_FORMAT,
                   "%s: tensor \"%s\": \"data_offsets\" must be [begin, end]", path, key);
        kiln_tensor_info *t = &ck->tensors[old_n + n_added];
        memset(t, 0, sizeof *t);
        t->dtype = kiln_dtype_from_safetensors(json_string_value(jd));
        KILN_CHECK(t->dtype != KILN_DTYPE_INVALID, KILN_ERR_UNSUPPORTED,
                   "%s: tensor \"%s\" has unsupported dtype \"%s\"", path, key, json_string_value(jd));
        snprintf(t->st_dtype, sizeof t->st_dtype, "%s", json_string_value(jd));
        size_t nd = json_array_size(js);
        KILN_CHECK(nd <= KILN_MAX_DIMS, KILN_ERR_FORMAT, "%s: tensor \"%s\" has %zu dimensions (max %d)", path, key,
                   nd, KILN_MAX_DIMS);
        t->ndim = (int)nd;
        unsigned __int128 numel = 1;
        for (size_t d = 0; d < nd; d++) {
            json_t *e = json_array_get(js, d);
            KILN_CHECK(json_is_integer(e) && json_integer_value(e) >= 0, KILN_ERR_FORMAT,
                       "%s: tensor \"%s\": shape[%zu] must be a non-negative integer", path, key, d);
            t->shape[d] = json_integer_value(e);
            numel *= (uint64_t)t->shape[d];
            KILN_CHECK(numel < ((unsigned __int128)1 << 62), KILN_ERR_FORMAT,
                       "%s: tensor \"%s\": shape has 2^62 or more elements (shape[%zu] = %lld)", path, key, d,
                       (long long)t->shape[d]);
        }
        json_t *b = json_array_get(jo, 0), *e = json_array_get(jo, 1);
        KILN_CHECK(json_is_integer(b) && json_is_integer(e) && json_integer_value(b) >= 0 &&
                       json_integer_value(e) >= json_integer_value(b),
                   KILN_ERR_FORMAT, "%s: tensor \"%s\": data_offsets must be integers with 0 <= begin <= end", path,
                   key);
        uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
        KILN_CHECK(end <= data_len, KILN_ERR_FORMAT,
                   "%s: tensor \"%s\": data_offsets [%llu, %llu] fall outside the data section (%llu bytes): "
                   "the file is truncated or corrupt",
                   path, key, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_len);
        unsigned __int128 want = numel * kiln_dtype_size(t->dtype);
        KILN_CHECK(want == end - begin, KILN_ERR_FORMAT,
                   "%s: tensor \"%s\": shape needs %llu bytes of %s but data_offsets span %llu", path, key,
                   (unsigned long long)want, json_string_value(jd), (unsigned long long)(end - begin));
        t->name = kiln_strdup(key);
        KILN_CHECK_ALLOC(t->name);
        t->file = file_idx;
        t->offset = sh.data_start + begin;
        t->nbytes = (size_t)(end - begin);
        t->data = (const char *)sh.map.data + t->offset;
        spans[n_added] = (span){begin, end, t->name};
        n_added++;
        ck->n_tensors++;
    }
    /* sorted by begin, a non-empty span overlaps an earlier one exactly when
     * it begins before the furthest end seen so far (empty spans hold no
     * bytes and are skipped, so they cannot hide an overlap) */
    qsort(spans, n_added, sizeof *spans, cmp_span);
    const span *reach = NULL; /* the non-empty span with the furthest end so far */
    for (size_t i = 0; i < n_added; i++) {
        if (spans[i].begin == spans[i].end) continue;
        KILN_CHECK(!reach || spans[i].begin >= reach->end, KILN_ERR_FORMAT,
                   "%s: tensors \"%s\" (bytes %llu to %llu) and \"%s\" (bytes %llu to %llu) overlap in the data "
                   "section",
                   path, reach ? reach->name : "", reach ? (unsigned long long)reach->begin : 0ull,
                   reach ? (unsigned long long)reach->end : 0ull, spans[i].name, (unsigned long long)spans[i].begin,
                   (unsigned long long)spans[i].end);
        if (!reach || spans[i].end > reach->end) reach = &spans[i];
    }
    kiln_shard *ns = realloc(ck->shards, (size_t)(ck->n_shards + 1) * sizeof *ns);
    KILN_CHECK_ALLOC(ns);
    ck->shards = ns;
    ck->shards[ck->n_shards++] = sh;
    ck->total_bytes += (size_t)data_len;
    json_decref(hdr);
    free(spans);
    return KILN_OK;
fail:
    for (size_t i = 0; i < n_added; i++) free(ck->tensors[old_n + i].name);
    ck->n_tensors = (int)old_n;
    if (hdr) json_decref(hdr);
    free(spans);
    kiln_mmap_close(&sh.map);
    free(sh.path);
    return st;
}

/* After sorting by name: no tensor may appear twice (in two shards; one
 * header cannot repeat a name, JSON_REJECT_DUPLICATES sees to that). */
static kiln_status check_unique(const kiln_checkpoint *ck) {
    for (int i = 1; i < ck->n_tensors; i++)
        if (!strcmp(ck->tensors[i - 1].name, ck->tensors[i].name))
            return KILN_FAIL(KILN_ERR_FORMAT, "tensor \"%s\" appears in more than one shard (%s and %s)",
                             ck->tensors[i].name, ck->shards[ck->tensors[i - 1].file].path,
                             ck->shards[ck->tensors[i].file].path);
    return KILN_OK;
}

static kiln_status open_index(kiln_checkpoint *ck, const char *dir, const char *index_path) {
    kiln_status st = KILN_OK;
    char *text = NULL, *shard_path = NULL;
    json_t *root = NULL;
    const char **files = NULL;
    size_t n_files = 0;
    KILN_TRY(kiln_read_file(index_path, &text, NULL));
    json_error_t jerr;
    root = json_loads(text, 0, &jerr);
    KILN_CHECK(root, KILN_ERR_FORMAT, "%s is not valid JSON: %s (line %d)", index_path, jerr.text, jerr.line);
    json_t *wm = json_object_get(root, "weight_map");
    KILN_CHECK(json_is_object(wm), KILN_ERR_FORMAT, "%s: missing \"weight_map\" object", index_path);
    files = calloc(json_object_size(wm) + 1, sizeof *files);
    KILN_CHECK_ALLOC(files);
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        KILN_CHECK(json_is_string(val), KILN_ERR_FORMAT, "%s: weight_map[\"%s\"] must be a file name", index_path, key);
        const char *f = json_string_value(val);
        KILN_CHECK(!strchr(f, '/') && strcmp(f, "..") && strcmp(f, ".") && *f, KILN_ERR_FORMAT,
                   "%s: weight_map[\"%s\"] = \"%s\" is not a plain file name", index_path, key, f);
        bool seen = false;
        for (size_t i = 0; i < n_files && !seen; i++) seen = !strcmp(files[i], f);
        if (!seen) files[n_files++] = f;
    }
    KILN_CHECK(n_files > 0, KILN_ERR_FORMAT, "%s: weight_map is empty", index_path);
    for (size_t i = 0; i < n_files; i++) {
        shard_path = kiln_path_join(dir, files[i]);
        KILN_CHECK_ALLOC(shard_path);
        KILN_CHECK(kiln_path_exists(shard_path), KILN_ERR_NOT_FOUND, "%s names shard %s, which does not exist",
                   index_path, shard_path);
        KILN_TRY(kiln_checkpoint_add_file(ck, shard_path));
        free(shard_path);
        shard_path = NULL;
    }
    qsort(ck->tensors, (size_t)ck->n_tensors, sizeof *ck->tensors, cmp_tensor_name);
    KILN_TRY(check_unique(ck));
    /* every tensor the index names must be in the shard it names (shard i
     * was opened from files[i]: compare names exactly, not by suffix) */
    json_object_foreach(wm, key, val) {
        const kiln_tensor_info *t = kiln_checkpoint_find(ck, key);
        KILN_CHECK(t, KILN_ERR_FORMAT, "%s lists tensor \"%s\" in %s, but that shard does not contain it", index_path,
                   key, json_string_value(val));
        KILN_CHECK(t->file >= 0 && (size_t)t->file < n_files, KILN_ERR_INTERNAL,
                   "internal error: tensor \"%s\" has shard index %d of %zu", key, t->file, n_files);
        KILN_CHECK(!strcmp(files[t->file], json_string_value(val)), KILN_ERR_FORMAT,
                   "%s lists tensor \"%s\" in %s, but it is in %s", index_path, key, json_string_value(val),
                   ck->shards[t->file].path);
    }
fail:
    free(shard_path);
    free(files);
    if (root) json_decref(root);
    free(text);
    return st;
}

kiln_status kiln_checkpoint_open(const char *dir, kiln_checkpoint *ck) {
    kiln_status st = KILN_OK;
    memset(ck, 0, sizeof *ck);
    char *single = kiln_path_join(dir, "model.safetensors");
    char *index = kiln_path_join(dir, "model.safetensors.index.json");
    KILN_CHECK_ALLOC(single);
    KILN_CHECK_ALLOC(index);
    if (kiln_path_exists(index)) {
        KILN_TRY(open_index(ck, dir, index));
    } else if (kiln_path_exists(single)) {
        KILN_TRY(kiln_checkpoint_add_file(ck, single));
        qsort(ck->tensors, (size_t)ck->n_tensors, sizeof *ck->tensors, cmp_tensor_name);
    } else {
        KILN_FAIL(KILN_ERR_NOT_FOUND,
                  "%s has no model.safetensors or model.safetensors.index.json (only safetensors checkpoints "
                  "are supported)",
                  dir);
        st = KILN_ERR_NOT_FOUND;
        goto fail;
    }
    KILN_TRY(check_unique(ck));
fail:
    free(single);
    free(index);
    if (st) kiln_checkpoint_close(ck);
    return st;
}

void kiln_checkpoint_close(kiln_checkpoint *ck) {
    for (int i = 0; i < ck->n_tensors; i++) free(ck->tensors[i].name);
    free(ck->tensors);
    for (int i = 0; i < ck->n_shards; i++) {
        kiln_mmap_close(&ck->shards[i].map);
        free(ck->shards[i].path);
    }
    free(ck->shards);
    memset(ck, 0, sizeof *ck);
}

const kiln_tensor_info *kiln_checkpoint_find(const kiln_checkpoint *ck, const char *name) {
    int lo = 0, hi = ck->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(ck->tensors[mid].name, name);
        if (!c) return &ck->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "[");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

kiln_status kiln_checkpoint_expect(const kiln_checkpoint *ck, const char *name, int ndim, const int64_t *shape,
                                   const kiln_tensor_info **out) {
    const kiln_tensor_info *t = kiln_checkpoint_find(ck, name);
    if (!t) return KILN_FAIL(KILN_ERR_FORMAT, "checkpoint is missing tensor \"%s\"", name);
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[128], got[128];
        shape_str(want, sizeof want, ndim, shape);
        shape_str(got, sizeof got, t->ndim, t->shape);
        return KILN_FAIL(KILN_ERR_FORMAT, "tensor \"%s\" has shape %s but the config implies %s", name, got, want);
    }
    if (t->dtype != KILN_DTYPE_BF16 && t->dtype != KILN_DTYPE_F16 && t->dtype != KILN_DTYPE_F32)
        return KILN_FAIL(KILN_ERR_UNSUPPORTED, "tensor \"%s\" has dtype %s; weights must be BF16, F16 or F32", name,
                         t->st_dtype);
    if (out) *out = t;
    return KILN_OK;
}

/* ------------------------------------------------------------ resolution */

static char *hf_hub_dir(void) {
    const char *c = getenv("HF_HUB_CACHE");
    if (c && *c) return kiln_strdup(c);
    c = getenv("HF_HOME");
    if (c && *c) return kiln_path_join(c, "hub");
    c = getenv("XDG_CACHE_HOME");
    if (c && *c) return kiln_asprintf("%s/huggingface/hub", c);
    c = getenv("HOME");
    return kiln_asprintf("%s/.cache/huggingface/hub", c ? c : "");
}

kiln_status kiln_model_resolve(const char *model, char **dir) {
    kiln_status st = KILN_OK;
    char *hub = NULL, *repo = NULL, *ref = NULL, *rev = NULL, *snap = NULL;
    DIR *d = NULL;
    KILN_CHECK(model && *model, KILN_ERR_INVALID_ARGUMENT, "no model given");
    if (kiln_path_exists(model)) {
        KILN_CHECK(kiln_path_is_dir(model), KILN_ERR_INVALID_ARGUMENT, "model path %s is not a directory", model);
        *dir = kiln_strdup(model);
        KILN_CHECK_ALLOC(*dir);
        return KILN_OK;
    }
    const char *slash = strchr(model, '/');
    bool is_id = slash && slash != model && slash[1] && !strchr(slash + 1, '/') && model[0] != '.';
    KILN_CHECK(is_id, KILN_ERR_NOT_FOUND, "model directory %s does not exist", model);
    hub = hf_hub_dir();
    KILN_CHECK_ALLOC(hub);
    repo = kiln_asprintf("%s/models--%.*s--%s", hub, (int)(slash - model), model, slash + 1);
    KILN_CHECK_ALLOC(repo);
    ref = kiln_asprintf("%s/refs/main", repo);
    KILN_CHECK_ALLOC(ref);
    size_t rlen = 0;
    if (kiln_path_exists(ref) && kiln_read_file(ref, &rev, &rlen) == KILN_OK) {
        while (rlen && (rev[rlen - 1] == '\n' || rev[rlen - 1] == ' ')) rev[--rlen] = 0;
        snap = kiln_asprintf("%s/snapshots/%s", repo, rev);
        KILN_CHECK_ALLOC(snap);
        if (!kiln_path_is_dir(snap)) {
            free(snap);
            snap = NULL;
        }
    }
    if (!snap) {
        char *snaps = kiln_asprintf("%s/snapshots", repo);
        KILN_CHECK_ALLOC(snaps);
        d = opendir(snaps);
        if (d) {
            struct dirent *de;
            while ((de = readdir(d))) {
                if (de->d_name[0] == '.') continue;
                free(snap);
                snap = kiln_asprintf("%s/%s", snaps, de->d_name);
            }
        }
        free(snaps);
    }
    KILN_CHECK(snap && kiln_path_is_dir(snap), KILN_ERR_NOT_FOUND,
               "model %s is not a local directory and is not in the Hugging Face cache (looked in %s); kiln does "
               "not download models: fetch it first (e.g. `huggingface-cli download %s`)",
               model, repo, model);
    *dir = snap;
    snap = NULL;
fail:
    if (d) closedir(d);
    free(hub);
    free(repo);
    free(ref);
    free(rev);
    free(snap);
    return st;
}
