/*
 * bench_args: what the bench programs (`inferd bench`, `inferd bench
 * --generate-floor`) share to report errors and read their flags. prog is
 * the program's name, the way every message starts ("inferd bench").
 *
 * bench_usage_error() prints "<prog>: <message>" and "try '<prog> --help'"
 * on stderr and returns 2, the usage exit status; bench_try_help() prints
 * only the second line (after getopt's own message) and returns 2.
 * bench_fail() prints "<prog>: <message>" and returns 1, the exit status of
 * a run that could not happen.
 *
 * bench_parse_u32() reads s, the value of --flag, as a whole decimal number
 * from lo to hi (no sign, nothing after it); bench_parse_f64() as a finite
 * number from lo to hi (strtod's forms). Both return 0 with *out set, or the
 * bench_usage_error() of a message naming the flag, the range and s (*out
 * untouched).
 *
 * bench_getopt() reads argv (argv[0] the command) with getopt_long()
 * against table, long options only but -h, --help: it prints usage on
 * stdout and returns -1. Every other option goes to fn with ctx, its getopt
 * value c, its long name and its argument (NULL without one); fn returns 0
 * or a usage error's 2, which stops the reading. An unknown option or a
 * missing argument: getopt's message, bench_try_help(), 2. An operand left
 * after the options: a usage error naming it. Returns 0, 2 or -1. It resets
 * getopt's globals first (optind, opterr), so it is not reentrant.
 *
 * Thread: any but bench_getopt() (getopt's globals); they write only to
 * stdout (usage) and stderr.
 */
#ifndef INFERD_BENCH_BENCH_ARGS_H
#define INFERD_BENCH_BENCH_ARGS_H

#include <getopt.h>
#include <stdint.h>

int bench_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bench_try_help(const char *prog);
int bench_fail(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int bench_parse_u32(const char *prog, const char *flag, const char *s, uint32_t lo, uint32_t hi,
                    uint32_t *out);
int bench_parse_f64(const char *prog, const char *flag, const char *s, double lo, double hi,
                    double *out);

typedef int (*bench_option_fn)(void *ctx, int c, const char *name, const char *arg);

int bench_getopt(const char *prog, int argc, char **argv, const struct option *table,
                 const char *usage, bench_option_fn fn, void *ctx);

#endif
