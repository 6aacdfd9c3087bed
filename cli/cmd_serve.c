/*
 * cmd_serve.c -- `kiln serve`: parse the options and run the
 * OpenAI-compatible HTTP server (server/).
 */
#include "cli.h"
#include "../server/server.h"

#include <stdio.h>

int kiln_cmd_serve(int argc, char **argv) {
    kiln_engine_params p;
    kiln_engine_default_params(&p);
    srv_config c;
    srv_default_config(&c);
    cli_opt own[] = {
        {"host", CLI_STR, &c.host, "ADDR", "listen address (default 127.0.0.1; 0.0.0.0 or :: for all)"},
        {"port", CLI_INT, &c.port, "N", "listen port (default 8000; 0 picks a free one)"},
        {"served-model-name", CLI_STR, &c.served_model_name, "NAME", "model name in the API (default: --model)"},
        {"api-key", CLI_STR, &c.api_key, "KEY", "require 'Authorization: Bearer KEY' (or set KILN_API_KEY)"},
        {"max-queued-requests", CLI_INT, &c.max_queued_requests, "N",
         "requests waiting for the engine before 503 (default 1024)"},
        {"max-n", CLI_INT, &c.max_n, "N", "largest `n` accepted (default 128)"},
        {"max-body-size", CLI_SIZE, &c.max_body_bytes, "BYTES", "request body limit, 413 above (default 32M)"},
        {"max-connections", CLI_INT, &c.max_connections, "N", "open connections (default 2048)"},
        {"max-connections-per-ip", CLI_INT, &c.max_connections_per_ip, "N", "per client address (default 1024)"},
        {"connection-memory", CLI_SIZE, &c.connection_memory, "BYTES", "per-connection HTTP buffer (default 64K)"},
        {"timeout", CLI_INT, &c.timeout_s, "SECONDS", "close idle or stalled connections (default 60)"},
        {"stream-buffer-size", CLI_SIZE, &c.stream_buffer_bytes, "BYTES",
         "undelivered stream output before the request is aborted (default 16M)"},
        {"send-timeout", CLI_DOUBLE, &c.send_timeout_s, "SECONDS",
         "abort a stream whose client reads nothing for this long (default 30)"},
        {"drain-timeout", CLI_DOUBLE, &c.drain_timeout_s, "SECONDS",
         "on SIGTERM, wait this long for running requests (default 30)"},
        {"socket-send-buffer", CLI_INT, &c.socket_send_buffer, "BYTES", "SO_SNDBUF of client sockets (default: OS)"},
        {"access-log", CLI_FLAG, &c.access_log, NULL, "log one line per request to stderr"},
        CLI_OPT_END,
    };
    cli_opt *tables[] = {own, cli_engine_opts(&p), NULL};
    int r = cli_parse(argc, argv, "serve",
                      "Serve a model over an OpenAI-compatible HTTP API: /v1/completions, /v1/chat/completions, "
                      "/v1/models, /health, /metrics, /tokenize, /detokenize. Prints the address once ready; "
                      "SIGTERM drains running requests and exits 0.",
                      tables, NULL, 0, NULL);
    if (r) return r == 3 ? 0 : r;
    if (!p.model) {
        fprintf(stderr, "kiln serve: give --model DIR_OR_ORG/NAME\n");
        return 2;
    }
    if (c.port < 0 || c.port > 65535) {
        fprintf(stderr, "kiln serve: --port must be in [0, 65535], got %d\n", c.port);
        return 2;
    }
    if (c.max_queued_requests < 1 || c.max_n < 1 || c.max_connections < 1 || c.max_connections_per_ip < 0 ||
        c.timeout_s < 0 || c.max_body_bytes < 1 || c.stream_buffer_bytes < 1 || !(c.send_timeout_s > 0) ||
        !(c.drain_timeout_s >= 0)) {
        fprintf(stderr, "kiln serve: limits must be positive (see kiln serve --help)\n");
        return 2;
    }
    return srv_run(&c, &p);
}
