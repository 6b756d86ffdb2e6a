/*
 * usage: metering of generative models' tokens by tenant, model and UTC
 * day (docs/generative.md, "Usage metering"), for Prometheus, for GET
 * /v2/usage, and kept across restarts in a small file.
 *
 * A row is (day, tenant, model): requests, prompt_tokens and
 * completion_tokens. usage_record() adds one settled call to its row
 * (tokenquota.h's done hook: every call of a generative model, admitted
 * or not, with the tokens the engine really used). Calls without a
 * tenant (no API keys configured) are metered under tenant NULL (JSON
 * null, Prometheus tenant=""). At most USAGE_MAX_ROWS rows: rows of days
 * older than the retention (--usage-retention-days) are dropped at the
 * day's first record; past the ceiling a new row is not kept (counted in
 * inferd_usage_rows_dropped_total, logged once).
 *
 * Persistence (--usage-file FILE; none: in memory only). usage_open()
 * loads the file if it exists (a file that does not parse is an error:
 * the server does not start, rather than overwrite it); a background
 * thread writes every row to FILE.tmp, fsyncs it, renames it over FILE
 * and fsyncs the directory, at most every USAGE_FLUSH_MS when something
 * changed, and once more in usage_close(). A crash loses at most the
 * last USAGE_FLUSH_MS of metering, never the file. Format:
 *   {"format": "inferd-usage/1", "rows": [{"day": "2026-12-02",
 *    "tenant": "team-a" | null, "model": "kjv", "requests": 3,
 *    "prompt_tokens": 120, "completion_tokens": 480}, ...]}
 *
 * Threads: usage_record, the metrics and the query on any thread (one
 * mutex, held for a table lookup or a copy); open and close on the main
 * thread.
 */
#ifndef INFERD_OBS_USAGE_H
#define INFERD_OBS_USAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"

#define USAGE_MAX_ROWS 100000u
#define USAGE_FLUSH_MS 5000u
#define USAGE_DEFAULT_RETENTION_DAYS 400u
#define USAGE_NAME_MAX 256 /* tenant and model names, NUL included */

struct usage;

struct usage_options {
    const char *path;        /* NULL: not persisted */
    uint32_t retention_days; /* 0: USAGE_DEFAULT_RETENTION_DAYS */
};

/* 0 and *out, or ST_ERROR with err naming the file (it exists but cannot be
 * read or parsed, or its directory is not writable). Starts the writer
 * thread when o->path is set. */
int usage_open(const struct usage_options *o, struct usage **out, struct error *err);
/* Stops the writer after a last write; NULL is a no-op. After every I/O
 * thread stopped. */
void usage_close(struct usage *u);

/* One settled call of tenant (NULL: none) on model, on UTC day `day`
 * (seconds since the epoch / 86400). */
void usage_record(struct usage *u, const char *tenant, const char *model, uint64_t day,
                  uint32_t prompt_tokens, uint32_t completion_tokens);

/* The filter of a query; NULL / 0 fields: no filter. Days inclusive. */
struct usage_query {
    const char *tenant;
    const char *model;
    uint64_t from_day, to_day; /* 0: unbounded */
};
/* The JSON body of GET /v2/usage:
 *   {"rows": [{"day", "tenant", "model", "requests", "prompt_tokens",
 *    "completion_tokens", "total_tokens"}, ...],   sorted by day, tenant, model
 *    "totals": {"requests", "prompt_tokens", "completion_tokens", "total_tokens"}}
 * Returns false when out of memory. */
bool usage_write_json(struct usage *u, const struct usage_query *q, struct buf *out);

/* Prometheus text: inferd_usage_requests_total{tenant, model} and
 * inferd_usage_tokens_total{tenant, model, kind="prompt"|"completion"}
 * (since the server started, all days), inferd_usage_rows_dropped_total
 * (docs/metrics.md). */
void usage_write_metrics(struct usage *u, struct buf *out);

#endif
