#include "api/limit_headers.h"

#include <inttypes.h>
#include <stdio.h>

size_t limit_duration(uint64_t ms, char out[LIMIT_DURATION_MAX])
{
    if (ms < 1000)
        return (size_t)snprintf(out, LIMIT_DURATION_MAX, ms ? "%" PRIu64 "ms" : "0s", ms);
    uint64_t h = ms / 3600000u, m = ms / 60000u % 60u, s = ms / 1000u % 60u;
    unsigned frac = (unsigned)(ms % 1000u);
    size_t n = 0;
    if (h)
        n += (size_t)snprintf(out + n, LIMIT_DURATION_MAX - n, "%" PRIu64 "h", h);
    if (h || m)
        n += (size_t)snprintf(out + n, LIMIT_DURATION_MAX - n, "%" PRIu64 "m", m);
    n += (size_t)snprintf(out + n, LIMIT_DURATION_MAX - n, "%" PRIu64, s);
    if (frac) {
        unsigned digits = 3;
        while (frac % 10u == 0) {
            frac /= 10u;
            digits--;
        }
        n += (size_t)snprintf(out + n, LIMIT_DURATION_MAX - n, ".%0*u", (int)digits, frac);
    }
    n += (size_t)snprintf(out + n, LIMIT_DURATION_MAX - n, "s");
    return n;
}

static void add_number(struct http_txn *txn, const char *name, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, v);
    http_txn_add_header(txn, name, s);
}

static void add_duration(struct http_txn *txn, const char *name, uint64_t ms)
{
    char s[LIMIT_DURATION_MAX];
    limit_duration(ms, s);
    http_txn_add_header(txn, name, s);
}

void limit_headers_add(struct http_txn *txn, const struct serve_ratelimit *rl,
                       const struct serve_tokens *tokens)
{
    if (rl && rl->set) {
        add_number(txn, "x-ratelimit-limit-requests", rl->limit);
        add_number(txn, "x-ratelimit-remaining-requests", rl->remaining);
        add_duration(txn, "x-ratelimit-reset-requests", (uint64_t)rl->reset_s * 1000u);
    }
    if (tokens && tokens->set) {
        add_number(txn, "x-ratelimit-limit-tokens", tokens->limit);
        add_number(txn, "x-ratelimit-remaining-tokens", tokens->remaining);
        add_duration(txn, "x-ratelimit-reset-tokens", tokens->reset_ms);
    }
}

void limit_headers_retry(struct http_txn *txn, int status, unsigned retry_after_s,
                         const struct serve_tokens *tokens)
{
    if (status != 429 && status != 503)
        return;
    uint64_t secs = retry_after_s ? retry_after_s : 1;
    add_number(txn, "Retry-After", secs);
    if (status != 429)
        return;
    enum serve_quota_refusal why = tokens ? tokens->refusal : SERVE_QUOTA_NONE;
    bool budget = why != SERVE_QUOTA_NONE && tokens->retry_ms;
    add_number(txn, "retry-after-ms", budget ? tokens->retry_ms : secs * 1000u);
    if (why == SERVE_QUOTA_EXHAUSTED || why == SERVE_QUOTA_TOO_LARGE)
        http_txn_add_header(txn, "x-should-retry", "false");
}
