/*
 * api/streams: the resumable event streams, on one thread with a fake
 * transport (no loop: every subscriber is delivered to at once). Event ids
 * and framing, replay after a Last-Event-ID, the per-stream byte bound (the
 * sequence is cancelled, the last event still fits), the stream count
 * bound (503), tenants, 409/410/404/400, replacement of a subscriber, a
 * client gone (the grace period cancels; with resume 0 at once), and
 * explicit cancel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/streams.h"
#include "base/clock.h"
#include "base/mem.h"

/* ---- a fake transport: what a txn's response carried -------------------------- */

struct fake {
    struct http_txn txn;
    int status;     /* of the response or the stream; 0: not begun */
    bool ended;     /* respond() or stream_end() */
    struct buf out; /* the stream's bytes */
};

static void fake_respond(struct http_txn *txn, int status, const char *ct)
{
    (void)ct;
    struct fake *f = txn->transport;
    f->status = status;
    f->ended = true;
}

static int fake_begin(struct http_txn *txn, int status, const char *ct)
{
    (void)ct;
    struct fake *f = txn->transport;
    f->status = status;
    return 0;
}

static int fake_write(struct http_txn *txn, const void *data, size_t len)
{
    struct fake *f = txn->transport;
    return buf_append(&f->out, data, len) == 0 ? 0 : -1;
}

static void fake_end(struct http_txn *txn)
{
    struct fake *f = txn->transport;
    f->ended = true;
}

static size_t fake_pending(const struct http_txn *txn)
{
    (void)txn;
    return 0;
}

static size_t fake_peer(const struct http_txn *txn, char *out, size_t cap)
{
    (void)txn;
    (void)out;
    (void)cap;
    return 0;
}

static const struct http_txn_ops fake_ops = {fake_respond, fake_begin,   fake_write,
                                             fake_end,     fake_pending, fake_peer};

static struct fake *fake_new(void)
{
    struct fake *f = mem_calloc(1, sizeof *f);
    assert_non_null(f);
    buf_init(&f->txn.body, 1 << 22);
    http_txn_reset(&f->txn, &fake_ops, f, HTTP_VERSION_1_1, NULL);
    buf_init(&f->out, 1 << 22);
    return f;
}

static void fake_free(struct fake *f)
{
    buf_free(&f->txn.body);
    buf_free(&f->out);
    mem_free(f);
}

/* The number of events in f's output. */
static int events_in(const struct fake *f)
{
    int n = 0;
    for (size_t i = 0; i + 1 < f->out.len; i++)
        if (f->out.data[i] == '\n' && f->out.data[i + 1] == '\n')
            n++;
    return n;
}

static const uint8_t digest_a[SHA256_DIGEST_SIZE] = {1};
static const uint8_t digest_b[SHA256_DIGEST_SIZE] = {2};

struct fixture {
    struct stream_thread t;
    atomic_bool cancel;
    struct gen_stream *s;
    struct fake *origin;
};

static int setup(void **state)
{
    struct fixture *fx = mem_calloc(1, sizeof *fx);
    streams_configure(10);
    stream_thread_init(&fx->t, NULL, 15000);
    atomic_init(&fx->cancel, false);
    struct error err;
    assert_int_equal(stream_create("team", digest_a, 0, &fx->cancel, &fx->s, &err), 0);
    fx->origin = fake_new();
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    stream_thread_free(&fx->t);
    streams_shutdown();
    fake_free(fx->origin);
    mem_free(fx);
    return 0;
}

static void append(struct gen_stream *s, const char *data, bool last)
{
    assert_int_equal(stream_append(s, data, strlen(data), last), 0);
}

static struct stream_resume resume_of(struct gen_stream *s, int64_t last)
{
    struct stream_resume r = {.id = stream_id(s), .id_len = STREAM_ID_LEN, .tenant = "team"};
    if (last >= 0) {
        r.has_last = true;
        r.last_seq = (uint64_t)last;
    }
    return r;
}

static void test_events_ids_and_replay(void **state)
{
    struct fixture *fx = *state;
    const char *id = stream_id(fx->s);
    assert_int_equal(strlen(id), STREAM_ID_LEN);
    stream_attach_origin(fx->s, &fx->t, &fx->origin->txn);
    append(fx->s, "{\"a\":1}", false);
    assert_int_equal(fx->origin->status, 200);
    char want[256];
    snprintf(want, sizeof want, "id: %s-0\ndata: {\"a\":1}\n\n", id);
    assert_int_equal(fx->origin->out.len, strlen(want));
    assert_memory_equal(fx->origin->out.data, want, strlen(want));
    append(fx->s, "{\"b\":2}", false);
    append(fx->s, "[DONE]", true);
    assert_true(fx->origin->ended);
    assert_int_equal(events_in(fx->origin), 3);

    /* A resume after event 0: exactly events 1 and 2, the same bytes. */
    struct fake *g = fake_new();
    struct stream_resume r = resume_of(fx->s, 0);
    struct error err;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), 0);
    assert_true(g->ended);
    size_t first = strlen(want);
    assert_int_equal(g->out.len, fx->origin->out.len - first);
    assert_memory_equal(g->out.data, fx->origin->out.data + first, g->out.len);
    fake_free(g);

    /* From the first event, by re-POST with the same digest. */
    g = fake_new();
    r = resume_of(fx->s, -1);
    r.digest = digest_a;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), 0);
    assert_int_equal(g->out.len, fx->origin->out.len);
    fake_free(g);

    /* Another body, another route, another tenant, an unsent event. */
    g = fake_new();
    r.digest = digest_b;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 409);
    r.digest = digest_a;
    r.kind = 1;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 409);
    r = resume_of(fx->s, 3);
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 400);
    r = resume_of(fx->s, 2);
    r.tenant = "other";
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 404);
    assert_false(g->ended);
    assert_null(g->txn.cancel);
    fake_free(g);
    stream_call_ended(fx->s);
}

static void test_parse_event_id(void **state)
{
    (void)state;
    char id[STREAM_ID_LEN + 1];
    uint64_t seq;
    struct error err;
    const char *ok = "0123456789abcdef0123456789ABCDEF-42";
    assert_int_equal(stream_parse_event_id(ok, strlen(ok), id, &seq, &err), 0);
    assert_string_equal(id, "0123456789abcdef0123456789ABCDEF");
    assert_int_equal(seq, 42);
    const char *bad[] = {"",
                         "x",
                         "0123456789abcdef0123456789abcdef",
                         "0123456789abcdef0123456789abcdef-",
                         "0123456789abcdef0123456789abcdeg-1",
                         "0123456789abcdef0123456789abcdef-1a",
                         "0123456789abcdef0123456789abcdef-99999999999",
                         "0123456789abcdef0123456789abcdef+1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(stream_parse_event_id(bad[i], strlen(bad[i]), id, &seq, &err), -1);
        assert_int_equal(err.status, 400);
    }
}

static void test_byte_bound_cancels_and_the_end_fits(void **state)
{
    struct fixture *fx = *state;
    stream_attach_origin(fx->s, &fx->t, &fx->origin->txn);
    static char big[4096];
    memset(big, 'x', sizeof big - 1);
    int n = 0;
    while (stream_append(fx->s, big, strlen(big), false) == 0)
        n++;
    assert_true((size_t)n * sizeof big <= STREAM_MAX_BYTES);
    assert_true((size_t)(n + 1) * (sizeof big + 64) > STREAM_MAX_BYTES);
    assert_true(atomic_load(&fx->cancel));
    append(fx->s, "{\"error\":{}}", true);
    assert_true(fx->origin->ended);
    assert_int_equal(events_in(fx->origin), n + 1);
    stream_call_ended(fx->s);
}

static void test_count_bound_503(void **state)
{
    struct fixture *fx = *state;
    static struct gen_stream *all[STREAM_MAX_COUNT];
    struct error err;
    int n = 1; /* the fixture's */
    while (n < STREAM_MAX_COUNT)
        assert_int_equal(stream_create(NULL, digest_a, 0, &fx->cancel, &all[n++], &err), 0);
    struct gen_stream *extra;
    assert_int_equal(stream_create(NULL, digest_a, 0, &fx->cancel, &extra, &err), -1);
    assert_int_equal(err.status, 503);
    assert_int_equal(err.retry_after_s, 1);
    /* Never started: freed when their call ends, and room again. */
    for (int i = 1; i < STREAM_MAX_COUNT; i++)
        stream_call_ended(all[i]);
    assert_int_equal(stream_create(NULL, digest_a, 0, &fx->cancel, &extra, &err), 0);
    stream_call_ended(extra);
    stream_call_ended(fx->s);
}

static void test_replaced_subscriber_ends(void **state)
{
    struct fixture *fx = *state;
    stream_attach_origin(fx->s, &fx->t, &fx->origin->txn);
    append(fx->s, "1", false);
    struct fake *g = fake_new();
    struct stream_resume r = resume_of(fx->s, -1);
    struct error err;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), 0);
    assert_true(fx->origin->ended);
    assert_false(g->ended);
    append(fx->s, "2", false);
    append(fx->s, "[DONE]", true);
    assert_true(g->ended);
    assert_int_equal(events_in(g), 3);
    assert_int_equal(events_in(fx->origin), 1);
    assert_false(atomic_load(&fx->cancel));
    stream_call_ended(fx->s);
    fake_free(g);
}

static void test_client_gone_grace_and_cancel(void **state)
{
    struct fixture *fx = *state;
    streams_configure(1);
    stream_attach_origin(fx->s, &fx->t, &fx->origin->txn);
    append(fx->s, "1", false);
    http_txn_abort(&fx->origin->txn); /* the transport saw the peer leave */
    append(fx->s, "2", false);        /* noticed at the next event */
    assert_true(fx->origin->ended);
    assert_false(atomic_load(&fx->cancel));
    /* Explicit cancel by the tenant; someone else's is unknown. */
    bool running;
    struct error err;
    assert_int_equal(streams_cancel(stream_id(fx->s), STREAM_ID_LEN, "other", &running, &err), -1);
    assert_int_equal(err.status, 404);
    /* The grace period passes: the sequence is cancelled. */
    usleep(1100 * 1000);
    stream_thread_tick(&fx->t, clock_now_ns());
    assert_true(atomic_load(&fx->cancel));
    append(fx->s, "cancelled", false);
    append(fx->s, "[DONE]", true);
    stream_call_ended(fx->s);
    /* Still there for a grace period after its end: a resume sees it. */
    struct fake *g = fake_new();
    struct stream_resume r = resume_of(fx->s, 1);
    char id[STREAM_ID_LEN + 1];
    memcpy(id, stream_id(fx->s), sizeof id);
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), 0);
    assert_int_equal(events_in(g), 2);
    assert_true(g->ended);
    fake_free(g);
    usleep(1100 * 1000);
    stream_thread_tick(&fx->t, clock_now_ns());
    /* Freed: 410 for its tenant (and DELETE alike), 404 for others. */
    g = fake_new();
    r.id = id;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 410);
    assert_int_equal(streams_cancel(id, STREAM_ID_LEN, "team", &running, &err), -1);
    assert_int_equal(err.status, 410);
    r.tenant = NULL;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 404);
    fake_free(g);
}

static void test_resume_zero_cancels_at_once(void **state)
{
    struct fixture *fx = *state;
    streams_configure(0);
    stream_attach_origin(fx->s, &fx->t, &fx->origin->txn);
    append(fx->s, "1", false);
    struct fake *g = fake_new();
    struct stream_resume r = resume_of(fx->s, 0);
    struct error err;
    assert_int_equal(streams_resume(&fx->t, &g->txn, &r, &err), -1);
    assert_int_equal(err.status, 404);
    fake_free(g);
    http_txn_abort(&fx->origin->txn);
    append(fx->s, "2", false);
    assert_true(fx->origin->ended);
    assert_true(atomic_load(&fx->cancel));
    append(fx->s, "[DONE]", true);
    stream_call_ended(fx->s); /* freed now */
    struct buf m;
    buf_init(&m, 1 << 16);
    streams_write_metrics(&m);
    buf_putc(&m, '\0');
    assert_non_null(strstr(m.data, "\ninferd_gen_streams_active 0\n"));
    buf_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_events_ids_and_replay, setup, teardown),
        cmocka_unit_test(test_parse_event_id),
        cmocka_unit_test_setup_teardown(test_byte_bound_cancels_and_the_end_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_bound_503, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaced_subscriber_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_gone_grace_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_zero_cancels_at_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
