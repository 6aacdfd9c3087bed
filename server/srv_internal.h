/*
 * srv_internal.h -- shared state of the HTTP server: the server object, one
 * call (an HTTP generation request: n choices x prompts engine requests and
 * their token channel), and the functions the modules export to each other.
 *
 * Threads: libmicrohttpd runs one thread per connection; the engine runs on
 * its own thread (engine_loop.c) and talks to connections only through the
 * engine's request queue (kiln_engine_add_request / kiln_engine_cancel) and
 * each call's token channel (srv_call.q under srv_call.mu, signalled by
 * srv_call.cv). The main thread loads the engine and handles signals.
 *
 * Ownership: a call is reference counted: one reference for the connection,
 * one for a streaming response object, one per engine request until its
 * final event. The last srv_call_unref frees it.
 */
#ifndef KILN_SERVER_INTERNAL_H
#define KILN_SERVER_INTERNAL_H

#include "api.h"
#include "server.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

enum { SRV_LOADING = 0, SRV_READY, SRV_DRAINING, SRV_STOPPING };

typedef struct srv_call srv_call;

typedef struct srv {
    srv_config cfg;
    const kiln_engine_params *ep;
    kiln_engine *eng;
    const kiln_tokenizer *tok;
    const kiln_chat_template *tmpl;
    const char *served_name;
    const char *model_path;
    int vocab_size;
    int max_model_len;
    int kv_capacity; /* tokens the KV pool holds                       */
    size_t max_token_bytes; /* longest vocabulary entry, for the prompt-length bound */
    long long started;

    atomic_int state;
    atomic_bool fatal;
    atomic_int queued;  /* engine requests admitted, no event yet        */

    pthread_mutex_t mu; /* guards everything below                       */
    pthread_cond_t cv;  /* engine wake-up; call list changes             */
    bool wake, quit;
    srv_call *active;   /* calls admitted and not yet finished           */
    int n_active;
    bool destroy;       /* the engine thread may destroy the engine      */
    bool load_failed;
    char load_error[1024];
    pthread_t engine_thread;
    bool engine_running;

    /* waking connection threads (engine_loop.c): stream callbacks queue
     * their call here (no syscall on the engine thread); after each engine
     * step the waker thread broadcasts each queued call's cv, overlapping
     * the next step */
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    srv_call **wl;      /* queued calls, each holding a reference       */
    int wl_n, wl_cap;
    bool wl_go, wl_quit;
    pthread_t waker;
    bool waker_running;

    struct MHD_Daemon *mhd;
    int port;

    /* counters for /metrics (atomics) */
    atomic_ullong http_requests[6]; /* by status class 1xx..5xx (index 1..5) */
    atomic_ullong rejected_busy, rejected_draining, client_aborts, slow_aborts;
} srv;

/* One queued event: a token and/or the end of one choice. */
typedef struct srv_ev {
    int choice;
    int32_t token;
    float logprob;
    size_t top_off;
    int n_top;
    size_t text_off, text_len;
    kiln_finish_reason finish;
    kiln_status error;
    int n_prompt, n_gen;
} srv_ev;

typedef struct srv_evq {
    srv_ev *ev;
    size_t n, cap;
    kiln_logprob *top;
    size_t n_top, cap_top;
    api_buf text;
    bool oom;
} srv_evq;

typedef struct srv_choice {
    srv_call *call;
    int index;  /* choice index in the response */
    int prompt; /* which prompt                  */
    uint64_t id; /* engine request id (0: not added) */
    bool started, done;

    /* connection thread only */
    api_buf text;
    api_utf8 utf8;
    api_logprobs lp;
    size_t text_bytes; /* emitted so far (text_offset) */
    int n_gen;
    kiln_finish_reason finish;
    kiln_status error;
    bool role_sent;
} srv_choice;

struct srv_call {
    srv *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool cancelled;  /* engine callbacks return non-zero          */
    bool slow_abort; /* cancelled because the reader stalled       */
    int n_done;
    srv_evq q;       /* producer side, under mu                   */
    size_t pending;  /* bytes queued since the last drain         */
    double pending_since;
    char error_msg[512]; /* first engine error message             */
    srv_call *prev, *next; /* srv.active list, under srv.mu     */
    bool listed;
    bool wake_queued; /* in srv.wl, under mu                          */

    /* fixed after admission */
    api_request req;
    srv_choice *choices;
    int n_choices;
    int32_t **prompt_ids;
    int *n_prompt_ids;
    char **echo;           /* per prompt, completions with echo       */
    size_t *echo_len;
    api_resp_info ri;
    char id[48];
    int fd;                /* client socket, for disconnect checks    */

    /* connection thread only */
    srv_evq local;
    api_buf out;           /* SSE bytes not yet handed to MHD         */
    size_t out_off;
    bool started_stream, stream_done, error_sent;
    int usage_prompt, usage_completion;
};

/* ---- engine_loop.c: the engine thread creates, steps and destroys the
 * engine. start returns once the model is loaded (or failed: load_error);
 * stop ends stepping; destroy frees the engine and joins the thread. */
kiln_status srv_engine_start(srv *s);
void srv_engine_stop(srv *s);
void srv_engine_destroy(srv *s);
void srv_engine_wake(srv *s);
int srv_on_event(void *user, const kiln_stream_event *ev);

/* ---- call lifetime (engine_loop.c) */
srv_call *srv_call_new(srv *s);
void srv_call_ref(srv_call *c);
void srv_call_unref(srv_call *c);
/* Cancel every unfinished engine request of the call (client gone,
 * shutdown). Safe to call more than once, from any thread. */
void srv_call_cancel(srv_call *c);
/* Take the queued events into c->local (connection thread). */
void srv_call_take(srv_call *c);
/* Add to the active list; false (not added) unless the server is READY.
 * Checked under srv.mu, so no call is admitted after a drain began. */
bool srv_call_list(srv *s, srv_call *c);
void srv_set_state(srv *s, int state);
void srv_call_unlist(srv *s, srv_call *c);
void srv_cancel_all(srv *s);

/* ---- http.c */
enum MHD_Result srv_respond_json(struct MHD_Connection *conn, int status, const char *json, const char *hdr,
                                 const char *hdr_val);
enum MHD_Result srv_respond_error(struct MHD_Connection *conn, const api_error *e);
bool srv_socket_alive(int fd);
double srv_now(void);

/* ---- openai.c: POST /v1/completions, /v1/chat/completions,
 * /tokenize, /detokenize. body is the whole request body. */
enum MHD_Result srv_handle_generate(srv *s, struct MHD_Connection *conn, api_kind kind, const char *body,
                                    size_t len, srv_call **call_out);
enum MHD_Result srv_handle_tokenize(srv *s, struct MHD_Connection *conn, const char *body, size_t len);
enum MHD_Result srv_handle_detokenize(srv *s, struct MHD_Connection *conn, const char *body, size_t len);

#endif
