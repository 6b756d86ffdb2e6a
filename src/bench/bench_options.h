/*
 * bench_options: the command line of `inferd bench` (the load generator;
 * --generate-floor has its own, gen_floor.h): the usage text, the options
 * and the checks across them. bench_args.h has what every bench program
 * shares (messages, number parsing, getopt).
 *
 * bench_options_parse() fills *o from argv (argv[0] "bench"): the defaults,
 * then each option, then the checks across options (something to load, the
 * modes that exclude each other, --concurrency and --threads within
 * --connections); an unset --concurrency becomes --connections. Returns 0;
 * 2, the usage exit status, after a usage error on stderr; or ST_ERROR
 * after --help printed the usage on stdout (the run is over, status 0).
 *
 * Ownership: *o points into argv (no string is copied), so argv must
 * outlive it. Once parsed it is read-only: the request, every client thread
 * and the report read it.
 *
 * Thread: bench_options_parse() on the main thread only (getopt's globals);
 * the header functions on any.
 */
#ifndef INFERD_BENCH_BENCH_OPTIONS_H
#define INFERD_BENCH_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_PROG "inferd bench" /* how its messages start */
#define BENCH_MAX_HEADERS 64

enum bench_format { BENCH_FORMAT_JSON, BENCH_FORMAT_BINARY };

struct bench_options {
    const char *url;
    const char *model;
    const char *version;
    enum bench_format format;
    bool format_set;
    uint32_t batch;
    bool batch_set;
    const char *path;
    const char *body_file;
    const char *method;
    const char *headers[BENCH_MAX_HEADERS];
    uint32_t nheaders;
    uint32_t connections;
    uint32_t concurrency; /* 0 = connections */
    double rate;          /* > 0: open loop */
    double duration_s;
    double warmup_s;
    uint32_t threads;
    uint32_t timeout_ms;
    bool json;
    /* --openai */
    const char *openai;
    const char *prompt;
    uint32_t max_tokens;
    double temperature;
    bool has_seed;
    uint64_t seed;
    bool gen_set; /* a generation option was given */
};

int bench_options_parse(int argc, char **argv, struct bench_options *o);

/* h, a "Name: value" header, is named name (case-insensitive). */
bool bench_header_named(const char *h, const char *name);
/* One of the --header options is named name. */
bool bench_options_has_header(const struct bench_options *o, const char *name);

#endif
