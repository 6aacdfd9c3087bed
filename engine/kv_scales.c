/*
 * kv_scales.c -- where the FP8 E4M3 KV cache's scales come from, decided
 * once at engine creation (E5M2 and 16/32-bit caches use none):
 *
 *   1. the user's kv_scales (--kv-scales): a mode or a JSON file;
 *   2. else the plan's kv_scales (a mode or per-layer values);
 *   3. mode "auto": the checkpoint's model.layers.N.self_attn.k_scale /
 *      v_scale tensors (vLLM / llm-compressor; scalar per layer, or one per
 *      KV head; the older single kv_scale is used for both), else
 *   4. calibration: a built-in text (or, without a tokenizer, fixed
 *      pseudo-random ids) of up to KV_CALIB_TOKENS tokens runs through the
 *      model once with a cache in the activation dtype; per layer, scale =
 *      max |x| * KILN_KV_CALIB_HEADROOM / 448 (keys and values apart).
 *
 * Scales are per KV layer and head over the whole model ([n_kv_layers, 2,
 * n_global_heads]); per-layer sources repeat the value over the heads.
 * Ownership: the engine owns the resolved array (e->kv_scales).
 * Thread-safety: engine creation only.
 */
#include "engine_internal.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define KV_CALIB_TOKENS 512
#define E4M3_MAX 448.0f

/* A mixed text (prose, code, numbers, another language) so that the
 * calibration sees more than one kind of activation. */
static const char calib_text[] =
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined a screw "
    "press, oil-based ink and movable metal type into a system that could produce books at a speed no scribe could "
    "match. Within fifty years, presses operated in more than two hundred European cities, and the price of a book "
    "fell by roughly two thirds.\n\n"
    "Q: What is 17 * 23? A: 17 * 23 = 391. Q: Convert 3.5 kilometres to metres. A: 3500 m.\n\n"
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n"
    "for (int i = 0; i < n; i++) { sum += x[i] * w[i]; }\n\n"
    "La lumière du matin traversait les rideaux, et la ville s'éveillait lentement sous un ciel gris.\n"
    "User: Can you summarise the main causes of the First World War in three bullet points?\n"
    "Assistant: - Militarism and an arms race between the great powers.\n- A web of alliances that turned a local "
    "conflict into a continental one.\n- Nationalism, and the assassination of Archduke Franz Ferdinand in Sarajevo "
    "in June 1914.\n\n"
    "{\"id\": 42, \"name\": \"kiln\", \"tags\": [\"inference\", \"cuda\", \"c11\"], \"ok\": true}\n"
    "In mathematics, a prime number is a natural number greater than 1 that is not a product of two smaller "
    "natural numbers: 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47. The fundamental theorem of "
    "arithmetic states that every integer larger than one can be written as a product of primes in a way that is "
    "unique up to the order of the factors.\n"
    "Ingredients: 200 g flour, 2 eggs, 300 ml milk, a pinch of salt. Whisk, rest for 30 minutes, then cook thin "
    "pancakes in a hot buttered pan, about one minute per side.\n"
    "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.";

float kiln_kv_scale_for_amax(float amax) {
    if (!(amax > 0)) return 1.0f;
    float s = amax * KILN_KV_CALIB_HEADROOM / E4M3_MAX;
    return s > 0 && s < INFINITY ? s : 1.0f;
}

/* ------------------------------------------------------------- checkpoint */

/* The decoder layer of each KV layer (from the program's cache writes). */
static void kv_layer_index(const kiln_program *p, int *layer_of) {
    for (int l = 0; l < p->n_kv_layers; l++) layer_of[l] = l;
    for (int i = 0; i < p->n_ops; i++) {
        const kiln_op *o = &p->ops[i];
        if ((o->kind == KILN_OP_KV_WRITE || o->kind == KILN_OP_ROPE_KV_WRITE) && o->kv_layer >= 0 &&
            o->kv_layer < p->n_kv_layers && o->layer >= 0)
            layer_of[o->kv_layer] = o->layer;
    }
}

/* One scale tensor into out[0 .. n_heads) (a scalar repeats). */
static kiln_status read_scale(const kiln_tensor_info *t, int n_heads, float *out) {
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    if (t->dtype != KILN_DTYPE_F32 && t->dtype != KILN_DTYPE_BF16 && t->dtype != KILN_DTYPE_F16)
        return KILN_FAIL(KILN_ERR_FORMAT, "checkpoint tensor %s: KV cache scales must be f32, bf16 or fp16, not %s",
                         t->name, kiln_dtype_name(t->dtype));
    if (numel != 1 && numel != n_heads)
        return KILN_FAIL(KILN_ERR_FORMAT,
                         "checkpoint tensor %s has %lld elements: a KV cache scale is a scalar or one per KV head (%d)",
                         t->name, (long long)numel, n_heads);
    float v[1024];
    if (numel > 1024) return KILN_FAIL(KILN_ERR_LIMIT, "%s: too many KV heads", t->name);
    kiln_to_f32(v, t->data, t->dtype, (size_t)numel);
    for (int h = 0; h < n_heads; h++) {
        out[h] = v[numel == 1 ? 0 : h];
        if (!(out[h] > 0 && out[h] < INFINITY))
            return KILN_FAIL(KILN_ERR_FORMAT, "checkpoint tensor %s: scale %g is not a positive finite number", t->name,
                             (double)out[h]);
    }
    return KILN_OK;
}

/* *found: the checkpoint has scales (then every layer must have them). */
static kiln_status scales_from_checkpoint(const kiln_model_files *mf, int G, float *s, bool *found) {
    kiln_status st = KILN_OK;
    const kiln_program *p = mf->program;
    *found = false;
    if (!mf->have_checkpoint) return KILN_OK;
    int *layer_of = malloc(sizeof(int) * (size_t)p->n_kv_layers);
    KILN_CHECK_ALLOC(layer_of);
    kv_layer_index(p, layer_of);
    int n_have = 0;
    char missing[160] = "";
    for (int l = 0; l < p->n_kv_layers; l++) {
        char kn[128], vn[128], kvn[128];
        snprintf(kn, sizeof kn, "model.layers.%d.self_attn.k_scale", layer_of[l]);
        snprintf(vn, sizeof vn, "model.layers.%d.self_attn.v_scale", layer_of[l]);
        snprintf(kvn, sizeof kvn, "model.layers.%d.self_attn.kv_scale", layer_of[l]);
        const kiln_tensor_info *tk = kiln_checkpoint_find(&mf->ck, kn), *tv = kiln_checkpoint_find(&mf->ck, vn);
        if (!tk && !tv) tk = tv = kiln_checkpoint_find(&mf->ck, kvn); /* vLLM's older single scale */
        if (!tk || !tv) {
            if (!missing[0]) snprintf(missing, sizeof missing, "%s", !tk ? kn : vn);
            continue;
        }
        float *row = s + (size_t)l * 2 * (size_t)G;
        KILN_TRY(read_scale(tk, G, row));
        KILN_TRY(read_scale(tv, G, row + G));
        n_have++;
    }
    KILN_CHECK(n_have == 0 || n_have == p->n_kv_layers, KILN_ERR_FORMAT,
               "the checkpoint has KV cache scales for %d of %d layers (%s is missing)", n_have, p->n_kv_layers,
               missing);
    *found = n_have > 0;
fail:
    free(layer_of);
    return st;
}

/* ------------------------------------------------------------------ JSON */

/* One scale of a file into *out: a number from FLT_MIN (the smallest
 * normal float) to 1e30. Positive as a double is not enough: 1e-50 becomes
 * the float 0, and dividing by a subnormal float overflows. */
#define KV_SCALE_RANGE "1.2e-38 to 1e30"
static bool json_scale(const json_t *e, float *out) {
    double x = json_is_number(e) ? json_number_value(e) : -1;
    if (!(x >= FLT_MIN && x < 1e30)) return false;
    *out = (float)x;
    return true;
}

/* x | [per layer] | [[per head] per layer] into s[l * 2 * G + which * G + h]. */
static kiln_status json_scales(json_t *j, const char *key, const char *what, int L, int G, int which, float *s) {
    json_t *v = json_object_get(j, key);
    if (!v) return KILN_FAIL(KILN_ERR_FORMAT, "%s: no \"%s\"", what, key);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < G; h++) {
            json_t *e = v;
            if (json_is_array(v)) {
                if (json_array_size(v) != (size_t)L)
                    return KILN_FAIL(KILN_ERR_FORMAT, "%s: \"%s\" lists %zu layers, the model has %d KV layers", what,
                                     key, json_array_size(v), L);
                e = json_array_get(v, (size_t)l);
                if (json_is_array(e)) {
                    if (json_array_size(e) != (size_t)G)
                        return KILN_FAIL(KILN_ERR_FORMAT, "%s: \"%s\"[%d] lists %zu heads, the model has %d KV heads",
                                         what, key, l, json_array_size(e), G);
                    e = json_array_get(e, (size_t)h);
                }
            }
            if (!json_scale(e, &s[((size_t)l * 2 + (size_t)which) * (size_t)G + (size_t)h]))
                return KILN_FAIL(KILN_ERR_FORMAT, "%s: \"%s\" of layer %d head %d is not a positive number (%s)",
                                 what, key, l, h, KV_SCALE_RANGE);
        }
    return KILN_OK;
}

kiln_status kiln_kv_scales_parse_json(const char *text, const char *what, int L, int G, float *s) {
    kiln_status st = KILN_OK;
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    KILN_CHECK(root, KILN_ERR_FORMAT, "%s: not a JSON object (%s, line %d)", what, jerr.text, jerr.line);
    KILN_CHECK(json_is_object(root), KILN_ERR_FORMAT, "%s: not a JSON object (the top level is %s)", what,
               json_is_array(root) ? "an array" : json_is_string(root) ? "a string" : "a number or a literal");
    json_t *kvc = json_object_get(root, "kv_cache");
    if (kvc) {
        /* vLLM's quantization-param file: scaling_factor {tp rank: {layer: x}},
         * one scale for keys and values; ranks merge by max (safe for all) */
        json_t *sf = json_object_get(kvc, "scaling_factor");
        KILN_CHECK(json_is_object(sf) && json_object_size(sf) > 0, KILN_ERR_FORMAT,
                   "%s: \"kv_cache\" has no \"scaling_factor\" object", what);
        for (size_t i = 0; i < (size_t)L * 2 * (size_t)G; i++) s[i] = 0;
        const char *rank;
        json_t *layers;
        json_object_foreach(sf, rank, layers) {
            KILN_CHECK(json_is_object(layers) && json_object_size(layers) == (size_t)L, KILN_ERR_FORMAT,
                       "%s: scaling_factor[\"%s\"] must map each of the %d KV layers to a scale", what, rank, L);
            for (int l = 0; l < L; l++) {
                char key[16];
                snprintf(key, sizeof key, "%d", l);
                float x = 0;
                KILN_CHECK(json_scale(json_object_get(layers, key), &x), KILN_ERR_FORMAT,
                           "%s: scaling_factor[\"%s\"][\"%d\"] is missing or not a positive number (%s)", what,
                           rank, l, KV_SCALE_RANGE);
                for (int w = 0; w < 2; w++)
                    for (int h = 0; h < G; h++) {
                        float *o = &s[((size_t)l * 2 + (size_t)w) * (size_t)G + (size_t)h];
                        if (x > *o) *o = x;
                    }
            }
        }
    } else {
        KILN_TRY(json_scales(root, "k_scale", what, L, G, 0, s));
        KILN_TRY(json_scales(root, "v_scale", what, L, G, 1, s));
    }
fail:
    if (root) json_decref(root);
    return st;
}

/* ----------------------------------------------------------- calibration */

kiln_status kiln_kv_calibrate(kiln_exec *x, const int32_t *tokens, int n, int max_blocks, int block_size, float *amax) {
    kiln_status st = KILN_OK;
    int nb = KILN_DIV_UP(n, block_size);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n), *tables = calloc((size_t)max_blocks, sizeof(int32_t));
    KILN_CHECK(pos && tables, KILN_ERR_OUT_OF_MEMORY, "out of host memory");
    KILN_CHECK(nb <= max_blocks, KILN_ERR_INTERNAL, "calibration of %d tokens needs %d blocks (max %d)", n, nb,
               max_blocks);
    KILN_CHECK(x->vt->kv_calibrate && x->vt->kv_amax, KILN_ERR_UNSUPPORTED,
               "the %s executor cannot calibrate FP8 KV cache scales", x->device);
    for (int i = 0; i < n; i++) pos[i] = i; /* slot i: block i / bs of the calibration cache */
    for (int b = 0; b < nb; b++) tables[b] = b;
    int32_t qstart[2] = {0, n}, ctx[1] = {n}, out_row[1] = {n - 1};
    kiln_batch b = {.n_tokens = n, .n_seqs = 1, .n_out = 1, .tokens = tokens, .positions = pos, .qstart = qstart,
                    .ctx_len = ctx, .block_tables = tables, .max_blocks = max_blocks, .slots = pos,
                    .out_rows = out_row, .max_q_len = n, .max_ctx_len = n};
    KILN_TRY(x->vt->kv_calibrate(x, n));
    const float *logits = NULL;
    st = x->vt->forward(x, &b, &logits);
    if (st == KILN_OK) x->vt->kv_amax(x, amax);
    kiln_status st2 = x->vt->kv_calibrate(x, 0);
    if (st) goto fail;
    KILN_TRY(st2);
fail:
    free(pos);
    free(tables);
    return st;
}

kiln_status kiln_kv_calib_tokens(kiln_engine *e, int32_t **out, int *n_out) {
    kiln_status st = KILN_OK;
    int32_t *ids = NULL;
    size_t n = 0;
    /* within the context, a step, and half the pool (the GPU calibrates in
     * the pool's memory at twice the bytes per token) */
    int max_n = KILN_MIN(KV_CALIB_TOKENS, e->max_model_len);
    max_n = KILN_MIN(max_n, e->max_tokens_plan);
    max_n = KILN_MIN(max_n, e->exec->num_kv_blocks / 2 * e->params.block_size);
    KILN_CHECK(max_n >= 1, KILN_ERR_OUT_OF_MEMORY, "the KV pool (%d blocks) is too small to calibrate FP8 scales",
               e->exec->num_kv_blocks);
    if (e->tok) {
        kiln_encode_options o = {.add_special = true, .parse_special = false};
        KILN_TRY(kiln_tokenize(e->tok, calib_text, sizeof calib_text - 1, &o, &ids, &n));
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= e->vocab_size) ids[i] = 0; /* tokenizer larger than the model */
    }
    if (n < 16) { /* no tokenizer (or it gave next to nothing) */
        kiln_free(ids);
        n = (size_t)max_n;
        ids = malloc(sizeof(int32_t) * n);
        KILN_CHECK_ALLOC(ids);
        int V = e->vocab_size, lo = V > 64 ? 16 : 0, hi = V > 64 ? V - 16 : V;
        for (size_t i = 0; i < n; i++) {
            uint32_t r[4];
            kiln_philox4x32(0x6b696c6e /* "kiln" */, 11, i, r);
            ids[i] = lo + (int32_t)(r[0] % (uint32_t)(hi - lo));
        }
    }
    *n_out = (int)KILN_MIN(n, (size_t)max_n);
    *out = ids;
    ids = NULL;
fail:
    kiln_free(ids);
    return st;
}

static kiln_status calibrate(kiln_engine *e, int L, int G, float *s) {
    kiln_status st = KILN_OK;
    int32_t *ids = NULL;
    float *amax = calloc((size_t)L * 2 * (size_t)G, sizeof(float));
    KILN_CHECK_ALLOC(amax);
    int n = 0;
    KILN_TRY(kiln_kv_calib_tokens(e, &ids, &n));
    int max_blocks = KILN_DIV_UP(e->max_model_len + 1 + e->spec_k, e->params.block_size);
    double t0 = kiln_now_sec();
    KILN_TRY(kiln_kv_calibrate(e->exec, ids, n, max_blocks, e->params.block_size, amax));
    /* per layer: the largest over heads (keys and values apart) */
    for (int l = 0; l < L; l++)
        for (int w = 0; w < 2; w++) {
            float m = 0;
            for (int h = 0; h < G; h++) {
                float a = amax[((size_t)l * 2 + (size_t)w) * (size_t)G + (size_t)h];
                KILN_CHECK(a == a && a < INFINITY, KILN_ERR_FORMAT,
                           "FP8 calibration: layer %d's %s are not finite; the model or the calibration text is bad",
                           l, w ? "values" : "keys");
                m = fmaxf(m, a);
            }
            for (int h = 0; h < G; h++) s[((size_t)l * 2 + (size_t)w) * (size_t)G + (size_t)h] = kiln_kv_scale_for_amax(m);
        }
    snprintf(e->kv_scales_src, sizeof e->kv_scales_src, "calibration (%d tokens%s, %.2f s)", n,
             e->tok ? "" : " of random ids", kiln_now_sec() - t0);
fail:
    free(amax);
    kiln_free(ids);
    return st;
}

/* ---------------------------------------------------------------- setup */

kiln_status kiln_engine_setup_kv_scales(kiln_engine *e) {
    kiln_status st = KILN_OK;
    char *text = NULL;
    const kiln_program *p = e->mf.program;
    const char *user = e->params.kv_scales && *e->params.kv_scales ? e->params.kv_scales : "auto";
    e->kv_scales_src[0] = 0;
    if (e->exec->kv_dtype != KILN_DTYPE_FP8_E4M3) {
        if (e->exec->kv_dtype == KILN_DTYPE_FP8_E5M2) {
            snprintf(e->kv_scales_src, sizeof e->kv_scales_src, "none (E5M2)");
            if (strcmp(user, "auto") && strcmp(user, "none"))
                KILN_INFO("kv_scales \"%s\" ignored: the E5M2 KV cache stores values unscaled", user);
        }
        return KILN_OK;
    }
    int L = p->n_kv_layers, G = kiln_kv_n_global_heads(&e->mf);
    size_t n = (size_t)L * 2 * (size_t)G;
    KILN_CHECK(e->exec->vt->set_kv_scales, KILN_ERR_UNSUPPORTED, "the %s executor takes no FP8 KV cache scales",
               e->exec->device);
    e->kv_scales = malloc(sizeof(float) * n);
    KILN_CHECK_ALLOC(e->kv_scales);
    float *s = e->kv_scales;
    for (size_t i = 0; i < n; i++) s[i] = 1.0f;
    const char *mode = user, *who = "kv_scales";
    if (!strcmp(mode, "auto") && strcmp(p->kv_scales, "auto")) mode = p->kv_scales, who = "the policy's kv_scales";
    if (!strcmp(mode, "values")) { /* the plan's numbers (policy.c checked the count) */
        for (int l = 0; l < L; l++)
            for (int h = 0; h < G; h++) {
                int i = KILN_MIN(l, p->n_kv_scales - 1);
                s[((size_t)l * 2) * (size_t)G + (size_t)h] = p->kv_k_scales[i];
                s[((size_t)l * 2 + 1) * (size_t)G + (size_t)h] = p->kv_v_scales[i];
            }
        snprintf(e->kv_scales_src, sizeof e->kv_scales_src, "policy");
    } else if (!strcmp(mode, "none")) {
        snprintf(e->kv_scales_src, sizeof e->kv_scales_src, "none (scale 1)");
    } else if (!strcmp(mode, "auto") || !strcmp(mode, "checkpoint")) {
        bool found = false;
        KILN_TRY(scales_from_checkpoint(&e->mf, G, s, &found));
        KILN_CHECK(found || strcmp(mode, "checkpoint"), KILN_ERR_NOT_FOUND,
                   "%s \"checkpoint\": the checkpoint has no model.layers.N.self_attn.k_scale / v_scale tensors", who);
        if (found) snprintf(e->kv_scales_src, sizeof e->kv_scales_src, "checkpoint");
        else KILN_TRY(calibrate(e, L, G, s));
    } else if (!strcmp(mode, "calibrate")) {
        KILN_TRY(calibrate(e, L, G, s));
    } else {
        st = kiln_read_file(mode, &text, NULL);
        if (st) {
            kiln_error_context("kv_scales \"%s\" is no mode (auto, calibrate, checkpoint, none) and no readable file",
                               mode);
            goto fail;
        }
        KILN_TRY(kiln_kv_scales_parse_json(text, mode, L, G, s));
        snprintf(e->kv_scales_src, sizeof e->kv_scales_src, "file %s", mode);
    }
    KILN_TRY(e->exec->vt->set_kv_scales(e->exec, s));
fail:
    free(text);
    return st;
}
