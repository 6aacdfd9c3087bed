/*
 * http.c -- the HTTP side of `kiln serve`: libmicrohttpd in
 * thread-per-connection mode with connection, per-IP, memory and timeout
 * limits; routing (404 / 405 as JSON), Bearer auth, body accumulation with
 * the size limit enforced while receiving (413), the small GET endpoints
 * (/health, /ping, /engine_check, /v1/models, /metrics, /version), and the
 * process lifecycle: start listening, load the engine (health says 503 until
 * then), print the address, wait for SIGTERM/SIGINT, drain, exit 0.
 * Ownership: one conn_ctx per HTTP request (MHD's con_cls), freed by the
 * completion callback, which also cancels an abandoned generation.
 * Thread-safety: handlers run on connection threads; shared state is in srv
 * (atomics, srv.mu).
 */
#define _GNU_SOURCE 1 /* POLLRDHUP */
#include "srv_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void srv_default_config(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8000;
    c->max_queued_requests = 1024;
    c->max_body_bytes = 32u << 20;
    c->max_connections = 2048;
    c->max_connections_per_ip = 1024;
    c->connection_memory = 64u << 10;
    c->timeout_s = 60;
    c->stream_buffer_bytes = 16u << 20;
    c->send_timeout_s = 30.0;
    c->drain_timeout_s = 30.0;
    c->heartbeat_s = 0.2;
    c->max_n = 128;
}

/* ------------------------------------------------------------ responses */

static srv *g_srv; /* for the response counters only; set once in srv_run */

static void count_status(int status) {
    if (g_srv && status >= 100 && status < 600) atomic_fetch_add(&g_srv->http_requests[status / 100], 1);
}

enum MHD_Result srv_respond_json(struct MHD_Connection *conn, int status, const char *json, const char *hdr,
                                 const char *hdr_val) {
    const char *body = json ? json : "{}";
    size_t len = strlen(body);
    /* a trailing newline makes curl output readable */
    char *copy = malloc(len + 2);
    if (!copy) return MHD_NO;
    memcpy(copy, body, len);
    copy[len] = '\n';
    copy[len + 1] = 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(len + 1, copy, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(copy);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (hdr && hdr_val) MHD_add_response_header(r, hdr, hdr_val);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(status);
    return ret;
}

enum MHD_Result srv_respond_error(struct MHD_Connection *conn, const api_error *e) {
    char *j = api_error_json(e);
    const char *hdr = NULL, *val = NULL;
    if (e->status == 503) hdr = MHD_HTTP_HEADER_RETRY_AFTER, val = "1";
    else if (e->status == 413) hdr = MHD_HTTP_HEADER_CONNECTION, val = "close"; /* the rest of the body is not read */
    else if (e->status == 401) hdr = MHD_HTTP_HEADER_WWW_AUTHENTICATE, val = "Bearer";
    enum MHD_Result r = srv_respond_json(conn, e->status, j, hdr, val);
    free(j);
    return r;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, int status, const char *text, const char *ctype) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    count_status(status);
    return ret;
}

static enum MHD_Result fail(struct MHD_Connection *conn, int status, const char *param, const char *code,
                            const char *msg) {
    api_error e;
    api_fail(&e, status, param, code, "%s", msg);
    if (status == 401) e.type = "authentication_error";
    return srv_respond_error(conn, &e);
}

/* ----------------------------------------------------------- utilities */

bool srv_socket_alive(int fd) {
    if (fd < 0) return true;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    int r = poll(&p, 1, 0);
    if (r <= 0) return true;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    return true;
}

/* Prometheus label value escaping. */
static void put_label(api_buf *b, const char *v) {
    for (const char *c = v; *c; c++) {
        if (*c == '\\') api_buf_puts(b, "\\\\");
        else if (*c == '"') api_buf_puts(b, "\\\"");
        else if (*c == '\n') api_buf_puts(b, "\\n");
        else api_buf_put(b, c, 1);
    }
}

/* ---------------------------------------------------------- GET routes */

static enum MHD_Result handle_health(srv *s, struct MHD_Connection *conn) {
    int st = atomic_load(&s->state);
    if (st == SRV_LOADING) return fail(conn, 503, NULL, "loading", "The model is still loading");
    if (atomic_load(&s->fatal)) return fail(conn, 503, NULL, "engine_dead", "The engine has failed");
    if (st != SRV_READY) return fail(conn, 503, NULL, "shutting_down", "The server is shutting down");
    return srv_respond_json(conn, 200, "{\"status\":\"ok\"}", NULL, NULL);
}

static enum MHD_Result handle_engine_check(srv *s, struct MHD_Connection *conn) {
    if (atomic_load(&s->state) == SRV_LOADING) return fail(conn, 503, NULL, "loading", "The model is still loading");
    kiln_stats st;
    kiln_engine_get_stats(s->eng, &st);
    json_t *o = json_object();
    bool ok = !st.fatal && atomic_load(&s->state) == SRV_READY;
    json_object_set_new(o, "status", json_string(st.fatal ? "failed" : ok ? "ok" : "draining"));
    json_object_set_new(o, "model", json_string(s->served_name));
    json_object_set_new(o, "vocab_size", json_integer(s->vocab_size));
    json_object_set_new(o, "max_model_len", json_integer(s->max_model_len));
    json_object_set_new(o, "has_tokenizer", json_boolean(s->tok != NULL));
    json_object_set_new(o, "num_requests_running", json_integer(st.num_running));
    json_object_set_new(o, "num_requests_waiting", json_integer(st.num_waiting));
    json_object_set_new(o, "kv_cache_usage_perc", json_real(st.kv_cache_usage));
    json_object_set_new(o, "num_kv_blocks", json_integer(st.num_kv_blocks));
    json_object_set_new(o, "num_free_kv_blocks", json_integer(st.num_free_kv_blocks));
    json_object_set_new(o, "steps_total", json_integer((json_int_t)st.steps_total));
    char *j = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    enum MHD_Result r = srv_respond_json(conn, ok ? 200 : 503, j, NULL, NULL);
    free(j);
    return r;
}

/* GET /admin/speculation: the speculative decoding state and counters;
 * POST {"enabled": true|false} switches drafting at the next engine step
 * (the engine keeps its drafter and caches: no re-initialisation). */
static enum MHD_Result handle_speculation(srv *s, struct MHD_Connection *conn, const char *body, size_t len) {
    kiln_speculation_info si;
    kiln_engine_speculation_info(s->eng, &si);
    if (body) {
        json_error_t je;
        json_t *in = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        json_t *en = json_is_object(in) ? json_object_get(in, "enabled") : NULL;
        bool ok = json_is_boolean(en), want = ok && json_is_true(en);
        json_decref(in);
        if (!ok)
            return fail(conn, 400, "enabled", "invalid_type",
                        "the body must be a JSON object with a boolean \"enabled\"");
        if (!strcmp(si.method, "none"))
            return fail(conn, 400, "enabled", "speculation_unavailable",
                        "the server was started without speculative decoding (--speculative-method)");
        if (kiln_engine_set_speculation(s->eng, want) != KILN_OK)
            return fail(conn, 500, NULL, NULL, kiln_last_error());
        kiln_engine_speculation_info(s->eng, &si);
    }
    kiln_stats st;
    kiln_engine_get_stats(s->eng, &st);
    json_t *o = json_object();
    json_object_set_new(o, "method", json_string(si.method));
    json_object_set_new(o, "enabled", json_boolean(si.enabled));
    json_object_set_new(o, "num_speculative_tokens", json_integer(si.num_speculative_tokens));
    json_object_set_new(o, "draft_tokens_total", json_integer((json_int_t)st.spec_draft_tokens_total));
    json_object_set_new(o, "accepted_tokens_total", json_integer((json_int_t)st.spec_accepted_tokens_total));
    json_object_set_new(o, "verification_steps_total", json_integer((json_int_t)st.spec_steps_total));
    json_object_set_new(o, "acceptance_rate",
                        json_real(st.spec_draft_tokens_total
                                      ? (double)st.spec_accepted_tokens_total / (double)st.spec_draft_tokens_total
                                      : 0.0));
    char *j = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    enum MHD_Result r = srv_respond_json(conn, 200, j, NULL, NULL);
    free(j);
    return r;
}

static enum MHD_Result handle_models(srv *s, struct MHD_Connection *conn) {
    json_t *o = json_object(), *data = json_array(), *m = json_object();
    json_object_set_new(m, "id", json_string(s->served_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(s->started));
    json_object_set_new(m, "owned_by", json_string("kiln"));
    json_object_set_new(m, "root", json_string(s->model_path ? s->model_path : s->served_name));
    json_object_set_new(m, "parent", json_null());
    json_object_set_new(m, "max_model_len", json_integer(s->max_model_len));
    json_array_append_new(data, m);
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    char *j = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    enum MHD_Result r = srv_respond_json(conn, 200, j, NULL, NULL);
    free(j);
    return r;
}

static void metric(api_buf *b, const char *name, const char *type, const char *help, const char *labels,
                   const char *model, double v) {
    api_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s{%s%smodel_name=\"", name, help, name, type, name,
                   labels ? labels : "", labels ? "," : "");
    put_label(b, model);
    api_buf_printf(b, "\"} %.17g\n", v);
}

static enum MHD_Result handle_metrics(srv *s, struct MHD_Connection *conn) {
    char *text = NULL;
    if (kiln_engine_metrics_prometheus(s->eng, s->served_name, &text) != KILN_OK)
        return fail(conn, 500, NULL, NULL, kiln_last_error());
    api_buf b = {0};
    api_buf_puts(&b, text);
    kiln_free(text);
    api_buf_printf(&b, "# HELP kiln:http_responses_total HTTP responses by status class.\n"
                       "# TYPE kiln:http_responses_total counter\n");
    for (int i = 1; i <= 5; i++) {
        api_buf_printf(&b, "kiln:http_responses_total{code=\"%dxx\",model_name=\"", i);
        put_label(&b, s->served_name);
        api_buf_printf(&b, "\"} %llu\n", (unsigned long long)atomic_load(&s->http_requests[i]));
    }
    api_buf_printf(&b, "# HELP kiln:requests_rejected_total Generation requests refused before queueing.\n"
                       "# TYPE kiln:requests_rejected_total counter\n");
    static const char *why[] = {"queue_full", "shutting_down"};
    unsigned long long vals[] = {atomic_load(&s->rejected_busy), atomic_load(&s->rejected_draining)};
    for (int i = 0; i < 2; i++) {
        api_buf_printf(&b, "kiln:requests_rejected_total{reason=\"%s\",model_name=\"", why[i]);
        put_label(&b, s->served_name);
        api_buf_printf(&b, "\"} %llu\n", vals[i]);
    }
    metric(&b, "kiln:client_disconnects_total", "counter", "Generation requests cancelled because the client left.",
           NULL, s->served_name, (double)atomic_load(&s->client_aborts));
    metric(&b, "kiln:slow_reader_aborts_total", "counter",
           "Streams aborted because the client stopped reading.", NULL, s->served_name,
           (double)atomic_load(&s->slow_aborts));
    pthread_mutex_lock(&s->mu);
    int active = s->n_active;
    pthread_mutex_unlock(&s->mu);
    metric(&b, "kiln:http_generation_requests_active", "gauge", "Generation requests being served.", NULL,
           s->served_name, active);
    metric(&b, "kiln:engine_healthy", "gauge", "1 while the engine works, 0 after a fatal fault.", NULL,
           s->served_name, atomic_load(&s->fatal) ? 0 : 1);
    if (b.oom) {
        api_buf_free(&b);
        return fail(conn, 500, NULL, NULL, "out of memory");
    }
    enum MHD_Result r = respond_text(conn, 200, b.data, "text/plain; version=0.0.4; charset=utf-8");
    api_buf_free(&b);
    return r;
}

/* --------------------------------------------------------------- routing */

enum { R_NONE = 0, R_COMPLETIONS, R_CHAT, R_MODELS, R_HEALTH, R_PING, R_ENGINE_CHECK, R_METRICS, R_TOKENIZE,
       R_DETOKENIZE, R_VERSION, R_SPECULATION };

typedef struct route {
    const char *path;
    int id;
    bool get, post, auth;
} route;

static const route routes[] = {
    {"/v1/completions", R_COMPLETIONS, false, true, true},
    {"/completion", R_COMPLETIONS, false, true, true},
    {"/v1/chat/completions", R_CHAT, false, true, true},
    {"/chat", R_CHAT, false, true, true},
    {"/v1/models", R_MODELS, true, false, true},
    {"/health", R_HEALTH, true, false, false},
    {"/ping", R_PING, true, true, false},
    {"/engine_check", R_ENGINE_CHECK, true, false, true},
    {"/metrics", R_METRICS, true, false, true},
    {"/tokenize", R_TOKENIZE, false, true, true},
    {"/detokenize", R_DETOKENIZE, false, true, true},
    {"/version", R_VERSION, true, false, true},
    {"/admin/speculation", R_SPECULATION, true, true, true},
};

typedef struct conn_ctx {
    const route *rt;
    api_buf body;
    bool responded;
    bool too_big;
    size_t discarded;
    srv_call *call;
    double t0;
    char method[16];
    char path[96];
} conn_ctx;

static bool auth_ok(srv *s, struct MHD_Connection *conn) {
    const char *key = s->cfg.api_key;
    if (!key || !*key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    size_t a = strlen(h), b = strlen(key);
    /* constant time in the key's length */
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)(key[i] ^ (i < a ? h[i] : 0));
    return diff == 0;
}

static enum MHD_Result dispatch(srv *s, struct MHD_Connection *conn, conn_ctx *x) {
    int id = x->rt->id;
    if (id == R_HEALTH || id == R_PING) return handle_health(s, conn);
    int st = atomic_load(&s->state);
    if (st == SRV_LOADING) return fail(conn, 503, NULL, "loading", "The model is still loading");
    if (st == SRV_STOPPING) return fail(conn, 503, NULL, "shutting_down", "The server is shutting down");
    switch (id) {
    case R_MODELS: return handle_models(s, conn);
    case R_ENGINE_CHECK: return handle_engine_check(s, conn);
    case R_METRICS: return handle_metrics(s, conn);
    case R_VERSION: {
        char v[96];
        snprintf(v, sizeof v, "{\"version\":\"%d.%d.%d\"}", KILN_VERSION_MAJOR, KILN_VERSION_MINOR,
                 KILN_VERSION_PATCH);
        return srv_respond_json(conn, 200, v, NULL, NULL);
    }
    case R_SPECULATION:
        if (!strcmp(x->method, "GET")) return handle_speculation(s, conn, NULL, 0);
        break;
    default: break;
    }
    /* POST routes */
    if (atomic_load(&s->state) != SRV_READY) {
        atomic_fetch_add(&s->rejected_draining, 1);
        return fail(conn, 503, NULL, "shutting_down", "The server is shutting down and accepts no new requests");
    }
    const char *body = x->body.data ? x->body.data : "";
    switch (id) {
    case R_COMPLETIONS: return srv_handle_generate(s, conn, API_COMPLETION, body, x->body.len, &x->call);
    case R_CHAT: return srv_handle_generate(s, conn, API_CHAT, body, x->body.len, &x->call);
    case R_TOKENIZE: return srv_handle_tokenize(s, conn, body, x->body.len);
    case R_DETOKENIZE: return srv_handle_detokenize(s, conn, body, x->body.len);
    case R_SPECULATION: return handle_speculation(s, conn, body, x->body.len);
    default: return fail(conn, 500, NULL, NULL, "unrouted request");
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    srv *s = cls;
    conn_ctx *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x) return MHD_NO;
        *con_cls = x;
        x->t0 = srv_now();
        snprintf(x->method, sizeof x->method, "%s", method);
        snprintf(x->path, sizeof x->path, "%s", url);
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            if (!strcmp(url, routes[i].path)) x->rt = &routes[i];
        bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
        if (!x->rt) {
            char msg[160];
            snprintf(msg, sizeof msg, "Not found: %s %.100s", method, url);
            x->responded = true;
            return fail(conn, 404, NULL, "not_found", msg);
        }
        if (!((get && x->rt->get) || (post && x->rt->post))) {
            char msg[160];
            const char *allow = x->rt->get && x->rt->post ? "GET, HEAD, POST" : x->rt->get ? "GET, HEAD" : "POST";
            snprintf(msg, sizeof msg, "Method %s is not allowed on %s (allowed: %s)", method, x->rt->path, allow);
            api_error e;
            api_fail(&e, 405, NULL, "method_not_allowed", "%s", msg);
            char *j = api_error_json(&e);
            x->responded = true;
            enum MHD_Result r = srv_respond_json(conn, 405, j, MHD_HTTP_HEADER_ALLOW, allow);
            free(j);
            return r;
        }
        if (x->rt->auth && !auth_ok(s, conn)) {
            x->responded = true;
            return fail(conn, 401, NULL, "invalid_api_key",
                        "Unauthorized: this server requires 'Authorization: Bearer <API key>'");
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end = NULL;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno == ERANGE || n > s->cfg.max_body_bytes) {
                char msg[200];
                snprintf(msg, sizeof msg, "The request body (Content-Length %.40s) is larger than the limit of %zu bytes",
                         cl, s->cfg.max_body_bytes);
                x->responded = true;
                return fail(conn, 413, NULL, "request_too_large", msg);
            }
        }
        return MHD_YES;
    }
    if (x->responded) {
        *upload_data_size = 0; /* discard the rest of a rejected body */
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (x->too_big || x->body.len + n > s->cfg.max_body_bytes) {
            /* libmicrohttpd cannot answer before the upload ends (a chunked
             * body has no Content-Length to check up front): stop buffering,
             * discard what follows and answer 413 at its end; a body that
             * goes on past twice the limit gets the connection closed */
            if (!x->too_big) api_buf_free(&x->body);
            x->too_big = true;
            x->discarded += n;
            return x->discarded > s->cfg.max_body_bytes ? MHD_NO : MHD_YES;
        }
        api_buf_put(&x->body, upload_data, n);
        if (x->body.oom) return MHD_NO;
        return MHD_YES;
    }
    if (x->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "The request body is larger than the limit of %zu bytes", s->cfg.max_body_bytes);
        x->responded = true;
        return fail(conn, 413, NULL, "request_too_large", msg);
    }
    x->responded = true;
    return dispatch(s, conn, x);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    srv *s = cls;
    conn_ctx *x = *con_cls;
    if (!x) return;
    if (x->call) {
        pthread_mutex_lock(&x->call->mu);
        bool unfinished = x->call->n_done < x->call->n_choices;
        pthread_mutex_unlock(&x->call->mu);
        if (unfinished || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
            if (unfinished && atomic_load(&s->state) == SRV_READY) atomic_fetch_add(&s->client_aborts, 1);
            srv_call_cancel(x->call);
        }
        srv_call_unref(x->call);
    }
    if (s->cfg.access_log)
        fprintf(stderr, "kiln serve: %s %s %s%.1f ms\n", x->method, x->path,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : "(connection closed early) ",
                (srv_now() - x->t0) * 1e3);
    api_buf_free(&x->body);
    free(x);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    (void)socket_context;
    srv *s = cls;
    if (toe != MHD_CONNECTION_NOTIFY_STARTED || s->cfg.socket_send_buffer <= 0) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) {
        int v = s->cfg.socket_send_buffer;
        setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    /* our own way of dropping a connection whose client left: not news */
    if (strstr(msg, "Application reported internal error") || strstr(msg, "application error generating response"))
        return;
    fprintf(stderr, "kiln serve: http: %s\n", msg);
}

/* ------------------------------------------------------------- lifecycle */

static struct MHD_Daemon *start_http(srv *s, char *err, size_t errlen) {
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int gai = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(err, errlen, "cannot resolve host '%s': %s", s->cfg.host, gai_strerror(gai));
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, /* first, so every message goes through it */
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_connections_per_ip,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->cfg.connection_memory,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s,
        /* connection threads parse JSON (nesting <= API_MAX_DEPTH) and run
         * chat templates (the interpreter bounds its depth): 4 MiB whatever
         * `ulimit -s` says */
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)4 << 20,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        snprintf(err, errlen, "cannot listen on %s:%d (%s)", s->cfg.host, s->cfg.port,
                 errno ? strerror(errno) : "libmicrohttpd refused the options");
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : s->cfg.port;
    return d;
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Wait up to secs for the active call list to empty. */
static void wait_active(srv *s, double secs) {
    double until = srv_now() + secs;
    pthread_mutex_lock(&s->mu);
    while (s->n_active > 0 && srv_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
}

int srv_run(const srv_config *cfg, const kiln_engine_params *ep) {
    srv *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->cfg = *cfg;
    const char *envkey = getenv("KILN_API_KEY");
    if ((!s->cfg.api_key || !*s->cfg.api_key) && envkey && *envkey) s->cfg.api_key = envkey;
    s->ep = ep;
    s->served_name = cfg->served_model_name ? cfg->served_model_name : ep->model;
    s->started = (long long)time(NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    atomic_init(&s->state, SRV_LOADING);
    atomic_init(&s->fatal, false);
    atomic_init(&s->queued, 0);
    g_srv = s;
    int rc = 1;

    /* SIGTERM / SIGINT are taken by sigwait on this thread; every thread
     * created from here on inherits the blocked mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    char err[256];
    s->mhd = start_http(s, err, sizeof err);
    if (!s->mhd) {
        fprintf(stderr, "kiln serve: error: %s\n", err);
        goto out;
    }
    fprintf(stderr, "kiln serve: loading %s (the server answers 503 until it is ready)\n", ep->model);
    if (srv_engine_start(s) != KILN_OK) {
        fprintf(stderr, "kiln serve: error: %s\n", s->load_error[0] ? s->load_error : "cannot start the engine thread");
        goto out;
    }
    s->tok = kiln_engine_tokenizer(s->eng);
    s->tmpl = kiln_engine_chat_template(s->eng);
    kiln_model_info info;
    kiln_engine_model_info(s->eng, &info);
    s->model_path = info.model_path;
    s->vocab_size = info.vocab_size;
    s->max_model_len = info.max_model_len;
    kiln_stats st;
    kiln_engine_get_stats(s->eng, &st);
    s->kv_capacity = st.num_kv_blocks * st.block_size;
    if (s->tok) {
        int32_t nv = kiln_tokenizer_vocab_size(s->tok);
        for (int32_t i = 0; i < nv; i++) {
            const char *t = kiln_tokenizer_token_text(s->tok, i);
            size_t l = t ? strlen(t) : 0;
            if (l > s->max_token_bytes) s->max_token_bytes = l;
        }
    }
    srv_set_state(s, SRV_READY);
    printf("kiln serve: ready: model %s (%s, max_model_len %d, %d KV tokens) listening on http://%s%s%s:%d\n",
           s->served_name, info.device, s->max_model_len, s->kv_capacity, strchr(cfg->host, ':') ? "[" : "",
           cfg->host, strchr(cfg->host, ':') ? "]" : "", s->port);
    fflush(stdout);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {
    }
    fprintf(stderr, "kiln serve: %s: refusing new requests, draining (up to %.0f s)\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", s->cfg.drain_timeout_s);
    srv_set_state(s, SRV_DRAINING);
    /* drain: wait for running requests, then cancel what is left */
    wait_active(s, s->cfg.drain_timeout_s);
    pthread_mutex_lock(&s->mu);
    int left = s->n_active;
    pthread_mutex_unlock(&s->mu);
    if (left) {
        fprintf(stderr, "kiln serve: drain timeout: cancelling %d request%s\n", left, left == 1 ? "" : "s");
        srv_cancel_all(s);
        wait_active(s, 5.0); /* cancelled requests end within a step or two */
    }
    rc = 0;
out:
    /* connection threads still waiting give up when they see STOPPING */
    srv_set_state(s, SRV_STOPPING);
    srv_engine_stop(s);
    if (s->mhd) MHD_stop_daemon(s->mhd);
    srv_engine_destroy(s); /* on its own thread, after the last connection */
    if (rc == 0) fprintf(stderr, "kiln serve: stopped\n");
    g_srv = NULL;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return rc;
}
