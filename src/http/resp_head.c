#include "http/resp_head.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

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
