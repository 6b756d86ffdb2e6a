#include "bench/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/status.h"

enum {
    S_STATUS,     /* expecting a status line */
    S_HEADER,     /* expecting a header line or the blank line */
    S_BODY_LEN,   /* skipping _left bytes of a Content-Length body */
    S_BODY_EOF,   /* body runs until the connection closes */
    S_CHUNK_SIZE, /* expecting a chunk-size line */
    S_CHUNK_DATA, /* skipping _left bytes of chunk data */
    S_CHUNK_CRLF, /* expecting the empty line after chunk data */
    S_TRAILER,    /* expecting a trailer line or the blank line */
    S_DONE,
};

#define MAX_CHUNK_SIZE (UINT64_C(1) << 62)

void http_resp_init(struct http_resp *p, bool head_request)
{
    void (*on_body)(void *, const char *, size_t) = p->on_body;
    void *body_arg = p->body_arg;
    memset(p, 0, sizeof *p);
    p->on_body = on_body;
    p->body_arg = body_arg;
    p->_head_request = head_request;
    p->_state = S_STATUS;
}

bool http_resp_started(const struct http_resp *p)
{
    return p->_state != S_STATUS || p->_head_bytes > 0 || p->_scan > 0;
}

static int fail(struct http_resp *p, const char *msg)
{
    p->err_msg = msg;
    return HTTP_RESP_ERROR;
}

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* Calls fn on each comma-separated, whitespace-trimmed token of v. */
static void for_each_token(const char *v, size_t n, struct http_resp *p,
                           void (*fn)(struct http_resp *p, const char *t, size_t tn, bool last))
{
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && v[j] != ',')
            j++;
        size_t a = i, b = j;
        while (a < b && (v[a] == ' ' || v[a] == '\t'))
            a++;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
            b--;
        fn(p, v + a, b - a, j >= n);
        i = j + 1;
    }
}

static void connection_token(struct http_resp *p, const char *t, size_t n, bool last)
{
    (void)last;
    if (name_is(t, n, "close"))
        p->_close = true;
    else if (name_is(t, n, "keep-alive"))
        p->_keep_alive_token = true;
}

static void te_token(struct http_resp *p, const char *t, size_t n, bool last)
{
    if (last)
        p->_chunked = name_is(t, n, "chunked");
}

static int parse_status_line(struct http_resp *p, const char *s, size_t n)
{
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' || s[8] != ' ')
        return fail(p, "malformed status line");
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (s[i] < '0' || s[i] > '9')
            return fail(p, "malformed status code");
        status = status * 10 + (s[i] - '0');
    }
    if (n > 12 && s[12] != ' ')
        return fail(p, "malformed status line");
    if (status < 100 || status > 599)
        return fail(p, "status code out of range");
    p->status = status;
    p->version_minor = s[7] - '0';
    p->_chunked = p->_has_length = p->_until_close = false;
    p->_close = p->_keep_alive_token = false;
    p->body_len = 0;
    return 0;
}

static int parse_header_line(struct http_resp *p, const char *s, size_t n)
{
    if (s[0] == ' ' || s[0] == '\t')
        return fail(p, "obsolete header line folding");
    size_t colon = 0;
    while (colon < n && s[colon] != ':') {
        if (!is_tchar((unsigned char)s[colon]))
            return fail(p, "invalid character in header name");
        colon++;
    }
    if (colon == 0 || colon == n)
        return fail(p, "malformed header line");
    const char *v = s + colon + 1;
    size_t vn = n - colon - 1;
    while (vn && (v[0] == ' ' || v[0] == '\t'))
        v++, vn--;
    while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
        vn--;
    if (name_is(s, colon, "content-length")) {
        if (vn == 0 || vn > 19)
            return fail(p, "invalid Content-Length");
        uint64_t len = 0;
        for (size_t i = 0; i < vn; i++) {
            if (v[i] < '0' || v[i] > '9')
                return fail(p, "invalid Content-Length");
            len = len * 10 + (uint64_t)(v[i] - '0');
        }
        if (p->_has_length && p->_left != len)
            return fail(p, "conflicting Content-Length headers");
        p->_has_length = true;
        p->_left = len;
    } else if (name_is(s, colon, "transfer-encoding")) {
        for_each_token(v, vn, p, te_token);
        /* A final coding other than chunked: the body ends with the connection. */
        p->_until_close = !p->_chunked;
    } else if (name_is(s, colon, "connection")) {
        for_each_token(v, vn, p, connection_token);
    }
    return 0;
}

/* The blank line after the headers: decide how the body is delimited. */
static int end_of_head(struct http_resp *p)
{
    if (p->status < 200) {
        if (p->status == 101)
            return fail(p, "unexpected 101 Switching Protocols");
        p->_state = S_STATUS; /* interim response: the final one follows */
        return 0;
    }
    p->head_done = true;
    p->keep_alive = p->version_minor >= 1 ? !p->_close : (p->_keep_alive_token && !p->_close);
    if (p->_head_request || p->status == 204 || p->status == 304) {
        p->_state = S_DONE;
    } else if (p->_chunked) {
        p->_state = S_CHUNK_SIZE;
    } else if (p->_has_length && !p->_until_close) {
        p->_state = p->_left ? S_BODY_LEN : S_DONE;
    } else {
        p->keep_alive = false;
        p->_state = S_BODY_EOF;
    }
    return 0;
}

static int parse_chunk_size(struct http_resp *p, const char *s, size_t n)
{
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n; i++) {
        int d;
        char c = s[i];
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (size > MAX_CHUNK_SIZE / 16)
            return fail(p, "chunk size too large");
        size = size * 16 + (uint64_t)d;
    }
    if (i == 0)
        return fail(p, "malformed chunk size");
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i < n && s[i] != ';')
        return fail(p, "malformed chunk size");
    if (size == 0) {
        p->_state = S_TRAILER;
    } else {
        p->_left = size;
        p->_state = S_CHUNK_DATA;
    }
    return 0;
}

/* One complete line s[0..n) (CR stripped) in a line-oriented state. */
static int parse_line(struct http_resp *p, const char *s, size_t n)
{
    switch (p->_state) {
    case S_STATUS:
        if (parse_status_line(p, s, n))
            return HTTP_RESP_ERROR;
        p->_state = S_HEADER;
        return 0;
    case S_HEADER:
        if (n == 0)
            return end_of_head(p);
        if (++p->_lines > HTTP_RESP_MAX_HEADERS)
            return fail(p, "too many header lines");
        return parse_header_line(p, s, n);
    case S_CHUNK_SIZE:
        return parse_chunk_size(p, s, n);
    case S_CHUNK_CRLF:
        if (n != 0)
            return fail(p, "missing CRLF after chunk data");
        p->_state = S_CHUNK_SIZE;
        return 0;
    case S_TRAILER:
        if (n == 0) {
            p->_state = S_DONE;
            return 0;
        }
        if (++p->_lines > HTTP_RESP_MAX_HEADERS)
            return fail(p, "too many trailer lines");
        return 0;
    default:
        return fail(p, "parser state error");
    }
}

int http_resp_parse(struct http_resp *p, const char *buf, size_t len, size_t *consumed)
{
    size_t pos = 0;
    int rc = HTTP_RESP_AGAIN;
    while (pos < len || p->_state == S_DONE) {
        if (p->_state == S_DONE) {
            rc = HTTP_RESP_DONE;
            break;
        }
        if (p->_state == S_BODY_LEN || p->_state == S_CHUNK_DATA || p->_state == S_BODY_EOF) {
            size_t n = len - pos;
            if (p->_state != S_BODY_EOF && p->_left < n)
                n = (size_t)p->_left;
            if (p->on_body)
                p->on_body(p->body_arg, buf + pos, n);
            pos += n;
            p->body_len += n;
            if (p->_state == S_BODY_EOF)
                continue;
            p->_left -= n;
            if (p->_left == 0)
                p->_state = p->_state == S_BODY_LEN ? S_DONE : S_CHUNK_CRLF;
            continue;
        }
        const char *start = buf + pos;
        size_t avail = len - pos;
        const char *nl = p->_scan < avail ? memchr(start + p->_scan, '\n', avail - p->_scan) : NULL;
        if (!nl) {
            p->_scan = avail;
            if (p->_head_bytes + avail > HTTP_RESP_MAX_HEAD) {
                rc = fail(p, "response head or line too long");
                break;
            }
            break;
        }
        size_t line_len = (size_t)(nl - start) + 1;
        p->_head_bytes += line_len;
        p->_scan = 0;
        if (p->_head_bytes > HTTP_RESP_MAX_HEAD) {
            rc = fail(p, "response head too long");
            break;
        }
        size_t n = line_len - 1;
        if (n && start[n - 1] == '\r')
            n--;
        pos += line_len;
        if (parse_line(p, start, n)) {
            rc = HTTP_RESP_ERROR;
            break;
        }
    }
    *consumed = pos;
    return rc;
}

int http_resp_eof(struct http_resp *p)
{
    if (p->_state == S_BODY_EOF || p->_state == S_DONE) {
        p->_state = S_DONE;
        p->keep_alive = false;
        return HTTP_RESP_DONE;
    }
    return fail(p, http_resp_started(p) ? "connection closed in the middle of a response"
                                        : "connection closed before a response");
}

/* ---- URL, connect ------------------------------------------------------ */

int http_url_parse(const char *url, struct http_url *out, const char **err)
{
    memset(out, 0, sizeof *out);
    if (strncasecmp(url, "http://", 7) != 0) {
        *err = strncasecmp(url, "https://", 8) == 0 ? "https is not supported"
                                                    : "the URL must start with http://";
        return ST_ERROR;
    }
    const char *a = url + 7;
    const char *slash = strchr(a, '/');
    size_t alen = slash ? (size_t)(slash - a) : strlen(a);
    if (alen == 0 || alen >= sizeof out->authority) {
        *err = "missing or overlong host in URL";
        return ST_ERROR;
    }
    if (memchr(a, '@', alen) || memchr(a, '?', alen) || memchr(a, '#', alen)) {
        *err = "user info, query and fragment are not supported in the URL";
        return ST_ERROR;
    }
    memcpy(out->authority, a, alen);
    const char *port = NULL;
    size_t hlen;
    const char *host = a;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', alen);
        if (!close) {
            *err = "unterminated IPv6 address in URL";
            return ST_ERROR;
        }
        host = a + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < a + alen) {
            if (close[1] != ':') {
                *err = "malformed URL authority";
                return ST_ERROR;
            }
            port = close + 2;
        }
    } else {
        const char *colon = memchr(a, ':', alen);
        hlen = colon ? (size_t)(colon - a) : alen;
        if (colon)
            port = colon + 1;
    }
    if (hlen == 0 || hlen >= sizeof out->host) {
        *err = "missing host in URL";
        return ST_ERROR;
    }
    memcpy(out->host, host, hlen);
    if (port) {
        size_t plen = (size_t)(a + alen - port);
        unsigned long v = 0;
        for (size_t i = 0; i < plen; i++) {
            if (port[i] < '0' || port[i] > '9' || i >= 5) {
                v = 0;
                break;
            }
            v = v * 10 + (unsigned long)(port[i] - '0');
        }
        if (v == 0 || v > 65535) {
            *err = "invalid port in URL";
            return ST_ERROR;
        }
        snprintf(out->port, sizeof out->port, "%lu", v);
    } else {
        strcpy(out->port, "80");
    }
    if (slash) {
        size_t plen = strlen(slash);
        while (plen && slash[plen - 1] == '/')
            plen--;
        if (plen >= sizeof out->prefix || memchr(slash, '?', plen) || memchr(slash, '#', plen)) {
            *err = "unsupported path in URL";
            return ST_ERROR;
        }
        memcpy(out->prefix, slash, plen);
    }
    return 0;
}

int http_url_resolve(const struct http_url *u, struct sockaddr_storage *addr, socklen_t *addrlen,
                     char *err_buf, size_t err_size)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(u->host, u->port, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err_buf, err_size, "cannot resolve %s: %s", u->host,
                 rc ? gai_strerror(rc) : "no address");
        return ST_ERROR;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int http_connect_start(const struct sockaddr_storage *addr, socklen_t addrlen)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)addr, addrlen) != 0 && errno != EINPROGRESS) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int http_connect_result(int fd)
{
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        return -errno;
    return -soerr;
}

/* ---- blocking fetch ---------------------------------------------------- */

struct fetch_body {
    struct buf *b;
    int err;
};

static void fetch_on_body(void *arg, const char *p, size_t n)
{
    struct fetch_body *fb = arg;
    if (!fb->err)
        fb->err = buf_append(fb->b, p, n);
}

/* Waits for `events` on fd until the deadline; 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
    for (;;) {
        uint64_t now = clock_now_ns();
        if (now >= deadline_ns)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = events};
        int ms = (int)((deadline_ns - now + 999999) / 1000000);
        int n = poll(&pfd, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int http_fetch(const struct sockaddr_storage *addr, socklen_t addrlen, const char *req,
               size_t req_len, bool head_request, int timeout_ms, int *status, struct buf *body)
{
    uint64_t deadline = clock_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    int fd = http_connect_start(addr, addrlen);
    if (fd < 0)
        return fd;
    int rc = wait_fd(fd, POLLOUT, deadline);
    if (rc == 0)
        rc = http_connect_result(fd);
    size_t sent = 0;
    while (rc == 0 && sent < req_len) {
        ssize_t n = send(fd, req + sent, req_len - sent, MSG_NOSIGNAL);
        if (n > 0)
            sent += (size_t)n;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            rc = wait_fd(fd, POLLOUT, deadline);
        else if (n < 0 && errno != EINTR)
            rc = -errno;
    }
    struct fetch_body fb = {.b = body};
    struct http_resp p = {.on_body = fetch_on_body, .body_arg = &fb};
    http_resp_init(&p, head_request);
    char rb[16384];
    size_t rl = 0;
    int prc = HTTP_RESP_AGAIN;
    while (rc == 0 && prc == HTTP_RESP_AGAIN) {
        ssize_t n = recv(fd, rb + rl, sizeof rb - rl, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                rc = wait_fd(fd, POLLIN, deadline);
            else if (errno != EINTR)
                rc = -errno;
            continue;
        }
        size_t used;
        if (n == 0) {
            prc = http_resp_eof(&p);
        } else {
            rl += (size_t)n;
            prc = http_resp_parse(&p, rb, rl, &used);
            memmove(rb, rb + used, rl - used);
            rl -= used;
            if (prc == HTTP_RESP_AGAIN && rl == sizeof rb)
                prc = HTTP_RESP_ERROR;
        }
        if (fb.err)
            rc = fb.err;
    }
    if (rc == 0 && prc != HTTP_RESP_DONE)
        rc = -EPROTO;
    if (rc == 0)
        *status = p.status;
    close(fd);
    return rc;
}
