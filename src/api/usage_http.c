/* GET /v2/usage (api/usage_http.h). */
#include "api/usage_http.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/day.h"
#include "base/hex.h"
#include "base/status.h"

/* The parameters, decoded. */
struct usage_params {
    char tenant[USAGE_NAME_MAX];
    char model[USAGE_NAME_MAX];
    char from[32]; /* room for a wrong date to be quoted back */
    char to[32];
    bool seen[4];
};

static const char *const param_names[] = {"tenant", "model", "from", "to"};

/* Percent-decodes s[0..n) ('+' is a space) into out (cap bytes, NUL
 * included). -1 on a bad escape, a NUL byte, or when it does not fit. */
static int decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 2 < n ? hex_value(s[i + 1]) : -1;
            int lo = i + 2 < n ? hex_value(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return ST_ERROR;
            c = hi * 16 + lo;
            i += 2;
        }
        if (c == 0 || len + 1 >= cap)
            return ST_ERROR;
        out[len++] = (char)c;
    }
    out[len] = '\0';
    return 0;
}

/* Splits the query string into the parameters; 0, or ST_ERROR with msg. */
static int parse_params(const char *q, size_t n, struct usage_params *p, char *msg, size_t cap)
{
    memset(p, 0, sizeof *p);
    size_t i = 0;
    while (q && i < n) {
        size_t end = i;
        while (end < n && q[end] != '&')
            end++;
        size_t eq = i;
        while (eq < end && q[eq] != '=')
            eq++;
        if (end == i) { /* "a=1&&b=2" */
            i = end + 1;
            continue;
        }
        char name[16];
        int k = -1;
        if (decode(q + i, eq - i, name, sizeof name) == 0)
            for (int j = 0; j < 4; j++)
                if (strcmp(name, param_names[j]) == 0)
                    k = j;
        if (k < 0) {
            snprintf(msg, cap, "unknown query parameter '%.*s'; use tenant, model, from and to",
                     (int)(eq - i > 64 ? 64 : eq - i), q + i);
            return ST_ERROR;
        }
        if (p->seen[k]) {
            snprintf(msg, cap, "query parameter '%s' given twice", param_names[k]);
            return ST_ERROR;
        }
        p->seen[k] = true;
        char *dst[] = {p->tenant, p->model, p->from, p->to};
        size_t size[] = {sizeof p->tenant, sizeof p->model, sizeof p->from, sizeof p->to};
        const char *v = eq < end ? q + eq + 1 : q + end;
        size_t vlen = eq < end ? end - eq - 1 : 0;
        if (decode(v, vlen, dst[k], size[k]) != 0 || dst[k][0] == '\0') {
            snprintf(msg, cap,
                     k < 2 ? "query parameter '%s': expected a name of 1 to 255 bytes"
                           : "query parameter '%s': expected a date YYYY-MM-DD",
                     param_names[k]);
            return ST_ERROR;
        }
        i = end + 1;
    }
    return 0;
}

void usage_http_get(struct usage *u, struct http_txn *txn)
{
    struct usage_params p;
    char msg[160];
    if (parse_params(txn->req.query, txn->req.query ? txn->req.query_len : 0, &p, msg,
                     sizeof msg) != 0) {
        http_txn_error(txn, 400, msg);
        return;
    }
    struct usage_query q = {.tenant = p.seen[0] ? p.tenant : NULL,
                            .model = p.seen[1] ? p.model : NULL};
    const char *dates[] = {p.from, p.to};
    uint64_t *days[] = {&q.from_day, &q.to_day};
    for (int k = 0; k < 2; k++) {
        if (p.seen[2 + k] && day_parse(dates[k], strlen(dates[k]), days[k]) != 0) {
            snprintf(msg, sizeof msg, "query parameter '%s': expected a date YYYY-MM-DD, got '%s'",
                     param_names[2 + k], dates[k]);
            http_txn_error(txn, 400, msg);
            return;
        }
    }
    /* (Day 0, 1970-01-01, reads as no bound: no call is metered on it.) */
    if (q.from_day && q.to_day && q.from_day > q.to_day) {
        snprintf(msg, sizeof msg, "query parameter 'from' (%s) is after 'to' (%s)", p.from, p.to);
        http_txn_error(txn, 400, msg);
        return;
    }
    if (!u) {
        http_txn_error(txn, 404, "usage metering is not on in this server");
        return;
    }
    if (!usage_write_json(u, &q, &txn->body)) {
        buf_reset(&txn->body);
        http_txn_error(txn, 500, "out of memory building the usage report");
        return;
    }
    http_txn_respond(txn, 200, "application/json");
}
