/*
 * Unit tests for cli/config_file and cli/serve_options: flag keys, a
 * test-only policy section, precedence over the command line, errors and
 * SIGHUP reloads.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "base/mem.h"
#include "cli/config_file.h"
#include "cli/serve_options.h"

static char dir[64];
static char path[128];

/* ---- a test-only section: {value: N} ------------------------------------- */

struct test_parsed {
    int value; /* -1 when the section is absent */
};

struct test_store {
    int applied; /* apply calls */
    int value;   /* of the last applied */
};

static int parses, frees;

static int section_parse(const struct json_value *v, void **out, struct error *err)
{
    parses++;
    int64_t n = -1;
    if (v) {
        const struct json_value *value = json_get(v, "value");
        if (v->type != JSON_OBJECT || !value || json_num_i64(value, &n) != 0 || n < 0)
            return error_set(err, 400, "test-section.value: expected a number >= 0");
    }
    struct test_parsed *p = mem_alloc(sizeof *p);
    if (!p)
        return error_set(err, 400, "out of memory");
    p->value = (int)n;
    *out = p;
    return 0;
}

static void section_apply(void *store, void *parsed)
{
    struct test_store *s = store;
    s->applied++;
    s->value = ((struct test_parsed *)parsed)->value;
    mem_free(parsed);
}

static void section_free(void *parsed)
{
    frees++;
    mem_free(parsed);
}

static struct test_store store_a, store_b;
static struct config_section sections[2] = {
    {"test-section", section_parse, section_apply, section_free, &store_a},
    {"other-section", section_parse, section_apply, section_free, &store_b},
};

/* ---- helpers --------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_config_XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/inferd.yaml", dir);
    parses = frees = 0;
    memset(&store_a, 0, sizeof store_a);
    memset(&store_b, 0, sizeof store_b);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    log_set_level(LOG_INFO);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static void write_file(const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Loads the file into defaults; returns it (the caller frees it and parsed[]). */
static struct config_file *load_ok(const char *text, struct serve_options *o, void **parsed)
{
    write_file(text);
    serve_options_defaults(o);
    struct config_file *f = NULL;
    struct error err;
    error_clear(&err);
    int rc = config_file_load(path, o, sections, 2, NULL, parsed, &f, &err);
    if (rc != 0)
        print_error("load failed: %s\n", err.msg);
    assert_int_equal(rc, 0);
    return f;
}

/* Loads text, which must fail: returns the message after "PATH: ". */
static const char *load_fail(const char *text)
{
    static struct error err;
    write_file(text);
    struct serve_options o;
    serve_options_defaults(&o);
    void *parsed[2] = {(void *)1, (void *)1};
    struct config_file *f = (struct config_file *)1;
    error_clear(&err);
    assert_int_equal(config_file_load(path, &o, sections, 2, NULL, parsed, &f, &err), -1);
    assert_int_equal(err.status, 400);
    assert_null(parsed[0]);
    assert_null(parsed[1]);
    size_t plen = strlen(path);
    assert_int_equal(strncmp(err.msg, path, plen), 0);
    assert_int_equal(strncmp(err.msg + plen, ": ", 2), 0);
    return err.msg + plen + 2;
}

/* stderr to a file while a function runs, for the log lines. */
static int saved_stderr = -1;
static char log_path[160];

static void capture_start(void)
{
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

static char *capture_end(void)
{
    static char text[8192];
    dup2(saved_stderr, 2);
    close(saved_stderr);
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(log_path);
    return text;
}

/* ---- flag keys ------------------------------------------------------------- */

static void test_every_kind_of_key(void **state)
{
    (void)state;
    struct serve_options o;
    void *parsed[2];
    struct config_file *f = load_ok("# inferd\n"
                                    "model-repository: /srv/models\n"
                                    "model-control-mode: explicit\n"
                                    "load-model: [a, b]\n"
                                    "host: 127.0.0.1\n"
                                    "http-port: 8100\n"
                                    "grpc-port: \"8101\"\n"
                                    "no-metrics: true\n"
                                    "header-timeout-secs: 5\n"
                                    "max-body-bytes: 1048576\n"
                                    "grpc-max-message-bytes: 4096\n"
                                    "log-level: debug\n"
                                    "log-format: json\n"
                                    "trace-rate: 0.5\n"
                                    "access-log-sample: .25\n",
                                    &o, parsed);
    assert_string_equal(o.repo.load.repository, "/srv/models");
    assert_int_equal(o.repo.mode, CONTROL_EXPLICIT);
    assert_int_equal(o.repo.nload_models, 2);
    assert_string_equal(o.load_models[0], "a");
    assert_string_equal(o.load_models[1], "b");
    assert_string_equal(o.http.host, "127.0.0.1");
    assert_int_equal(o.http.port, 8100);
    assert_int_equal(o.http.grpc_port, 8101);
    assert_int_equal(o.metrics_port, -1);
    assert_int_equal(o.http.header_timeout_ms, 5000);
    assert_int_equal(o.http.limits.max_body, 1048576);
    assert_int_equal(o.grpc_max_message_bytes, 4096);
    assert_int_equal(o.log_level, LOG_DEBUG);
    assert_int_equal(o.log_format, LOG_LINE_JSON);
    assert_true(o.trace.rate == 0.5);
    assert_true(o.access_log.sample == 0.25);
    struct error err;
    assert_int_equal(serve_options_check(&o, &err), 0);
    assert_ptr_equal(o.repo.load_models, o.load_models);
    /* Absent sections are parsed as NULL: the module's defaults. */
    assert_int_equal(parses, 2);
    assert_int_equal(((struct test_parsed *)parsed[0])->value, -1);
    config_sections_discard(sections, 2, parsed);
    assert_int_equal(frees, 2);
    config_file_free(f);
}

static void test_scalars_for_lists_and_switches(void **state)
{
    (void)state;
    struct serve_options o;
    void *parsed[2];
    struct config_file *f = load_ok("load-model: only\nno-metrics: false\n", &o, parsed);
    assert_int_equal(o.repo.nload_models, 1);
    assert_string_equal(o.load_models[0], "only");
    assert_int_equal(o.metrics_port, 8002); /* false = not given */
    config_sections_discard(sections, 2, parsed);
    config_file_free(f);
    /* An empty file and an empty sequence are nothing at all. */
    f = load_ok("", &o, parsed);
    assert_int_equal(o.http.port, 8000);
    config_sections_discard(sections, 2, parsed);
    config_file_free(f);
    f = load_ok("load-model: []\n", &o, parsed);
    assert_int_equal(o.repo.nload_models, 0);
    config_sections_discard(sections, 2, parsed);
    config_file_free(f);
}

static void test_key_errors(void **state)
{
    (void)state;
    assert_string_equal(load_fail("htp-port: 8000\n"), "unknown key 'htp-port'");
    assert_string_equal(load_fail("config: other.yaml\n"), "unknown key 'config'");
    assert_string_equal(load_fail("help: true\n"), "unknown key 'help'");
    assert_string_equal(load_fail("--http-port: 1\n"), "unknown key '--http-port'");
    assert_string_equal(load_fail("http-port: 70000\n"),
                        "http-port: expected a number from 0 to 65535, got '70000'");
    assert_string_equal(load_fail("http-port: -1\n"),
                        "http-port: expected a number from 0 to 65535, got '-1'");
    assert_string_equal(load_fail("http-port: 80.5\n"),
                        "http-port: expected a number from 0 to 65535, got '80.5'");
    assert_string_equal(load_fail("http-port: [1, 2]\n"),
                        "http-port: expected one value, not a sequence");
    assert_string_equal(load_fail("http-port:\n"), "http-port: needs a value");
    assert_string_equal(load_fail("host: true\n"), "host: expected a string or a number");
    assert_string_equal(load_fail("host: {a: 1}\n"), "host: expected a string or a number");
    assert_string_equal(load_fail("host: \"a\\0b\"\n"), "host: contains a NUL character");
    assert_string_equal(load_fail("no-metrics: yes\n"), "no-metrics: expected true or false");
    assert_string_equal(load_fail("no-metrics: 1\n"), "no-metrics: expected true or false");
    assert_string_equal(load_fail("load-model: [a, [b]]\n"),
                        "load-model[1]: expected a string or a number");
    assert_string_equal(load_fail("log-level: loud\n"),
                        "log-level: expected error, warn, info or debug");
    assert_string_equal(load_fail("model-control-mode: never\n"),
                        "model-control-mode: expected none, poll or explicit");
    assert_string_equal(load_fail("trace-rate: 2\n"),
                        "trace-rate: expected a number from 0 to 1, got '2'");
    assert_string_equal(load_fail("- http-port\n"),
                        "expected a mapping of settings (key: value) at the top level");
    assert_string_equal(load_fail("8000\n"),
                        "expected a mapping of settings (key: value) at the top level");
    assert_string_equal(load_fail("http-port: 1\nhttp-port: 2\n"),
                        "line 2, column 1: duplicate mapping key (first at line 1)");
    /* 257 models are one too many. */
    char text[4096] = "load-model: [";
    for (int i = 0; i <= MAX_LOAD_MODELS; i++)
        strcat(text, i ? ",m" : "m");
    strcat(text, "]\n");
    assert_string_equal(load_fail(text), "load-model: at most 256 models");
}

/* The file and the command line check values with the same function. */
static void test_same_rules_as_flags(void **state)
{
    (void)state;
    const struct {
        int id;
        const char *value;
    } cases[] = {
        {SERVE_OPT_PORT, "65536"},           {SERVE_OPT_IO_THREADS, "0"},
        {SERVE_OPT_MAX_HEADERS, "abc"},      {SERVE_OPT_LOG_FORMAT, "xml"},
        {SERVE_OPT_ACCESS_LOG_SAMPLE, "-1"}, {SERVE_OPT_SSE_KEEPALIVE, "99"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct serve_options o;
        serve_options_defaults(&o);
        struct error err;
        error_clear(&err);
        assert_int_equal(serve_option_apply(&o, cases[i].id, cases[i].value, &err), -1);
        char text[128], expected[ERROR_MSG_MAX + 64];
        snprintf(text, sizeof text, "%s: %s\n", serve_option_name(cases[i].id), cases[i].value);
        snprintf(expected, sizeof expected, "%s: %s", serve_option_name(cases[i].id), err.msg);
        assert_string_equal(load_fail(text), expected);
    }
}

static void test_file_errors(void **state)
{
    (void)state;
    struct serve_options o;
    serve_options_defaults(&o);
    void *parsed[2];
    struct config_file *f = NULL;
    struct error err;
    char missing[160];
    snprintf(missing, sizeof missing, "%s/missing.yaml", dir);
    assert_int_equal(config_file_load(missing, &o, sections, 2, NULL, parsed, &f, &err), -1);
    char expected[256];
    snprintf(expected, sizeof expected, "%s: cannot open: No such file or directory", missing);
    assert_string_equal(err.msg, expected);
    assert_int_equal(config_file_load(dir, &o, sections, 2, NULL, parsed, &f, &err), -1);
    snprintf(expected, sizeof expected, "%s: not a regular file", dir);
    assert_string_equal(err.msg, expected);
    /* Over 1 MiB. */
    char *big = malloc(CONFIG_MAX_FILE_BYTES + 2);
    assert_non_null(big);
    memset(big, '#', CONFIG_MAX_FILE_BYTES + 1);
    big[CONFIG_MAX_FILE_BYTES + 1] = '\0';
    assert_string_equal(load_fail(big), "larger than 1048576 bytes");
    free(big);
}

/* ---- sections ---------------------------------------------------------------- */

static void test_sections_parsed_then_applied(void **state)
{
    (void)state;
    struct serve_options o;
    void *parsed[2];
    struct config_file *f =
        load_ok("test-section: {value: 7}\nhttp-port: 1\nother-section:\n  value: 9\n", &o, parsed);
    assert_int_equal(((struct test_parsed *)parsed[0])->value, 7);
    assert_int_equal(((struct test_parsed *)parsed[1])->value, 9);
    assert_int_equal(store_a.applied, 0); /* loading applies nothing */
    config_sections_apply(sections, 2, parsed);
    assert_null(parsed[0]);
    assert_int_equal(store_a.applied, 1);
    assert_int_equal(store_a.value, 7);
    assert_int_equal(store_b.value, 9);
    assert_int_equal(frees, 0);
    config_file_free(f);
}

static void test_bad_section_keeps_nothing(void **state)
{
    (void)state;
    /* The first section parses, the second does not: the first is freed. */
    assert_string_equal(load_fail("test-section: {value: 1}\nother-section: {value: -3}\n"),
                        "test-section.value: expected a number >= 0");
    assert_int_equal(parses, 2);
    assert_int_equal(frees, 1);
    assert_int_equal(store_a.applied + store_b.applied, 0);
    /* A bad flag key: no section is parsed at all. */
    parses = frees = 0;
    assert_string_equal(load_fail("test-section: {value: 1}\nhttp-port: x\n"),
                        "http-port: expected a number from 0 to 65535, got 'x'");
    assert_int_equal(parses, 0);
}

/* Without a file every section gets its defaults (parsed as absent). */
static void test_sections_without_a_file(void **state)
{
    (void)state;
    void *parsed[2];
    struct error err;
    assert_int_equal(config_sections_defaults(sections, 2, parsed, &err), 0);
    assert_int_equal(parses, 2);
    config_sections_apply(sections, 2, parsed);
    assert_int_equal(store_a.applied, 1);
    assert_int_equal(store_a.value, -1);
    assert_int_equal(store_b.value, -1);
    assert_int_equal(frees, 0);
}

/* ---- the command line on top ----------------------------------------------- */

static void test_command_line_overrides(void **state)
{
    (void)state;
    write_file("http-port: 8100\ngrpc-port: 8101\nmodel-control-mode: explicit\n"
               "load-model: [a, b]\n");
    char a0[] = "serve", a1[] = "--config", a3[] = "--http-port", a4[] = "8200",
         a5[] = "--load-model", a6[] = "c";
    char *argv[] = {a0, a1, path, a3, a4, a5, a6, NULL};
    struct serve_cmdline cl;
    serve_cmdline_parse(7, argv, &cl);
    assert_string_equal(cl.config_path, path);
    assert_false(cl.check_only);
    assert_true(serve_cmdline_has(&cl, SERVE_OPT_PORT));
    assert_false(serve_cmdline_has(&cl, SERVE_OPT_GRPC_PORT));
    struct serve_options o;
    serve_options_defaults(&o);
    void *parsed[2];
    struct config_file *f = NULL;
    struct error err;
    assert_int_equal(config_file_load(path, &o, sections, 2, NULL, parsed, &f, &err), 0);
    serve_cmdline_apply(&cl, &o);
    assert_int_equal(serve_options_check(&o, &err), 0);
    assert_int_equal(o.http.port, 8200);      /* the flag */
    assert_int_equal(o.http.grpc_port, 8101); /* the file */
    assert_int_equal(o.repo.mode, CONTROL_EXPLICIT);
    /* --load-model on the command line replaces the file's list. */
    assert_int_equal(o.repo.nload_models, 1);
    assert_string_equal(o.load_models[0], "c");
    config_sections_discard(sections, 2, parsed);
    config_file_free(f);
    serve_cmdline_free(&cl);
}

static void test_rules_between_flags(void **state)
{
    (void)state;
    struct serve_options o;
    void *parsed[2];
    struct error err;
    struct config_file *f = load_ok("load-model: a\n", &o, parsed);
    assert_int_equal(serve_options_check(&o, &err), -1);
    assert_string_equal(err.msg, "--load-model needs --model-control-mode explicit");
    config_sections_discard(sections, 2, parsed);
    config_file_free(f);
    f = load_ok("tls-cert: c.pem\n", &o, parsed);
    assert_int_equal(serve_options_check(&o, &err), -1);
    assert_string_equal(err.msg, "--tls-cert and --tls-key go together");
    config_sections_discard(sections, 2, parsed);
    config_file_free(f);
}

/* ---- SIGHUP ---------------------------------------------------------------------- */

struct running {
    struct serve_cmdline cl;
    struct serve_options o;
    struct config_file *file;
    struct config_reloader r;
};

/* Starts as serve() does, with the given extra flags. */
static void start(struct running *s, const char *text, int argc, char **argv)
{
    write_file(text);
    serve_cmdline_parse(argc, argv, &s->cl);
    void *parsed[2];
    s->file = load_ok(text, &s->o, parsed);
    serve_cmdline_apply(&s->cl, &s->o);
    config_sections_apply(sections, 2, parsed);
    s->r = (struct config_reloader){
        .path = path, .cmdline = &s->cl, .sections = sections, .nsections = 2, .running = s->file};
    serve_runtime_of(&s->o, &s->r.runtime);
}

static void stop(struct running *s)
{
    config_file_free(s->file);
    serve_cmdline_free(&s->cl);
}

static char *reload(struct running *s, const char *text)
{
    write_file(text);
    capture_start();
    config_reload(&s->r);
    return capture_end();
}

static void test_reload(void **state)
{
    (void)state;
    char a0[] = "serve", a1[] = "--grpc-port", a2[] = "9001";
    char *argv[] = {a0, a1, a2, NULL};
    struct running s;
    start(&s, "http-port: 8100\ngrpc-port: 8101\nlog-level: info\ntest-section: {value: 1}\n", 3,
          argv);
    assert_int_equal(store_a.value, 1);
    assert_false(log_enabled(LOG_DEBUG));

    /* Reloadable settings apply; a port logs that it needs a restart; the
     * gRPC port is the command line's, so its change in the file is moot. */
    char *log = reload(&s, "http-port: 8200\ngrpc-port: 8102\nlog-level: debug\n"
                           "test-section: {value: 2}\n");
    assert_non_null(strstr(log, "config: http-port changed, restart to apply"));
    assert_null(strstr(log, "grpc-port"));
    assert_non_null(strstr(log, "config: log-level is now debug"));
    assert_non_null(strstr(log, "config: reloaded "));
    assert_true(log_enabled(LOG_DEBUG));
    assert_int_equal(store_a.value, 2);
    assert_int_equal(store_a.applied, 2);
    assert_int_equal(s.r.runtime.log_level, LOG_DEBUG);
    /* Running settings are kept. */
    assert_int_equal(s.o.http.port, 8100);

    /* A broken file changes nothing and says why. */
    log = reload(&s, "http-port: 8100\nlog-level: error\ntest-section: {value: -1}\n");
    char expected[512];
    snprintf(expected, sizeof expected,
             "config: reload of %s failed, keeping the current configuration: %s: "
             "test-section.value: expected a number >= 0",
             path, path);
    assert_non_null(strstr(log, expected));
    assert_null(strstr(log, "reloaded"));
    assert_true(log_enabled(LOG_DEBUG));
    assert_int_equal(store_a.applied, 2);
    log = reload(&s, "http-port: [\n");
    assert_non_null(strstr(log, "keeping the current configuration"));
    /* A file that breaks a rule between flags too. */
    log = reload(&s, "load-model: a\n");
    assert_non_null(strstr(log, "--load-model needs --model-control-mode explicit"));

    /* Removing a key is a change (back to the default); equal spellings are not. */
    log = reload(&s, "http-port: \"8100\"\nlog-level: debug\n");
    assert_null(strstr(log, "restart to apply"));
    assert_int_equal(store_a.value, -1); /* the section is gone: its defaults */
    log = reload(&s, "log-level: debug\nno-metrics: false\n");
    assert_non_null(strstr(log, "config: http-port changed, restart to apply"));
    assert_null(strstr(log, "no-metrics"));
    log = reload(&s, "http-port: 8100\nlog-level: debug\nno-metrics: true\n");
    assert_non_null(strstr(log, "config: no-metrics changed, restart to apply"));
    stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_every_kind_of_key),
        TEST(test_scalars_for_lists_and_switches),
        TEST(test_key_errors),
        TEST(test_same_rules_as_flags),
        TEST(test_file_errors),
        TEST(test_sections_parsed_then_applied),
        TEST(test_bad_section_keeps_nothing),
        TEST(test_sections_without_a_file),
        TEST(test_command_line_overrides),
        TEST(test_rules_between_flags),
        TEST(test_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
