/*
 * stats: per model-version inference statistics, in the shape of Triton's
 * statistics extension (REST GET /v2/models[/{m}[/versions/{v}]]/stats and
 * gRPC ModelStatistics), and the source of the nv_inference_* and
 * inferd_* per-model Prometheus metrics.
 *
 * Recording (hot path; no lock, no allocation in steady state):
 *   The numbers of one model version live in a struct stats_model, created
 *   by stats_model_get() when the version's scheduler starts. It keeps one
 *   slot per recording thread (see metrics.h: metrics_shard_index()); a
 *   thread writes only its own slot, with relaxed atomic loads and stores
 *   on its own cache lines. A thread's slot is allocated the first time it
 *   records for that model version (once; not per request).
 *   - The thread that runs a batch calls stats_record_execution() once per
 *     successful backend run (execution_count, inference batch statistics).
 *   - The front end calls stats_record_completion() on its I/O thread when
 *     an infer request it submitted is answered, and stats_record_refused()
 *     when the request never reached the queue (decode error, queue full).
 *   - For a decoupled model, the serving pipeline (serve/call.c) calls
 *     stats_record_response() on the I/O thread for each response the model
 *     sent, and once more when the request ended without one (an empty
 *     final response, or a cancellation).
 *
 * Lifetime: a struct stats_model is shared by every load of the same
 * (name, version) and counted: each running scheduler of that version holds
 * one reference (stats_model_get / stats_model_put). Counters keep counting
 * across a reload and across an unload followed by a load of the same
 * version (Prometheus counters never go backwards). A version that no load
 * holds is retired: it keeps its last values, but only the
 * STATS_RETIRED_PER_MODEL versions of a model retired most recently are
 * kept; older ones are freed and leave /metrics, so a model that gets new
 * versions for ever does not grow memory or the scrape without bound.
 *
 * Reading (any thread, off the hot path; allocates): stats_version_read()
 * sums the slots into plain structs. Values read while requests are
 * recorded are each exact but not a single atomic cut (a success may be
 * counted before its queue time, for a moment).
 *
 * Layering: recording depends only on base/ and core/infer.h; the
 * scheduler (below obs/) reaches it through its observer (batch_obs.h);
 * stats_report_build() reads a repository snapshot (model/), for the front
 * ends.
 */
#ifndef INFERD_OBS_STATS_H
#define INFERD_OBS_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "core/infer.h"
#include "obs/metrics.h"
#include "obs/route_kind.h"

struct repository;

/* Triton's nv_inference_request_failure reasons. */
enum stats_fail_reason {
    STATS_FAIL_REJECTED, /* queue full, timed out in the queue, model stopping */
    STATS_FAIL_CANCELED, /* the client went away before the answer */
    STATS_FAIL_BACKEND,  /* the backend (or the batch around it) failed */
    STATS_FAIL_OTHER,    /* invalid request and everything else */
    STATS_FAIL_REASONS
};
/* "REJECTED", "CANCELED", "BACKEND", "OTHER". */
const char *stats_fail_reason_name(enum stats_fail_reason r);

/* Why a model version's scheduler refused a request it could have queued
 * (sched.h's enum sched_refusal, as obs/ counts it). */
enum stats_queue_refusal {
    STATS_QUEUE_FULL,     /* 429: the queue was full */
    STATS_QUEUE_DEADLINE, /* 503: the request's own timeout could not be met */
    STATS_QUEUE_BUDGET,   /* 503: the wait would exceed the queue budget */
    STATS_QUEUE_REFUSALS
};
/* "full", "deadline", "budget". */
const char *stats_queue_refusal_name(enum stats_queue_refusal r);

/* Batch sizes above this are counted in every total but get no
 * batch_stats entry (only oversize requests of config-less models reach
 * them). */
#define STATS_MAX_BATCH_SIZE 65536

/* Histogram bounds of the inferd_* per-model histograms (see metrics.h):
 * durations in nanoseconds, exposed in seconds; batch size in samples. */
extern const struct metrics_hist_spec stats_duration_buckets;
extern const struct metrics_hist_spec stats_batch_buckets;

struct stats_model;

/* Unloaded versions of one model whose statistics are kept (see Lifetime). */
#define STATS_RETIRED_PER_MODEL 4

/* ---- recording ---------------------------------------------------------- */

/* The statistics of (name, version), created on first use, with one more
 * reference. Any thread; takes a mutex and may allocate: call when a
 * version starts, never per request. Returns NULL only when out of memory;
 * every stats_record_* function accepts NULL and records nothing. */
struct stats_model *stats_model_get(const char *name, int64_t version);

/* Drops a reference taken by stats_model_get (NULL: nothing). The last one
 * retires the version; nothing may record into s after its last put. */
void stats_model_put(struct stats_model *s);

/* The statistics of (name, version) without taking a reference, or NULL.
 * For a version the caller keeps loaded (a model held from a repository
 * snapshot): its scheduler's reference keeps the result alive. */
struct stats_model *stats_model_find(const char *name, int64_t version);

/* The statistics a running scheduler records into (through the observer
 * batch_obs_attach gave it), where the front end records its requests'
 * outcomes; NULL when it has none. The scheduler's reference keeps them
 * alive while it runs. Any thread; no lock. (Defined in batch_obs.c; the
 * name is kept from when sched.h declared it.) */
struct sched;
struct stats_model *sched_stats(const struct sched *s);

/* What one successful backend run was, besides its durations. */
struct stats_execution {
    uint32_t batch_size; /* samples */
    int64_t elements;    /* input elements, padding included */
    int64_t padding;     /* zeros added by variable-length batching */
    bool inline_run;     /* run by the I/O thread that formed it */
};

/* The thread that ran it, after a successful backend run: the gather
 * (input), execute (infer) and scatter (output) durations. */
void stats_record_execution(struct stats_model *s, const struct stats_execution *e,
                            uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns);

/* I/O thread, when a request that was queued is answered. received_ns is
 * when its HTTP request was complete (clock_now_ns()), now_ns the time of
 * the answer. The outcome is derived from req: rc == 0 → success (queue and
 * compute times from req's timestamps, inference_count += req->batch);
 * client gone (canceled, or the request failed 499: dropped from the queue
 * because its client cancelled) → CANCELED; answered 504 before it ran (expired in
 * the queue) → REJECTED; failed while or after running → BACKEND; else OTHER. */
void stats_record_completion(struct stats_model *s, const struct infer_request *req,
                             bool canceled, uint64_t received_ns, uint64_t now_ns);

/* I/O thread, when a request for this version was refused before it was
 * queued, with the HTTP status it got: 429 and 503 → REJECTED, anything
 * else (invalid input, 413) → OTHER. */
void stats_record_refused(struct stats_model *s, int status, uint64_t received_ns,
                          uint64_t now_ns);

/* The submitting thread, when the version's scheduler refused a request
 * (also counted by stats_record_refused, as REJECTED). */
void stats_record_queue_refusal(struct stats_model *s, enum stats_queue_refusal why);

/* I/O thread, once per infer request that resolved to this version
 * (answered or refused): the rule that chose the version (route_kind.h). */
void stats_record_route(struct stats_model *s, enum route_kind route);

/* Response indexes of a decoupled request beyond this are counted in the
 * request totals but get no response_stats entry. */
#define STATS_MAX_RESPONSES 4096

/* What became of response `index` of a decoupled request (Triton's
 * InferResponseStatistics). */
enum stats_response_outcome {
    STATS_RESPONSE_SUCCESS, /* sent to the client */
    STATS_RESPONSE_FAIL,    /* made by the model but not sent (the request had
                               already failed or ended, or it could not be copied) */
    STATS_RESPONSE_EMPTY,   /* the model ended the request without a final
                               response; the client got an empty final one */
    STATS_RESPONSE_CANCEL,  /* the request was cancelled before this response */
};

/* I/O thread, per response of a decoupled request, in order: index 0 is a
 * request's first response. infer_ns: from the start of the execution (index
 * 0) or the previous response to this one (for CANCEL: to the end of the
 * execution, the time the model took to stop); output_ns: copying the
 * response's outputs out of the backend. Counts as Triton does:
 * SUCCESS/FAIL add to compute_infer (infer_ns), compute_output (output_ns)
 * and success/fail (their sum); EMPTY to compute_infer and empty_response
 * (infer_ns); CANCEL to cancel (infer_ns). */
void stats_record_response(struct stats_model *s, uint32_t index,
                           enum stats_response_outcome outcome, uint64_t infer_ns,
                           uint64_t output_ns);

/* ---- reading ------------------------------------------------------------ */

struct stats_duration {
    uint64_t count;
    uint64_t ns;
};

/* One batch size's executions (Triton's $batch_stat). */
struct stats_batch {
    uint64_t batch_size;
    struct stats_duration compute_input, compute_infer, compute_output;
};

/* One response index of a decoupled model (Triton's $response_stats). */
struct stats_response {
    uint32_t index;
    struct stats_duration compute_infer, compute_output, success, fail, empty_response, cancel;
};

/* Plain snapshot of one model version (Triton's $model_stat, plus the
 * failure reasons and histograms the metrics need). */
struct stats_version {
    char *name;       /* owned (stats_version_free) */
    char version[24]; /* decimal text */
    uint64_t last_inference_ms; /* ms since the epoch; 0 = never */
    uint64_t inference_count;   /* samples of successful requests */
    uint64_t execution_count;   /* successful backend runs */
    uint64_t inline_executions; /* of which run by an I/O thread (run to completion) */
    uint64_t input_elements;    /* their input elements, padding included */
    uint64_t padding_elements;  /* zeros added by variable-length batching */
    uint64_t routed[ROUTE_KINDS]; /* requests by the rule that chose this version */
    uint64_t queue_refusals[STATS_QUEUE_REFUSALS]; /* refused by the scheduler, by reason */
    /* Triton's inference_stats: success (request duration of successful
     * requests), fail (of failed ones), queue, compute_* (successful
     * requests only; a request's compute times are its batch's). */
    struct stats_duration success, fail, queue, compute_input, compute_infer, compute_output;
    struct stats_duration fail_by_reason[STATS_FAIL_REASONS];
    /* Per-request histograms: request duration (every success and failure
     * counted above), queue and compute (exec start → end) durations of
     * successful requests; batch size per execution. */
    struct metrics_hist_snapshot request_hist, queue_hist, compute_hist, batch_hist;
    struct stats_batch *batches; /* ascending batch_size; owned (stats_version_free) */
    uint32_t nbatches;
    /* Indexes with any count, ascending; owned (stats_version_free). Only
     * decoupled models record them. */
    struct stats_response *responses;
    uint32_t nresponses;
    /* Host memory the version took when it loaded (model/memory.h), for
     * Triton's memory_usage; filled by stats_report_build (0 from
     * stats_version_read alone). */
    uint64_t memory_bytes;
};

/* Sums s's slots into *out. Returns 0, or -ENOMEM (out is then empty). */
int stats_version_read(const struct stats_model *s, struct stats_version *out);
void stats_version_free(struct stats_version *v);

/* Every struct stats_model alive (loaded or retired and kept), in creation
 * order, for the metrics exposition. Any thread; fn runs under the table's
 * mutex, so it must not call stats_model_get, _put or _find. */
void stats_foreach(void (*fn)(const struct stats_model *s, void *arg), void *arg);

/* The statistics of the loaded versions in the repository's current
 * snapshot, as Triton's statistics extension selects them:
 *   model == NULL              every loaded version of every ready model,
 *                              models by name, versions ascending;
 *   model, version == NULL     every loaded version of that model;
 *   model, version             that version.
 * model_len: bytes of model (not NUL-terminated). Versions that never
 * recorded anything are reported with zeros.
 * Returns 0 with *out filled (free with stats_report_free), or ST_ERROR with err:
 * 404 for an unknown or unavailable model or a version that is not loaded,
 * 503 when out of memory. */
struct stats_report {
    struct stats_version *versions;
    uint32_t count;
};
int stats_report_build(struct repository *repo, const char *model, size_t model_len,
                       const char *version, struct stats_report *out, struct error *err);
void stats_report_free(struct stats_report *r);

#endif
