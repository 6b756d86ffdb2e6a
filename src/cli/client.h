/*
 * client: what the CLI's client commands (`inferd infer`, `models`,
 * `health`: cli/infer_cmd.h, cli/admin_cmd.h) share — the server's address
 * and credentials, a blocking connection (TCP, or TLS with certificate and
 * host name verification), one HTTP/1.1 exchange over it, the exit codes,
 * and the options every command takes.
 *
 * Target: --url URL (default $INFERD_URL, else http://127.0.0.1:8000;
 * http:// or https://), --cacert FILE (trust these CAs instead of the
 * system's), --insecure (no certificate verification), --timeout SECS (the
 * whole exchange, default 30). The API key is $INFERD_API_KEY only (a flag
 * would show in ps), sent as `Authorization: Bearer`.
 *
 * cli_http() connects, sends one request (Connection: close), reads the
 * whole response (body at most CLI_MAX_BODY bytes) and closes. A tick
 * callback, when given, runs about every 200 ms while waiting (the
 * progress display of long loads). Returns 0 with the response filled
 * (whatever its status), or CLI_EXIT_CONNECT with a message in err: cannot
 * resolve or connect, TLS handshake or verification failed, timeout, the
 * connection closed early, malformed response.
 *
 * cli_conn_*: the connection underneath, for the gRPC client
 * (cli/grpc_client.h): open (with ALPN protocols for TLS), write all, read
 * some (bounded by the deadline), close. Thread: the caller's; nothing is
 * shared.
 */
#ifndef INFERD_CLI_CLIENT_H
#define INFERD_CLI_CLIENT_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "bench/http_client.h"

/* Exit codes of the client commands (docs/cli.md). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILED = 1,    /* the server answered with an error */
    CLI_EXIT_USAGE = 2,     /* bad arguments or input files */
    CLI_EXIT_CONNECT = 3,   /* cannot connect, TLS failure, timeout */
    CLI_EXIT_NOT_READY = 4, /* health: not live / not ready */
};

#define CLI_DEFAULT_URL "http://127.0.0.1:8000"
#define CLI_MAX_BODY ((size_t)256 << 20)
#define CLI_DEFAULT_TIMEOUT_S 30

struct cli_target {
    const char *url;
    struct http_url u; /* host, port, authority, prefix */
    bool tls;
    const char *cacert;
    bool insecure;
    int timeout_ms;
    const char *api_key; /* NULL: none */
};

/* The common options: getopt_long codes and table entries. */
enum { CLI_OPT_URL = 1000, CLI_OPT_CACERT, CLI_OPT_INSECURE, CLI_OPT_TIMEOUT };
#define CLI_COMMON_OPTIONS                                                                         \
    {"url", required_argument, NULL, CLI_OPT_URL},                                                 \
        {"cacert", required_argument, NULL, CLI_OPT_CACERT},                                       \
        {"insecure", no_argument, NULL, CLI_OPT_INSECURE},                                         \
    {                                                                                              \
        "timeout", required_argument, NULL, CLI_OPT_TIMEOUT                                        \
    }
/* Their help text. */
extern const char cli_common_help[];

/* Defaults from the environment. Returns 0, or CLI_EXIT_USAGE (printed,
 * prefixed by prog). */
int cli_target_init(struct cli_target *t, const char *prog);
/* Handles a common option code c: 1 if it was one (0 if not), or
 * -CLI_EXIT_USAGE after printing why its value is wrong. */
int cli_target_option(struct cli_target *t, int c, const char *arg, const char *prog);
/* Parses the URL once options are read: 0 or CLI_EXIT_USAGE (printed). */
int cli_target_finish(struct cli_target *t, const char *prog);

struct cli_response {
    int status;
    struct buf body;           /* the decoded body (bounded by CLI_MAX_BODY) */
    long long json_header_len; /* Inference-Header-Content-Length, or -1 */
};

void cli_response_init(struct cli_response *r);
void cli_response_free(struct cli_response *r);

int cli_http(const struct cli_target *t, const char *method, const char *path,
             const char *content_type, const char *extra_headers, const void *body, size_t body_len,
             struct cli_response *resp, void (*tick)(void *), void *tick_arg, char *err,
             size_t err_size);

/* Prints the server's error answer ({"error": "..."} or the body's start)
 * to stderr as "PROG: HTTP status: message". */
void cli_print_http_error(const char *prog, const struct cli_response *r);

struct cli_conn {
    int fd;
    void *ssl_ctx, *ssl; /* OpenSSL's, when TLS */
    int64_t deadline_ns; /* CLOCK_MONOTONIC */
};

/* alpn: a wire-format ALPN list ("\x02h2") or NULL. 0, or ST_ERROR with err. */
int cli_conn_open(struct cli_conn *c, const struct cli_target *t, const char *alpn, size_t alpn_len,
                  char *err, size_t err_size);
int cli_conn_write(struct cli_conn *c, const void *p, size_t n, char *err, size_t err_size);
/* Reads up to n bytes: > 0 bytes, 0 at the end of the stream, -1 with err
 * (including the deadline). With a tick, waits in steps of 200 ms calling
 * it in between. */
long cli_conn_read(struct cli_conn *c, void *p, size_t n, void (*tick)(void *), void *tick_arg,
                   char *err, size_t err_size);
void cli_conn_close(struct cli_conn *c);

/* Prints "PROG: message" and "(PROG --help lists the options)" to stderr;
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "PROG: message" to stderr; returns code. */
int cli_fail(int code, const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A path segment percent-encoded onto b (model names in targets). */
void cli_put_segment(struct buf *b, const char *s);

#endif
