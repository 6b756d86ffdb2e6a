/*
 * bench: `inferd bench`, an HTTP/1.1 load generator built into the binary,
 * aimed at KServe v2 servers (it builds infer requests from a model's
 * metadata) and at arbitrary endpoints (raw mode: a fixed method, path and
 * body).
 *
 * Structure: the request is built once (head and body in one contiguous
 * buffer shared read-only by all threads). Each client thread owns an event
 * loop (net/loop.h), its share of the connections and a timerfd; requests
 * are sent with one send() and responses parsed incrementally in a
 * per-connection receive buffer (bench/http_client.h) without copying
 * bodies. Latencies go into a per-thread histogram (bench/hist.h) that is
 * merged at the end. Nothing is allocated per request.
 *
 * Two load models:
 *   closed loop (--concurrency N): N requests in flight; a completed request
 *     is immediately followed by the next one. Latency runs from the moment
 *     the request is handed to a connection.
 *   open loop (--rate R): request i is due at start + i/R whatever the
 *     server does; latency runs from that scheduled time, so time spent
 *     waiting for a free connection counts (no coordinated omission).
 *
 * Lifecycle of a run: connect every connection (not measured) → warm-up
 * (requests sent, not recorded) → measured window of --duration seconds →
 * drain (no new requests; wait for the measured ones still in flight, each
 * bounded by --timeout-ms) → report. A request is measured when its start
 * (closed loop: hand-off; open loop: scheduled time) falls in the window.
 *
 * Files: bench.c runs it (bench_main: the options, the request, the client
 * threads, the report); bench_options.c reads the command line,
 * bench_request.c builds what is sent, loadgen.c is the client threads'
 * engine, bench_report.c prints the report.
 */
#ifndef INFERD_BENCH_BENCH_H
#define INFERD_BENCH_BENCH_H

/* Entry point of `inferd bench`: argv[0] is "bench". Returns the process
 * exit status: 0 the run happened (whatever the HTTP statuses), 1 no
 * connection could be made or the model metadata could not be fetched, 2
 * usage error. Prints the report on stdout, diagnostics on stderr. */
int bench_main(int argc, char **argv);

#endif
