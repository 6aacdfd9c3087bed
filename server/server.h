/*
 * server.h -- `kiln serve`: the OpenAI-compatible HTTP server's entry point
 * and its configuration. The CLI (cli/cmd_serve.c) fills srv_config and
 * calls srv_run, which loads the engine, serves until SIGTERM/SIGINT, drains
 * and returns the process exit code.
 * Layering: the server includes only kiln.h, libmicrohttpd and Jansson.
 * Thread-safety: srv_run is called once, from the main thread.
 */
#ifndef KILN_SERVER_H
#define KILN_SERVER_H

#include "kiln.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct srv_config {
    const char *host;              /* listen address, default 127.0.0.1          */
    int port;                      /* default 8000; 0 picks a free port          */
    const char *served_model_name; /* NULL: the --model argument                 */
    const char *api_key;           /* NULL: no auth (KILN_API_KEY is read too)  */
    int max_queued_requests;       /* requests admitted but not yet generating  */
    size_t max_body_bytes;         /* request body limit (413 above it)          */
    int max_connections;           /* total open connections                     */
    int max_connections_per_ip;    /* per client address                         */
    size_t connection_memory;      /* libmicrohttpd per-connection memory pool   */
    int timeout_s;                 /* idle / stalled connection timeout          */
    size_t stream_buffer_bytes;    /* undelivered output per request before abort */
    double send_timeout_s;         /* a reader stalled this long is aborted       */
    double drain_timeout_s;        /* SIGTERM: wait this long for running requests */
    double heartbeat_s;            /* SSE comment heartbeat while a stream waits  */
    int max_n;                     /* cap on `n`                                  */
    int socket_send_buffer;        /* >0: SO_SNDBUF of accepted sockets (tests)   */
    bool access_log;               /* one stderr line per request                 */
} srv_config;

void srv_default_config(srv_config *c);

/* Load the engine described by ep, serve, and return an exit code (0 after
 * a clean drain, 1 on a startup error). */
int srv_run(const srv_config *cfg, const kiln_engine_params *ep);

#endif
