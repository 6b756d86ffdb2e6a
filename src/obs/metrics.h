/*
 * metrics: the building blocks of inferd's Prometheus metrics — per-thread
 * shards, counters, fixed-bucket histograms, the server-wide HTTP counters
 * and the text exposition format 0.0.4.
 *
 * Recording never takes a lock and never shares a cache line between
 * threads: every recording thread gets a shard index on its first call to
 * metrics_shard_index() and writes only its own shard, with a relaxed load
 * and store (one writer, so no read-modify-write is needed). A scrape sums
 * the shards. Indexes are recycled when a thread exits (model reloads start
 * new worker threads), so the shards stay bounded; when more than
 * METRICS_MAX_SHARDS threads record at once, the extra ones share the index
 * METRICS_SHARED_SHARD, whose writes are atomic read-modify-writes (slower,
 * still exact).
 *
 * The shard table and the HTTP counters are process-wide because the
 * threads that write them are: there is one set of metrics per process.
 *
 * Depends only on base/.
 */
#ifndef INFERD_OBS_METRICS_H
#define INFERD_OBS_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define METRICS_MAX_SHARDS 128
#define METRICS_SHARED_SHARD METRICS_MAX_SHARDS
#define METRICS_NSHARDS (METRICS_MAX_SHARDS + 1)
#define METRICS_CACHE_LINE 64

/* This thread's shard index in [0, METRICS_NSHARDS). The first call of a
 * thread takes an index (mutex; no allocation after the first thread); it
 * is given back when the thread exits. */
int metrics_shard_index(void);

/* Adds v to a counter of shard `shard` (the caller's own). */
static inline void metrics_add(_Atomic uint64_t *c, uint64_t v, int shard)
{
    if (shard == METRICS_SHARED_SHARD)
        atomic_fetch_add_explicit(c, v, memory_order_relaxed);
    else
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                              memory_order_relaxed);
}

static inline uint64_t metrics_load(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

/* ---- histograms --------------------------------------------------------- */

#define METRICS_HIST_MAX_BOUNDS 20

/* Upper bounds (inclusive, ascending) in the unit values are observed in;
 * the exposition divides bounds and the sum by `divisor` (1e9 shows
 * nanoseconds as seconds; a division keeps 100000 / 1e9 exactly 0.0001).
 * A +Inf bucket is implied. */
struct metrics_hist_spec {
    uint32_t nbounds;
    uint64_t bounds[METRICS_HIST_MAX_BOUNDS];
    double divisor;
};

/* One shard's histogram: per-bucket (not cumulative) counts. */
struct metrics_hist {
    _Atomic uint64_t buckets[METRICS_HIST_MAX_BOUNDS + 1]; /* last = +Inf */
    _Atomic uint64_t count;
    _Atomic uint64_t sum;
};

struct metrics_hist_snapshot {
    uint64_t buckets[METRICS_HIST_MAX_BOUNDS + 1]; /* per bucket, not cumulative */
    uint64_t count;
    uint64_t sum;
};

/* Index of the bucket v falls in (nbounds = +Inf). */
uint32_t metrics_hist_bucket(const struct metrics_hist_spec *spec, uint64_t v);

static inline void metrics_hist_observe(struct metrics_hist *h, const struct metrics_hist_spec *spec,
                                        uint64_t v, int shard)
{
    metrics_add(&h->buckets[metrics_hist_bucket(spec, v)], 1, shard);
    metrics_add(&h->count, 1, shard);
    metrics_add(&h->sum, v, shard);
}

/* Adds shard histogram h into the snapshot. */
void metrics_hist_accumulate(struct metrics_hist_snapshot *out, const struct metrics_hist *h);

/* Value at quantile q (0..1) by linear interpolation inside the bucket, as
 * Prometheus's histogram_quantile(); in observed units. 0 when empty; the
 * largest finite bound when q falls in +Inf. */
double metrics_hist_quantile(const struct metrics_hist_spec *spec,
                             const struct metrics_hist_snapshot *h, double q);

/* ---- server-wide HTTP counters ------------------------------------------ */

/* Endpoint label of a request, from its method and path (query excluded). */
enum metrics_endpoint {
    METRICS_EP_INFER,      /* POST /v2/models/{m}[/versions/{v}]/infer */
    METRICS_EP_HEALTH,     /* /v2/health/... */
    METRICS_EP_MODEL,      /* model metadata, ready, config */
    METRICS_EP_STATS,      /* .../stats */
    METRICS_EP_REPOSITORY, /* /v2/repository/... */
    METRICS_EP_SERVER,     /* /v2 */
    METRICS_EP_DASHBOARD,  /* /dashboard, /dashboard/data */
    METRICS_EP_PLAYGROUND, /* /playground */
    METRICS_EP_METRICS,    /* /metrics on the metrics port */
    METRICS_EP_OTHER,      /* anything else, and requests that did not parse */
    METRICS_ENDPOINTS
};
const char *metrics_endpoint_name(enum metrics_endpoint e);
enum metrics_endpoint metrics_endpoint_of(const char *path, size_t len);

/* Statuses counted one by one; any other code is counted as "other". */
#define METRICS_STATUSES 20
/* Index of an HTTP status in [0, METRICS_STATUSES] (last = other). */
uint32_t metrics_status_index(int status);
/* The code for an index; 0 for "other". */
int metrics_status_code(uint32_t index);

/* Records one response: endpoint (NULL path = the request did not parse),
 * status, request bytes received and response bytes queued. I/O thread. */
void metrics_http_response(const char *path, size_t path_len, int status, uint64_t bytes_in,
                           uint64_t bytes_out);

struct metrics_http_totals {
    uint64_t responses[METRICS_ENDPOINTS][METRICS_STATUSES + 1];
    uint64_t bytes_in, bytes_out;
};
/* Sums every shard. */
void metrics_http_read(struct metrics_http_totals *out);

/* ---- exposition (text format 0.0.4) -------------------------------------- */

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP name help\n# TYPE name type\n" (help escaped as the format says). */
void metrics_write_header(struct buf *b, const char *name, const char *type, const char *help);
/* Writes `name{labels} value\n`. labels: alternating key, value C strings,
 * nlabels pairs; values are escaped. */
void metrics_write_u64(struct buf *b, const char *name, const char *const *labels,
                       uint32_t nlabels, uint64_t value);
void metrics_write_f64(struct buf *b, const char *name, const char *const *labels,
                       uint32_t nlabels, double value);
/* name_bucket{labels,le=...} (cumulative, incl. +Inf), name_sum, name_count. */
void metrics_write_hist(struct buf *b, const char *name, const char *const *labels,
                        uint32_t nlabels, const struct metrics_hist_spec *spec,
                        const struct metrics_hist_snapshot *h);

#endif
