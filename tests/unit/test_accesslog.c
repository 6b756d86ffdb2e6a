/*
 * The access log writer: lines from several threads reach the file whole,
 * reopen (logrotate) switches files, an oversized line and a full buffer
 * are dropped and counted, and a reader that stops reading (a FIFO) never
 * blocks writers or the close. Also the request-id rule, a request's
 * `error`, `tenant` and `tokens_reserved` fields (JSON and text), and the
 * line builder's string escaping (eight bytes at a time) against a byte-by-byte
 * reference.
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

#include "base/clock.h"
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

#define LINES_PER_THREAD 2000

static void *producer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < LINES_PER_THREAD; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "{\"thread\":%d,\"i\":%d}", id, i);
        accesslog_write(line, (size_t)n);
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
    accesslog_write("first", 5);
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
    accesslog_write("second", 6);
    accesslog_close();
    size_t len;
    assert_string_equal(read_file(rotated, &len), "first\n");
    assert_string_equal(read_file(path, &len), "second\n");
    unlink(path);
    unlink(rotated);
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
    accesslog_write(big, sizeof big); /* longer than the whole buffer */
    accesslog_write(big, 40);
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
        accesslog_write(line, sizeof line);
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
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct accesslog_config cfg = {.path = path, .format = format, .sample = 1};
    struct error err;
    assert_int_equal(accesslog_open(&cfg, &err), 0);
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
    accesslog_close();
    obsreq_pool_free();
    size_t len;
    char *line = read_file(path, &len);
    unlink(path);
    assert_int_equal(count_char(line, len, '\n'), 1);
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
    jl_qraw(&l, "123456", 6);
    assert_false(l.overflow);
    assert_memory_equal(small, "\"123456\"", 8);
    jl_qraw(&l, "", 0);
    assert_true(l.overflow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_whole_lines),
        cmocka_unit_test(test_reopen),
        cmocka_unit_test(test_drops_counted),
        cmocka_unit_test(test_stalled_reader),
        cmocka_unit_test(test_request_id),
        cmocka_unit_test(test_error_field),
        cmocka_unit_test(test_tenant_field),
        cmocka_unit_test(test_tokens_reserved_field),
        cmocka_unit_test(test_jl_str_escapes_every_byte_anywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
