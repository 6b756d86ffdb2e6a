/*
 * Fuzz target for the W3C trace context parsers (obs/trace.c) and the
 * request-id rule (obs/request.c). The input is split at its first '\n':
 * the part before is a traceparent value, the rest a tracestate value.
 * Properties checked:
 *   - an accepted traceparent has non-zero ids and formats back to the
 *     input's first 55 characters (apart from the version, which is
 *     written as 00);
 *   - an accepted tracestate yields at most the buffer's length, and that
 *     output parses again to exactly itself (normal form), also when a
 *     small buffer forced truncation;
 *   - a resolved request id is the input when valid, else 32 hex digits.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/request.h"
#include "obs/trace.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_traceparent: %s\n", what);
        abort();
    }
}

static void check_tracestate(const char *s, size_t n, size_t cap)
{
    char out[TRACESTATE_MAX + 1], again[TRACESTATE_MAX + 1];
    int len = trace_parse_tracestate(s, n, out, cap);
    if (len < 0)
        return;
    check((size_t)len < cap && strlen(out) == (size_t)len, "tracestate output length");
    int len2 = trace_parse_tracestate(out, (size_t)len, again, cap);
    check(len2 == len && memcmp(out, again, (size_t)len) == 0, "tracestate not in normal form");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    size_t tp_len = nl ? (size_t)(nl - s) : size;

    struct trace_parent p;
    if (trace_parse_traceparent(s, tp_len, &p) == 0) {
        check(!trace_id_is_zero(p.trace_id, TRACE_ID_BYTES), "zero trace id accepted");
        check(!trace_id_is_zero(p.span_id, SPAN_ID_BYTES), "zero span id accepted");
        char out[TRACEPARENT_LEN + 1];
        trace_format_traceparent(out, p.trace_id, p.span_id, p.flags);
        check(tp_len >= TRACEPARENT_LEN && memcmp(out + 2, s + 2, TRACEPARENT_LEN - 2) == 0,
              "traceparent does not format back");
    }
    if (nl) {
        const char *ts = nl + 1;
        size_t ts_len = size - tp_len - 1;
        check_tracestate(ts, ts_len, TRACESTATE_MAX + 1);
        check_tracestate(ts, ts_len, 40);
    }

    char id[REQUEST_ID_MAX + 1];
    size_t id_len = request_id_resolve(s, tp_len, id);
    bool valid = tp_len >= 1 && tp_len <= REQUEST_ID_MAX;
    for (size_t i = 0; valid && i < tp_len; i++)
        valid = s[i] >= 0x21 && s[i] <= 0x7e;
    if (valid)
        check(id_len == tp_len && memcmp(id, s, tp_len) == 0, "valid request id changed");
    else
        check(id_len == 32 && strspn(id, "0123456789abcdef") == 32, "generated id malformed");
    return 0;
}
