/*
 * metrics.c -- latency histograms and the Prometheus text exposition, with
 * vLLM's metric names and buckets so existing dashboards work.
 * Thread-safety: callers hold the engine mutex around observe/format.
 */
#include "engine_internal.h"

#include <stdio.h>

static const double ttft_b[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double itl_b[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                               0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_b[] = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                               30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

static void hist_init(kiln_hist *h, const double *b, int n) {
    memset(h, 0, sizeof *h);
    h->bounds = b;
    h->n = n;
}

static void hist_observe(kiln_hist *h, double v) {
    int i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void kiln_metrics_init(kiln_metrics *m) {
    hist_init(&m->ttft, ttft_b, (int)KILN_ARRAY_LEN(ttft_b));
    hist_init(&m->itl, itl_b, (int)KILN_ARRAY_LEN(itl_b));
    hist_init(&m->e2e, e2e_b, (int)KILN_ARRAY_LEN(e2e_b));
}
void kiln_metrics_observe_ttft(kiln_metrics *m, double s) { hist_observe(&m->ttft, s); }
void kiln_metrics_observe_itl(kiln_metrics *m, double s) { hist_observe(&m->itl, s); }
void kiln_metrics_observe_e2e(kiln_metrics *m, double s) { hist_observe(&m->e2e, s); }

/* Label values: escape backslash, quote and newline. */
static kiln_status put_label(kiln_buf *b, const char *v) {
    kiln_status st = KILN_OK;
    for (const char *c = v; *c; c++) {
        if (*c == '\\') st = kiln_buf_puts(b, "\\\\");
        else if (*c == '"') st = kiln_buf_puts(b, "\\\"");
        else if (*c == '\n') st = kiln_buf_puts(b, "\\n");
        else st = kiln_buf_append(b, c, 1);
        if (st) return st;
    }
    return KILN_OK;
}

static kiln_status put_hist(kiln_buf *b, const char *name, const char *help, const kiln_hist *h, const char *model) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name));
    uint64_t cum = 0;
    for (int i = 0; i <= h->n; i++) {
        cum += h->counts[i];
        KILN_TRY(kiln_buf_printf(b, "%s_bucket{model_name=\"", name));
        KILN_TRY(put_label(b, model));
        if (i < h->n)
            KILN_TRY(kiln_buf_printf(b, "\",le=\"%g\"} %llu\n", h->bounds[i], (unsigned long long)cum));
        else
            KILN_TRY(kiln_buf_printf(b, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum));
    }
    KILN_TRY(kiln_buf_printf(b, "%s_sum{model_name=\"", name));
    KILN_TRY(put_label(b, model));
    KILN_TRY(kiln_buf_printf(b, "\"} %.9g\n%s_count{model_name=\"", h->sum, name));
    KILN_TRY(put_label(b, model));
    KILN_TRY(kiln_buf_printf(b, "\"} %llu\n", (unsigned long long)h->count));
fail:
    return st;
}

static kiln_status put_scalar(kiln_buf *b, const char *name, const char *type, const char *help, const char *model,
                              double v) {
    kiln_status st = KILN_OK;
    KILN_TRY(kiln_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"", name, help, name, type, name));
    KILN_TRY(put_label(b, model));
    KILN_TRY(kiln_buf_printf(b, "\"} %.17g\n", v));
fail:
    return st;
}

kiln_status kiln_engine_metrics_prometheus(kiln_engine *e, const char *model, char **out) {
    kiln_status st = KILN_OK;
    kiln_buf b = {0};
    if (!model) model = e->params.model;
    pthread_mutex_lock(&e->mu);
    kiln_stats s = e->stats;
    kiln_metrics m = e->metrics;
    pthread_mutex_unlock(&e->mu);
    KILN_TRY(put_scalar(&b, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                        model, s.num_running));
    KILN_TRY(put_scalar(&b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", model,
                        s.num_waiting));
    KILN_TRY(put_scalar(&b, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", model,
                        s.kv_cache_usage));
    KILN_TRY(put_scalar(&b, "kiln:kv_cache_capacity_tokens", "gauge", "Tokens the KV-cache pool holds.", model,
                        (double)s.num_kv_blocks * s.block_size));
    KILN_TRY(put_scalar(&b, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", model,
                        (double)s.prompt_tokens_total));
    KILN_TRY(put_scalar(&b, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", model,
                        (double)s.generation_tokens_total));
    KILN_TRY(put_scalar(&b, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
                        model, (double)s.num_preemptions_total));
    KILN_TRY(kiln_buf_puts(&b, "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                               "# TYPE vllm:request_success_total counter\n"));
    static const char *reasons[] = {NULL, "stop", "length", "abort"};
    for (int i = 1; i < 4; i++) {
        KILN_TRY(kiln_buf_printf(&b, "vllm:request_success_total{finished_reason=\"%s\",model_name=\"", reasons[i]));
        KILN_TRY(put_label(&b, model));
        KILN_TRY(kiln_buf_printf(&b, "\"} %llu\n", (unsigned long long)s.requests_finished[i]));
    }
    KILN_TRY(put_scalar(&b, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", model,
                        (double)s.spec_draft_tokens_total));
    KILN_TRY(put_scalar(&b, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.",
                        model, (double)s.spec_accepted_tokens_total));
    KILN_TRY(put_hist(&b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m.ttft,
                      model));
    KILN_TRY(put_hist(&b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &m.itl,
                      model));
    KILN_TRY(put_hist(&b, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                      &m.e2e, model));
    *out = kiln_buf_steal(&b);
fail:
    kiln_buf_free(&b);
    return st;
}
