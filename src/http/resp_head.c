#include "http/resp_head.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/numfmt.h"

/* The Date header value, formatted once per second per thread. */
static const char *date_now(void)
{
    static __thread time_t cached_sec;
    static __thread char cached[40];
    time_t now = time(NULL);
    if (now != cached_sec) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(cached, sizeof cached, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached_sec = now;
    }
    return cached;
}

static void add(struct http_resp_head *h, const char *name, size_t nl, const char *value, size_t vl)
{
    h->fields[h->n++] = (struct http_resp_field){name, value, nl, vl};
}

void http_resp_head_build(struct http_resp_head *h, int status, const char *content_type,
                          const char *extra, bool streamed, uint64_t length)
{
    const char *date = date_now();
    h->n = 0;
    snprintf(h->status, sizeof h->status, "%d", status);
    snprintf(h->length, sizeof h->length, "%llu", (unsigned long long)length);
    add(h, ":status", 7, h->status, strlen(h->status));
    add(h, "server", 6, "inferd", 6);
    add(h, "date", 4, date, strlen(date));
    if (!streamed)
        add(h, "content-length", 14, h->length, strlen(h->length));
    if (content_type)
        add(h, "content-type", 12, content_type, strlen(content_type));
    if (!extra)
        return;
    snprintf(h->extra, sizeof h->extra, "%s", extra);
    char *line = h->extra;
    while (*line && h->n < HTTP_RESP_HEAD_FIELDS) {
        char *eol = strstr(line, "\r\n");
        if (!eol)
            break;
        *eol = '\0';
        char *colon = strchr(line, ':');
        if (colon) {
            for (char *p = line; p < colon; p++)
                if (*p >= 'A' && *p <= 'Z')
                    *p = (char)(*p - 'A' + 'a');
            char *v = colon + 1;
            while (*v == ' ')
                v++;
            add(h, line, (size_t)(colon - line), v, strlen(v));
        }
        line = eol + 2;
    }
}

/* ---- HTTP/1.1 ---- */

/* "HTTP/1.1 <status> <text>\r\nServer: inferd\r\nDate: <now>\r\n", built
 * once per status and second and kept per thread: most responses of a
 * second share it (a response head is on every request's path). */
struct head_start {
    time_t sec;
    int status;
    size_t len;
    char text[128];
};

static const struct head_start *head_start(int status)
{
    static __thread struct head_start cache[2]; /* 200, and the last other status */
    struct head_start *h = &cache[status == 200 ? 0 : 1];
    time_t now = time(NULL);
    if (h->sec == now && h->status == status && h->len)
        return h;
    struct tm tm;
    gmtime_r(&now, &tm);
    char date[40];
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    int n = snprintf(h->text, sizeof h->text, "HTTP/1.1 %d %s\r\nServer: inferd\r\nDate: %s\r\n",
                     status, http_status_text(status), date);
    h->len = n > 0 && (size_t)n < sizeof h->text ? (size_t)n : 0;
    h->sec = now;
    h->status = status;
    return h;
}


#define PUT_LITERAL(b, s) buf_append((b), (s), sizeof(s) - 1)

void http_resp_head_h1(struct buf *b, int status, const char *content_type,
                       const char *extra_headers, bool keep_alive, int version_minor,
                       int64_t content_length)
{
    const struct head_start *h = head_start(status);
    buf_reset(b);
    buf_append(b, h->text, h->len);
    if (content_length >= 0) {
        char num[NUMFMT_MAX];
        PUT_LITERAL(b, "Content-Length: ");
        buf_append(b, num, numfmt_i64(num, content_length));
        PUT_LITERAL(b, "\r\n");
    } else if (version_minor >= 1) {
        PUT_LITERAL(b, "Transfer-Encoding: chunked\r\n");
    }
    if (content_type) {
        PUT_LITERAL(b, "Content-Type: ");
        buf_puts(b, content_type);
        PUT_LITERAL(b, "\r\n");
    }
    if (!keep_alive)
        PUT_LITERAL(b, "Connection: close\r\n");
    else if (version_minor == 0)
        PUT_LITERAL(b, "Connection: keep-alive\r\n");
    if (extra_headers)
        buf_puts(b, extra_headers);
    PUT_LITERAL(b, "\r\n");
}
