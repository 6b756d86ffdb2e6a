/*
 * The access log writer: lines from several threads reach the file whole,
 * records are formatted on the writer thread, reopen (logrotate) switches
 * files, an oversized record and a full buffer are dropped and counted,
 * and a reader that stops reading (a FIFO) never blocks writers or the
 * close. Also the request-id rule, a request's
 * `error`, `tenant` and `tokens_reserved` fields (JSON and text), and the
 * line builder's string escaping (eight bytes at a time) against a byte-by-byte
 * reference; the longest line the writer can produce, parsed back; the
 * inputs summary a thread reuses only for the same inputs.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/json.h"
#include "core/dtype.h"
#include "core/infer.h"
#include "obs/accesslog.h"
#include "obs/jsonline.h"
#include "obs/request.h"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char data[1 << 20];
    *len = fread(data, 1, sizeof data - 1, f);
    data[*len] = '\0';
    fclose(f);
    return data;
}

static size_t count_char(const char *s, size_t n, char c)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == c;
    return k;
}

/* Opens the access log on a new temporary file named into path (a
 * mkstemp template), every request sampled. */
static void open_temp_log(char *path, enum log_line_format format)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct accesslog_config cfg = {.path = path, .format = format, .sample = 1};
    struct error err;
    assert_int_equal(accesslog_open(&cfg, &err), 0);
}

/* Closes the access log and the request pool, and returns what path holds
 * (then removed): `lines` lines, *len bytes. */
static char *close_and_read(const char *path, size_t lines, size_t *len)
{
    accesslog_close();
    obsreq_pool_free();
    char *text = read_file(path, len);
    unlink(path);
    assert_int_equal(count_char(text, *len, '\n'), lines);
    return text;
}

/* The tests' records are their lines: formatting copies them. */
static size_t copy_line(const void *record, size_t len, char *out)
{
    memcpy(out, record, len);
    return len;
}

static void write_line(const char *line, size_t len)
{
    accesslog_write(copy_line, line, len);
}

#define LINES_PER_THREAD 2000

static void *producer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < LINES_PER_THREAD; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "{\"thread\":%d,\"i\":%d}", id, i);
        write_line(line, (size_t)n);
        if (i % 256 == 0)
            usleep(1000); /* let the writer swap buffers meanwhile */
    }
    return NULL;
}

static void test_threads_whole_lines(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct accesslog_stats before, after;
    accesslog_stats(&before);
    struct accesslog_config cfg = {.path = path, .format = LOG_LINE_JSON, .sample = 1};
    struct error err;
    assert_int_equal(accesslog_open(&cfg, &err), 0);
    assert_true(accesslog_enabled());
    assert_true(accesslog_sample());
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, producer, (void *)(intptr_t)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    accesslog_close();
    assert_false(accesslog_enabled());
    accesslog_stats(&after);
    uint64_t written = after.lines_written - before.lines_written;
    uint64_t dropped = after.lines_dropped - before.lines_dropped;
    assert_int_equal(written + dropped, 3 * LINES_PER_THREAD);
    assert_int_equal(dropped, 0); /* 256 KiB per thread is plenty */
    size_t len;
    char *data = read_file(path, &len);
    assert_int_equal(count_char(data, len, '\n'), written);
    /* Each thread's lines are whole and in order. */
    int next[3] = {0, 0, 0};
    for (char *line = data; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        int th, i;
        assert_int_equal(sscanf(line, "{\"thread\":%d,\"i\":%d}", &th, &i), 2);
        assert_true(th >= 0 && th < 3);
        assert_int_equal(i, next[th]);
        next[th]++;
        line = nl + 1;
    }
    unlink(path);
}

static void test_reopen(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char rotated[64];
    snprintf(rotated, sizeof rotated, "%s.1", path);
    struct accesslog_config cfg = {.path = path, .format = LOG_LINE_TEXT, .sample = 1};
    struct error err;
    assert_int_equal(accesslog_open(&cfg, &err), 0);
    assert_int_equal(accesslog_format(), LOG_LINE_TEXT);
    write_line("first", 5);
    /* Wait until the writer has written it, then rotate. */
    struct stat st;
    uint64_t deadline = clock_now_ms() + 5000;
    while (stat(path, &st) == 0 && st.st_size == 0 && clock_now_ms() < deadline)
        usleep(5000);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(rename(path, rotated), 0);
    accesslog_reopen();
    while (stat(path, &st) != 0 && clock_now_ms() < deadline)
        usleep(5000);
    assert_int_equal(stat(path, &st), 0);
    write_line("second", 6);
    accesslog_close();
    size_t len;
    assert_string_equal(read_file(rotated, &len), "first\n");
    assert_string_equal(read_file(path, &len), "second\n");
    unlink(path);
    unlink(rotated);
}

/* The thread each record was formatted on. */
static pthread_t formatted_on[8];
static int nformatted;

static size_t note_thread(const void *record, size_t len, char *out)
{
    if (nformatted < 8)
        formatted_on[nformatted++] = pthread_self();
    return copy_line(record, len, out);
}

/* Records are formatted by the writer thread, not the thread that wrote
 * them, and in the order written. */
static void test_formatted_by_writer(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    open_temp_log(path, LOG_LINE_JSON);
    nformatted = 0;
    accesslog_write(note_thread, "one", 3);
    accesslog_write(note_thread, "two", 3);
    size_t len; /* close_and_read joins the writer: formatted_on is ours then */
    char *text = close_and_read(path, 2, &len);
    assert_string_equal(text, "one\ntwo\n");
    assert_int_equal(nformatted, 2);
    for (int i = 0; i < nformatted; i++)
        assert_false(pthread_equal(formatted_on[i], pthread_self()));
}

static void test_drops_counted(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct accesslog_stats before, after;
    accesslog_stats(&before);
    struct accesslog_config cfg = {.path = path, .format = LOG_LINE_JSON, .sample = 1,
                                   .thread_buffer_bytes = 64};
    struct error err;
    assert_int_equal(accesslog_open(&cfg, &err), 0);
    char big[100];
    memset(big, 'x', sizeof big);
    write_line(big, sizeof big); /* longer than the whole buffer */
    write_line(big, 40);
    accesslog_close();
    accesslog_stats(&after);
    assert_int_equal(after.lines_dropped - before.lines_dropped, 1);
    assert_int_equal(after.lines_written - before.lines_written, 1);
    unlink(path);
}

static void test_stalled_reader(void **state)
{
    (void)state;
    char dir[] = "/tmp/inferd_fifo_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    struct accesslog_config cfg = {.path = path, .format = LOG_LINE_JSON, .sample = 1,
                                   .thread_buffer_bytes = 4096};
    struct error err;
    /* No reader: refused at open instead of hanging. */
    assert_int_equal(accesslog_open(&cfg, &err), -1);
    assert_non_null(strstr(err.msg, "FIFO"));
    /* A reader that never reads: the pipe fills, lines are dropped, the
     * writer keeps returning, and close gives up after its grace period. */
    int rfd = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(rfd >= 0);
    assert_int_equal(accesslog_open(&cfg, &err), 0);
    struct accesslog_stats before, after;
    accesslog_stats(&before);
    char line[200];
    memset(line, 'z', sizeof line);
    const int total = 20000;
    for (int i = 0; i < total; i++) {
        write_line(line, sizeof line);
        if (i % 100 == 0)
            usleep(200);
    }
    /* 4 MB of lines went to a 64 KiB pipe nobody reads: the loop above
     * returned, so writers never blocked. */
    accesslog_close();
    accesslog_stats(&after);
    uint64_t written = after.lines_written - before.lines_written;
    uint64_t dropped = after.lines_dropped - before.lines_dropped;
    assert_true(dropped > 0);
    assert_true(written < (uint64_t)total);
    assert_int_equal(written + dropped, total);
    close(rfd);
    unlink(path);
    rmdir(dir);
}

static void test_request_id(void **state)
{
    (void)state;
    char out[REQUEST_ID_MAX + 1];
    assert_int_equal(request_id_resolve("abc-123", 7, out), 7);
    assert_string_equal(out, "abc-123");
    /* Not printable, too long, empty, absent: a new 32-hex id. */
    char longid[REQUEST_ID_MAX + 1];
    memset(longid, 'a', sizeof longid);
    const char *bad[] = {"a b", "a\x01", longid, "", NULL};
    size_t lens[] = {3, 2, sizeof longid, 0, 0};
    char prev[REQUEST_ID_MAX + 1] = "";
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(request_id_resolve(bad[i], lens[i], out), 32);
        assert_int_equal(strspn(out, "0123456789abcdef"), 32);
        assert_string_not_equal(out, prev);
        memcpy(prev, out, sizeof prev);
    }
    /* The longest valid id passes unchanged. */
    assert_int_equal(request_id_resolve(longid, REQUEST_ID_MAX, out), REQUEST_ID_MAX);
}

/* One request's line through obsreq (obs/request.h) in `format`, with the
 * error message `error` (NULL: a success) and tenant (NULL: none);
 * reserved > 0: a generative request (12 prompt and 34 completion tokens,
 * "length") that reserved that many tokens of a budget. Returns the line,
 * newline cut. */
static const char *generative_line(enum log_line_format format, int status, const char *error,
                                   const char *tenant, uint64_t reserved)
{
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    open_temp_log(path, format);
    struct obsreq_start s = {.proto = OBS_PROTO_HTTP1,
                             .method = "POST",
                             .method_len = 4,
                             .endpoint = "/v2/models/mlp/infer",
                             .endpoint_len = 20,
                             .request_id = "r1",
                             .request_id_len = 2};
    struct obsreq *o = obsreq_begin(&s);
    assert_non_null(o);
    obsreq_set_error(o, error);
    obsreq_set_tenant(o, tenant);
    if (reserved) {
        obsreq_set_generation(o, 12, 34, "length");
        obsreq_set_tokens_reserved(o, reserved);
    }
    obsreq_end(o, status, 10);
    size_t len;
    char *line = close_and_read(path, 1, &len);
    line[len - 1] = '\0';
    return line;
}

static const char *request_line(enum log_line_format format, int status, const char *error,
                                const char *tenant)
{
    return generative_line(format, status, error, tenant, 0);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* The last field, `error`: the message of an error answer (escaped JSON;
 * a text token), null or "-" for a success. */
static void test_error_field(void **state)
{
    (void)state;
    const char *line = request_line(LOG_LINE_JSON, 200, NULL, NULL);
    assert_true(ends_with(line, ",\"status\":200,\"bytes_in\":0,\"bytes_out\":10,\"client\":\"\","
                                "\"error\":null}"));
    line = request_line(LOG_LINE_JSON, 400, "unknown input 'in\"put' for model 'mlp'\n\xff", NULL);
    assert_true(ends_with(line, ",\"status\":400,\"bytes_in\":0,\"bytes_out\":10,\"client\":\"\","
                                "\"error\":\"unknown input 'in\\\"put' for model "
                                "'mlp'\\u000a\\u00ff\"}"));
    /* Cut to what a struct error holds. */
    char longmsg[ERROR_MSG_MAX + 200];
    memset(longmsg, 'e', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    line = request_line(LOG_LINE_JSON, 500, longmsg, NULL);
    const char *e = strstr(line, "\"error\":\"");
    assert_non_null(e);
    assert_int_equal(strlen(e), strlen("\"error\":\"\"}") + ERROR_MSG_MAX - 1);

    line = request_line(LOG_LINE_TEXT, 200, NULL, NULL);
    assert_true(ends_with(line, " status=200 bytes_in=0 bytes_out=10 client=- error=-"));
    line = request_line(LOG_LINE_TEXT, 413, "request body of 10 bytes exceeds the limit", NULL);
    assert_true(ends_with(line, " status=413 bytes_in=0 bytes_out=10 client=- "
                                "error=request_body_of_10_bytes_exceeds_the_limit"));
}

/* `tenant` (policy/auth.h) follows `route`, only on requests that have one. */
static void test_tenant_field(void **state)
{
    (void)state;
    const char *line = request_line(LOG_LINE_JSON, 200, NULL, NULL);
    assert_null(strstr(line, "tenant"));
    line = request_line(LOG_LINE_JSON, 200, NULL, "");
    assert_null(strstr(line, "tenant"));
    line = request_line(LOG_LINE_JSON, 403, "no scope", "team-a");
    assert_non_null(strstr(line, ",\"route\":null,\"tenant\":\"team-a\",\"model_sha256\":"));
    line = request_line(LOG_LINE_TEXT, 403, "no scope", "team-a");
    assert_non_null(strstr(line, " route=- tenant=team-a model_sha256=-"));
    line = request_line(LOG_LINE_TEXT, 200, NULL, NULL);
    assert_null(strstr(line, "tenant"));
}

/* `tokens_reserved` (a token budget's reservation) follows the generation
 * fields, only on requests that reserved. */
static void test_tokens_reserved_field(void **state)
{
    (void)state;
    assert_null(strstr(request_line(LOG_LINE_JSON, 200, NULL, NULL), "tokens_reserved"));
    const char *line = generative_line(LOG_LINE_JSON, 200, NULL, NULL, 300);
    assert_non_null(strstr(line, ",\"prompt_tokens\":12,\"completion_tokens\":34,"
                                 "\"finish_reason\":\"length\",\"tokens_reserved\":300,"
                                 "\"model_sha256\":"));
    line = generative_line(LOG_LINE_TEXT, 200, NULL, NULL, 300);
    assert_non_null(strstr(line, " finish_reason=length tokens_reserved=300 model_sha256=-"));
    assert_null(strstr(request_line(LOG_LINE_TEXT, 200, NULL, NULL), "tokens_reserved"));
}

/* Writes 63 bytes of 0x01 as the client's address (the longest the record
 * keeps). */
static size_t odd_peer(const void *ctx, char *out, size_t cap)
{
    (void)ctx;
    size_t n = cap - 1;
    memset(out, 'p', n);
    out[n] = '\0';
    return n;
}

/* The JSON line of a request with every text field at its longest and made
 * of bytes that escape to six (so the line at its longest, which the
 * writer's bound must hold: obs/request.c LINE_BOUND), parsed back. */
static void test_longest_line(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    open_temp_log(path, LOG_LINE_JSON);
    static char odd[4096];
    memset(odd, '\x01', sizeof odd - 1);
    struct obsreq_start s = {.proto = OBS_PROTO_GRPC_WEB,
                             .method = odd, .method_len = 4000,
                             .endpoint = odd, .endpoint_len = 4000,
                             .request_id = odd, .request_id_len = 4000,
                             .peer = odd_peer};
    struct obsreq *o = obsreq_begin(&s);
    assert_non_null(o);
    obsreq_set_model(o, odd, odd, "0123456789abcdef");
    obsreq_set_route(o, ROUTE_FALLBACK);
    obsreq_set_tenant(o, odd);
    obsreq_set_generation(o, UINT32_MAX, UINT32_MAX, odd);
    obsreq_set_tokens_reserved(o, UINT64_MAX);
    obsreq_set_error(o, odd);
    /* More inputs than the summary holds, names escaped to six bytes each. */
    static struct tensor in[64];
    char name[31]; /* 180 bytes escaped: two elements fit, not three */
    memset(name, '\x01', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    for (size_t i = 0; i < 64; i++) {
        in[i] = (struct tensor){.name = i % 2 ? name : "x", .dtype = DT_FP32, .ndim = TENSOR_MAX_DIMS};
        for (int d = 0; d < TENSOR_MAX_DIMS; d++)
            in[i].shape[d] = INT64_MIN;
    }
    struct infer_request req = {.inputs = in, .ninputs = 64, .batch_size = UINT32_MAX};
    obsreq_infer_done(o, &req);
    obsreq_end(o, -2147483647 - 1, UINT64_MAX);
    size_t len;
    char *line = close_and_read(path, 1, &len);
    struct arena a;
    arena_init(&a, 1 << 16, 1 << 24);
    struct json_value *root;
    assert_int_equal(json_parse(&a, line, len - 1, NULL, &root, NULL, NULL), 0);
    /* Each field cut to its cap, every byte back as it was sent. */
    static const struct {
        const char *key;
        size_t len;
    } fields[] = {{"request_id", REQUEST_ID_MAX}, {"method", 15}, {"endpoint", 255},
                  {"model", 255}, {"version", 23}, {"tenant", OBSREQ_TENANT_MAX},
                  {"finish_reason", OBSREQ_FINISH_MAX}, {"error", ERROR_MSG_MAX - 1}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const struct json_value *v = json_get(root, fields[i].key);
        assert_non_null(v);
        assert_int_equal(v->type, JSON_STRING);
        assert_int_equal(v->len, fields[i].len);
        assert_memory_equal(v->u.str, odd, fields[i].len);
    }
    assert_string_equal(json_get(root, "model_sha256")->u.str, "0123456789ab");
    assert_string_equal(json_get(root, "route")->u.str, "fallback");
    assert_string_equal(json_get(root, "protocol")->u.str, "grpc-web");
    assert_int_equal(json_get(root, "client")->len, 63);
    uint64_t u;
    assert_int_equal(json_num_u64(json_get(root, "tokens_reserved"), &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(json_num_u64(json_get(root, "bytes_out"), &u), 0);
    assert_true(u == UINT64_MAX);
    int64_t status;
    assert_int_equal(json_num_i64(json_get(root, "status"), &status), 0);
    assert_int_equal(status, -2147483647 - 1);
    /* The inputs stop at a whole element, the last that fits in 1024 bytes. */
    const struct json_value *inputs = json_get(root, "inputs");
    assert_int_equal(inputs->type, JSON_ARRAY);
    assert_true(inputs->len >= 2 && inputs->len < 64);
    for (uint32_t i = 0; i < inputs->len; i++) {
        const struct json_value *nm = json_get(&inputs->u.items[i], "name");
        assert_int_equal(nm->len, i % 2 ? sizeof name - 1 : 1);
        const struct json_value *shape = json_get(&inputs->u.items[i], "shape");
        assert_int_equal(shape->len, TENSOR_MAX_DIMS);
        int64_t d;
        assert_int_equal(json_num_i64(&shape->u.items[TENSOR_MAX_DIMS - 1], &d), 0);
        assert_true(d == INT64_MIN);
    }
    arena_free(&a);
}

/* The inputs summary of the line before is reused only for the same names,
 * datatypes and shapes (obs/request.c keeps the last one per thread). */
static void test_inputs_summary(void **state)
{
    (void)state;
    char path[] = "/tmp/inferd_accesslog_XXXXXX";
    open_temp_log(path, LOG_LINE_JSON);
    struct tensor in[2] = {{.name = "INPUT0", .dtype = DT_INT32, .ndim = 2, .shape = {1, 16}},
                           {.name = "INPUT1", .dtype = DT_INT32, .ndim = 2, .shape = {1, 16}}};
    struct {
        const char *name1;
        enum dtype dtype1;
        uint32_t ndim1;
        int64_t dim;
    } steps[] = {{"INPUT1", DT_INT32, 2, 16}, {"INPUT1", DT_INT32, 2, 16}, {"INPUT1", DT_INT32, 2, 8},
                 {"INPUT2", DT_INT32, 2, 8},  {"INPUT2", DT_FP32, 2, 8},   {"INPUT2", DT_FP32, 1, 8},
                 {"INPUT1", DT_INT32, 2, 16}};
    const char *want[] = {
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[1,16]}],",
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[1,16]}],",
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[1,8]}],",
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT2\",\"datatype\":\"INT32\",\"shape\":[1,8]}],",
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT2\",\"datatype\":\"FP32\",\"shape\":[1,8]}],",
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT2\",\"datatype\":\"FP32\",\"shape\":[1]}],",
        "\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16]},"
        "{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[1,16]}],",
    };
    size_t nsteps = sizeof steps / sizeof steps[0];
    for (size_t i = 0; i < nsteps; i++) {
        in[1].name = steps[i].name1;
        in[1].dtype = steps[i].dtype1;
        in[1].ndim = steps[i].ndim1;
        in[1].shape[1] = steps[i].dim;
        struct obsreq_start s = {.proto = OBS_PROTO_HTTP1, .method = "POST", .method_len = 4,
                                 .endpoint = "/", .endpoint_len = 1, .request_id = "r",
                                 .request_id_len = 1};
        struct obsreq *o = obsreq_begin(&s);
        assert_non_null(o);
        struct infer_request req = {.inputs = in, .ninputs = 2};
        obsreq_infer_done(o, &req);
        obsreq_end(o, 200, 1);
    }
    size_t len;
    char *text = close_and_read(path, nsteps, &len);
    char *line = text;
    for (size_t i = 0; i < nsteps; i++) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        if (!strstr(line, want[i]))
            fail_msg("line %zu: %s\nwanted %s", i, line, want[i]);
        line = nl + 1;
    }
}

/* The reference: one byte at a time, as RFC 8259 asks (valid UTF-8 kept,
 * '"' and '\\' escaped, everything else below 0x20 or not valid UTF-8 as
 * \u00XX). */
static size_t escape_reference(const char *s, size_t n, char *out)
{
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c >= 0x80 ? json_utf8_seq_len((const unsigned char *)s + i, n - i) : 0;
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x80) {
            o += (size_t)sprintf(out + o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
        i++;
    }
    out[o++] = '"';
    return o;
}

static void test_jl_str_escapes_every_byte_anywhere(void **state)
{
    (void)state;
    /* Every byte value at every position of strings up to 24 bytes (three
     * words and a tail), in plain text and next to a UTF-8 sequence. */
    static const char *const fills[] = {"abcdefghijklmnopqrstuvwx", "\xc3\xa9" "abcdefghijklmnopqrstuv"};
    for (size_t f = 0; f < 2; f++) {
        for (size_t len = 1; len <= 24; len++) {
            for (size_t pos = 0; pos < len; pos++) {
                for (int c = 0; c < 256; c++) {
                    char s[32], got[256], want[256];
                    memcpy(s, fills[f], len);
                    s[pos] = (char)c;
                    struct jline l;
                    jl_init(&l, got, sizeof got);
                    jl_str(&l, s, len);
                    assert_false(l.overflow);
                    size_t n = escape_reference(s, len, want);
                    assert_int_equal(l.n, n);
                    assert_memory_equal(got, want, n);
                    /* The unchecked cursor writes the same. */
                    char *end = jc_str(got, s, len);
                    assert_int_equal((size_t)(end - got), n);
                    assert_memory_equal(got, want, n);
                }
            }
        }
    }
    /* Too small a buffer sets overflow instead of writing past it. */
    char small[8];
    struct jline l;
    jl_init(&l, small, sizeof small);
    jl_str(&l, "0123456789", 10);
    assert_true(l.overflow);
    jl_init(&l, small, sizeof small);
    jl_str(&l, "123456", 6);
    assert_false(l.overflow);
    assert_memory_equal(small, "\"123456\"", 8);
    jl_str(&l, "", 0);
    assert_true(l.overflow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_whole_lines),
        cmocka_unit_test(test_reopen),
        cmocka_unit_test(test_formatted_by_writer),
        cmocka_unit_test(test_drops_counted),
        cmocka_unit_test(test_stalled_reader),
        cmocka_unit_test(test_request_id),
        cmocka_unit_test(test_error_field),
        cmocka_unit_test(test_tenant_field),
        cmocka_unit_test(test_tokens_reserved_field),
        cmocka_unit_test(test_jl_str_escapes_every_byte_anywhere),
        cmocka_unit_test(test_longest_line),
        cmocka_unit_test(test_inputs_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
