#include "cli/admin_cmd.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/status.h"
#include "bench/progress.h"
#include "cli/client.h"

#define LOAD_TIMEOUT_S 600

static const char models_usage_text[] =
    "usage: inferd models list [--ready]\n"
    "       inferd models load NAME\n"
    "       inferd models unload NAME\n"
    "       inferd models stats [NAME [--version V]]\n"
    "\n"
    "The model repository of a running server (Triton's repository extension; loads\n"
    "and unloads need --model-control explicit on the server).\n"
    "\n"
    "  list                   every model version of the repository: name, version,\n"
    "                         state and reason (--ready: only ready ones)\n"
    "  load NAME              load (or reload) NAME; waits until the server is done,\n"
    "                         showing the time waited on stderr when it is a terminal\n"
    "                         (the timeout of a load is 600 s unless --timeout says)\n"
    "  unload NAME            unload NAME\n"
    "  stats [NAME]           inference statistics of every model, or of NAME\n"
    "                         (--version V: of that version)\n"
    "  --json-output          print the server's JSON answer instead of a table\n"
    "%s"
    "  -h, --help             this text\n"
    "\n"
    "Environment: INFERD_URL (the default --url); INFERD_API_KEY, when set, is sent as\n"
    "`Authorization: Bearer` (repository calls need a key with the admin scope).\n"
    "\n"
    "Exit status: 0 success; 1 the server refused (its message on stderr); 2 usage\n"
    "error; 3 cannot connect, TLS failure or timeout.\n";

static const char health_usage_text[] =
    "usage: inferd health [--model NAME [--version V]] [options]\n"
    "\n"
    "Asks a running server whether it is live and ready (GET /v2/health/live and\n"
    "/v2/health/ready), and with --model whether that model (version) is ready\n"
    "(GET /v2/models/NAME[/versions/V]/ready). Prints one line per check.\n"
    "\n"
    "  --model NAME           also check this model\n"
    "  --version V            with --model: this version\n"
    "%s"
    "  -h, --help             this text\n"
    "\n"
    "Exit status: 0 live and ready; 4 not live or not ready (a server that is still\n"
    "loading or is draining answers 503); 1 the server refused a check (e.g. 404 for\n"
    "an unknown model, 401 without a valid key); 2 usage error; 3 cannot connect,\n"
    "TLS failure or timeout.\n";

enum { OPT_READY = 256, OPT_VERSION, OPT_MODEL, OPT_JSON_OUTPUT };

static const struct option options_table[] = {
    {"ready", no_argument, NULL, OPT_READY},
    {"version", required_argument, NULL, OPT_VERSION},
    {"model", required_argument, NULL, OPT_MODEL},
    {"json-output", no_argument, NULL, OPT_JSON_OUTPUT},
    CLI_COMMON_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct admin_opts {
    const char *prog;
    const char *usage;
    struct cli_target t;
    bool timeout_given;
    const char *words[3];
    int nwords;
    bool ready, json_output;
    const char *version, *model;
};

/* Returns 0, -1 after --help, or an exit code. */
static int parse_args(int argc, char **argv, struct admin_opts *o)
{
    int rc = cli_target_init(&o->t, o->prog);
    if (rc)
        return rc;
    optind = 1;
    opterr = 0;
    int c, idx;
    while (optind < argc) {
        c = getopt_long(argc, argv, "-:h", options_table, &idx);
        if (c == -1)
            break;
        int common = cli_target_option(&o->t, c, optarg, o->prog);
        if (common < 0)
            return -common;
        if (common) {
            o->timeout_given |= c == CLI_OPT_TIMEOUT;
            continue;
        }
        switch (c) {
        case 1:
            if (o->nwords == 3)
                return cli_usage_error(o->prog, "unexpected argument '%s'", optarg);
            o->words[o->nwords++] = optarg;
            break;
        case 'h':
            printf(o->usage, cli_common_help);
            return ST_ERROR;
        case OPT_READY:
            o->ready = true;
            break;
        case OPT_VERSION:
            o->version = optarg;
            break;
        case OPT_MODEL:
            o->model = optarg;
            break;
        case OPT_JSON_OUTPUT:
            o->json_output = true;
            break;
        case ':':
            return cli_usage_error(o->prog, "%s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(o->prog, "unknown option '%s'", argv[optind - 1]);
        }
    }
    while (optind < argc) {
        if (o->nwords == 3)
            return cli_usage_error(o->prog, "unexpected argument '%s'", argv[optind]);
        o->words[o->nwords++] = argv[optind++];
    }
    return cli_target_finish(&o->t, o->prog);
}

/* One exchange: 0 with r filled, or CLI_EXIT_CONNECT (printed). */
static int call(const struct admin_opts *o, const char *method, const char *path, const char *body,
                struct cli_response *r)
{
    char msg[512];
    int rc = cli_http(&o->t, method, path, body ? "application/json" : NULL, NULL, body,
                      body ? strlen(body) : 0, r, NULL, NULL, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "%s: %s\n", o->prog, msg);
    return rc;
}

static void path_of(struct buf *b, const char *before, const char *model, const char *version,
                    const char *after)
{
    buf_puts(b, before);
    if (model)
        cli_put_segment(b, model);
    if (model && version) {
        buf_puts(b, "/versions/");
        cli_put_segment(b, version);
    }
    buf_puts(b, after);
    buf_putc(b, '\0');
}

/* The body parsed into a, or NULL (printed). */
static struct json_value *parse_body(const struct admin_opts *o, struct arena *a,
                                     const struct cli_response *r)
{
    struct json_value *v;
    if (!r->body.len || json_parse(a, r->body.data, r->body.len, NULL, &v, NULL, NULL) != ST_OK) {
        fprintf(stderr, "%s: the server's answer is not JSON\n", o->prog);
        return NULL;
    }
    return v;
}

static const char *str_of(const struct json_value *v)
{
    return v && v->type == JSON_STRING ? v->u.str : "";
}

static void print_raw(const struct cli_response *r)
{
    fwrite(r->body.data, 1, r->body.len, stdout);
    if (r->body.len == 0 || r->body.data[r->body.len - 1] != '\n')
        putchar('\n');
}

static int models_list(const struct admin_opts *o)
{
    struct cli_response r;
    cli_response_init(&r);
    int rc = call(o, "POST", "/v2/repository/index", o->ready ? "{\"ready\":true}" : "{}", &r);
    struct arena a;
    arena_init(&a, 16 * 1024, (size_t)1 << 30);
    if (rc == 0 && r.status != 200) {
        cli_print_http_error(o->prog, &r);
        rc = CLI_EXIT_FAILED;
    } else if (rc == 0 && o->json_output) {
        print_raw(&r);
    } else if (rc == 0) {
        struct json_value *v = parse_body(o, &a, &r);
        if (!v || v->type != JSON_ARRAY) {
            rc = CLI_EXIT_FAILED;
        } else {
            printf("%-24s %-8s %-12s %s\n", "NAME", "VERSION", "STATE", "REASON");
            for (uint32_t i = 0; i < v->len; i++) {
                const struct json_value *m = &v->u.items[i];
                printf("%-24s %-8s %-12s %s\n", str_of(json_get(m, "name")),
                       str_of(json_get(m, "version")), str_of(json_get(m, "state")),
                       str_of(json_get(m, "reason")));
            }
        }
    }
    arena_free(&a);
    cli_response_free(&r);
    return rc;
}

static void load_tick(void *arg)
{
    progress_update(arg, -1, NULL);
}

static int models_load(const struct admin_opts *o, const char *name, bool load)
{
    struct admin_opts lo = *o;
    if (load && !o->timeout_given)
        lo.t.timeout_ms = LOAD_TIMEOUT_S * 1000;
    struct buf path;
    buf_init(&path, 4096);
    path_of(&path, "/v2/repository/models/", name, NULL, load ? "/load" : "/unload");
    struct cli_response r;
    cli_response_init(&r);
    char label[96], msg[512];
    snprintf(label, sizeof label, "%s %.64s", load ? "loading" : "unloading", name);
    struct progress p;
    progress_start(&p, stderr, label);
    int rc = cli_http(&lo.t, "POST", path.data, "application/json", NULL, "{}", 2, &r,
                      p.on ? load_tick : NULL, &p, msg, sizeof msg);
    progress_end(&p);
    if (rc) {
        fprintf(stderr, "%s: %s\n", o->prog, msg);
    } else if (r.status != 200) {
        cli_print_http_error(o->prog, &r);
        rc = CLI_EXIT_FAILED;
    } else {
        printf("%s %s\n", load ? "loaded" : "unloaded", name);
    }
    cli_response_free(&r);
    buf_free(&path);
    return rc;
}

static double avg_ms(const struct json_value *d)
{
    uint64_t count = 0, ns = 0;
    if (json_num_u64(json_get(d, "count"), &count) != 0 ||
        json_num_u64(json_get(d, "ns"), &ns) != 0 || count == 0)
        return 0;
    return (double)ns / (double)count / 1e6;
}

static uint64_t u64_of(const struct json_value *v)
{
    uint64_t n = 0;
    return json_num_u64(v, &n) == 0 ? n : 0;
}

static int models_stats(const struct admin_opts *o, const char *name)
{
    struct buf path;
    buf_init(&path, 4096);
    path_of(&path, "/v2/models/", name, o->version, name ? "/stats" : "stats");
    struct cli_response r;
    cli_response_init(&r);
    int rc = call(o, "GET", path.data, NULL, &r);
    struct arena a;
    arena_init(&a, 16 * 1024, (size_t)1 << 30);
    if (rc == 0 && r.status != 200) {
        cli_print_http_error(o->prog, &r);
        rc = CLI_EXIT_FAILED;
    } else if (rc == 0 && o->json_output) {
        print_raw(&r);
    } else if (rc == 0) {
        struct json_value *v = parse_body(o, &a, &r);
        const struct json_value *list = json_get(v, "model_stats");
        if (!list || list->type != JSON_ARRAY) {
            rc = CLI_EXIT_FAILED;
            if (v)
                fprintf(stderr, "%s: the answer has no model_stats\n", o->prog);
        } else {
            printf("%-24s %-8s %12s %12s %10s %10s %12s %12s\n", "NAME", "VERSION", "INFERENCES",
                   "EXECUTIONS", "SUCCESS", "FAIL", "AVG_MS", "QUEUE_MS");
            for (uint32_t i = 0; i < list->len; i++) {
                const struct json_value *m = &list->u.items[i];
                const struct json_value *st = json_get(m, "inference_stats");
                printf("%-24s %-8s %12llu %12llu %10llu %10llu %12.3f %12.3f\n",
                       str_of(json_get(m, "name")), str_of(json_get(m, "version")),
                       (unsigned long long)u64_of(json_get(m, "inference_count")),
                       (unsigned long long)u64_of(json_get(m, "execution_count")),
                       (unsigned long long)u64_of(json_get(json_get(st, "success"), "count")),
                       (unsigned long long)u64_of(json_get(json_get(st, "fail"), "count")),
                       avg_ms(json_get(st, "success")), avg_ms(json_get(st, "queue")));
            }
        }
    }
    arena_free(&a);
    cli_response_free(&r);
    buf_free(&path);
    return rc;
}

int models_main(int argc, char **argv)
{
    struct admin_opts o = {.prog = "inferd models", .usage = models_usage_text};
    int rc = parse_args(argc, argv, &o);
    if (rc == -1)
        return 0;
    if (rc)
        return rc;
    if (o.nwords == 0)
        return cli_usage_error(o.prog, "which subcommand? (list, load, unload or stats)");
    const char *verb = o.words[0];
    if (o.model)
        return cli_usage_error(o.prog, "--model is for inferd health; give the model as a word");
    if (strcmp(verb, "list") == 0) {
        if (o.nwords > 1 || o.version)
            return cli_usage_error(o.prog, "list takes no model or version");
        return models_list(&o);
    }
    if (o.ready)
        return cli_usage_error(o.prog, "--ready is for list");
    if (strcmp(verb, "load") == 0 || strcmp(verb, "unload") == 0) {
        if (o.nwords != 2 || !*o.words[1])
            return cli_usage_error(o.prog, "%s: which model? (one name)", verb);
        if (o.version)
            return cli_usage_error(o.prog, "%s loads a model's versions by its version policy",
                                   verb);
        return models_load(&o, o.words[1], strcmp(verb, "load") == 0);
    }
    if (strcmp(verb, "stats") == 0) {
        if (o.nwords > 2)
            return cli_usage_error(o.prog, "stats: one model at most");
        if (o.version && o.nwords < 2)
            return cli_usage_error(o.prog, "--version needs a model");
        return models_stats(&o, o.nwords == 2 ? o.words[1] : NULL);
    }
    return cli_usage_error(o.prog, "unknown subcommand '%s' (list, load, unload or stats)", verb);
}

/* One check: 0 when the answer is 200, CLI_EXIT_NOT_READY for another
 * 5xx, CLI_EXIT_FAILED for a refusal (4xx), CLI_EXIT_CONNECT. */
static int check(const struct admin_opts *o, const char *what, const char *path)
{
    struct cli_response r;
    cli_response_init(&r);
    int rc = call(o, "GET", path, NULL, &r);
    if (rc == 0) {
        if (r.status == 200) {
            printf("%s: yes\n", what);
        } else if (r.status >= 400 && r.status < 500) {
            cli_print_http_error(o->prog, &r);
            rc = CLI_EXIT_FAILED;
        } else {
            printf("%s: no (HTTP %d)\n", what, r.status);
            rc = CLI_EXIT_NOT_READY;
        }
    }
    cli_response_free(&r);
    return rc;
}

int health_main(int argc, char **argv)
{
    struct admin_opts o = {.prog = "inferd health", .usage = health_usage_text};
    int rc = parse_args(argc, argv, &o);
    if (rc == -1)
        return 0;
    if (rc)
        return rc;
    if (o.nwords)
        return cli_usage_error(o.prog, "unexpected argument '%s'", o.words[0]);
    if (o.version && !o.model)
        return cli_usage_error(o.prog, "--version needs --model");
    if (o.ready || o.json_output)
        return cli_usage_error(o.prog, "%s is not an option of health",
                               o.ready ? "--ready" : "--json-output");
    rc = check(&o, "live", "/v2/health/live");
    if (rc == 0 || rc == CLI_EXIT_NOT_READY) {
        int r2 = check(&o, "ready", "/v2/health/ready");
        if (r2 != 0 && rc == 0)
            rc = r2;
    }
    if (o.model && (rc == 0 || rc == CLI_EXIT_NOT_READY)) {
        struct buf path;
        buf_init(&path, 4096);
        path_of(&path, "/v2/models/", o.model, o.version, "/ready");
        char what[300];
        snprintf(what, sizeof what, "model %.200s%s%.32s ready", o.model,
                 o.version ? " version " : "", o.version ? o.version : "");
        int r3 = check(&o, what, path.data);
        if (r3 != 0 && (rc == 0 || r3 != CLI_EXIT_NOT_READY))
            rc = r3;
        buf_free(&path);
    }
    return rc;
}
