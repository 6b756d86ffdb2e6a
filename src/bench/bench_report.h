/*
 * bench_report: the report of `inferd bench` on stdout, once the run is
 * over: the text report, or with --json one JSON object (docs/bench.md
 * names its keys). Both give the measured requests and their rate, the
 * latency percentiles of every response and of the admitted (2xx) and the
 * refused (429, 503) ones apart, statuses, errors, bytes, reconnects, with
 * --openai what the streams measured (gen_stream.h), and the run's
 * configuration (JSON: "config").
 *
 * Latencies are printed in µs with one decimal; rates are per second of
 * the measured window (--duration).
 *
 * Ownership: nothing is kept; the arguments are only read.
 * Errors: none reported; a JSON report larger than 1 MiB is not printed.
 * Thread: the main thread, after the client threads are joined.
 */
#ifndef INFERD_BENCH_BENCH_REPORT_H
#define INFERD_BENCH_BENCH_REPORT_H

#include <stddef.h>

#include "bench/bench_options.h"
#include "bench/loadgen.h"

/* What was sent, as the report states it. */
struct report_info {
    const char *authority;
    const char *method;
    const char *target;
    size_t request_bytes;
    size_t body_bytes;
};

void bench_report_json(const struct bench_options *o, const struct report_info *ri,
                       const struct bench_stats *st);
void bench_report_text(const struct bench_options *o, const struct report_info *ri,
                       const struct bench_stats *st);

#endif
