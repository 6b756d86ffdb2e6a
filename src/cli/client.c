#include "cli/client.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/status.h"

#define TICK_MS 200

const char cli_common_help[] =
    "  --url URL             the server (default: $INFERD_URL, else " CLI_DEFAULT_URL ");\n"
    "                        https:// verifies the certificate and host name\n"
    "  --cacert FILE         https: trust the CA certificates of FILE (PEM) instead of\n"
    "                        the system's\n"
    "  --insecure            https: do not verify the certificate\n"
    "  --timeout SECS        the whole exchange (default 30)\n";

int cli_target_init(struct cli_target *t, const char *prog)
{
    memset(t, 0, sizeof *t);
    t->url = getenv("INFERD_URL");
    if (!t->url || !*t->url)
        t->url = CLI_DEFAULT_URL;
    t->timeout_ms = CLI_DEFAULT_TIMEOUT_S * 1000;
    t->api_key = getenv("INFERD_API_KEY");
    if (t->api_key && !*t->api_key)
        t->api_key = NULL;
    if (t->api_key && (strpbrk(t->api_key, "\r\n") || strlen(t->api_key) > 4096)) {
        fprintf(stderr, "%s: INFERD_API_KEY: a key is one line of at most 4096 bytes\n", prog);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_target_option(struct cli_target *t, int c, const char *arg, const char *prog)
{
    switch (c) {
    case CLI_OPT_URL:
        t->url = arg;
        return 1;
    case CLI_OPT_CACERT:
        t->cacert = arg;
        return 1;
    case CLI_OPT_INSECURE:
        t->insecure = true;
        return 1;
    case CLI_OPT_TIMEOUT: {
        char *end;
        errno = 0;
        double s = strtod(arg, &end);
        if (!*arg || *end || errno || !(s > 0 && s <= 86400)) {
            fprintf(stderr, "%s: --timeout: seconds from 0 to 86400, got '%s'\n", prog, arg);
            return -CLI_EXIT_USAGE;
        }
        t->timeout_ms = (int)(s * 1000);
        if (t->timeout_ms < 1)
            t->timeout_ms = 1;
        return 1;
    }
    default:
        return 0;
    }
}

int cli_target_finish(struct cli_target *t, const char *prog)
{
    const char *err;
    char plain[2048];
    const char *url = t->url;
    t->tls = strncasecmp(url, "https://", 8) == 0;
    if (t->tls) {
        if (snprintf(plain, sizeof plain, "http://%s", url + 8) >= (int)sizeof plain) {
            fprintf(stderr, "%s: --url: too long\n", prog);
            return CLI_EXIT_USAGE;
        }
        url = plain;
    }
    if (http_url_parse(url, &t->u, &err) != 0) {
        fprintf(stderr, "%s: --url %s: %s\n", prog, t->url, err);
        return CLI_EXIT_USAGE;
    }
    if (t->tls) { /* the default port of https */
        const char *a = t->u.authority;
        bool explicit_port = a[0] == '[' ? strstr(a, "]:") != NULL : strchr(a, ':') != NULL;
        if (!explicit_port)
            snprintf(t->u.port, sizeof t->u.port, "443");
    }
    if ((t->cacert || t->insecure) && !t->tls) {
        fprintf(stderr, "%s: --cacert and --insecure are for https:// URLs\n", prog);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(%s --help lists the options)\n", prog);
    return CLI_EXIT_USAGE;
}

int cli_fail(int code, const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

void cli_put_segment(struct buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr("-._~", *p);
        if (plain)
            buf_putc(b, (char)*p);
        else
            buf_printf(b, "%%%02X", *p);
    }
}

/* ---- connection ------------------------------------------------------------ */

static int remaining_ms(const struct cli_conn *c)
{
    int64_t left = c->deadline_ns - (int64_t)clock_now_ns();
    return left <= 0 ? 0 : (int)(left / 1000000 + 1);
}

/* Waits for events on the fd: 1 ready, 0 tick elapsed (with a tick), -1 deadline. */
static int wait_fd(struct cli_conn *c, short events, bool with_tick)
{
    for (;;) {
        int left = remaining_ms(c);
        if (left == 0)
            return ST_ERROR;
        int step = with_tick && left > TICK_MS ? TICK_MS : left;
        struct pollfd p = {.fd = c->fd, .events = events};
        int n = poll(&p, 1, step);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return ST_ERROR;
        if (n == 0 && with_tick)
            return 0;
    }
}

static void ssl_error(char *err, size_t size, const char *what)
{
    unsigned long e = ERR_get_error();
    char detail[256] = "";
    if (e)
        ERR_error_string_n(e, detail, sizeof detail);
    snprintf(err, size, "%s%s%s", what, *detail ? ": " : "", detail);
    ERR_clear_error();
}

static int tls_start(struct cli_conn *c, const struct cli_target *t, const char *alpn,
                     size_t alpn_len, char *err, size_t err_size)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        ssl_error(err, err_size, "TLS setup failed");
        return ST_ERROR;
    }
    c->ssl_ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (!t->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        int ok = t->cacert ? SSL_CTX_load_verify_locations(ctx, t->cacert, NULL)
                           : SSL_CTX_set_default_verify_paths(ctx);
        if (ok != 1) {
            snprintf(err, err_size, "cannot load CA certificates%s%s", t->cacert ? " from " : "",
                     t->cacert ? t->cacert : "");
            ERR_clear_error();
            return ST_ERROR;
        }
    }
    if (alpn && SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)alpn, (unsigned)alpn_len)) {
        ssl_error(err, err_size, "TLS setup failed");
        return ST_ERROR;
    }
    SSL *ssl = SSL_new(ctx);
    if (!ssl) {
        ssl_error(err, err_size, "TLS setup failed");
        return ST_ERROR;
    }
    c->ssl = ssl;
    SSL_set_fd(ssl, c->fd);
    if (!t->insecure) {
        if (SSL_set1_host(ssl, t->u.host) != 1) {
            ssl_error(err, err_size, "TLS setup failed");
            return ST_ERROR;
        }
    }
    /* SNI for names, not for address literals (RFC 6066). */
    bool literal = strchr(t->u.host, ':') || strspn(t->u.host, "0123456789.") == strlen(t->u.host);
    if (!literal)
        SSL_set_tlsext_host_name(ssl, t->u.host);
    for (;;) {
        int r = SSL_connect(ssl);
        if (r == 1)
            return 0;
        int e = SSL_get_error(ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (wait_fd(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, false) < 0) {
                snprintf(err, err_size, "TLS handshake: timed out");
                return ST_ERROR;
            }
            continue;
        }
        long v = SSL_get_verify_result(ssl);
        if (v != X509_V_OK) {
            snprintf(err, err_size, "TLS: certificate verification failed: %s",
                     X509_verify_cert_error_string(v));
            ERR_clear_error();
        } else {
            ssl_error(err, err_size, "TLS handshake failed");
        }
        return ST_ERROR;
    }
}

int cli_conn_open(struct cli_conn *c, const struct cli_target *t, const char *alpn, size_t alpn_len,
                  char *err, size_t err_size)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->deadline_ns = (int64_t)clock_now_ns() + (int64_t)t->timeout_ms * 1000000;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    if (http_url_resolve(&t->u, &addr, &addrlen, err, err_size) != 0)
        return ST_ERROR;
    int fd = http_connect_start(&addr, addrlen);
    if (fd < 0) {
        snprintf(err, err_size, "cannot connect to %s: %s", t->u.authority, strerror(-fd));
        return ST_ERROR;
    }
    c->fd = fd;
    int w = wait_fd(c, POLLOUT, false);
    int e = w < 0 ? -ETIMEDOUT : http_connect_result(fd);
    if (e) {
        snprintf(err, err_size, "cannot connect to %s: %s", t->u.authority, strerror(-e));
        cli_conn_close(c);
        return ST_ERROR;
    }
    if (t->tls && tls_start(c, t, alpn, alpn_len, err, err_size) != 0) {
        cli_conn_close(c);
        return ST_ERROR;
    }
    return 0;
}

int cli_conn_write(struct cli_conn *c, const void *p, size_t n, char *err, size_t err_size)
{
    const char *s = p;
    while (n > 0) {
        long k;
        short want = POLLOUT;
        if (c->ssl) {
            int r = SSL_write(c->ssl, s, n > (1u << 30) ? (1 << 30) : (int)n);
            if (r > 0) {
                k = r;
            } else {
                int e = SSL_get_error(c->ssl, r);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                    ssl_error(err, err_size, "TLS write failed");
                    return ST_ERROR;
                }
                want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
                k = 0;
            }
        } else {
            k = write(c->fd, s, n);
            if (k < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(err, err_size, "send failed: %s", strerror(errno));
                return ST_ERROR;
            }
            if (k < 0)
                k = 0;
        }
        s += k;
        n -= (size_t)k;
        if (n > 0 && k == 0 && wait_fd(c, want, false) < 0) {
            snprintf(err, err_size, "timed out sending the request");
            return ST_ERROR;
        }
    }
    return 0;
}

long cli_conn_read(struct cli_conn *c, void *p, size_t n, void (*tick)(void *), void *tick_arg,
                   char *err, size_t err_size)
{
    int cap = n > (1u << 30) ? (1 << 30) : (int)n;
    for (;;) {
        short want = POLLIN;
        if (c->ssl) {
            int r = SSL_read(c->ssl, p, cap);
            if (r > 0)
                return r;
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
            if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
                return 0; /* closed without close_notify: the end of the stream */
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                ssl_error(err, err_size, "TLS read failed");
                return ST_ERROR;
            }
            want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
        } else {
            long k = read(c->fd, p, n);
            if (k >= 0)
                return k;
            if (errno != EAGAIN && errno != EINTR) {
                snprintf(err, err_size, "receive failed: %s", strerror(errno));
                return ST_ERROR;
            }
        }
        int w = wait_fd(c, want, tick != NULL);
        if (w < 0) {
            snprintf(err, err_size, "timed out waiting for the server");
            return ST_ERROR;
        }
        if (w == 0)
            tick(tick_arg);
    }
}

void cli_conn_close(struct cli_conn *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    if (c->ssl_ctx)
        SSL_CTX_free(c->ssl_ctx);
    if (c->fd >= 0)
        close(c->fd);
    c->ssl = c->ssl_ctx = NULL;
    c->fd = -1;
}

/* ---- one HTTP/1.1 exchange -------------------------------------------------- */

void cli_response_init(struct cli_response *r)
{
    r->status = 0;
    r->json_header_len = -1;
    buf_init(&r->body, CLI_MAX_BODY);
}

void cli_response_free(struct cli_response *r)
{
    buf_free(&r->body);
}

static void keep_body(void *arg, const char *p, size_t n)
{
    buf_append(arg, p, n);
}

/* Inference-Header-Content-Length of the head head[0..len), or -1. */
static long long header_len_of(const char *head, size_t len)
{
    static const char name[] = "\r\ninference-header-content-length:";
    size_t nl = sizeof name - 1;
    for (size_t i = 0; i + nl <= len; i++) {
        if (strncasecmp(head + i, name, nl) != 0)
            continue;
        const char *v = head + i + nl;
        while (v < head + len && (*v == ' ' || *v == '\t'))
            v++;
        long long n = 0;
        const char *d = v;
        while (d < head + len && *d >= '0' && *d <= '9' && d - v < 15)
            n = n * 10 + (*d++ - '0');
        return d == v ? -1 : n;
    }
    return NOT_FOUND;
}

int cli_http(const struct cli_target *t, const char *method, const char *path,
             const char *content_type, const char *extra_headers, const void *body, size_t body_len,
             struct cli_response *resp, void (*tick)(void *), void *tick_arg, char *err,
             size_t err_size)
{
    struct buf head;
    buf_init(&head, 64 * 1024);
    buf_printf(&head,
               "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: inferd/%s\r\n"
               "Connection: close\r\n",
               method, t->u.prefix, path, t->u.authority, INFERD_VERSION);
    if (t->api_key)
        buf_printf(&head, "Authorization: Bearer %s\r\n", t->api_key);
    if (content_type)
        buf_printf(&head, "Content-Type: %s\r\n", content_type);
    if (extra_headers)
        buf_puts(&head, extra_headers);
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0)
        buf_printf(&head, "Content-Length: %zu\r\n", body_len);
    buf_puts(&head, "\r\n");
    if (head.err) {
        buf_free(&head);
        snprintf(err, err_size, "request head too long");
        return CLI_EXIT_USAGE;
    }
    struct cli_conn c;
    int rc = CLI_EXIT_CONNECT;
    struct buf in; /* received, not yet consumed by the parser */
    buf_init(&in, HTTP_RESP_MAX_HEAD + 65536);
    if (cli_conn_open(&c, t, NULL, 0, err, err_size) != 0)
        goto out;
    if (cli_conn_write(&c, head.data, head.len, err, err_size) != 0 ||
        (body_len && cli_conn_write(&c, body, body_len, err, err_size) != 0))
        goto out_close;
    struct http_resp p;
    http_resp_init(&p, strcmp(method, "HEAD") == 0);
    p.on_body = keep_body;
    p.body_arg = &resp->body;
    bool head_seen = false;
    char chunk[65536];
    for (;;) {
        long k = cli_conn_read(&c, chunk, sizeof chunk, tick, tick_arg, err, err_size);
        if (k < 0)
            goto out_close;
        if (buf_append(&in, chunk, (size_t)k) != 0) {
            snprintf(err, err_size, "response head too long");
            goto out_close;
        }
        if (!head_seen) { /* the parser starts once the whole head is here */
            char *end = in.len ? memmem(in.data, in.len, "\r\n\r\n", 4) : NULL;
            if (end) {
                head_seen = true;
                resp->json_header_len = header_len_of(in.data, (size_t)(end - in.data + 2));
            } else if (k > 0) {
                continue;
            }
        }
        size_t used = 0;
        int st = in.len ? http_resp_parse(&p, in.data, in.len, &used) : HTTP_RESP_AGAIN;
        buf_consume(&in, used);
        if (st == HTTP_RESP_AGAIN && k == 0)
            st = http_resp_eof(&p);
        if (resp->body.err) {
            snprintf(err, err_size, "response body over %zu MiB", CLI_MAX_BODY >> 20);
            goto out_close;
        }
        if (st == HTTP_RESP_DONE) {
            resp->status = p.status;
            rc = 0;
            break;
        }
        if (st == HTTP_RESP_ERROR || k == 0) {
            snprintf(err, err_size, "malformed or truncated response%s%s", p.err_msg ? ": " : "",
                     p.err_msg ? p.err_msg : "");
            break;
        }
    }
out_close:
    cli_conn_close(&c);
out:
    buf_free(&in);
    buf_free(&head);
    return rc;
}

void cli_print_http_error(const char *prog, const struct cli_response *r)
{
    const char *text = r->body.data ? r->body.data : "";
    size_t len = r->body.len;
    struct arena a;
    arena_init(&a, 16 * 1024, 64 << 20);
    struct json_value *root;
    const struct json_value *e = NULL;
    if (len && json_parse(&a, text, len, NULL, &root, NULL, NULL) == ST_OK)
        e = json_get(root, "error");
    if (e && e->type == JSON_STRING)
        fprintf(stderr, "%s: HTTP %d: %s\n", prog, r->status, e->u.str);
    else
        fprintf(stderr, "%s: HTTP %d: %.*s\n", prog, r->status, (int)(len < 1000 ? len : 1000),
                text);
    arena_free(&a);
}
