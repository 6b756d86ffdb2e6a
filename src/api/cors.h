/*
 * cors: Cross-Origin Resource Sharing on the HTTP port, for browser
 * clients of gRPC-Web and REST served from another origin
 * (--cors-allow-origin ORIGIN, repeatable; "*" allows any origin).
 *
 * For a request whose Origin header is allowed, every answer (REST, SSE,
 * gRPC-Web, errors) carries Access-Control-Allow-Origin (the origin, or
 * "*" when any is allowed), Vary: Origin and Access-Control-Expose-Headers
 * (grpc-status, grpc-message and inferd's own response headers, so that a
 * page can read them). A preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) from an allowed origin is answered 204
 * with Access-Control-Allow-Methods, -Allow-Headers (CORS_ALLOW_HEADERS)
 * and -Max-Age; from any other origin 403 with a JSON error. A request
 * from an origin not allowed gets no CORS header (the browser then keeps
 * the answer from the page). With no origin configured nothing here
 * applies: OPTIONS is routed as any request.
 *
 * The configuration is immutable once the server runs; functions run on
 * the connection's I/O thread.
 */
#ifndef INFERD_API_CORS_H
#define INFERD_API_CORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "http/txn.h"

#define CORS_MAX_ORIGINS 32
#define CORS_ORIGIN_MAX 255
/* How long a browser may cache a preflight answer (Access-Control-Max-Age). */
#define CORS_MAX_AGE_SECS 600
/* The request headers a page may send. */
#define CORS_ALLOW_HEADERS                                                                         \
    "content-type, x-grpc-web, x-user-agent, grpc-timeout, authorization, x-api-key, "             \
    "traceparent, tracestate, x-request-id, connect-protocol-version, connect-timeout-ms, "        \
    "inference-header-content-length, last-event-id"
/* The response headers a page may read. */
#define CORS_EXPOSE_HEADERS                                                                        \
    "grpc-status, grpc-message, grpc-retry-pushback-ms, x-request-id, traceparent, "               \
    "x-inferd-model-version, x-inferd-route, x-inferd-stream-id, "                                 \
    "inference-header-content-length, ratelimit-limit, ratelimit-remaining, ratelimit-reset, "     \
    "retry-after, www-authenticate"

struct cors {
    char origins[CORS_MAX_ORIGINS][CORS_ORIGIN_MAX + 1];
    uint32_t norigins;
    bool any; /* "*" was given */
};

/* Adds one --cors-allow-origin value: "*" or an origin
 * "scheme://host[:port]" (no path; compared exactly, case-insensitively).
 * Returns 0, or ST_ERROR with err (400) for a malformed value or too many. */
int cors_add_origin(struct cors *c, const char *origin, struct error *err);
/* Whether any origin is configured. c may be NULL (none). */
bool cors_enabled(const struct cors *c);
/* The CORS answer headers for txn's Origin, when it is allowed (see the
 * top of this file). */
void cors_add_headers(const struct cors *c, struct http_txn *txn);
/* When txn is a preflight and CORS is enabled: answers it and returns
 * true; else returns false and leaves txn alone. */
bool cors_preflight(const struct cors *c, struct http_txn *txn);

#endif
