/*
 * Token metering (obs/usage.c) and its days (base/day.c) without a
 * server: YYYY-MM-DD both ways, rows adding up by day, tenant and model,
 * the query's filters and JSON shape, the retention, the row ceiling, the
 * metrics, the file's round trip through close and open (no FILE.tmp
 * left), files that are refused (and left as they were), and many threads
 * recording at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/day.h"
#include "base/json.h"
#include "base/log.h"
#include "obs/usage.h"

static struct arena arena;
static char dir[64];

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    arena_init(&arena, 4096, 1 << 26);
    snprintf(dir, sizeof dir, "/tmp/test_usage.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    arena_free(&arena);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    return 0;
}

static uint64_t today(void)
{
    return (uint64_t)time(NULL) / 86400;
}

static struct usage *open_mem(uint32_t retention)
{
    struct usage_options o = {.retention_days = retention};
    struct usage *u;
    struct error err;
    assert_int_equal(usage_open(&o, &u, &err), 0);
    return u;
}

/* usage_write_json(q), parsed. */
static const struct json_value *query(struct usage *u, const struct usage_query *q)
{
    struct buf b;
    buf_init(&b, 1 << 26);
    assert_true(usage_write_json(u, q, &b));
    struct json_value *v;
    assert_int_equal(json_parse(&arena, b.data, b.len, NULL, &v, NULL, NULL), ST_OK);
    buf_free(&b);
    return v;
}

static uint64_t num(const struct json_value *o, const char *key)
{
    uint64_t n;
    assert_int_equal(json_num_u64(json_get(o, key), &n), 0);
    return n;
}

static const char *str(const struct json_value *o, const char *key)
{
    const struct json_value *v = json_get(o, key);
    assert_non_null(v);
    return v->type == JSON_NULL ? NULL : v->u.str;
}

static void test_days(void **state)
{
    (void)state;
    char s[DAY_TEXT_LEN + 1];
    day_format(0, s);
    assert_string_equal(s, "1970-01-01");
    day_format(DAY_MAX, s);
    assert_string_equal(s, "9999-12-31");
    day_format(20513, s); /* 2026-03-01: after a February of 28 days */
    assert_string_equal(s, "2026-03-01");
    uint64_t d;
    assert_int_equal(day_parse("2024-02-29", 10, &d), 0);
    day_format(d + 1, s);
    assert_string_equal(s, "2024-03-01");
    assert_int_equal(day_parse("9999-12-31", 10, &d), 0);
    assert_int_equal(d, DAY_MAX);
    for (uint64_t k = 0; k <= DAY_MAX; k += 997) {
        day_format(k, s);
        assert_int_equal(day_parse(s, strlen(s), &d), 0);
        assert_int_equal(d, k);
    }
    static const char *const bad[] = {"2023-02-29", "2024-13-01", "2024-00-10",  "2024-04-31",
                                      "1969-12-31", "2024-1-01",  "2024-01-01x", "2024/01/01",
                                      "20240101",   "",           "2024-01-0a",  "+024-01-01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(day_parse(bad[i], strlen(bad[i]), &d), -1);
}

static void test_record_and_query(void **state)
{
    (void)state;
    struct usage *u = open_mem(0);
    uint64_t d = today();
    usage_record(u, "team-b", "kjv", d, 10, 20);
    usage_record(u, "team-a", "kjv", d, 1, 2);
    usage_record(u, "team-a", "kjv", d, 3, 4);
    usage_record(u, NULL, "kjv", d, 5, 6);
    usage_record(u, "team-a", "other", d - 1, 7, 8);
    usage_record(u, "team-a", "kjv", d - 1, 0, 0); /* a call that never ran */

    const struct json_value *v = query(u, NULL);
    const struct json_value *rows = json_get(v, "rows");
    assert_int_equal(rows->type, JSON_ARRAY);
    assert_int_equal(rows->len, 5);
    /* By day, then tenant (none first), then model. */
    static const struct {
        int dd;
        const char *tenant, *model;
        uint64_t req, p, c;
    } want[] = {{-1, "team-a", "kjv", 1, 0, 0},
                {-1, "team-a", "other", 1, 7, 8},
                {0, NULL, "kjv", 1, 5, 6},
                {0, "team-a", "kjv", 2, 4, 6},
                {0, "team-b", "kjv", 1, 10, 20}};
    for (uint32_t i = 0; i < rows->len; i++) {
        const struct json_value *r = &rows->u.items[i];
        char day[DAY_TEXT_LEN + 1];
        day_format(d + (uint64_t)(int64_t)want[i].dd, day);
        assert_int_equal(r->len, 7);
        assert_string_equal(str(r, "day"), day);
        if (want[i].tenant)
            assert_string_equal(str(r, "tenant"), want[i].tenant);
        else
            assert_null(str(r, "tenant"));
        assert_string_equal(str(r, "model"), want[i].model);
        assert_int_equal(num(r, "requests"), want[i].req);
        assert_int_equal(num(r, "prompt_tokens"), want[i].p);
        assert_int_equal(num(r, "completion_tokens"), want[i].c);
        assert_int_equal(num(r, "total_tokens"), want[i].p + want[i].c);
    }
    const struct json_value *t = json_get(v, "totals");
    assert_int_equal(t->len, 4);
    assert_int_equal(num(t, "requests"), 6);
    assert_int_equal(num(t, "prompt_tokens"), 26);
    assert_int_equal(num(t, "completion_tokens"), 40);
    assert_int_equal(num(t, "total_tokens"), 66);

    /* Filters. */
    struct usage_query q = {.tenant = "team-a"};
    v = query(u, &q);
    assert_int_equal(json_get(v, "rows")->len, 3);
    assert_int_equal(num(json_get(v, "totals"), "requests"), 4);
    q = (struct usage_query){.model = "other"};
    assert_int_equal(json_get(query(u, &q), "rows")->len, 1);
    q = (struct usage_query){.from_day = d};
    v = query(u, &q);
    assert_int_equal(json_get(v, "rows")->len, 3);
    assert_int_equal(num(json_get(v, "totals"), "prompt_tokens"), 19);
    q = (struct usage_query){.to_day = d - 1};
    assert_int_equal(json_get(query(u, &q), "rows")->len, 2);
    q = (struct usage_query){.tenant = "team-a", .model = "kjv", .from_day = d, .to_day = d};
    v = query(u, &q);
    assert_int_equal(json_get(v, "rows")->len, 1);
    assert_int_equal(num(&json_get(v, "rows")->u.items[0], "requests"), 2);
    q = (struct usage_query){.tenant = "nobody"};
    v = query(u, &q);
    assert_int_equal(json_get(v, "rows")->len, 0);
    assert_int_equal(num(json_get(v, "totals"), "total_tokens"), 0);
    usage_close(u);
}

static void test_metrics(void **state)
{
    (void)state;
    struct usage *u = open_mem(0);
    usage_record(u, NULL, "kjv", today(), 5, 6);
    usage_record(u, "team-a", "kjv", today() - 3, 1, 2);
    usage_record(u, "team-a", "kjv", today(), 1, 2);
    struct buf b;
    buf_init(&b, 1 << 20);
    usage_write_metrics(u, &b);
    buf_putc(&b, '\0');
    assert_int_equal(b.err, 0);
    static const char *const lines[] = {
        "# TYPE inferd_usage_requests_total counter\n",
        "\ninferd_usage_requests_total{tenant=\"\",model=\"kjv\"} 1\n",
        "\ninferd_usage_requests_total{tenant=\"team-a\",model=\"kjv\"} 2\n",
        "\ninferd_usage_tokens_total{tenant=\"\",model=\"kjv\",kind=\"prompt\"} 5\n",
        "\ninferd_usage_tokens_total{tenant=\"\",model=\"kjv\",kind=\"completion\"} 6\n",
        "\ninferd_usage_tokens_total{tenant=\"team-a\",model=\"kjv\",kind=\"completion\"} 4\n",
        "\ninferd_usage_rows_dropped_total 0\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(b.data, lines[i]))
            fail_msg("missing %s in:\n%s", lines[i], b.data);
    buf_free(&b);
    usage_close(u);
}

static void test_retention(void **state)
{
    (void)state;
    struct usage *u = open_mem(3);
    uint64_t d = 20000;
    usage_record(u, "a", "kjv", d, 1, 1);
    usage_record(u, "a", "kjv", d + 1, 1, 1);
    usage_record(u, "a", "kjv", d + 2, 1, 1);
    assert_int_equal(json_get(query(u, NULL), "rows")->len, 3);
    /* Day d + 3's first record keeps d + 1 .. d + 3. */
    usage_record(u, "a", "kjv", d + 3, 1, 1);
    const struct json_value *rows = json_get(query(u, NULL), "rows");
    assert_int_equal(rows->len, 3);
    char s[DAY_TEXT_LEN + 1];
    day_format(d + 1, s);
    assert_string_equal(str(&rows->u.items[0], "day"), s);
    /* A late record of a kept day still counts; the totals keep every day. */
    usage_record(u, "a", "kjv", d + 1, 1, 1);
    assert_int_equal(num(&json_get(query(u, NULL), "rows")->u.items[0], "requests"), 2);
    usage_record(u, "a", "kjv", d + 40, 1, 1);
    assert_int_equal(json_get(query(u, NULL), "rows")->len, 1);
    struct buf b;
    buf_init(&b, 1 << 20);
    usage_write_metrics(u, &b);
    buf_putc(&b, '\0');
    assert_non_null(strstr(b.data, "inferd_usage_requests_total{tenant=\"a\",model=\"kjv\"} 6\n"));
    buf_free(&b);
    usage_close(u);
}

static void test_row_ceiling(void **state)
{
    (void)state;
    struct usage *u = open_mem(0);
    char model[32];
    for (uint32_t i = 0; i < USAGE_MAX_ROWS; i++) {
        snprintf(model, sizeof model, "m%u", i);
        usage_record(u, NULL, model, today(), 1, 1);
    }
    usage_record(u, NULL, "one-too-many", today(), 1, 1);
    usage_record(u, NULL, "m7", today(), 1, 1); /* an existing row still counts */
    char longname[USAGE_NAME_MAX + 1];
    memset(longname, 'x', USAGE_NAME_MAX);
    longname[USAGE_NAME_MAX] = '\0';
    usage_record(u, longname, "m1", today(), 1, 1);
    const struct json_value *v = query(u, NULL);
    assert_int_equal(json_get(v, "rows")->len, USAGE_MAX_ROWS);
    assert_int_equal(num(json_get(v, "totals"), "requests"), USAGE_MAX_ROWS + 1);
    struct buf b;
    buf_init(&b, 1 << 26);
    usage_write_metrics(u, &b);
    buf_putc(&b, '\0');
    assert_non_null(strstr(b.data, "\ninferd_usage_rows_dropped_total 2\n"));
    assert_null(strstr(b.data, "one-too-many"));
    buf_free(&b);
    usage_close(u);
}

static void path_in_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static size_t dir_entries(void)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    static char data[1 << 16];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(data, 1, sizeof data - 1, f);
    data[n] = '\0';
    fclose(f);
    return data;
}

static void test_file_round_trip(void **state)
{
    (void)state;
    char path[128];
    path_in_dir(path, sizeof path, "usage.json");
    struct usage_options o = {.path = path};
    struct usage *u;
    struct error err;
    assert_int_equal(usage_open(&o, &u, &err), 0);
    /* Written at open, without rows. */
    assert_string_equal(read_text(path), "{\"format\":\"inferd-usage/1\",\"rows\":[]}\n");
    usage_record(u, "team-a", "kjv", today(), 44, 256);
    usage_record(u, NULL, "kjv", today() - 1, 3, 4);
    usage_close(u);
    assert_int_equal(dir_entries(), 1); /* no usage.json.tmp */
    char want[512];
    char d0[DAY_TEXT_LEN + 1], d1[DAY_TEXT_LEN + 1];
    day_format(today() - 1, d0);
    day_format(today(), d1);
    snprintf(want, sizeof want,
             "{\"format\":\"inferd-usage/1\",\"rows\":["
             "{\"day\":\"%s\",\"tenant\":null,\"model\":\"kjv\",\"requests\":1,"
             "\"prompt_tokens\":3,\"completion_tokens\":4},"
             "{\"day\":\"%s\",\"tenant\":\"team-a\",\"model\":\"kjv\",\"requests\":1,"
             "\"prompt_tokens\":44,\"completion_tokens\":256}]}\n",
             d0, d1);
    assert_string_equal(read_text(path), want);

    /* Loaded again, and added to. */
    assert_int_equal(usage_open(&o, &u, &err), 0);
    usage_record(u, "team-a", "kjv", today(), 1, 1);
    const struct json_value *rows = json_get(query(u, NULL), "rows");
    assert_int_equal(rows->len, 2);
    assert_int_equal(num(&rows->u.items[1], "requests"), 2);
    assert_int_equal(num(&rows->u.items[1], "completion_tokens"), 257);
    /* The totals are this process's only. */
    struct buf b;
    buf_init(&b, 1 << 20);
    usage_write_metrics(u, &b);
    buf_putc(&b, '\0');
    assert_non_null(strstr(b.data, "{tenant=\"team-a\",model=\"kjv\",kind=\"completion\"} 1\n"));
    assert_null(strstr(b.data, "tenant=\"\""));
    buf_free(&b);
    usage_close(u);
    assert_int_equal(dir_entries(), 1);

    /* Rows older than the retention are not loaded. */
    o.retention_days = 1;
    assert_int_equal(usage_open(&o, &u, &err), 0);
    assert_int_equal(json_get(query(u, NULL), "rows")->len, 1);
    usage_close(u);
    unlink(path);
}

static void test_refused_files(void **state)
{
    (void)state;
    char path[128];
    path_in_dir(path, sizeof path, "bad.json");
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"{\"format\": \"inferd-usage/1\", \"rows\": [", "malformed JSON at byte"},
        {"[]", "not a usage file"},
        {"{\"format\": \"inferd-usage/2\", \"rows\": []}", "not a usage file"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": {}}", "\"rows\" must be an array"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": [{\"day\": \"2026-02-30\", \"tenant\": null, "
         "\"model\": \"kjv\", \"requests\": 1, \"prompt_tokens\": 1, \"completion_tokens\": 1}]}",
         "rows[0].day: expected a date YYYY-MM-DD"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": [{\"day\": \"2026-02-03\", \"tenant\": 5, "
         "\"model\": \"kjv\", \"requests\": 1, \"prompt_tokens\": 1, \"completion_tokens\": 1}]}",
         "rows[0].tenant: expected null or a name"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": [{\"day\": \"2026-02-03\", \"tenant\": null, "
         "\"model\": \"\", \"requests\": 1, \"prompt_tokens\": 1, \"completion_tokens\": 1}]}",
         "rows[0].model: expected a name"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": [{\"day\": \"2026-02-03\", \"tenant\": null, "
         "\"model\": \"kjv\", \"requests\": -1, \"prompt_tokens\": 1, \"completion_tokens\": 1}]}",
         "rows[0].requests: expected an integer"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": [{\"day\": \"2026-02-03\", \"tenant\": null, "
         "\"model\": \"kjv\", \"requests\": 1, \"prompt_tokens\": 1}]}",
         "rows[0].completion_tokens: expected an integer"},
        {"{\"format\": \"inferd-usage/1\", \"rows\": [{\"day\": \"2026-02-03\", \"tenant\": null, "
         "\"model\": \"kjv\", \"requests\": 1, \"prompt_tokens\": 1, \"completion_tokens\": 1, "
         "\"cost\": 3}]}",
         "rows[0]: unknown key 'cost'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(path, cases[i].text);
        struct usage_options o = {.path = path};
        struct usage *u = (struct usage *)&o; /* set to NULL on failure */
        struct error err;
        error_clear(&err);
        assert_int_equal(usage_open(&o, &u, &err), -1);
        assert_null(u);
        if (!strstr(err.msg, path) || !strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: %s", i, err.msg);
        assert_string_equal(read_text(path), cases[i].text); /* left as it was */
        assert_int_equal(dir_entries(), 1);
    }
    unlink(path);

    /* A directory that is not there. */
    char missing[160];
    path_in_dir(missing, sizeof missing, "nowhere/usage.json");
    struct usage_options o = {.path = missing};
    struct usage *u;
    struct error err;
    assert_int_equal(usage_open(&o, &u, &err), -1);
    assert_non_null(strstr(err.msg, "nowhere/usage.json.tmp"));
    assert_int_equal(dir_entries(), 0);
}

#define THREADS 8
#define RECORDS 20000

static void *recorder(void *arg)
{
    struct usage *u = arg;
    static const char *const tenants[] = {"a", "b", NULL};
    for (uint32_t i = 0; i < RECORDS; i++)
        usage_record(u, tenants[i % 3], i % 2 ? "kjv" : "other", today(), 1, 2);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    char path[128];
    path_in_dir(path, sizeof path, "threads.json");
    struct usage_options o = {.path = path};
    struct usage *u;
    struct error err;
    assert_int_equal(usage_open(&o, &u, &err), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, recorder, u), 0);
    /* Queries and scrapes meanwhile. */
    for (int k = 0; k < 50; k++) {
        struct buf b;
        buf_init(&b, 1 << 20);
        assert_true(usage_write_json(u, NULL, &b));
        usage_write_metrics(u, &b);
        assert_int_equal(b.err, 0);
        buf_free(&b);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    const struct json_value *v = query(u, NULL);
    assert_int_equal(json_get(v, "rows")->len, 6);
    assert_int_equal(num(json_get(v, "totals"), "requests"), THREADS * RECORDS);
    assert_int_equal(num(json_get(v, "totals"), "completion_tokens"), 2ull * THREADS * RECORDS);
    usage_close(u);
    assert_int_equal(usage_open(&o, &u, &err), 0);
    assert_int_equal(num(json_get(query(u, NULL), "totals"), "requests"), THREADS * RECORDS);
    usage_close(u);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_days),          cmocka_unit_test(test_record_and_query),
        cmocka_unit_test(test_metrics),       cmocka_unit_test(test_retention),
        cmocka_unit_test(test_row_ceiling),   cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_refused_files), cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
