/*
 * config.c -- parse a Hugging Face config.json and generation_config.json
 * into kiln_model_config. Handles the classic rope_theta / rope_scaling keys
 * and the newer rope_parameters, torch_dtype or dtype, head_dim, tied
 * embeddings and bias flags. Errors name the file and the field.
 * Ownership: the config owns its strings and JSON trees.
 * Thread-safety: no shared state.
 */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static kiln_status get_int(json_t *root, const char *what, const char *key, bool required, int def,
                           int min, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return KILN_FAIL(KILN_ERR_FORMAT, "%s: missing required field \"%s\"", what, key);
        *out = def;
        return KILN_OK;
    }
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v))
        d = json_real_value(v);
    else
        return KILN_FAIL(KILN_ERR_FORMAT, "%s: field \"%s\" must be an integer", what, key);
    if (d < min || d > 1e9)
        return KILN_FAIL(KILN_ERR_FORMAT, "%s: field \"%s\" = %.0f is out of range (%d to 1000000000)", what, key,
                         d, min);
    *out = (int)d;
    return KILN_OK;
}

static kiln_status get_num(json_t *root, const char *what, const char *key, double def, double *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return KILN_OK;
    }
    if (!json_is_number(v)) return KILN_FAIL(KILN_ERR_FORMAT, "%s: field \"%s\" must be a number", what, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return KILN_FAIL(KILN_ERR_FORMAT, "%s: field \"%s\" is not finite", what, key);
    return KILN_OK;
}

static kiln_status get_bool(json_t *root, const char *what, const char *key, bool def, bool *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return KILN_OK;
    }
    if (!json_is_boolean(v)) return KILN_FAIL(KILN_ERR_FORMAT, "%s: field \"%s\" must be true or false", what, key);
    *out = json_is_true(v);
    return KILN_OK;
}

/* A token id field (bos / pad / eos): an integer; negative means none (-1).
 * Ids past INT_MAX cannot name a token and are an error, not a wrap. */
static kiln_status token_id(json_t *v, const char *what, const char *key, int *out) {
    json_int_t id = json_integer_value(v);
    if (id > INT_MAX)
        return KILN_FAIL(KILN_ERR_FORMAT, "%s: %s = %lld is out of range (token ids are 0 to %d)", what, key,
                         (long long)id, INT_MAX);
    *out = id < 0 ? -1 : (int)id;
    return KILN_OK;
}

static void add_eos(kiln_model_config *cfg, int id) {
    if (id < 0) return;
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_token_ids[i] == id) return;
    if (cfg->n_eos < KILN_MAX_EOS) cfg->eos_token_ids[cfg->n_eos++] = id;
}

static kiln_status parse_eos(kiln_model_config *cfg, json_t *root, const char *what) {
    json_t *v = json_object_get(root, "eos_token_id");
    if (!v || json_is_null(v)) return KILN_OK;
    int id = -1;
    if (json_is_integer(v)) {
        kiln_status st = token_id(v, what, "eos_token_id", &id);
        if (st) return st;
        add_eos(cfg, id);
        return KILN_OK;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (!json_is_integer(e))
                return KILN_FAIL(KILN_ERR_FORMAT, "%s: eos_token_id[%zu] must be an integer", what, i);
            char key[40];
            snprintf(key, sizeof key, "eos_token_id[%zu]", i);
            kiln_status st = token_id(e, what, key, &id);
            if (st) return st;
            add_eos(cfg, id);
        }
        return KILN_OK;
    }
    return KILN_FAIL(KILN_ERR_FORMAT, "%s: eos_token_id must be an integer or a list", what);
}

/* rope: classic rope_theta + rope_scaling, or rope_parameters (newer
 * transformers), which carries rope_theta and rope_type together. */
static kiln_status parse_rope(kiln_model_config *cfg, json_t *root, const char *what) {
    kiln_status st = KILN_OK;
    kiln_rope_config *r = &cfg->rope;
    snprintf(r->type, sizeof r->type, "default");
    r->factor = 1.0;
    KILN_TRY(get_num(root, what, "rope_theta", 10000.0, &r->theta));
    KILN_TRY(get_num(root, what, "partial_rotary_factor", 1.0, &r->partial_rotary_factor));
    json_t *sc = json_object_get(root, "rope_parameters");
    const char *scname = "rope_parameters";
    if (!sc || json_is_null(sc)) {
        sc = json_object_get(root, "rope_scaling");
        scname = "rope_scaling";
    }
    if (sc && !json_is_null(sc)) {
        KILN_CHECK(json_is_object(sc), KILN_ERR_FORMAT, "%s: %s must be an object", what, scname);
        char sub[96];
        snprintf(sub, sizeof sub, "%s: %s", what, scname);
        json_t *t = json_object_get(sc, "rope_type");
        if (!t) t = json_object_get(sc, "type");
        if (t) {
            KILN_CHECK(json_is_string(t), KILN_ERR_FORMAT, "%s.rope_type must be a string", sub);
            static const char *known[] = {"default", "linear", "dynamic", "llama3", "yarn"};
            bool ok = false;
            for (size_t i = 0; i < KILN_ARRAY_LEN(known); i++) ok |= !strcmp(json_string_value(t), known[i]);
            KILN_CHECK(ok, KILN_ERR_UNSUPPORTED,
                       "%s: rope type \"%.64s\" is not supported (supported: default, linear, dynamic, llama3, "
                       "yarn)",
                       sub, json_string_value(t));
            snprintf(r->type, sizeof r->type, "%s", json_string_value(t));
        }
        if (json_object_get(sc, "rope_theta")) KILN_TRY(get_num(sc, sub, "rope_theta", r->theta, &r->theta));
        if (json_object_get(sc, "partial_rotary_factor"))
            KILN_TRY(get_num(sc, sub, "partial_rotary_factor", 1.0, &r->partial_rotary_factor));
        KILN_TRY(get_num(sc, sub, "factor", 1.0, &r->factor));
        KILN_TRY(get_num(sc, sub, "low_freq_factor", 1.0, &r->low_freq_factor));
        KILN_TRY(get_num(sc, sub, "high_freq_factor", 4.0, &r->high_freq_factor));
        KILN_TRY(get_int(sc, sub, "original_max_position_embeddings", false, cfg->max_position_embeddings, 1,
                         &r->original_max_position));
        KILN_TRY(get_num(sc, sub, "attention_factor", 0.0, &r->attention_factor));
        KILN_TRY(get_num(sc, sub, "beta_fast", 32.0, &r->beta_fast));
        KILN_TRY(get_num(sc, sub, "beta_slow", 1.0, &r->beta_slow));
        KILN_CHECK(r->factor > 0, KILN_ERR_FORMAT, "%s.factor = %g must be positive", sub, r->factor);
        /* llama3 smooths between two wavelengths: (x - low) / (high - low) */
        if (!strcmp(r->type, "llama3"))
            KILN_CHECK(r->low_freq_factor > 0 && r->high_freq_factor > r->low_freq_factor, KILN_ERR_FORMAT,
                       "%s: llama3 rope needs 0 < low_freq_factor < high_freq_factor (got %g and %g)", sub,
                       r->low_freq_factor, r->high_freq_factor);
    }
    /* the rotation base and the rotated fraction feed pow() and the rotary width */
    KILN_CHECK(r->theta > 0, KILN_ERR_FORMAT, "%s: rope_theta = %g must be positive", what, r->theta);
    KILN_CHECK(r->partial_rotary_factor > 0 && r->partial_rotary_factor <= 1, KILN_ERR_FORMAT,
               "%s: partial_rotary_factor = %g must be in (0, 1]", what, r->partial_rotary_factor);
fail:
    return st;
}

kiln_status kiln_model_config_parse(const char *text, const char *what, kiln_model_config *cfg) {
    kiln_status st = KILN_OK;
    memset(cfg, 0, sizeof *cfg);
    cfg->bos_token_id = -1;
    cfg->pad_token_id = -1;
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    KILN_CHECK(root, KILN_ERR_FORMAT, "%s is not valid JSON: %s (line %d, column %d)", what, jerr.text,
               jerr.line, jerr.column);
    cfg->json = root;
    KILN_CHECK(json_is_object(root), KILN_ERR_FORMAT, "%s must contain a JSON object", what);

    json_t *arch = json_object_get(root, "architectures");
    KILN_CHECK(arch, KILN_ERR_FORMAT, "%s: missing required field \"architectures\"", what);
    KILN_CHECK(json_is_array(arch) && json_array_size(arch) >= 1 && json_is_string(json_array_get(arch, 0)),
               KILN_ERR_FORMAT, "%s: field \"architectures\" must be a non-empty list of strings", what);
    cfg->architecture = kiln_strdup(json_string_value(json_array_get(arch, 0)));
    json_t *mt = json_object_get(root, "model_type");
    cfg->model_type = kiln_strdup(json_is_string(mt) ? json_string_value(mt) : "");
    KILN_CHECK_ALLOC(cfg->architecture);
    KILN_CHECK_ALLOC(cfg->model_type);

    KILN_TRY(get_int(root, what, "hidden_size", true, 0, 1, &cfg->hidden_size));
    KILN_TRY(get_int(root, what, "intermediate_size", true, 0, 1, &cfg->intermediate_size));
    KILN_TRY(get_int(root, what, "num_hidden_layers", true, 0, 1, &cfg->num_layers));
    KILN_TRY(get_int(root, what, "num_attention_heads", true, 0, 1, &cfg->num_heads));
    KILN_TRY(get_int(root, what, "num_key_value_heads", false, cfg->num_heads, 1, &cfg->num_kv_heads));
    KILN_TRY(get_int(root, what, "vocab_size", true, 0, 1, &cfg->vocab_size));
    KILN_TRY(get_int(root, what, "max_position_embeddings", false, 2048, 1, &cfg->max_position_embeddings));
    json_t *hd = json_object_get(root, "head_dim");
    KILN_CHECK(cfg->hidden_size % cfg->num_heads == 0 || (hd && !json_is_null(hd)), KILN_ERR_FORMAT,
               "%s: hidden_size %d is not divisible by num_attention_heads %d", what, cfg->hidden_size,
               cfg->num_heads);
    KILN_TRY(get_int(root, what, "head_dim", false, cfg->hidden_size / cfg->num_heads, 1, &cfg->head_dim));
    KILN_CHECK(cfg->num_heads % cfg->num_kv_heads == 0, KILN_ERR_FORMAT,
               "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", what,
               cfg->num_heads, cfg->num_kv_heads);
    /* the fused q/k/v row width is an int everywhere downstream */
    int64_t qkv_width = ((int64_t)cfg->num_heads + 2 * (int64_t)cfg->num_kv_heads) * cfg->head_dim;
    KILN_CHECK(qkv_width <= INT_MAX, KILN_ERR_FORMAT,
               "%s: (num_attention_heads %d + 2 * num_key_value_heads %d) * head_dim %d = %lld is too large "
               "(at most %d)",
               what, cfg->num_heads, cfg->num_kv_heads, cfg->head_dim, (long long)qkv_width, INT_MAX);
    KILN_TRY(get_num(root, what, "rms_norm_eps", 1e-6, &cfg->rms_norm_eps));
    KILN_CHECK(cfg->rms_norm_eps >= 0, KILN_ERR_FORMAT, "%s: rms_norm_eps = %g must not be negative", what,
               cfg->rms_norm_eps);
    KILN_TRY(get_bool(root, what, "tie_word_embeddings", false, &cfg->tie_word_embeddings));
    KILN_TRY(get_bool(root, what, "attention_bias", false, &cfg->attention_bias));
    KILN_TRY(get_bool(root, what, "mlp_bias", false, &cfg->mlp_bias));
    /* Qwen2 carries q/k/v biases without a flag: its policy decides. */
    json_t *sw = json_object_get(root, "sliding_window");
    json_t *usw = json_object_get(root, "use_sliding_window");
    if (sw && !json_is_null(sw) && !(usw && json_is_false(usw)))
        KILN_TRY(get_int(root, what, "sliding_window", false, 0, 0, &cfg->sliding_window));

    json_t *act = json_object_get(root, "hidden_act");
    cfg->hidden_act = kiln_strdup(json_is_string(act) ? json_string_value(act) : "silu");
    KILN_CHECK_ALLOC(cfg->hidden_act);

    json_t *dt = json_object_get(root, "dtype");
    if (!dt || json_is_null(dt)) dt = json_object_get(root, "torch_dtype");
    if (dt && !json_is_null(dt)) {
        KILN_CHECK(json_is_string(dt), KILN_ERR_FORMAT, "%s: field \"%s\" must be a string", what,
                   dt == json_object_get(root, "dtype") ? "dtype" : "torch_dtype");
        cfg->dtype = kiln_dtype_from_name(json_string_value(dt));
        KILN_CHECK(cfg->dtype == KILN_DTYPE_BF16 || cfg->dtype == KILN_DTYPE_F16 || cfg->dtype == KILN_DTYPE_F32,
                   KILN_ERR_UNSUPPORTED, "%s: dtype \"%s\" is not supported (bfloat16, float16, float32)", what,
                   json_string_value(dt));
    } else {
        cfg->dtype = KILN_DTYPE_BF16;
    }
    KILN_TRY(parse_rope(cfg, root, what));

    json_t *bos = json_object_get(root, "bos_token_id");
    if (json_is_integer(bos)) KILN_TRY(token_id(bos, what, "bos_token_id", &cfg->bos_token_id));
    json_t *pad = json_object_get(root, "pad_token_id");
    if (json_is_integer(pad)) KILN_TRY(token_id(pad, what, "pad_token_id", &cfg->pad_token_id));
    KILN_TRY(parse_eos(cfg, root, what));
    return KILN_OK;
fail:
    kiln_model_config_free(cfg);
    return st;
}

kiln_status kiln_model_config_load(const char *dir, kiln_model_config *cfg) {
    kiln_status st = KILN_OK;
    char *path = NULL, *text = NULL, *gpath = NULL, *gtext = NULL;
    memset(cfg, 0, sizeof *cfg);
    KILN_CHECK(kiln_path_is_dir(dir), kiln_path_exists(dir) ? KILN_ERR_INVALID_ARGUMENT : KILN_ERR_NOT_FOUND,
               "model directory %s %s", dir, kiln_path_exists(dir) ? "is not a directory" : "does not exist");
    path = kiln_path_join(dir, "config.json");
    KILN_CHECK_ALLOC(path);
    st = kiln_read_file(path, &text, NULL);
    if (st) {
        if (st == KILN_ERR_NOT_FOUND) KILN_FAIL(KILN_ERR_NOT_FOUND, "%s has no config.json", dir);
        goto fail;
    }
    KILN_TRY(kiln_model_config_parse(text, path, cfg));

    gpath = kiln_path_join(dir, "generation_config.json");
    KILN_CHECK_ALLOC(gpath);
    if (kiln_path_exists(gpath)) {
        KILN_TRY(kiln_read_file(gpath, &gtext, NULL));
        json_error_t jerr;
        cfg->generation = json_loads(gtext, 0, &jerr);
        KILN_CHECK(cfg->generation, KILN_ERR_FORMAT, "%s is not valid JSON: %s (line %d, column %d)", gpath,
                   jerr.text, jerr.line, jerr.column);
        KILN_CHECK(json_is_object(cfg->generation), KILN_ERR_FORMAT, "%s must contain a JSON object", gpath);
        KILN_TRY(parse_eos(cfg, cfg->generation, gpath));
        json_t *bos = json_object_get(cfg->generation, "bos_token_id");
        if (json_is_integer(bos) && cfg->bos_token_id < 0)
            KILN_TRY(token_id(bos, gpath, "bos_token_id", &cfg->bos_token_id));
    }
fail:
    if (st) kiln_model_config_free(cfg);
    free(path);
    free(text);
    free(gpath);
    free(gtext);
    return st;
}

void kiln_model_config_free(kiln_model_config *cfg) {
    free(cfg->architecture);
    free(cfg->model_type);
    free(cfg->hidden_act);
    if (cfg->json) json_decref(cfg->json);
    if (cfg->generation) json_decref(cfg->generation);
    memset(cfg, 0, sizeof *cfg);
}

kiln_status kiln_model_config_describe(const kiln_model_config *c, kiln_buf *b) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_buf_printf(b,
                             "architecture: %s\nmodel_type: %s\nhidden_size: %d\nintermediate_size: %d\n"
                             "num_layers: %d\nnum_heads: %d\nnum_kv_heads: %d\nhead_dim: %d\nvocab_size: %d\n"
                             "max_position_embeddings: %d\nrms_norm_eps: %g\ndtype: %s\nhidden_act: %s\n"
                             "tie_word_embeddings: %s\nattention_bias: %s\nmlp_bias: %s\n",
                             c->architecture, c->model_type, c->hidden_size, c->intermediate_size, c->num_layers,
                             c->num_heads, c->num_kv_heads, c->head_dim, c->vocab_size,
                             c->max_position_embeddings, c->rms_norm_eps, kiln_dtype_name(c->dtype),
                             c->hidden_act, c->tie_word_embeddings ? "true" : "false",
                             c->attention_bias ? "true" : "false", c->mlp_bias ? "true" : "false"));
    KILN_TRY(kiln_buf_printf(b, "rope: type=%s theta=%g", c->rope.type, c->rope.theta));
    if (strcmp(c->rope.type, "default"))
        KILN_TRY(kiln_buf_printf(b, " factor=%g", c->rope.factor));
    if (!strcmp(c->rope.type, "llama3"))
        KILN_TRY(kiln_buf_printf(b, " low_freq_factor=%g high_freq_factor=%g original_max_position=%d",
                                 c->rope.low_freq_factor, c->rope.high_freq_factor, c->rope.original_max_position));
    if (c->rope.partial_rotary_factor != 1.0)
        KILN_TRY(kiln_buf_printf(b, " partial_rotary_factor=%g", c->rope.partial_rotary_factor));
    KILN_TRY(kiln_buf_printf(b, "\nsliding_window: %d\nbos_token_id: %d\neos_token_ids:", c->sliding_window,
                             c->bos_token_id));
    for (int i = 0; i < c->n_eos; i++) KILN_TRY(kiln_buf_printf(b, " %d", c->eos_token_ids[i]));
    KILN_TRY(kiln_buf_puts(b, "\n"));
fail:
    return st;
}

/* ------------------------------------------------------- built-in configs */

#include "embed.h"

const char *kiln_builtin_config(const char *name) {
    char path[128];
    if (!name || strlen(name) > 64 || strchr(name, '/')) return NULL;
    snprintf(path, sizeof path, "engine/configs/%s.json", name);
    const kiln_embedded_file *f = kiln_embedded_find(path);
    return f ? f->data : NULL;
}

const char *kiln_builtin_config_names(void) { return "llama2-7b llama3-8b llama3.1-8b llama3-70b"; }
