#include "bench/bench_args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"

/* "<prog>: <message>\n" on stderr. */
__attribute__((format(printf, 2, 0))) static void say(const char *prog, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int bench_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(prog, fmt, ap);
    va_end(ap);
    return bench_try_help(prog);
}

int bench_try_help(const char *prog)
{
    fprintf(stderr, "try '%s --help'\n", prog);
    return 2;
}

int bench_fail(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(prog, fmt, ap);
    va_end(ap);
    return 1;
}

int bench_parse_u32(const char *prog, const char *flag, const char *s, uint32_t lo, uint32_t hi,
                    uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
        return bench_usage_error(prog, "--%s: expected a whole number from %u to %u, got '%s'",
                                 flag, lo, hi, s);
    *out = (uint32_t)v;
    return 0;
}

int bench_parse_f64(const char *prog, const char *flag, const char *s, double lo, double hi,
                    double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return bench_usage_error(prog, "--%s: expected a number from %g to %g, got '%s'", flag, lo,
                                 hi, s);
    *out = v;
    return 0;
}

int bench_getopt(const char *prog, int argc, char **argv, const struct option *table,
                 const char *usage, bench_option_fn fn, void *ctx)
{
    int c, idx, rc = 0;
    optind = 1;
    opterr = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "h", table, &idx)) != -1) {
        switch (c) {
        case 'h':
            fputs(usage, stdout);
            return ST_ERROR;
        case '?':
            return bench_try_help(prog);
        default:
            rc = fn(ctx, c, table[idx].name, optarg);
        }
    }
    if (rc)
        return rc;
    if (optind < argc)
        return bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    return 0;
}
