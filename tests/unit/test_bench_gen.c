/* Unit tests of `inferd bench --openai`'s pieces: the incremental SSE reader
 * (every split point, line endings, comments, ids, limits) and the
 * accounting of streamed completions (gen_stream: TTFT, TPOT, usage, the
 * window, failed streams), and the request body. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "bench/gen_stream.h"
#include "bench/sse_reader.h"

/* ---- SSE reader ------------------------------------------------------------ */

#define MAX_EVENTS 8

struct collected {
    uint32_t n;
    char data[MAX_EVENTS][256];
    char event[MAX_EVENTS][SSE_MAX_EVENT + 1];
    char id[MAX_EVENTS][SSE_MAX_ID + 1];
    uint32_t stop_after; /* 0 = never stop */
};

static int collect(void *arg, const struct sse_event *ev)
{
    struct collected *c = arg;
    assert_true(c->n < MAX_EVENTS);
    assert_true(ev->data_len < sizeof c->data[0]);
    assert_int_equal(strlen(ev->data), ev->data_len);
    memcpy(c->data[c->n], ev->data, ev->data_len + 1);
    snprintf(c->event[c->n], sizeof c->event[0], "%s", ev->event);
    snprintf(c->id[c->n], sizeof c->id[0], "%s", ev->id);
    c->n++;
    return c->stop_after && c->n == c->stop_after;
}

/* Feeds text in pieces of `step` bytes (0 = at once) to a fresh reader. */
static int feed_steps(const char *text, size_t len, size_t step, struct collected *c,
                      const char **err)
{
    struct sse_reader r;
    assert_int_equal(sse_reader_init(&r), 0);
    int rc = 0;
    for (size_t off = 0; off < len && rc == 0;) {
        size_t n = step && step < len - off ? step : len - off;
        rc = sse_reader_feed(&r, text + off, n, collect, c);
        off += n;
    }
    *err = r.err;
    sse_reader_free(&r);
    return rc;
}

/* The same events at every split point and in one-byte pieces. */
static void expect_events(const char *text, uint32_t n, const char *const *data,
                          const char *const *event, const char *const *id)
{
    size_t len = strlen(text);
    for (size_t step = 0; step <= len; step++) {
        struct collected c = {0};
        const char *err;
        assert_int_equal(feed_steps(text, len, step, &c, &err), 0);
        assert_int_equal(c.n, n);
        for (uint32_t i = 0; i < n; i++) {
            assert_string_equal(c.data[i], data[i]);
            assert_string_equal(c.event[i], event ? event[i] : "");
            assert_string_equal(c.id[i], id ? id[i] : "");
        }
    }
}

static void test_sse_basic(void **state)
{
    (void)state;
    const char *data[] = {"{\"a\":1}", "[DONE]"};
    expect_events("data: {\"a\":1}\n\ndata: [DONE]\n\n", 2, data, NULL, NULL);
    /* No space after the colon; CRLF and lone CR line ends. */
    expect_events("data:{\"a\":1}\r\n\r\ndata: [DONE]\r\r", 2, data, NULL, NULL);
    /* Only one space is dropped. */
    const char *spaced[] = {" x"};
    expect_events("data:  x\n\n", 1, spaced, NULL, NULL);
}

static void test_sse_multiline_comments_fields(void **state)
{
    (void)state;
    const char *data[] = {"line1\nline2", "x"};
    const char *event[] = {"delta", ""};
    const char *id[] = {"abc-1", "abc-1"};
    expect_events(": keep-alive comment\n"
                  "retry: 1000\n"
                  "unknownfieldnamethatislong: v\n"
                  "event: delta\n"
                  "id: abc-1\n"
                  "data: line1\n"
                  "data: line2\n"
                  "\n"
                  "data: x\n"
                  "\n",
                  2, data, event, id);
}

static void test_sse_empty_and_unterminated(void **state)
{
    (void)state;
    /* An event without data is not dispatched, and its name is dropped;
     * "data" without a colon is an empty data line (dispatched as ""). */
    const char *data[] = {"", "y"};
    const char *event[] = {"", ""};
    expect_events("event: ignored\n\ndata\n\ndata: y\n\ndata: unterminated\n", 2, data, event,
                  NULL);
}

static void test_sse_id_rules(void **state)
{
    (void)state;
    /* An id with a NUL is ignored; an empty id clears. */
    static const char text[] = "id: s-1\ndata: a\n\nid: b\0d\ndata: b\n\nid\ndata: c\n\n";
    const char *data[] = {"a", "b", "c"};
    const char *id[] = {"s-1", "s-1", ""};
    struct collected c = {0};
    const char *err;
    for (size_t step = 0; step < sizeof text; step++) {
        memset(&c, 0, sizeof c);
        assert_int_equal(feed_steps(text, sizeof text - 1, step, &c, &err), 0);
        assert_int_equal(c.n, 3);
        for (int i = 0; i < 3; i++) {
            assert_string_equal(c.data[i], data[i]);
            assert_string_equal(c.id[i], id[i]);
        }
    }
}

static void test_sse_bom(void **state)
{
    (void)state;
    const char *data[] = {"x"};
    expect_events("\xEF\xBB\xBF"
                  "data: x\n\n",
                  1, data, NULL, NULL);
    /* Half a BOM is content: the field name "\xEF" + "data" is unknown. */
    const char *none[] = {"z"};
    expect_events("\xEF"
                  "data: y\n\ndata: z\n\n",
                  1, none, NULL, NULL);
}

static void test_sse_limits_and_stop(void **state)
{
    (void)state;
    size_t big = SSE_MAX_DATA + 16;
    char *text = malloc(big + 16);
    assert_non_null(text);
    memcpy(text, "data: ", 6);
    memset(text + 6, 'x', big - 6);
    memcpy(text + big, "\n\n", 2);
    struct collected c = {0};
    const char *err = NULL;
    assert_int_equal(feed_steps(text, big + 2, 0, &c, &err), -1);
    assert_string_equal(err, "event data over 64 KiB");
    assert_int_equal(c.n, 0);
    free(text);

    char id[SSE_MAX_ID + 32];
    int n = snprintf(id, sizeof id, "id: %0*d\n", SSE_MAX_ID + 1, 7);
    assert_int_equal(feed_steps(id, (size_t)n, 3, &c, &err), -1);
    assert_string_equal(err, "event id over 256 bytes");

    /* The callback stops the reader; later feeds fail at once. */
    struct collected s = {.stop_after = 1};
    struct sse_reader r;
    assert_int_equal(sse_reader_init(&r), 0);
    assert_int_equal(sse_reader_feed(&r, "data: 1\n\ndata: 2\n\n", 18, collect, &s), -1);
    assert_string_equal(r.err, "stopped by the caller");
    assert_int_equal(s.n, 1);
    assert_int_equal(sse_reader_feed(&r, "data: 3\n\n", 9, collect, &s), -1);
    assert_int_equal(s.n, 1);
    /* A reset starts over. */
    s.stop_after = 0;
    sse_reader_reset(&r);
    assert_int_equal(sse_reader_feed(&r, "data: 4\n\n", 9, collect, &s), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.data[1], "4");
    sse_reader_free(&r);
}

/* ---- gen_stream -------------------------------------------------------------- */

#define MS 1000000ull

static const char chunk_a[] =
    "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
    "\"text\":\" and\",\"finish_reason\":null}],\"usage\":null}\n\n";
static const char chunk_b[] = "data: {\"choices\":[{\"index\":0,\"text\":\" the\","
                              "\"finish_reason\":null}],\"usage\":null}\n\n";
static const char chunk_empty[] = "data: {\"choices\":[{\"index\":0,\"text\":\"\","
                                  "\"finish_reason\":null}],\"usage\":null}\n\n";
static const char chunk_final[] = "data: {\"choices\":[{\"index\":0,\"text\":\"\","
                                  "\"finish_reason\":\"length\"}],\"usage\":null}\n\n";
static const char chunk_usage[] =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
    "\"total_tokens\":7}}\n\n";
static const char done[] = "data: [DONE]\n\n";

static void feed_str(struct gen_stream *g, const char *s, uint64_t now)
{
    gen_stream_feed(g, s, strlen(s), now);
}

static void test_stream_ok_with_usage(void **state)
{
    (void)state;
    struct gen_stream g;
    struct gen_stats st;
    gen_stats_init(&st);
    assert_int_equal(gen_stream_init(&g), 0);
    /* Window [100 ms, 200 ms); the request starts at 90 ms. */
    gen_stream_begin(&g, 90 * MS, 100 * MS, 200 * MS);
    feed_str(&g, chunk_a, 95 * MS); /* before the window */
    feed_str(&g, chunk_empty, 120 * MS);
    feed_str(&g, chunk_b, 150 * MS);
    feed_str(&g, chunk_final, 160 * MS);
    feed_str(&g, chunk_usage, 161 * MS);
    feed_str(&g, done, 162 * MS);
    gen_stream_finish(&g, 200, true, 165 * MS, &st);
    assert_int_equal(st.ok, 1);
    assert_int_equal(st.failed, 0);
    assert_int_equal(st.completion_tokens, 4); /* usage, not the 2 text events */
    assert_int_equal(st.prompt_tokens, 3);
    assert_int_equal(st.finish[GEN_FINISH_LENGTH], 1);
    /* 4 tokens over 2 text events, 1 of them in the window. */
    assert_true(st.window_tokens == 2.0);
    assert_int_equal(st.ttft.count, 1);
    assert_int_equal(hist_max(&st.ttft), 5 * MS);
    /* (165 - 95) ms / 3 tokens after the first. */
    assert_int_equal(st.tpot.count, 1);
    assert_int_equal(hist_max(&st.tpot), 70 * MS / 3);
    gen_stream_free(&g);
}

static void test_stream_without_usage_and_chat(void **state)
{
    (void)state;
    struct gen_stream g;
    struct gen_stats st;
    gen_stats_init(&st);
    assert_int_equal(gen_stream_init(&g), 0);
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    /* Chat chunks: delta.content; every byte apart. */
    static const char chat[] =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"In\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\" the\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\" beginning\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    for (size_t i = 0; i < sizeof chat - 1; i++)
        gen_stream_feed(&g, chat + i, 1, (10 + i) * MS);
    gen_stream_finish(&g, 200, true, 500 * MS, &st);
    assert_int_equal(st.ok, 1);
    assert_int_equal(st.completion_tokens, 3);
    assert_int_equal(st.prompt_tokens, 0);
    assert_int_equal(st.finish[GEN_FINISH_STOP], 1);
    assert_true(st.window_tokens == 3.0);
    gen_stream_free(&g);
}

static void test_stream_failures(void **state)
{
    (void)state;
    struct gen_stream g;
    struct gen_stats st;
    gen_stats_init(&st);
    assert_int_equal(gen_stream_init(&g), 0);

    /* No [DONE]: the stream was cut. Its in-window tokens still count. */
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    feed_str(&g, chunk_a, 10 * MS);
    gen_stream_finish(&g, 200, true, 20 * MS, &st);
    assert_int_equal(st.failed, 1);
    assert_true(st.window_tokens == 1.0);

    /* An error chunk (the text before it was received: 1 more token). */
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    feed_str(&g, chunk_a, 10 * MS);
    feed_str(&g, "data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}\n\n", 11 * MS);
    feed_str(&g, done, 12 * MS);
    gen_stream_finish(&g, 200, true, 20 * MS, &st);
    assert_int_equal(st.failed, 2);

    /* Not JSON. */
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    feed_str(&g, "data: {not json\n\n", 10 * MS);
    feed_str(&g, done, 12 * MS);
    gen_stream_finish(&g, 200, true, 20 * MS, &st);
    assert_int_equal(st.failed, 3);

    /* Something after [DONE]. */
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    feed_str(&g, done, 12 * MS);
    feed_str(&g, chunk_a, 13 * MS);
    gen_stream_finish(&g, 200, true, 20 * MS, &st);
    assert_int_equal(st.failed, 4);

    /* A refusal (the body is not fed) and a failed connection. */
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    gen_stream_finish(&g, 503, true, 20 * MS, &st);
    gen_stream_begin(&g, 0, 0, 1000 * MS);
    gen_stream_finish(&g, 0, true, 20 * MS, &st);
    assert_int_equal(st.failed, 6);

    /* Unmeasured responses count neither way, but their window tokens do. */
    gen_stream_begin(&g, 0, 5 * MS, 1000 * MS);
    feed_str(&g, chunk_a, 10 * MS);
    feed_str(&g, done, 12 * MS);
    gen_stream_finish(&g, 200, false, 20 * MS, &st);
    assert_int_equal(st.failed, 6);
    assert_int_equal(st.ok, 0);
    assert_true(st.window_tokens == 3.0);
    assert_int_equal(st.ttft.count, 0);
    gen_stream_free(&g);
}

static void test_stats_merge(void **state)
{
    (void)state;
    struct gen_stats a, b;
    gen_stats_init(&a);
    gen_stats_init(&b);
    a.ok = 2;
    b.ok = 3;
    b.failed = 1;
    a.window_tokens = 1.5;
    b.window_tokens = 2.0;
    b.finish[GEN_FINISH_OTHER] = 4;
    hist_record(&b.ttft, 7);
    gen_stats_merge(&a, &b);
    assert_int_equal(a.ok, 5);
    assert_int_equal(a.failed, 1);
    assert_true(a.window_tokens == 3.5);
    assert_int_equal(a.finish[GEN_FINISH_OTHER], 4);
    assert_int_equal(a.ttft.count, 1);
}

static void test_request_body(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 16);
    struct gen_request r = {.model = "kjv",
                            .prompt = "And God said \"Let\"",
                            .max_tokens = 64,
                            .temperature = 0.5,
                            .has_seed = true,
                            .seed = 18446744073709551615ull};
    gen_request_body(&b, &r);
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *doc;
    const char *err;
    size_t off;
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &doc, &err, &off), 0);
    assert_string_equal(json_get(doc, "model")->u.str, "kjv");
    assert_string_equal(json_get(doc, "prompt")->u.str, "And God said \"Let\"");
    int64_t n;
    assert_int_equal(json_num_i64(json_get(doc, "max_tokens"), &n), 0);
    assert_int_equal(n, 64);
    double t;
    assert_int_equal(json_num_f64(json_get(doc, "temperature"), &t), 0);
    assert_true(t == 0.5);
    uint64_t seed;
    assert_int_equal(json_num_u64(json_get(doc, "seed"), &seed), 0);
    assert_true(seed == 18446744073709551615ull);
    assert_int_equal(json_get(doc, "stream")->type, JSON_TRUE);
    assert_int_equal(json_get(json_get(doc, "stream_options"), "include_usage")->type, JSON_TRUE);
    arena_free(&a);

    /* Without a seed, none is sent. */
    b.len = 0;
    r.has_seed = false;
    gen_request_body(&b, &r);
    arena_init(&a, 4096, 1 << 20);
    assert_int_equal(json_parse(&a, b.data, b.len, NULL, &doc, &err, &off), 0);
    assert_null(json_get(doc, "seed"));
    arena_free(&a);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_basic),
        cmocka_unit_test(test_sse_multiline_comments_fields),
        cmocka_unit_test(test_sse_empty_and_unterminated),
        cmocka_unit_test(test_sse_id_rules),
        cmocka_unit_test(test_sse_bom),
        cmocka_unit_test(test_sse_limits_and_stop),
        cmocka_unit_test(test_stream_ok_with_usage),
        cmocka_unit_test(test_stream_without_usage_and_chat),
        cmocka_unit_test(test_stream_failures),
        cmocka_unit_test(test_stats_merge),
        cmocka_unit_test(test_request_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
