#include "api/cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int cors_add_origin(struct cors *c, const char *origin, struct error *err)
{
    if (strcmp(origin, "*") == 0) {
        c->any = true;
        return 0;
    }
    size_t n = strlen(origin);
    const char *host = strstr(origin, "://");
    bool ok = host && host > origin && n <= CORS_ORIGIN_MAX && host[3] && !strchr(host + 3, '/');
    for (size_t i = 0; ok && i < n; i++)
        ok = origin[i] > 0x20 && origin[i] < 0x7f;
    if (!ok)
        return error_set(err, 400,
                         "'%.300s' is not * or an origin "
                         "scheme://host[:port] (at most %d characters)",
                         origin, CORS_ORIGIN_MAX);
    if (c->norigins == CORS_MAX_ORIGINS)
        return error_set(err, 400, "at most %d origins", CORS_MAX_ORIGINS);
    memcpy(c->origins[c->norigins++], origin, n + 1);
    return 0;
}

bool cors_enabled(const struct cors *c)
{
    return c && (c->any || c->norigins);
}

/* The request's Origin when it is allowed, NUL-terminated into out. */
static bool allowed_origin(const struct cors *c, const struct http_txn *txn,
                           char out[CORS_ORIGIN_MAX + 1])
{
    const struct http_header *h = http1_header(&txn->req, "origin");
    if (!cors_enabled(c) || !h || h->value_len == 0 || h->value_len > CORS_ORIGIN_MAX)
        return false;
    bool ok = c->any;
    for (uint32_t i = 0; !ok && i < c->norigins; i++)
        ok = strlen(c->origins[i]) == h->value_len &&
             strncasecmp(c->origins[i], h->value, h->value_len) == 0;
    for (size_t i = 0; ok && i < h->value_len; i++)
        ok = h->value[i] > 0x20 && h->value[i] < 0x7f; /* never echo control bytes */
    if (!ok)
        return false;
    memcpy(out, h->value, h->value_len);
    out[h->value_len] = '\0';
    return true;
}

static void allow_origin(const struct cors *c, struct http_txn *txn, const char *origin)
{
    http_txn_add_header(txn, "Access-Control-Allow-Origin", c->any ? "*" : origin);
    if (!c->any)
        http_txn_add_header(txn, "Vary", "Origin");
}

void cors_add_headers(const struct cors *c, struct http_txn *txn)
{
    char origin[CORS_ORIGIN_MAX + 1];
    if (!allowed_origin(c, txn, origin))
        return;
    allow_origin(c, txn, origin);
    http_txn_add_header(txn, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS);
}

bool cors_preflight(const struct cors *c, struct http_txn *txn)
{
    if (!cors_enabled(c) || txn->req.method_len != 7 ||
        memcmp(txn->req.method, "OPTIONS", 7) != 0 || !http1_header(&txn->req, "origin") ||
        !http1_header(&txn->req, "access-control-request-method"))
        return false;
    char origin[CORS_ORIGIN_MAX + 1];
    if (!allowed_origin(c, txn, origin)) {
        http_txn_error(txn, 403, "origin not allowed (--cors-allow-origin)");
        return true;
    }
    char max_age[16];
    snprintf(max_age, sizeof max_age, "%d", CORS_MAX_AGE_SECS);
    allow_origin(c, txn, origin);
    http_txn_add_header(txn, "Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, OPTIONS");
    http_txn_add_header(txn, "Access-Control-Allow-Headers", CORS_ALLOW_HEADERS);
    http_txn_add_header(txn, "Access-Control-Max-Age", max_age);
    http_txn_respond(txn, 204, NULL);
    return true;
}
