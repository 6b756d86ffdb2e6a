#include "cli/routing_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/status.h"
#include "cli/client.h"
#include "policy/route.h"

#define PROG "inferd routing"
/* Largest table body read from a file or stdin. The server refuses tables
 * over 1 MiB itself (413). */
#define MAX_TABLE_BYTES ((size_t)8 << 20)

static const char routing_usage_text[] =
    "usage: inferd routing get MODEL [--url URL]\n"
    "       inferd routing set MODEL (--file FILE | --json TEXT | - | --canary S:V:W)\n"
    "                                [--url URL]\n"
    "\n"
    "Reads or replaces the routing table of MODEL on a running server\n"
    "(GET/PUT /v2/models/MODEL/routing; the table's fields: docs/traffic.md).\n"
    "The table is printed as the server returns it, one line of JSON.\n"
    "\n"
    "  get                        print MODEL's table ({\"model\":..,\"generation\":0} when\n"
    "                             it has none)\n"
    "  set                        replace MODEL's table by the body given below, print\n"
    "                             the new one ('{}': no rule, as without a table)\n"
    "  --file FILE                set: the table is the JSON text of FILE\n"
    "  --json TEXT                set: the table is TEXT\n"
    "  -                          set: the table is read from standard input\n"
    "  --canary STABLE:VERSION:WEIGHT\n"
    "                             set: read the current table, change only its canary\n"
    "                             (WEIGHT percent of the traffic the earlier rules leave\n"
    "                             goes to VERSION, the rest to STABLE; at most two\n"
    "                             decimals; an existing guard is kept) and write it back\n"
    "                             with the generation read, so that a change made in\n"
    "                             between fails with 409 instead of being overwritten\n"
    "  --url URL                  the server's HTTP address (default: $INFERD_URL, else\n"
    "                             " CLI_DEFAULT_URL ")\n"
    "  -h, --help                 this text\n"
    "\n"
    "Environment: INFERD_API_KEY, when set, is sent as `Authorization: Bearer` (a server\n"
    "with API keys needs one whose tenant has the admin scope: docs/security.md).\n"
    "\n"
    "Exit status: 0 success; 1 the request failed (the server's message on stderr);\n"
    "2 usage error.\n";

enum { OPT_URL = 256, OPT_FILE, OPT_JSON, OPT_CANARY };

static const struct option options_table[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"file", required_argument, NULL, OPT_FILE},
    {"json", required_argument, NULL, OPT_JSON},
    {"canary", required_argument, NULL, OPT_CANARY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct canary_arg {
    int64_t stable, version;
    uint32_t weight_bp;
};

struct routing_opts {
    struct cli_target t; /* --url, $INFERD_URL, $INFERD_API_KEY */
    const char *file;
    const char *json;
    bool stdin_body;
    const char *canary;
    struct canary_arg c;
};

/* A version number: decimal digits. */
static bool parse_version(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* STABLE:VERSION:WEIGHT, WEIGHT a percent with at most two decimals. */
static int parse_canary(const char *s, struct canary_arg *c)
{
    const char *a = strchr(s, ':');
    const char *b = a ? strchr(a + 1, ':') : NULL;
    if (!a || !b || !parse_version(s, (size_t)(a - s), &c->stable) ||
        !parse_version(a + 1, (size_t)(b - a - 1), &c->version))
        return cli_usage_error(
            PROG, "--canary: expected STABLE:VERSION:WEIGHT (e.g. 1:2:5), got '%s'", s);
    char *end;
    errno = 0;
    double w = strtod(b + 1, &end);
    if (b[1] == '\0' || *end || errno || !(w >= 0 && w <= 100))
        return cli_usage_error(
            PROG, "--canary: the weight must be a percent from 0 to 100, got '%s'", b + 1);
    double bp = w * 100.0;
    if (fabs(bp - round(bp)) > 1e-6)
        return cli_usage_error(PROG, "--canary: the weight has at most two decimals, got '%s'",
                               b + 1);
    if (c->stable == c->version)
        return cli_usage_error(PROG, "--canary: VERSION is the same as STABLE (%lld)",
                               (long long)c->stable);
    c->weight_bp = (uint32_t)llround(bp);
    return 0;
}

/* Reads all of f into b. 0, or ST_ERROR with errno. */
static int read_all(FILE *f, struct buf *b)
{
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (buf_append(b, chunk, n) != 0) {
            errno = EFBIG;
            return ST_ERROR;
        }
    }
    return ferror(f) ? ST_ERROR : ST_OK;
}

/* One exchange with the server about MODEL's table: 0 with the answer in
 * *resp, or 1 after printing why it failed. */
static int exchange(const struct routing_opts *o, const char *method, const char *model,
                    const char *body, size_t body_len, struct cli_response *resp)
{
    struct buf path;
    buf_init(&path, 4096);
    buf_puts(&path, "/v2/models/");
    cli_put_segment(&path, model);
    buf_puts(&path, "/routing");
    buf_putc(&path, '\0');
    char err[512];
    int rc = 0;
    if (path.err)
        rc = cli_fail(CLI_EXIT_FAILED, PROG, "the model name is too long");
    else if (cli_http(&o->t, method, path.data, body ? "application/json" : NULL, NULL, body,
                      body_len, resp, NULL, NULL, err, sizeof err) != 0)
        rc = cli_fail(CLI_EXIT_FAILED, PROG, "%s %s: %s", method, o->t.url, err);
    buf_free(&path);
    return rc;
}

/* Prints the answer: the table on stdout (200, returns 0), or the server's
 * error message on stderr (returns 1). */
static int report(const struct cli_response *resp)
{
    const char *text = resp->body.data ? resp->body.data : "";
    size_t len = resp->body.len;
    if (resp->status != 200) {
        cli_print_http_error(PROG, resp);
        return 1;
    }
    fwrite(text, 1, len, stdout);
    if (len == 0 || text[len - 1] != '\n')
        fputc('\n', stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* The body of --canary: the current table with its canary replaced, and
 * the generation it had (the server refuses the PUT if it changed). 0, or
 * 1 after printing why not. */
static int canary_body(const struct routing_opts *o, const char *model, struct buf *out)
{
    struct cli_response cur;
    cli_response_init(&cur);
    int rc = exchange(o, "GET", model, NULL, 0, &cur);
    if (rc == 0 && cur.status != 200)
        rc = report(&cur);
    struct route_table *t = NULL;
    if (rc == 0) {
        struct error err;
        if (route_parse(cur.body.data ? cur.body.data : "", cur.body.len, NULL, &t, &err) != 0)
            rc = cli_fail(CLI_EXIT_FAILED, PROG, "the current table of '%s' does not parse: %s",
                          model, err.msg);
    }
    if (rc == 0) {
        t->canary = true;
        t->stable = o->c.stable;
        t->canary_version = o->c.version;
        t->weight_bp = o->c.weight_bp;
        t->rolled_back = false; /* a new weight resumes a rolled-back canary */
        t->generation = t->expect_generation;
        struct json_writer w;
        json_w_init(&w, out);
        route_write_json(t, model, &w);
        if (out->err)
            rc = cli_fail(CLI_EXIT_FAILED, PROG, "out of memory building the table");
    }
    route_table_unref(t);
    cli_response_free(&cur);
    return rc;
}

int routing_main(int argc, char **argv)
{
    struct routing_opts o = {0};
    int rc = cli_target_init(&o.t, PROG);
    if (rc)
        return rc;
    const char *positional[3];
    int npos = 0;
    /* getopt_long permutes: options may come before or after the
     * positional words; "-" is a positional word for it. */
    optind = 1;
    opterr = 0;
    int c, idx;
    while (optind < argc) {
        c = getopt_long(argc, argv, "-:h", options_table, &idx);
        if (c == -1)
            break;
        switch (c) {
        case 1:
            if (strcmp(optarg, "-") == 0 && npos >= 2) {
                o.stdin_body = true;
            } else if (npos < 2) {
                positional[npos++] = optarg;
            } else {
                return cli_usage_error(PROG, "unexpected argument '%s'", optarg);
            }
            break;
        case 'h':
            fputs(routing_usage_text, stdout);
            return 0;
        case OPT_URL:
            o.t.url = optarg;
            break;
        case OPT_FILE:
            o.file = optarg;
            break;
        case OPT_JSON:
            o.json = optarg;
            break;
        case OPT_CANARY:
            o.canary = optarg;
            if (parse_canary(optarg, &o.c) != 0)
                return 2;
            break;
        case ':':
            return cli_usage_error(PROG, "%s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(PROG, "unknown option '%s'", argv[optind - 1]);
        }
    }
    while (optind < argc) { /* after "--" */
        if (npos < 2)
            positional[npos++] = argv[optind++];
        else
            return cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    }
    if (npos == 0) {
        fputs(routing_usage_text, stderr);
        return 2;
    }
    const char *verb = positional[0];
    bool get = strcmp(verb, "get") == 0, set = strcmp(verb, "set") == 0;
    if (!get && !set)
        return cli_usage_error(PROG, "unknown subcommand '%s' (get or set)", verb);
    if (npos < 2)
        return cli_usage_error(PROG, "%s: which model?", verb);
    const char *model = positional[1];
    if (!*model)
        return cli_usage_error(PROG, "the model name is empty");
    int sources = (o.file != NULL) + (o.json != NULL) + o.stdin_body + (o.canary != NULL);
    if (get && sources)
        return cli_usage_error(PROG, "get takes no table (--file, --json, - or --canary)");
    if (set && sources != 1)
        return cli_usage_error(PROG,
                               "set needs exactly one of --file FILE, --json TEXT, - (stdin) or "
                               "--canary S:V:W");

    rc = cli_target_finish(&o.t, PROG);
    if (rc)
        return rc;

    struct buf body;
    buf_init(&body, MAX_TABLE_BYTES);
    struct cli_response resp;
    cli_response_init(&resp);
    if (get) {
        rc = exchange(&o, "GET", model, NULL, 0, &resp);
    } else {
        if (o.json) {
            buf_append(&body, o.json, strlen(o.json));
        } else if (o.file || o.stdin_body) {
            FILE *f = o.file ? fopen(o.file, "rb") : stdin;
            if (!f || read_all(f, &body) != 0)
                rc = cli_fail(CLI_EXIT_FAILED, PROG, "%s: %s", o.file ? o.file : "standard input",
                              errno == EFBIG ? "larger than 8 MiB" : strerror(errno));
            if (f && f != stdin)
                fclose(f);
        } else {
            rc = canary_body(&o, model, &body);
        }
        if (rc == 0 && body.err)
            rc = cli_fail(CLI_EXIT_FAILED, PROG, "out of memory");
        if (rc == 0)
            rc = exchange(&o, "PUT", model, body.data ? body.data : "", body.len, &resp);
    }
    if (rc == 0)
        rc = report(&resp);
    buf_free(&body);
    cli_response_free(&resp);
    return rc;
}
