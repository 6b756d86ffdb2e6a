/*
 * The serving pipeline's stage interface (serve/call.h), driven with test
 * stages and a recording front end: stages run in order; a stage that
 * answers (error or response) ends the call there; a stage that defers
 * keeps the call until it is resumed from another thread, and the stages
 * go on, from the next one, on the call's loop thread. Every call ends
 * with exactly one end() and goes back to the pool.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "net/loop.h"
#include "serve/call.h"

#define MAX_EVENTS 32

/* What the front end and the stages saw, in order. */
struct record {
    const char *events[MAX_EVENTS];
    uint32_t nevents;
    int fail_status;
    char fail_msg[ERROR_MSG_MAX];
    uint32_t emitted;
    bool emitted_final;
    uint32_t ends;
    pthread_t stage_threads[MAX_EVENTS];
    struct loop *loop;
};

static void note(struct infer_call *call, const char *what)
{
    struct record *r = call->fe.owner;
    assert_true(r->nevents < MAX_EVENTS);
    r->stage_threads[r->nevents] = pthread_self();
    r->events[r->nevents++] = what;
}

/* ---- the front end ---- */

static int fe_decode(struct infer_call *call, const struct model *m, struct error *err)
{
    (void)call, (void)m, (void)err;
    fail_msg("the test pipelines have no decode stage");
    return -1;
}

static void fe_emit(struct infer_call *call, const struct serve_response *resp)
{
    struct record *r = call->fe.owner;
    note(call, "emit");
    r->emitted++;
    r->emitted_final = resp->final;
}

static void fe_fail(struct infer_call *call, const struct error *err)
{
    struct record *r = call->fe.owner;
    note(call, "fail");
    r->fail_status = err->status;
    snprintf(r->fail_msg, sizeof r->fail_msg, "%s", err->msg);
}

static void fe_end(struct infer_call *call)
{
    struct record *r = call->fe.owner;
    note(call, "end");
    r->ends++;
    if (r->loop)
        loop_stop(r->loop);
}

static const struct serve_frontend test_fe = {
    .name = "test", .decode = fe_decode, .emit = fe_emit, .fail = fe_fail, .end = fe_end};

/* ---- the stages ---- */

static enum stage_result stage_note(struct infer_call *call, const void *cfg)
{
    note(call, cfg);
    return STAGE_CONTINUE;
}

static enum stage_result stage_refuse(struct infer_call *call, const void *cfg)
{
    note(call, cfg);
    return serve_call_error(call, 429, "refused by %s", (const char *)cfg);
}

static enum stage_result stage_answer(struct infer_call *call, const void *cfg)
{
    note(call, cfg);
    static int32_t value = 7;
    struct tensor out = {.name = "OUT", .dtype = DT_INT32, .ndim = 1, .shape = {1},
                         .data = &value, .nbytes = sizeof value};
    return serve_call_respond(call, &out, 1);
}

static void *resume_later(void *arg)
{
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    serve_call_resume(arg);
    return NULL;
}

static pthread_t resumer;

static enum stage_result stage_defer(struct infer_call *call, const void *cfg)
{
    note(call, cfg);
    assert_int_equal(pthread_create(&resumer, NULL, resume_later, call), 0);
    return STAGE_DEFER;
}

/* ---- harness ---- */

static void run_call(const struct serve_pipeline *p, struct record *rec, bool with_loop)
{
    struct loop loop;
    struct serve_thread t;
    if (with_loop)
        assert_int_equal(loop_init(&loop), 0);
    serve_thread_init(&t, NULL, with_loop ? &loop : NULL, p, 0);
    rec->loop = with_loop ? &loop : NULL;
    struct infer_call *call = serve_call_new(&t, &test_fe, NULL, 100);
    assert_non_null(call);
    call->fe.owner = rec;
    call->model_name = "m";
    serve_call_start(call);
    if (with_loop) {
        assert_int_equal(loop_run(&loop), 0);
        pthread_join(resumer, NULL);
    }
    assert_int_equal(t.inflight, 0);
    assert_int_equal(t.nfree, 1); /* the call went back to the pool */
    serve_thread_free(&t);
    if (with_loop)
        loop_close(&loop);
}

static void assert_events(const struct record *r, const char *const *want, uint32_t n)
{
    for (uint32_t i = 0; i < n && i < r->nevents; i++)
        assert_string_equal(r->events[i], want[i]);
    assert_int_equal(r->nevents, n);
}

static void test_stages_run_in_order_until_one_answers_with_an_error(void **state)
{
    (void)state;
    struct serve_pipeline p = {.stages = {{"a", stage_note, "a"},
                                          {"b", stage_note, "b"},
                                          {"limit", stage_refuse, "limit"},
                                          {"never", stage_note, "never"}},
                               .nstages = 4};
    struct record rec = {0};
    run_call(&p, &rec, false);
    const char *want[] = {"a", "b", "limit", "fail", "end"};
    assert_events(&rec, want, 5);
    assert_int_equal(rec.fail_status, 429);
    assert_string_equal(rec.fail_msg, "refused by limit");
    assert_int_equal(rec.emitted, 0);
    assert_int_equal(rec.ends, 1);
}

static void test_a_stage_may_answer_with_a_response(void **state)
{
    (void)state;
    struct serve_pipeline p = {.stages = {{"a", stage_note, "a"},
                                          {"cache", stage_answer, "cache"},
                                          {"never", stage_note, "never"}},
                               .nstages = 3};
    struct record rec = {0};
    run_call(&p, &rec, false);
    const char *want[] = {"a", "cache", "emit", "end"};
    assert_events(&rec, want, 4);
    assert_int_equal(rec.emitted, 1);
    assert_true(rec.emitted_final);
    assert_int_equal(rec.fail_status, 0);
}

static void test_a_deferred_call_resumes_on_its_loop_at_the_next_stage(void **state)
{
    (void)state;
    struct serve_pipeline p = {.stages = {{"a", stage_note, "a"},
                                          {"wait", stage_defer, "wait"},
                                          {"b", stage_note, "b"},
                                          {"done", stage_refuse, "done"}},
                               .nstages = 4};
    struct record rec = {0};
    run_call(&p, &rec, true);
    const char *want[] = {"a", "wait", "b", "done", "fail", "end"};
    assert_events(&rec, want, 6);
    /* Every stage ran on the thread that owns the loop (this one), also
     * after the resume that came from another thread. */
    for (uint32_t i = 0; i < rec.nevents; i++)
        assert_true(pthread_equal(rec.stage_threads[i], pthread_self()));
    assert_int_equal(rec.ends, 1);
}

static void test_a_pipeline_that_never_submits_is_an_internal_error(void **state)
{
    (void)state;
    struct serve_pipeline p = {.stages = {{"a", stage_note, "a"}}, .nstages = 1};
    struct record rec = {0};
    run_call(&p, &rec, false);
    const char *want[] = {"a", "fail", "end"};
    assert_events(&rec, want, 3);
    assert_int_equal(rec.fail_status, 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages_run_in_order_until_one_answers_with_an_error),
        cmocka_unit_test(test_a_stage_may_answer_with_a_response),
        cmocka_unit_test(test_a_deferred_call_resumes_on_its_loop_at_the_next_stage),
        cmocka_unit_test(test_a_pipeline_that_never_submits_is_an_internal_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
