/* Unit tests of obs/metrics (histograms, quantiles, exposition text,
 * endpoint labels, shard indexes), obs/stats (recording, outcome
 * classification, batch statistics, exact totals from many threads) and
 * obs/sysinfo's /proc/stat parser. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "base/buf.h"
#include "obs/metrics.h"
#include "obs/stats.h"
#include "obs/sysinfo.h"

static const struct metrics_hist_spec small_spec = {
    .nbounds = 3, .bounds = {10, 20, 40}, .divisor = 10};

static void test_hist_buckets_are_inclusive_upper_bounds(void **state)
{
    (void)state;
    assert_int_equal(metrics_hist_bucket(&small_spec, 0), 0);
    assert_int_equal(metrics_hist_bucket(&small_spec, 10), 0);
    assert_int_equal(metrics_hist_bucket(&small_spec, 11), 1);
    assert_int_equal(metrics_hist_bucket(&small_spec, 20), 1);
    assert_int_equal(metrics_hist_bucket(&small_spec, 40), 2);
    assert_int_equal(metrics_hist_bucket(&small_spec, 41), 3); /* +Inf */
    assert_int_equal(metrics_hist_bucket(&small_spec, UINT64_MAX), 3);
}

static void test_hist_quantile_interpolates(void **state)
{
    (void)state;
    struct metrics_hist_snapshot h = {0};
    assert_true(metrics_hist_quantile(&small_spec, &h, 0.5) == 0);
    h.buckets[0] = 10; /* (0, 10] */
    h.buckets[1] = 10; /* (10, 20] */
    /* rank 10 of 20 is the top of the first bucket; rank 15 halfway into the second. */
    assert_true(metrics_hist_quantile(&small_spec, &h, 0.5) == 10.0);
    assert_true(metrics_hist_quantile(&small_spec, &h, 0.75) == 15.0);
    h.buckets[3] = 80; /* +Inf: the largest finite bound */
    assert_true(metrics_hist_quantile(&small_spec, &h, 0.99) == 40.0);
}

static void test_exposition_histogram_text(void **state)
{
    (void)state;
    struct metrics_hist hist = {0};
    metrics_hist_observe(&hist, &small_spec, 5, 0);
    metrics_hist_observe(&hist, &small_spec, 15, 0);
    metrics_hist_observe(&hist, &small_spec, 100, 0);
    struct metrics_hist_snapshot snap = {0};
    metrics_hist_accumulate(&snap, &hist);
    assert_int_equal(snap.count, 3);
    assert_int_equal(snap.sum, 120);
    struct buf b;
    buf_init(&b, 1 << 16);
    const char *labels[] = {"model", "a\"b\\c\nd"};
    metrics_write_header(&b, "x_seconds", "histogram", "help with \\ and\nnewline");
    metrics_write_hist(&b, "x_seconds", labels, 1, &small_spec, &snap);
    buf_putc(&b, '\0');
    assert_string_equal(b.data,
                        "# HELP x_seconds help with \\\\ and\\nnewline\n"
                        "# TYPE x_seconds histogram\n"
                        "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",le=\"1\"} 1\n"
                        "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",le=\"2\"} 2\n"
                        "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",le=\"4\"} 2\n"
                        "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",le=\"+Inf\"} 3\n"
                        "x_seconds_sum{model=\"a\\\"b\\\\c\\nd\"} 12\n"
                        "x_seconds_count{model=\"a\\\"b\\\\c\\nd\"} 3\n");
    buf_free(&b);
}

static void test_exposition_duration_bounds_in_seconds(void **state)
{
    (void)state;
    struct metrics_hist_snapshot snap = {0};
    struct buf b;
    buf_init(&b, 1 << 16);
    metrics_write_hist(&b, "d", NULL, 0, &stats_duration_buckets, &snap);
    buf_putc(&b, '\0');
    /* Exact decimal bounds, not 1.0000000000000002e-4. */
    assert_non_null(strstr(b.data, "d_bucket{le=\"0.0001\"} 0\n"));
    assert_non_null(strstr(b.data, "d_bucket{le=\"0.00025\"} 0\n"));
    assert_non_null(strstr(b.data, "d_bucket{le=\"2.5\"} 0\n"));
    assert_non_null(strstr(b.data, "d_bucket{le=\"+Inf\"} 0\n"));
    assert_non_null(strstr(b.data, "d_count 0\n"));
    buf_free(&b);
}

static void test_scalar_series(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 4096);
    const char *labels[] = {"model", "m", "version", "1"};
    metrics_write_u64(&b, "c", labels, 2, 18446744073709551615ull);
    metrics_write_f64(&b, "g", NULL, 0, 0.25);
    buf_putc(&b, '\0');
    assert_string_equal(b.data, "c{model=\"m\",version=\"1\"} 18446744073709551615\ng 0.25\n");
    buf_free(&b);
}

static void test_endpoint_labels(void **state)
{
    (void)state;
#define EP(p) metrics_endpoint_of(p, strlen(p))
    assert_int_equal(EP("/v2/models/simple/infer"), METRICS_EP_INFER);
    assert_int_equal(EP("/v2/models/simple/versions/3/infer"), METRICS_EP_INFER);
    assert_int_equal(EP("/v2/models/simple"), METRICS_EP_MODEL);
    assert_int_equal(EP("/v2/models/simple/ready"), METRICS_EP_MODEL);
    assert_int_equal(EP("/v2/models/stats"), METRICS_EP_STATS);
    assert_int_equal(EP("/v2/models/simple/versions/1/stats"), METRICS_EP_STATS);
    assert_int_equal(EP("/v2/health/ready"), METRICS_EP_HEALTH);
    assert_int_equal(EP("/v2"), METRICS_EP_SERVER);
    assert_int_equal(EP("/v2/"), METRICS_EP_SERVER);
    assert_int_equal(EP("/v2/repository/index"), METRICS_EP_REPOSITORY);
    assert_int_equal(EP("/dashboard"), METRICS_EP_DASHBOARD);
    assert_int_equal(EP("/dashboard/data"), METRICS_EP_DASHBOARD);
    assert_int_equal(EP("/playground"), METRICS_EP_PLAYGROUND);
    assert_int_equal(EP("/playgrounds"), METRICS_EP_OTHER);
    assert_int_equal(EP("/metrics"), METRICS_EP_METRICS);
    assert_int_equal(EP("/v2/models"), METRICS_EP_OTHER);
    assert_int_equal(EP("/v3"), METRICS_EP_OTHER);
    assert_int_equal(EP(""), METRICS_EP_OTHER);
    assert_int_equal(EP("*"), METRICS_EP_OTHER);
    assert_int_equal(metrics_endpoint_of(NULL, 0), METRICS_EP_OTHER);
#undef EP
    assert_int_equal(metrics_status_code(metrics_status_index(429)), 429);
    assert_int_equal(metrics_status_index(299), METRICS_STATUSES);
    assert_int_equal(metrics_status_code(METRICS_STATUSES), 0);
}

static void test_http_counters(void **state)
{
    (void)state;
    struct metrics_http_totals before, after;
    metrics_http_read(&before);
    const char *p = "/v2/models/x/infer";
    metrics_http_response(p, strlen(p), 429, 100, 20);
    metrics_http_response(NULL, 0, 431, 0, 30);
    metrics_http_read(&after);
    uint32_t i429 = metrics_status_index(429), i431 = metrics_status_index(431);
    assert_int_equal(after.responses[METRICS_EP_INFER][i429] -
                         before.responses[METRICS_EP_INFER][i429], 1);
    assert_int_equal(after.responses[METRICS_EP_OTHER][i431] -
                         before.responses[METRICS_EP_OTHER][i431], 1);
    assert_int_equal(after.bytes_in - before.bytes_in, 100);
    assert_int_equal(after.bytes_out - before.bytes_out, 50);
}

/* ---- stats ---------------------------------------------------------------- */

static struct infer_request completed(int rc, int status, uint64_t base, int64_t batch)
{
    struct infer_request r;
    memset(&r, 0, sizeof r);
    r.rc = rc;
    r.err.status = status;
    r.batch = batch;
    if (base) {
        r.enqueue_ns = base;
        r.exec_start_ns = base + 1000;   /* queue 1000 */
        r.infer_start_ns = base + 1100;  /* input 100 */
        r.infer_end_ns = base + 1600;    /* infer 500 */
        r.exec_end_ns = base + 1620;     /* output 20 */
    }
    return r;
}

static void test_stats_model_get_is_stable(void **state)
{
    (void)state;
    struct stats_model *a = stats_model_get("unit_same", 1);
    assert_non_null(a);
    assert_ptr_equal(stats_model_get("unit_same", 1), a);
    assert_ptr_not_equal(stats_model_get("unit_same", 2), a);
    assert_ptr_equal(stats_model_find("unit_same", 1), a);
    assert_null(stats_model_find("unit_same", 3));
    struct stats_version v;
    assert_int_equal(stats_version_read(a, &v), 0);
    assert_string_equal(v.name, "unit_same");
    assert_string_equal(v.version, "1");
    stats_version_free(&v);
}

static void count_model(const struct stats_model *s, void *arg)
{
    struct stats_version v;
    if (stats_version_read(s, &v) != 0)
        return;
    if (strcmp(v.name, "unit_retire") == 0)
        ++*(int *)arg;
    stats_version_free(&v);
}

/* Unloaded versions keep their numbers, but only the newest
 * STATS_RETIRED_PER_MODEL of a model: a model that gets new versions for
 * ever does not grow the table for ever. A version loaded again resumes
 * its counters. */
static void test_stats_retired_versions_are_bounded(void **state)
{
    (void)state;
    enum { VERSIONS = STATS_RETIRED_PER_MODEL + 3 };
    struct stats_model *live = stats_model_get("unit_retire", 100); /* stays loaded */
    for (int64_t v = 1; v <= VERSIONS; v++) {
        struct stats_model *s = stats_model_get("unit_retire", v);
        struct stats_model *again = stats_model_get("unit_retire", v); /* a reload overlaps */
        assert_ptr_equal(again, s);
        stats_record_execution(s, &(struct stats_execution){.batch_size = 1}, 1, 1, 1);
        stats_model_put(again);
        assert_ptr_equal(stats_model_find("unit_retire", v), s); /* still held once */
        stats_model_put(s);
    }
    for (int64_t v = 1; v <= VERSIONS; v++) {
        bool kept = v > VERSIONS - STATS_RETIRED_PER_MODEL;
        assert_int_equal(stats_model_find("unit_retire", v) != NULL, kept);
    }
    int listed = 0;
    stats_foreach(count_model, &listed);
    assert_int_equal(listed, STATS_RETIRED_PER_MODEL + 1);

    /* Loading the newest retired version again resumes its counters. */
    struct stats_model *s = stats_model_get("unit_retire", VERSIONS);
    stats_record_execution(s, &(struct stats_execution){.batch_size = 1}, 1, 1, 1);
    struct stats_version sv;
    assert_int_equal(stats_version_read(s, &sv), 0);
    assert_int_equal(sv.execution_count, 2);
    stats_version_free(&sv);
    stats_model_put(s);
    /* Other models are untouched by the pruning. */
    assert_non_null(stats_model_find("unit_same", 1));
    stats_model_put(live);
}

static void test_stats_outcomes(void **state)
{
    (void)state;
    struct stats_model *s = stats_model_get("unit_outcomes", 7);
    struct infer_request ok = completed(0, 0, 5000, 3);
    stats_record_completion(s, &ok, false, 4000, 10000);       /* success, 6000 ns */
    struct infer_request gone = completed(0, 0, 5000, 3);
    stats_record_completion(s, &gone, true, 4000, 4500);       /* CANCELED */
    struct infer_request late = completed(-1, 504, 0, 1);
    late.enqueue_ns = 4100;                                    /* never ran */
    stats_record_completion(s, &late, false, 4000, 4300);      /* REJECTED */
    struct infer_request broken = completed(-1, 500, 5000, 1);
    stats_record_completion(s, &broken, false, 4000, 9000);    /* BACKEND */
    struct infer_request dropped = completed(-1, 499, 0, 1);   /* cancelled in the queue */
    stats_record_completion(s, &dropped, false, 4000, 4040);   /* CANCELED */
    stats_record_refused(s, 429, 100, 200);                    /* REJECTED */
    stats_record_refused(s, 400, 100, 300);                    /* OTHER */
    stats_record_completion(NULL, &ok, false, 0, 1);           /* no-op */

    struct stats_version v;
    assert_int_equal(stats_version_read(s, &v), 0);
    assert_string_equal(v.name, "unit_outcomes");
    assert_string_equal(v.version, "7");
    assert_int_equal(v.success.count, 1);
    assert_int_equal(v.success.ns, 6000);
    assert_int_equal(v.queue.count, 1);
    assert_int_equal(v.queue.ns, 1000);
    assert_int_equal(v.compute_input.ns, 100);
    assert_int_equal(v.compute_infer.ns, 500);
    assert_int_equal(v.compute_output.ns, 20);
    assert_int_equal(v.inference_count, 3);
    assert_int_equal(v.fail_by_reason[STATS_FAIL_CANCELED].count, 2);
    assert_int_equal(v.fail_by_reason[STATS_FAIL_REJECTED].count, 2);
    assert_int_equal(v.fail_by_reason[STATS_FAIL_BACKEND].count, 1);
    assert_int_equal(v.fail_by_reason[STATS_FAIL_OTHER].count, 1);
    assert_int_equal(v.fail.count, 6);
    assert_int_equal(v.fail.ns, 500 + 40 + 300 + 5000 + 100 + 200);
    assert_int_equal(v.request_hist.count, 7); /* every success and failure */
    assert_int_equal(v.queue_hist.count, 1);   /* successes only */
    assert_int_equal(v.compute_hist.count, 1);
    assert_int_equal(v.compute_hist.sum, 620); /* exec start → end */
    assert_true(v.last_inference_ms > 0);
    assert_int_equal(v.nbatches, 0);
    stats_version_free(&v);
    assert_string_equal(stats_fail_reason_name(STATS_FAIL_BACKEND), "BACKEND");
}

static void test_stats_batches_grow_and_sort(void **state)
{
    (void)state;
    struct stats_model *s = stats_model_get("unit_batches", 1);
    stats_record_execution(s, &(struct stats_execution){.batch_size = 3}, 1, 10, 100);
    stats_record_execution(s, &(struct stats_execution){.batch_size = 100}, 2, 20, 200); /* grows the slot's array */
    stats_record_execution(s, &(struct stats_execution){.batch_size = 3}, 1, 10, 100);
    stats_record_execution(s, &(struct stats_execution){.batch_size = 0}, 5, 5, 5);      /* counted, no batch entry */
    stats_record_execution(s, &(struct stats_execution){.batch_size = STATS_MAX_BATCH_SIZE + 1}, 1, 1, 1);
    struct stats_version v;
    assert_int_equal(stats_version_read(s, &v), 0);
    assert_int_equal(v.execution_count, 5);
    assert_int_equal(v.batch_hist.count, 5);
    assert_int_equal(v.nbatches, 2);
    assert_int_equal(v.batches[0].batch_size, 3);
    assert_int_equal(v.batches[0].compute_input.count, 2);
    assert_int_equal(v.batches[0].compute_input.ns, 2);
    assert_int_equal(v.batches[0].compute_infer.ns, 20);
    assert_int_equal(v.batches[0].compute_output.ns, 200);
    assert_int_equal(v.batches[1].batch_size, 100);
    assert_int_equal(v.batches[1].compute_infer.count, 1);
    assert_int_equal(v.batches[1].compute_output.ns, 200);
    stats_version_free(&v);
}

static void test_stats_responses_by_index(void **state)
{
    (void)state;
    struct stats_model *s = stats_model_get("unit_responses", 1);
    stats_record_response(s, 0, STATS_RESPONSE_SUCCESS, 10, 1);
    stats_record_response(s, 1, STATS_RESPONSE_SUCCESS, 20, 2);
    stats_record_response(s, 0, STATS_RESPONSE_SUCCESS, 30, 3);
    stats_record_response(s, 40, STATS_RESPONSE_FAIL, 5, 5); /* grows the slot's array */
    stats_record_response(s, 2, STATS_RESPONSE_EMPTY, 7, 0);
    stats_record_response(s, 3, STATS_RESPONSE_CANCEL, 9, 0);
    stats_record_response(s, STATS_MAX_RESPONSES, STATS_RESPONSE_SUCCESS, 1, 1); /* dropped */
    struct stats_version v;
    assert_int_equal(stats_version_read(s, &v), 0);
    assert_int_equal(v.nresponses, 5);
    uint32_t want_index[] = {0, 1, 2, 3, 40};
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(v.responses[i].index, want_index[i]);
    const struct stats_response *r = &v.responses[0];
    assert_int_equal(r->success.count, 2);
    assert_int_equal(r->success.ns, 44); /* infer + output */
    assert_int_equal(r->compute_infer.count, 2);
    assert_int_equal(r->compute_infer.ns, 40);
    assert_int_equal(r->compute_output.ns, 4);
    assert_int_equal(r->fail.count + r->empty_response.count + r->cancel.count, 0);
    r = &v.responses[2]; /* empty: compute_infer and empty_response only */
    assert_int_equal(r->compute_infer.count, 1);
    assert_int_equal(r->compute_output.count, 0);
    assert_int_equal(r->empty_response.count, 1);
    assert_int_equal(r->empty_response.ns, 7);
    assert_int_equal(r->success.count, 0);
    r = &v.responses[3]; /* cancel alone */
    assert_int_equal(r->cancel.count, 1);
    assert_int_equal(r->cancel.ns, 9);
    assert_int_equal(r->compute_infer.count, 0);
    r = &v.responses[4];
    assert_int_equal(r->fail.count, 1);
    assert_int_equal(r->fail.ns, 10);
    assert_int_equal(r->compute_output.count, 1);
    stats_version_free(&v);
    stats_model_put(s);
}

/* Many threads record into one model at once; the sums are exact whether
 * a thread has its own shard or (beyond METRICS_MAX_SHARDS) the shared one. */
#define RECORDS 2000

struct recorder {
    struct stats_model *s;
    pthread_barrier_t *start;
    uint32_t batch;
    int shard;
};

static void *record_many(void *arg)
{
    struct recorder *r = arg;
    r->shard = metrics_shard_index();
    pthread_barrier_wait(r->start);
    for (int i = 0; i < RECORDS; i++)
        stats_record_execution(r->s, &(struct stats_execution){.batch_size = r->batch}, 1, 2, 3);
    return NULL;
}

static void run_recorders(const char *name, uint32_t nthreads)
{
    struct stats_model *s = stats_model_get(name, 1);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, nthreads);
    pthread_t *tids = calloc(nthreads, sizeof *tids);
    struct recorder *rs = calloc(nthreads, sizeof *rs);
    assert_non_null(tids);
    assert_non_null(rs);
    for (uint32_t i = 0; i < nthreads; i++) {
        rs[i] = (struct recorder){.s = s, .start = &start, .batch = 1 + i % 40};
        assert_int_equal(pthread_create(&tids[i], NULL, record_many, &rs[i]), 0);
    }
    for (uint32_t i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&start);
    struct stats_version v;
    assert_int_equal(stats_version_read(s, &v), 0);
    assert_int_equal(v.execution_count, (uint64_t)nthreads * RECORDS);
    uint64_t execs = 0, infer_ns = 0;
    for (uint32_t k = 0; k < v.nbatches; k++) {
        execs += v.batches[k].compute_infer.count;
        infer_ns += v.batches[k].compute_infer.ns;
    }
    assert_int_equal(execs, (uint64_t)nthreads * RECORDS);
    assert_int_equal(infer_ns, 2ull * nthreads * RECORDS);
    stats_version_free(&v);
    /* Concurrent threads never share a shard, except the shared one. */
    for (uint32_t i = 0; i < nthreads; i++)
        for (uint32_t j = i + 1; j < nthreads; j++)
            if (rs[i].shard != METRICS_SHARED_SHARD)
                assert_int_not_equal(rs[i].shard, rs[j].shard);
    free(tids);
    free(rs);
}

static void test_sharded_totals_exact(void **state)
{
    (void)state;
    run_recorders("unit_threads", 8);
}

static void test_more_threads_than_shards(void **state)
{
    (void)state;
    run_recorders("unit_overflow", METRICS_MAX_SHARDS + 12);
}

static void *take_index(void *arg)
{
    *(int *)arg = metrics_shard_index();
    return NULL;
}

static void test_shard_indexes_are_recycled(void **state)
{
    (void)state;
    /* Far more threads over time than shards, one at a time: each exits
     * and gives its index back, so none falls back to the shared shard. */
    for (int i = 0; i < 3 * METRICS_MAX_SHARDS; i++) {
        pthread_t t;
        int idx = -1;
        assert_int_equal(pthread_create(&t, NULL, take_index, &idx), 0);
        pthread_join(t, NULL);
        assert_true(idx >= 0 && idx < METRICS_MAX_SHARDS);
    }
}

static void test_cpu_line(void **state)
{
    (void)state;
    struct sysinfo_cpu c;
    assert_true(sysinfo_parse_cpu_line("cpu  100 5 50 800 45 0 0 0 0 0\n", &c));
    assert_int_equal(c.total, 1000);
    assert_int_equal(c.busy, 155);
    assert_false(sysinfo_parse_cpu_line("intr 1 2 3\n", &c));
    assert_false(sysinfo_parse_cpu_line("cpu 1 2\n", &c));
    struct sysinfo_cpu prev = {0};
    double u = sysinfo_cpu_utilization(&prev);
    assert_true(u >= 0 && u <= 1);
    assert_true(prev.total > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_buckets_are_inclusive_upper_bounds),
        cmocka_unit_test(test_hist_quantile_interpolates),
        cmocka_unit_test(test_exposition_histogram_text),
        cmocka_unit_test(test_exposition_duration_bounds_in_seconds),
        cmocka_unit_test(test_scalar_series),
        cmocka_unit_test(test_endpoint_labels),
        cmocka_unit_test(test_http_counters),
        cmocka_unit_test(test_stats_model_get_is_stable),
        cmocka_unit_test(test_stats_retired_versions_are_bounded),
        cmocka_unit_test(test_stats_outcomes),
        cmocka_unit_test(test_stats_responses_by_index),
        cmocka_unit_test(test_stats_batches_grow_and_sort),
        cmocka_unit_test(test_sharded_totals_exact),
        cmocka_unit_test(test_more_threads_than_shards),
        cmocka_unit_test(test_shard_indexes_are_recycled),
        cmocka_unit_test(test_cpu_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
