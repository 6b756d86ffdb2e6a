/*
 * The byte-level parts of the etcd client (cluster/etcd_proto.h): prefix
 * range ends, the HTTP response reader (Content-Length and chunked,
 * fed in every split), etcd's JSON answers as etcd 3.4's gateway writes
 * them, and the registration value read back by discovery
 * (cluster_instance_parse) from what registration writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/status.h"
#include "cluster/discovery.h"
#include "cluster/etcd.h"
#include "cluster/etcd_proto.h"
#include "cluster/registration.h"
#include "model/version.h"

static void test_prefix_end(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(etcd_prefix_end("/a/", 3, out), 3);
    assert_memory_equal(out, "/a0", 3);
    assert_int_equal(etcd_prefix_end("a\xff", 2, out), 1);
    assert_memory_equal(out, "b", 1);
    assert_int_equal(etcd_prefix_end("\xff\xff", 2, out), 0);
}

/* Feeds text to a fresh reader in pieces of `step` bytes; returns the
 * final status and leaves the body in r. */
static int feed_all(struct etcd_resp *r, const char *text, size_t len, size_t step)
{
    int rc = ST_AGAIN;
    size_t off = 0;
    while (off < len && rc == ST_AGAIN) {
        size_t n = len - off < step ? len - off : step;
        size_t used;
        rc = etcd_resp_feed(r, text + off, n, &used);
        off += used;
    }
    return rc;
}

static void test_resp_content_length(void **state)
{
    (void)state;
    const char *text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "content-length: 11\r\n\r\n{\"a\":\"bc\"}\nHTTP/1.1 ...";
    for (size_t step = 1; step <= strlen(text); step++) {
        struct etcd_resp r;
        etcd_resp_init(&r, 1024);
        size_t used, total = 0;
        int rc = ST_AGAIN;
        while (rc == ST_AGAIN) {
            size_t n = strlen(text) - total < step ? strlen(text) - total : step;
            rc = etcd_resp_feed(&r, text + total, n, &used);
            total += used;
        }
        assert_int_equal(rc, ST_DONE);
        assert_int_equal(r.status, 200);
        assert_false(r.close);
        /* The next response's bytes are not consumed. */
        assert_int_equal(total, strlen(text) - strlen("HTTP/1.1 ..."));
        assert_int_equal(r.body.len, 11);
        assert_memory_equal(r.body.data, "{\"a\":\"bc\"}\n", 11);
        etcd_resp_free(&r);
    }
}

static void test_resp_chunked_lines(void **state)
{
    (void)state;
    /* As etcd 3.4's gateway streams a watch: one message per chunk, a
     * newline after each; here the second line spans two chunks. */
    const char *text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "6\r\n{\"a\":1\r\n3\r\n}\n{\r\n"
                       "7;ext=1\r\n\"b\":2}\n\r\n0\r\nTrailer: x\r\n\r\n";
    for (size_t step = 1; step <= strlen(text); step++) {
        struct etcd_resp r;
        etcd_resp_init(&r, 1024);
        assert_int_equal(feed_all(&r, text, strlen(text), step), ST_DONE);
        struct buf line;
        buf_init(&line, 1024);
        assert_true(etcd_resp_take_line(&r, &line));
        assert_int_equal(line.len, 7);
        assert_memory_equal(line.data, "{\"a\":1}", 7);
        assert_true(etcd_resp_take_line(&r, &line));
        assert_int_equal(line.len, 7);
        assert_memory_equal(line.data, "{\"b\":2}", 7);
        assert_false(etcd_resp_take_line(&r, &line));
        buf_free(&line);
        etcd_resp_free(&r);
    }
}

static void test_resp_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n", /* over the ceiling */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\n\r\n", /* no framing */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000000000001\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct etcd_resp r;
        etcd_resp_init(&r, 1024);
        assert_int_equal(feed_all(&r, bad[i], strlen(bad[i]), 1), ST_ERROR);
        assert_non_null(r.err);
        etcd_resp_free(&r);
    }
    /* A head larger than ETCD_HEAD_MAX. */
    struct etcd_resp r;
    etcd_resp_init(&r, 1024);
    size_t n = ETCD_HEAD_MAX + 100;
    char *big = malloc(n);
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(big + 20, 'a', n - 20);
    assert_int_equal(feed_all(&r, big, n, 4096), ST_ERROR);
    free(big);
    etcd_resp_free(&r);
}

static void test_parse_watch(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct etcd_watch_msg m;
    const char *err = NULL;
    const char *created = "{\"result\":{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\","
                          "\"revision\":\"3\",\"raft_term\":\"2\"},\"created\":true}}";
    assert_int_equal(etcd_parse_watch(&a, created, strlen(created), &m, &err), 0);
    assert_true(m.created);
    assert_int_equal(m.revision, 3);
    assert_int_equal(m.n_events, 0);
    /* A put (type omitted: PUT is the enum's zero) and a delete. */
    const char *events =
        "{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[{\"kv\":{\"key\":\"Zm9v\","
        "\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"YmFy\","
        "\"lease\":\"7587899296570898437\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"Zm9v\","
        "\"mod_revision\":\"3\"}}]}}";
    assert_int_equal(etcd_parse_watch(&a, events, strlen(events), &m, &err), 0);
    assert_int_equal(m.n_events, 2);
    assert_int_equal(m.events[0].type, ETCD_EVENT_PUT);
    assert_string_equal(m.events[0].kv.key, "foo");
    assert_string_equal(m.events[0].kv.value, "bar");
    assert_int_equal(m.events[0].kv.mod_revision, 2);
    assert_true(m.events[0].kv.lease == 7587899296570898437LL);
    assert_int_equal(m.events[1].type, ETCD_EVENT_DELETE);
    assert_int_equal(m.events[1].kv.value_len, 0);
    assert_int_equal(m.events[1].kv.mod_revision, 3);
    const char *compacted = "{\"result\":{\"header\":{\"revision\":\"9\"},\"canceled\":true,"
                            "\"compact_revision\":\"5\",\"cancel_reason\":\"compacted\"}}";
    assert_int_equal(etcd_parse_watch(&a, compacted, strlen(compacted), &m, &err), 0);
    assert_true(m.canceled);
    assert_int_equal(m.compact_revision, 5);
    assert_string_equal(m.cancel_reason, "compacted");
    static const char *const bad[] = {
        "{\"error\":{\"grpc_code\":14},\"message\":\"etcdserver: no leader\"}",
        "not json",
        "[]",
        "{\"result\":{\"header\":{\"revision\":\"x\"}}}",
        "{\"result\":{\"events\":{}}}",
        "{\"result\":{\"events\":[{\"type\":\"PATCH\",\"kv\":{\"key\":\"Zm9v\"}}]}}",
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"Zm9v!\"}}]}}",
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"Zm9v\",\"mod_revision\":\"12x\"}}]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        assert_int_equal(etcd_parse_watch(&a, bad[i], strlen(bad[i]), &m, &err), -1);
        assert_non_null(err);
    }
    err = NULL;
    etcd_parse_watch(&a, bad[0], strlen(bad[0]), &m, &err);
    assert_string_equal(err, "etcdserver: no leader");
    arena_free(&a);
}

static void test_parse_range(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    const char *text =
        "{\"header\":{\"revision\":\"12\"},\"kvs\":[{\"key\":\"Zm9v\",\"mod_revision\":"
        "\"2\",\"value\":\"YmFy\"},{\"key\":\"Zm9w\",\"value\":\"\"}],\"count\":\"2\"}";
    struct etcd_kv *kvs;
    uint32_t n;
    int64_t rev;
    const char *err;
    assert_int_equal(etcd_parse_range(&a, text, strlen(text), &kvs, &n, &rev, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rev, 12);
    assert_string_equal(kvs[0].key, "foo");
    assert_string_equal(kvs[1].key, "fop");
    assert_int_equal(kvs[1].value_len, 0);
    const char *empty = "{\"header\":{\"revision\":\"3\"}}";
    assert_int_equal(etcd_parse_range(&a, empty, strlen(empty), &kvs, &n, &rev, &err), 0);
    assert_int_equal(n, 0);
    const char *norev = "{\"kvs\":[]}";
    assert_int_equal(etcd_parse_range(&a, norev, strlen(norev), &kvs, &n, &rev, &err), -1);
    arena_free(&a);
}

static void test_endpoints(void **state)
{
    (void)state;
    struct error err;
    assert_int_equal(etcd_endpoints_check("http://127.0.0.1:2379", &err), 0);
    assert_int_equal(etcd_endpoints_check("127.0.0.1:1,http://[::1]:2,localhost/", &err), 0);
    assert_int_equal(etcd_endpoints_check("https://127.0.0.1:2379", &err), -1);
    assert_int_equal(etcd_endpoints_check("http://h:0", &err), -1);
    assert_int_equal(etcd_endpoints_check("http://h:70000", &err), -1);
    assert_int_equal(etcd_endpoints_check("http://:1", &err), -1);
    assert_int_equal(etcd_endpoints_check(",", &err), -1);
    assert_int_equal(etcd_endpoints_check("a,b,c,d,e,f,g,h,i", &err), -1);
}

static void test_instance_parse(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    const char *v = "{\"id\":\"n1\",\"host\":\"10.0.0.5\",\"http_port\":8000,\"grpc_port\":8001,"
                    "\"metrics_port\":8002,\"ready\":true,\"draining\":false,\"version\":\"0.1.0\","
                    "\"models\":[{\"name\":\"digits\",\"versions\":[\"1\",\"2\"],"
                    "\"ready_versions\":[\"2\"]},{\"name\":\"off\",\"versions\":[\"1\"],"
                    "\"ready_versions\":[]}],\"extra\":{}}";
    struct cluster_instance inst;
    assert_null(cluster_instance_parse(&a, v, strlen(v), &inst));
    assert_string_equal(inst.id, "n1");
    assert_string_equal(inst.host, "10.0.0.5");
    assert_int_equal(inst.grpc_port, 8001);
    assert_int_equal(inst.http_port, 8000);
    assert_int_equal(inst.metrics_port, 8002);
    assert_true(inst.ready);
    assert_false(inst.draining);
    assert_string_equal(inst.version, "0.1.0");
    assert_int_equal(inst.n_models, 2);
    assert_int_equal(inst.models[0].n_versions, 2);
    assert_true(cluster_instance_serves(&inst, "digits", NULL));
    assert_true(cluster_instance_serves(&inst, "digits", "2"));
    assert_false(cluster_instance_serves(&inst, "digits", "1"));
    assert_false(cluster_instance_serves(&inst, "off", NULL));
    assert_false(cluster_instance_serves(&inst, "nope", NULL));
    assert_non_null(cluster_instance_model(&inst, "off"));
    inst.draining = true;
    assert_false(cluster_instance_serves(&inst, "digits", NULL));
    static const char *const bad[] = {
        "{}",
        "{\"id\":\"n\",\"host\":\"h\"}",                     /* no gRPC port */
        "{\"id\":\"n\",\"host\":\"h\",\"grpc_port\":70000}", /* out of range */
        "{\"id\":\"\",\"host\":\"h\",\"grpc_port\":1}",
        "{\"id\":\"n\",\"host\":\"h\",\"grpc_port\":1,\"models\":{}}",
        "{\"id\":\"n\",\"host\":\"h\",\"grpc_port\":1,\"models\":[{\"versions\":[]}]}",
        "{\"id\":\"n\",\"host\":\"h\",\"grpc_port\":1,\"models\":[{\"name\":\"m\","
        "\"versions\":[1]}]}",
        "[1]",
        "{\"id\":",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_non_null(cluster_instance_parse(&a, bad[i], strlen(bad[i]), &inst));
    arena_free(&a);
}

/* The value registration writes, read back by discovery: versions merge
 * the loaded ones and those that failed (not the model-wide failures),
 * ready_versions only the loaded ones of a READY model. */
static void test_registration_value(void **state)
{
    (void)state;
    struct model v1 = {.version = 1}, v3 = {.version = 3};
    struct model *loaded[] = {&v1, &v3};
    struct model_failure fails[] = {{.version = -1}, {.version = 2}, {.version = 4}};
    struct model_entry entries[] = {
        {.name = "a",
         .state = MODEL_READY,
         .versions = loaded,
         .nversions = 2,
         .failed_versions = 2,
         .failures = fails,
         .nfailures = 3},
        {.name = "b", .state = MODEL_UNAVAILABLE, .failures = fails + 1, .nfailures = 1},
    };
    struct model_snapshot snap = {.count = 2, .entries = entries};
    struct registration_config cfg = {
        .instance_id = "n\"1", .host = "::1", .http_port = 1, .grpc_port = 2, .metrics_port = -1};
    struct buf b;
    buf_init(&b, 1 << 16);
    registration_value(&b, &cfg, &snap);
    assert_int_equal(b.err, 0);
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct cluster_instance inst;
    assert_null(cluster_instance_parse(&a, b.data, b.len, &inst));
    assert_string_equal(inst.id, "n\"1");
    assert_string_equal(inst.host, "::1");
    assert_int_equal(inst.metrics_port, 0); /* no metrics server */
    assert_false(inst.ready);               /* b is not ready, a has failed versions */
    assert_false(inst.draining);
    assert_int_equal(inst.n_models, 2);
    const struct cluster_model *m = &inst.models[0];
    assert_int_equal(m->n_versions, 4);
    const char *want[] = {"1", "2", "3", "4"};
    for (int i = 0; i < 4; i++)
        assert_string_equal(m->versions[i], want[i]);
    assert_int_equal(m->n_ready_versions, 2);
    assert_string_equal(m->ready_versions[0], "1");
    assert_string_equal(m->ready_versions[1], "3");
    assert_int_equal(inst.models[1].n_versions, 1);
    assert_int_equal(inst.models[1].n_ready_versions, 0);
    /* Every model ready: ready. */
    snap.count = 1;
    entries[0].failed_versions = 0;
    buf_reset(&b);
    registration_value(&b, &cfg, &snap);
    assert_null(cluster_instance_parse(&a, b.data, b.len, &inst));
    assert_true(inst.ready);
    arena_free(&a);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_end),         cmocka_unit_test(test_resp_content_length),
        cmocka_unit_test(test_resp_chunked_lines), cmocka_unit_test(test_resp_errors),
        cmocka_unit_test(test_parse_watch),        cmocka_unit_test(test_parse_range),
        cmocka_unit_test(test_endpoints),          cmocka_unit_test(test_instance_parse),
        cmocka_unit_test(test_registration_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
