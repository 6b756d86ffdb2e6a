/*
 * W3C trace context (traceparent/tracestate) parsing and formatting, id
 * generation, trace settings (Triton's fields), the OTLP/HTTP JSON encoder
 * and the exporter against an in-process collector socket (batching, the
 * bounded ring's drop counter, a collector that does not answer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "obs/otlp.h"
#include "obs/settings.h"
#include "obs/trace.h"

static const char valid_tp[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

static int parse_tp(const char *s, struct trace_parent *p)
{
    return trace_parse_traceparent(s, strlen(s), p);
}

static void test_traceparent_valid(void **state)
{
    (void)state;
    struct trace_parent p;
    assert_int_equal(parse_tp(valid_tp, &p), 0);
    assert_int_equal(p.trace_id[0], 0x0a);
    assert_int_equal(p.trace_id[15], 0x9c);
    assert_int_equal(p.span_id[0], 0xb7);
    assert_int_equal(p.span_id[7], 0x31);
    assert_int_equal(p.flags, 1);
    char out[TRACEPARENT_LEN + 1];
    trace_format_traceparent(out, p.trace_id, p.span_id, p.flags);
    out[TRACEPARENT_LEN] = '\0';
    assert_string_equal(out, valid_tp);
    /* Flags other than sampled are kept; unsampled parses too. */
    assert_int_equal(parse_tp("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", &p), 0);
    assert_int_equal(p.flags, 0);
    assert_int_equal(parse_tp("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff", &p), 0);
    assert_int_equal(p.flags, 0xff);
    /* A later version may carry more fields after a '-'. */
    assert_int_equal(parse_tp("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what", &p), 0);
    assert_int_equal(parse_tp("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", &p), 0);
}

static void test_traceparent_invalid(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "00",
        /* upper-case hex */
        "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0A",
        /* all-zero ids */
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        /* version ff, non-hex version */
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        /* version 00 with anything after the flags */
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ",
        /* a later version without '-' after the flags */
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
        /* wrong separators and lengths */
        "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-101",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
        "00-0af7651916cd43dd8448eb211c8031 c-b7ad6b7169203331-01",
    };
    struct trace_parent p;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parse_tp(bad[i], &p) != -1)
            fail_msg("accepted: '%s'", bad[i]);
    }
    /* Bytes after a NUL inside the length are not a valid header either. */
    char with_nul[sizeof valid_tp];
    memcpy(with_nul, valid_tp, sizeof valid_tp);
    with_nul[10] = '\0';
    assert_int_equal(trace_parse_traceparent(with_nul, TRACEPARENT_LEN, &p), -1);
}

static int parse_ts(const char *s, char *out, size_t cap)
{
    return trace_parse_tracestate(s, strlen(s), out, cap);
}

static void test_tracestate(void **state)
{
    (void)state;
    char out[TRACESTATE_MAX + 1];
    assert_int_equal(parse_ts("congo=t61rcWkgMzE", out, sizeof out), 17);
    assert_string_equal(out, "congo=t61rcWkgMzE");
    /* White space around members and empty members are dropped. */
    assert_true(parse_ts(" rojo=00f067aa0ba902b7 ,\t,congo=t61rcWkgMzE ", out, sizeof out) > 0);
    assert_string_equal(out, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    /* Multi-tenant keys, values with spaces inside. */
    assert_true(parse_ts("fw529a3039@dt=a b c,1tenant@sys-1=x", out, sizeof out) > 0);
    assert_string_equal(out, "fw529a3039@dt=a b c,1tenant@sys-1=x");
    assert_int_equal(parse_ts("", out, sizeof out), 0);
    assert_string_equal(out, "");

    static const char *const bad[] = {
        "Congo=x",          /* upper-case key */
        "1congo=x",         /* simple key starting with a digit */
        "congo",            /* no '=' */
        "congo=",           /* empty value */
        "congo=a b ",       /* value ending in a space: trimmed as OWS, then fine? no: see below */
        "congo=a,congo=b",  /* duplicate key */
        "congo=a=b",        /* '=' in value */
        "@sys=x",           /* empty tenant */
        "t@=x",             /* empty system */
        "t@sys456789012345=x", /* system id longer than 14 */
        "congo=\x01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_ts(bad[i], out, sizeof out);
        /* "congo=a b " is OWS-trimmed to "congo=a b", which is valid. */
        if (i == 4) {
            assert_int_equal(rc, 9);
            continue;
        }
        if (rc != -1)
            fail_msg("accepted: '%s'", bad[i]);
    }
    /* 33 members: invalid. 32: valid. */
    char list[33 * 8];
    size_t n = 0;
    for (int i = 0; i < 33; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%sk%02d=v", i ? "," : "", i);
    assert_int_equal(trace_parse_tracestate(list, n, out, sizeof out), -1);
    assert_true(trace_parse_tracestate(list, n - 6, out, sizeof out) > 0);
}

static void test_tracestate_truncation(void **state)
{
    (void)state;
    /* Members over 128 bytes go first, then members from the end. */
    char big[200];
    memset(big, 'x', sizeof big);
    memcpy(big, "big=", 4);
    char input[1024];
    int n = snprintf(input, sizeof input, "a=1,%.*s,b=2,c=3", (int)sizeof big, big);
    char out[16];
    int len = trace_parse_tracestate(input, (size_t)n, out, sizeof out);
    assert_int_equal(len, 11);
    assert_string_equal(out, "a=1,b=2,c=3");
    char tiny[9];
    len = trace_parse_tracestate(input, (size_t)n, tiny, sizeof tiny);
    assert_string_equal(tiny, "a=1,b=2");
    assert_int_equal(len, 7);
}

static void test_ids(void **state)
{
    (void)state;
    uint8_t a[TRACE_ID_BYTES], b[TRACE_ID_BYTES], s[SPAN_ID_BYTES];
    trace_new_trace_id(a);
    trace_new_trace_id(b);
    assert_false(trace_id_is_zero(a, sizeof a));
    assert_memory_not_equal(a, b, sizeof a);
    trace_new_span_id(s);
    assert_false(trace_id_is_zero(s, sizeof s));
    char hex[2 * TRACE_ID_BYTES + 1];
    span_hex(a, sizeof a, hex);
    assert_int_equal(strlen(hex), 32);
    for (int i = 0; i < 32; i++)
        assert_non_null(strchr("0123456789abcdef", hex[i]));
    /* Random bits look random: over 1000 ids each bit of byte 0 is set
     * sometimes and clear sometimes. */
    unsigned ones[8] = {0};
    for (int i = 0; i < 1000; i++) {
        trace_new_span_id(s);
        for (int bit = 0; bit < 8; bit++)
            ones[bit] += (s[0] >> bit) & 1;
    }
    for (int bit = 0; bit < 8; bit++)
        assert_true(ones[bit] > 0 && ones[bit] < 1000);
    double u = trace_random_unit();
    assert_true(u >= 0 && u < 1);
}

/* span_hex against snprintf's "%02x" for every byte value at every
 * position of a word, and for lengths that are not a multiple of four. */
static void test_hex(void **state)
{
    (void)state;
    uint8_t in[259];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (uint8_t)(i * 7 + i / 256);
    char want[2 * sizeof in + 1], got[2 * sizeof in + 1];
    for (size_t n = 0; n <= sizeof in; n += n < 9 ? 1 : 125) {
        for (size_t i = 0; i < n; i++)
            snprintf(want + 2 * i, 3, "%02x", in[i]);
        want[2 * n] = '\0';
        memset(got, 'X', sizeof got);
        span_hex(in, n, got);
        assert_string_equal(got, want);
    }
}

/* ---- settings ------------------------------------------------------------ */

static int apply(const char *model, const char *json, struct error *err)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *v;
    int rc = json_parse(&a, json, strlen(json), NULL, &v, NULL, NULL);
    assert_int_equal(rc, 0);
    struct setting *settings;
    uint32_t n;
    rc = settings_from_json(&a, v, &settings, &n, err);
    if (rc == 0)
        rc = settings_trace_apply(model, settings, n, err);
    arena_free(&a);
    return rc;
}

static void test_settings(void **state)
{
    (void)state;
    struct trace_settings init = {.level = TRACE_LEVEL_TIMESTAMPS, .rate = 0, .count = -1};
    trace_settings_init(&init);
    struct error err;
    struct trace_parent sampled, unsampled;
    assert_int_equal(parse_tp(valid_tp, &sampled), 0);
    unsampled = sampled;
    unsampled.flags = 0;
    /* Rate 0: only a sampled parent is traced; parent flags win. */
    assert_false(trace_sample(NULL, NULL, NULL));
    assert_true(trace_sample(NULL, &sampled, NULL));
    assert_false(trace_sample(NULL, &unsampled, NULL));

    assert_int_equal(apply(NULL, "{\"trace_rate\":\"1\"}", &err), 0);
    assert_true(trace_sample(NULL, NULL, NULL));
    assert_false(trace_sample(NULL, &unsampled, NULL));
    struct trace_settings s;
    trace_settings_get(NULL, &s);
    assert_true(s.rate == 1.0);

    /* trace_count: that many traces, then none. */
    assert_int_equal(apply(NULL, "{\"trace_count\":\"2\"}", &err), 0);
    assert_true(trace_sample(NULL, NULL, NULL));
    assert_true(trace_sample(NULL, NULL, NULL));
    assert_false(trace_sample(NULL, NULL, NULL));
    assert_false(trace_sample(NULL, &sampled, NULL));
    assert_int_equal(apply(NULL, "{\"trace_count\":\"-1\"}", &err), 0);

    /* OFF stops everything, even a sampled parent. */
    assert_int_equal(apply(NULL, "{\"trace_level\":[\"OFF\"]}", &err), 0);
    assert_false(trace_enabled());
    assert_false(trace_sample(NULL, &sampled, NULL));
    /* A model's own level turns it back on for that model only. */
    assert_int_equal(apply("m", "{\"trace_level\":[\"TIMESTAMPS\"],\"trace_rate\":\"1\"}", &err), 0);
    assert_true(trace_enabled());
    assert_true(trace_has_model_settings());
    assert_int_equal(trace_sample_model("m", NULL, NULL), 1);
    assert_int_equal(trace_sample_model("other", NULL, NULL), -1);
    assert_false(trace_sample(NULL, NULL, NULL));
    trace_settings_get("m", &s);
    assert_int_equal(s.level, TRACE_LEVEL_TIMESTAMPS);
    /* null clears the override: the global values apply again. */
    assert_int_equal(apply("m", "{\"trace_level\":null,\"trace_rate\":null}", &err), 0);
    assert_false(trace_has_model_settings());
    trace_settings_get("m", &s);
    assert_int_equal(s.level, TRACE_LEVEL_OFF);
    /* null on a global field: back to the startup value. */
    assert_int_equal(apply(NULL, "{\"trace_level\":null,\"trace_rate\":null}", &err), 0);
    trace_settings_get(NULL, &s);
    assert_int_equal(s.level, TRACE_LEVEL_TIMESTAMPS);
    assert_true(s.rate == 0);

    /* Rates: N = one of N, fractions, 0. */
    assert_int_equal(apply(NULL, "{\"trace_rate\":\"4\"}", &err), 0);
    trace_settings_get(NULL, &s);
    assert_true(s.rate == 0.25);
    assert_int_equal(apply(NULL, "{\"trace_rate\":\"0.5\",\"log_frequency\":\"10\","
                                 "\"trace_file\":\"/tmp/x\",\"trace_mode\":\"opentelemetry\"}",
                           &err),
                     0);
    trace_settings_get(NULL, &s);
    assert_true(s.rate == 0.5);
    assert_int_equal(s.log_frequency, 10);
    assert_string_equal(s.file, "/tmp/x");

    /* Rejected, and nothing changed. */
    static const char *const bad[] = {
        "{\"trace_level\":[\"TENSORS\"]}", "{\"trace_level\":[\"LOUD\"]}",
        "{\"trace_level\":[\"OFF\",\"TIMESTAMPS\"]}", "{\"trace_level\":3}",
        "{\"trace_rate\":\"-1\"}", "{\"trace_rate\":\"1.5\"}", "{\"trace_rate\":\"x\"}",
        "{\"trace_rate\":2}", "{\"trace_count\":\"-2\"}", "{\"log_frequency\":\"-1\"}",
        "{\"trace_mode\":\"triton\"}", "{\"nonsense\":\"1\"}", "{\"trace_rate\":\"1\",\"x\":1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        error_clear(&err);
        if (apply(NULL, bad[i], &err) != -1)
            fail_msg("accepted: %s", bad[i]);
        assert_int_equal(err.status, 400);
    }
    trace_settings_get(NULL, &s);
    assert_true(s.rate == 0.5);
    trace_settings_init(&init);
}

/* ---- OTLP encoding ------------------------------------------------------------ */

static void make_span(struct span_record *r, int links)
{
    uint8_t tid[TRACE_ID_BYTES], sid[SPAN_ID_BYTES], pid[SPAN_ID_BYTES];
    for (int i = 0; i < TRACE_ID_BYTES; i++)
        tid[i] = (uint8_t)(0xa0 + i);
    for (int i = 0; i < SPAN_ID_BYTES; i++) {
        sid[i] = (uint8_t)(0x10 + i);
        pid[i] = (uint8_t)(0x20 + i);
    }
    uint64_t now = clock_now_ns();
    span_init(r, tid, sid, pid, SPAN_KIND_SERVER, "POST /v2/models/m/infer", 23, now, now + 5000);
    span_attr_str(r, "inferd.model.name", "m\"q", 3);
    span_attr_int(r, "inferd.batch_size", -42);
    span_attr_double(r, "inferd.sampling.rate", 0.25);
    span_attr_bool(r, "inferd.remote_parent", true);
    span_attr_str(r, "odd", "a\x01\xff\xc3\xa9\\", 6); /* control, invalid UTF-8, é, backslash */
    span_set_state(r, "congo=t61rcWkgMzE", 17);
    span_set_error(r, "HTTP 500");
    for (int i = 0; i < links; i++)
        span_add_link(r, tid, sid);
}

static const struct json_value *attr_value(const struct json_value *span, const char *key)
{
    const struct json_value *attrs = json_get(span, "attributes");
    for (uint32_t i = 0; attrs && i < attrs->len; i++)
        if (strcmp(json_get(&attrs->u.items[i], "key")->u.str, key) == 0)
            return json_get(&attrs->u.items[i], "value");
    return NULL;
}

static void test_otlp_encode(void **state)
{
    (void)state;
    static struct span_record r[2];
    make_span(&r[0], 1);
    make_span(&r[1], SPAN_MAX_LINKS + 3);
    struct buf b;
    buf_init(&b, 1 << 22);
    otlp_encode(&b, r, 2, "svc");
    assert_int_equal(b.err, 0);
    struct arena a;
    arena_init(&a, 1 << 16, 1 << 24);
    struct json_value *root;
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &root, NULL, NULL), 0);
    const struct json_value *rs = &json_get(root, "resourceSpans")->u.items[0];
    const struct json_value *rattr = json_get(json_get(rs, "resource"), "attributes");
    assert_string_equal(json_get(&rattr->u.items[0], "key")->u.str, "service.name");
    assert_string_equal(json_get(json_get(&rattr->u.items[0], "value"), "stringValue")->u.str,
                        "svc");
    const struct json_value *ss = &json_get(rs, "scopeSpans")->u.items[0];
    assert_string_equal(json_get(json_get(ss, "scope"), "name")->u.str, "inferd");
    const struct json_value *spans = json_get(ss, "spans");
    assert_int_equal(spans->len, 2);
    const struct json_value *s = &spans->u.items[0];
    assert_string_equal(json_get(s, "traceId")->u.str, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    assert_string_equal(json_get(s, "spanId")->u.str, "1011121314151617");
    assert_string_equal(json_get(s, "parentSpanId")->u.str, "2021222324252627");
    assert_string_equal(json_get(s, "traceState")->u.str, "congo=t61rcWkgMzE");
    assert_string_equal(json_get(s, "name")->u.str, "POST /v2/models/m/infer");
    int64_t kind;
    assert_int_equal(json_num_i64(json_get(s, "kind"), &kind), 0);
    assert_int_equal(kind, 2);
    /* unix nanos as decimal strings, start <= end */
    const struct json_value *st = json_get(s, "startTimeUnixNano"), *en = json_get(s, "endTimeUnixNano");
    assert_int_equal(st->type, JSON_STRING);
    assert_int_equal(en->type, JSON_STRING);
    unsigned long long start = strtoull(st->u.str, NULL, 10), end = strtoull(en->u.str, NULL, 10);
    assert_int_equal(end - start, 5000);
    assert_true(start > 1600000000ull * 1000000000ull);
    /* attribute value types (proto3 JSON: int64 as a string) */
    assert_string_equal(json_get(attr_value(s, "inferd.model.name"), "stringValue")->u.str, "m\"q");
    const struct json_value *iv = json_get(attr_value(s, "inferd.batch_size"), "intValue");
    assert_int_equal(iv->type, JSON_STRING);
    assert_string_equal(iv->u.str, "-42");
    double d;
    assert_int_equal(json_num_f64(json_get(attr_value(s, "inferd.sampling.rate"), "doubleValue"), &d), 0);
    assert_true(d == 0.25);
    assert_int_equal(json_get(attr_value(s, "inferd.remote_parent"), "boolValue")->type, JSON_TRUE);
    /* Escaped so that the document stays valid JSON; valid UTF-8 passes. */
    const struct json_value *odd = json_get(attr_value(s, "odd"), "stringValue");
    assert_int_equal(odd->len, 7);
    assert_memory_equal(odd->u.str, "a\x01\xc3\xbf\xc3\xa9\\", 7);
    const struct json_value *status = json_get(s, "status");
    assert_string_equal(json_get(status, "message")->u.str, "HTTP 500");
    int64_t code;
    assert_int_equal(json_num_i64(json_get(status, "code"), &code), 0);
    assert_int_equal(code, 2);
    assert_int_equal(json_get(s, "links")->len, 1);
    assert_string_equal(json_get(&json_get(s, "links")->u.items[0], "spanId")->u.str,
                        "1011121314151617");
    /* Links beyond the record's room are counted. */
    const struct json_value *s2 = &spans->u.items[1];
    assert_int_equal(json_get(s2, "links")->len, SPAN_MAX_LINKS);
    int64_t dropped;
    assert_int_equal(json_num_i64(json_get(s2, "droppedLinksCount"), &dropped), 0);
    assert_int_equal(dropped, 3);
    arena_free(&a);
    buf_free(&b);
}

static void test_span_limits(void **state)
{
    (void)state;
    struct span_record r;
    uint8_t tid[TRACE_ID_BYTES] = {1}, sid[SPAN_ID_BYTES] = {1};
    span_init(&r, tid, sid, NULL, SPAN_KIND_INTERNAL, "x", 1, 10, 5);
    /* end before start is clamped */
    assert_true(r.end_unix_ns == r.start_unix_ns);
    assert_false(r.has_parent);
    for (int i = 0; i < SPAN_MAX_ATTRS + 2; i++)
        span_attr_int(&r, "k", i);
    assert_int_equal(r.nattrs, SPAN_MAX_ATTRS);
    assert_int_equal(r.dropped_attrs, 2);
    span_init(&r, tid, sid, NULL, SPAN_KIND_INTERNAL, "x", 1, 10, 20);
    char big[SPAN_TEXT_MAX];
    memset(big, 'y', sizeof big);
    span_attr_str(&r, "big", big, sizeof big); /* does not fit next to the name */
    assert_int_equal(r.nattrs, 0);
    assert_int_equal(r.dropped_attrs, 1);
    /* Keys up to SPAN_KEY_MAX bytes; a longer one drops its attribute. */
    char key[SPAN_KEY_MAX + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    span_attr_int(&r, key, 1);
    assert_int_equal(r.nattrs, 0);
    assert_int_equal(r.dropped_attrs, 2);
    key[SPAN_KEY_MAX] = '\0';
    span_attr_int(&r, key, 1);
    assert_int_equal(r.nattrs, 1);
}

/* The longest span the encoder can write (every text byte and key byte
 * escaped to six, every number at its longest, every link) stays within
 * OTLP_SPAN_JSON_MAX, the room it is given, and parses back. */
static void test_otlp_longest_span(void **state)
{
    (void)state;
    static struct span_record r;
    static char odd[SPAN_TEXT_MAX + 1]; /* NUL-terminated: span_set_error takes a C string */
    memset(odd, '\x01', SPAN_TEXT_MAX);
    static char keys[SPAN_MAX_ATTRS][SPAN_KEY_MAX + 1];
    uint8_t id[TRACE_ID_BYTES] = {0xff};
    span_init(&r, id, id, id, SPAN_KIND_SERVER, odd, 128, 0, 1000000000);
    span_set_state(&r, odd, 256);
    span_set_error(&r, odd);
    r.status_code = 2;
    for (int i = 0; i < SPAN_MAX_ATTRS; i++) {
        memset(keys[i], '\x01', SPAN_KEY_MAX);
        if (i == 0)
            span_attr_str(&r, keys[i], odd, SPAN_TEXT_MAX - r.text_len);
        else
            span_attr_double(&r, keys[i], -2.2250738585072014e-308);
    }
    for (int i = 0; i < SPAN_MAX_LINKS + 1; i++)
        span_add_link(&r, id, id);
    r.dropped_attrs = r.dropped_links = UINT32_MAX;
    assert_int_equal(r.nattrs, SPAN_MAX_ATTRS);
    assert_int_equal(r.text_len, SPAN_TEXT_MAX);
    struct buf empty, b;
    buf_init(&empty, 1 << 22);
    buf_init(&b, 1 << 22);
    otlp_encode(&empty, &r, 0, "svc");
    otlp_encode(&b, &r, 1, "svc");
    assert_int_equal(b.err, 0);
    assert_true(b.len - empty.len <= OTLP_SPAN_JSON_MAX);
    struct arena a;
    arena_init(&a, 1 << 16, 1 << 24);
    struct json_value *root;
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &root, NULL, NULL), 0);
    arena_free(&a);
    buf_free(&empty);
    buf_free(&b);
}

static void test_parse_url(void **state)
{
    (void)state;
    char host[64], path[64];
    int port;
    assert_int_equal(otlp_parse_url("http://127.0.0.1:4318/v1/traces", host, sizeof host, &port,
                                    path, sizeof path), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 4318);
    assert_string_equal(path, "/v1/traces");
    assert_int_equal(otlp_parse_url("http://collector", host, sizeof host, &port, path,
                                    sizeof path), 0);
    assert_int_equal(port, 80);
    assert_string_equal(path, "/v1/traces");
    assert_int_equal(otlp_parse_url("http://[::1]:9/x", host, sizeof host, &port, path,
                                    sizeof path), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 9);
    static const char *const bad[] = {"https://h/x", "h:1/x", "http://", "http://h:/x",
                                      "http://h:0/", "http://h:65536/", "http://h:1x/",
                                      "http://[::1/x", "http://h/a b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(otlp_parse_url(bad[i], host, sizeof host, &port, path, sizeof path), -1);
}

/* ---- the exporter against a socket ---------------------------------------------- */

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Reads one HTTP request (head + Content-Length body) into out. */
static size_t read_request(int fd, char *out, size_t cap)
{
    size_t len = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            return len;
        ssize_t r = recv(fd, out + len, cap - 1 - len, 0);
        if (r <= 0)
            return len;
        len += (size_t)r;
        out[len] = '\0';
        char *end = strstr(out, "\r\n\r\n");
        char *cl = strstr(out, "Content-Length: ");
        if (end && cl && len >= (size_t)(end + 4 - out) + strtoull(cl + 16, NULL, 10))
            return len;
    }
}

static void test_exporter(void **state)
{
    (void)state;
    int port;
    int lfd = listen_any(&port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/traces", port);
    struct otlp_config cfg = {.endpoint = url, .batch_size = 4, .buffer_spans = 4,
                              .interval_ms = 50, .timeout_ms = 3000};
    struct error err;
    assert_int_equal(otlp_start(&cfg, &err), 0);
    struct otlp_stats before;
    otlp_stats(&before);
    static struct span_record r;
    make_span(&r, 0);
    for (int i = 0; i < 4; i++)
        otlp_submit(&r);
    int c = accept(lfd, NULL, NULL);
    assert_true(c >= 0);
    static char req[1 << 20];
    size_t n = read_request(c, req, sizeof req);
    assert_true(n > 0);
    assert_non_null(strstr(req, "POST /v1/traces HTTP/1.1\r\n"));
    assert_non_null(strstr(req, "Content-Type: application/json\r\n"));
    char *body = strstr(req, "\r\n\r\n") + 4;
    struct arena a;
    arena_init(&a, 1 << 16, 1 << 24);
    struct json_value *root;
    assert_int_equal(json_parse(&a, body, n - (size_t)(body - req), NULL, &root, NULL, NULL), 0);
    const struct json_value *ss = &json_get(&json_get(root, "resourceSpans")->u.items[0],
                                            "scopeSpans")->u.items[0];
    assert_int_equal(json_get(ss, "spans")->len, 4);
    arena_free(&a);
    /* While the exporter waits for our answer, the ring (4) fills and
     * further spans are dropped and counted. */
    for (int i = 0; i < 7; i++)
        otlp_submit(&r);
    struct otlp_stats mid;
    otlp_stats(&mid);
    assert_int_equal(mid.spans_dropped - before.spans_dropped, 3);
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    assert_int_equal(send(c, ok, sizeof ok - 1, 0), (ssize_t)(sizeof ok - 1));
    /* The next batch comes on the same (kept-alive) connection; this time
     * the collector fails it. */
    n = read_request(c, req, sizeof req);
    assert_true(n > 0);
    static const char bad[] = "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(send(c, bad, sizeof bad - 1, 0), (ssize_t)(sizeof bad - 1));
    otlp_stop();
    struct otlp_stats after;
    otlp_stats(&after);
    assert_int_equal(after.spans_exported - before.spans_exported, 4);
    assert_int_equal(after.spans_failed - before.spans_failed, 4);
    assert_int_equal(after.exports_failed - before.exports_failed, 1);
    close(c);
    close(lfd);
}

static void test_exporter_unreachable(void **state)
{
    (void)state;
    int port;
    int lfd = listen_any(&port);
    close(lfd); /* nobody listens there now */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/traces", port);
    struct otlp_config cfg = {.endpoint = url, .batch_size = 8, .interval_ms = 20,
                              .timeout_ms = 500};
    struct error err;
    assert_int_equal(otlp_start(&cfg, &err), 0);
    struct otlp_stats before, after;
    otlp_stats(&before);
    static struct span_record r;
    make_span(&r, 0);
    for (int i = 0; i < 3; i++)
        otlp_submit(&r);
    otlp_stop(); /* flushes: one failed attempt */
    otlp_stats(&after);
    assert_int_equal(after.spans_failed - before.spans_failed, 3);
    assert_int_equal(after.spans_exported, before.spans_exported);
    /* A bad endpoint is refused at start; submit without an exporter is a no-op. */
    cfg.endpoint = "https://x/";
    assert_int_equal(otlp_start(&cfg, &err), -1);
    otlp_submit(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traceparent_valid), cmocka_unit_test(test_traceparent_invalid),
        cmocka_unit_test(test_tracestate),        cmocka_unit_test(test_tracestate_truncation),
        cmocka_unit_test(test_ids),               cmocka_unit_test(test_hex),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_otlp_encode),       cmocka_unit_test(test_span_limits),
        cmocka_unit_test(test_otlp_longest_span),
        cmocka_unit_test(test_parse_url),         cmocka_unit_test(test_exporter),
        cmocka_unit_test(test_exporter_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
