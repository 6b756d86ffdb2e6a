/*
 * http_client: the client side of HTTP/1.1 that `inferd bench` needs — a
 * base URL, a non-blocking connect, an incremental response parser, and a
 * blocking one-shot fetch (for model metadata before the run).
 *
 * Response parser contract (http_resp_parse):
 *   The caller keeps the bytes it has received but the parser has not yet
 *   consumed in a buffer and passes them as buf[0..len). The parser consumes
 *   what it can: complete lines of the head, body bytes (which it skips
 *   without copying; an optional on_body callback sees them), chunk framing.
 *   It reports how many bytes it consumed in *consumed; the caller drops
 *   them, appends newly received bytes after the rest, and calls again. An
 *   incomplete line is never consumed, so the buffer must be able to hold
 *   the longest line (the caller detects "buffer full and nothing
 *   consumed").
 *   1xx interim responses are skipped. Bodies are delimited by
 *   Content-Length, chunked Transfer-Encoding, none (HEAD, 204, 304), or the
 *   end of the connection (then keep_alive is false and http_resp_eof()
 *   completes the response).
 *
 * Return values: HTTP_RESP_DONE (the response is complete; *consumed ends at
 * its last byte; status, keep_alive and body_len are set), HTTP_RESP_AGAIN
 * (need more bytes), HTTP_RESP_ERROR (malformed: err_msg says why; close the
 * connection).
 */
#ifndef INFERD_BENCH_HTTP_CLIENT_H
#define INFERD_BENCH_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/buf.h"

enum { HTTP_RESP_ERROR = -1, HTTP_RESP_AGAIN = 0, HTTP_RESP_DONE = 1 };

/* Longest head the parser accepts (all lines, all interim responses). */
#define HTTP_RESP_MAX_HEAD (64 * 1024)
#define HTTP_RESP_MAX_HEADERS 256

struct http_resp {
    /* Results. */
    int status;          /* final status (100..599), once the status line is read */
    int version_minor;   /* HTTP/1.x */
    bool keep_alive;     /* the connection may carry another request */
    bool head_done;      /* the final response's head has been parsed */
    uint64_t body_len;   /* decoded body bytes so far */
    const char *err_msg; /* static, on HTTP_RESP_ERROR */
    /* Optional: sees each piece of the decoded body (e.g. to keep it). */
    void (*on_body)(void *arg, const char *p, size_t n);
    void *body_arg;
    /* Private. */
    int _state;
    bool _head_request;
    bool _chunked, _has_length, _until_close, _close, _keep_alive_token;
    uint64_t _left; /* body or chunk bytes still to skip */
    size_t _scan;   /* bytes of the current (incomplete) line already searched */
    size_t _head_bytes;
    uint32_t _lines;
};

/* Prepares p for the next response. head_request: the request was HEAD, so
 * the response has no body whatever its headers say. */
void http_resp_init(struct http_resp *p, bool head_request);
int http_resp_parse(struct http_resp *p, const char *buf, size_t len, size_t *consumed);
/* The peer closed the connection: DONE if the body was delimited by the
 * close, ERROR (truncated) otherwise. */
int http_resp_eof(struct http_resp *p);
/* True once any byte of this response has been consumed (a close before
 * that is a reset of an idle keep-alive connection, not a truncation). */
bool http_resp_started(const struct http_resp *p);

/* A base URL "http://HOST[:PORT][/PREFIX]". */
struct http_url {
    char host[256];      /* without brackets for IPv6 literals */
    char port[8];        /* decimal, default "80" */
    char authority[272]; /* for the Host header: host[:port] as written */
    char prefix[512];    /* path prefix without trailing '/', may be "" */
};

/* Returns 0 or ST_ERROR with *err a static message. */
int http_url_parse(const char *url, struct http_url *out, const char **err);

/* Resolves the URL's host (getaddrinfo, TCP) to its first address. Returns 0
 * or ST_ERROR with a message in err_buf. */
int http_url_resolve(const struct http_url *u, struct sockaddr_storage *addr, socklen_t *addrlen,
                     char *err_buf, size_t err_size);

/* Starts a non-blocking connect with TCP_NODELAY; returns the fd (the
 * connect may still be in progress: wait for writability, then check
 * http_connect_result()) or -errno. The fd is non-blocking and close-on-exec. */
int http_connect_start(const struct sockaddr_storage *addr, socklen_t addrlen);
/* 0 once connected, else -errno of the failed connect. */
int http_connect_result(int fd);

/* Blocking exchange on a new connection: sends req[0..req_len), reads one
 * response (the whole exchange bounded by timeout_ms). The body is appended
 * to *body (its ceiling bounds the size). Returns 0 with *status set, or
 * -errno (-ETIMEDOUT, -ECONNREFUSED, -EPROTO for a malformed response,
 * -E2BIG for an oversized body). */
int http_fetch(const struct sockaddr_storage *addr, socklen_t addrlen, const char *req,
               size_t req_len, bool head_request, int timeout_ms, int *status, struct buf *body);

#endif
