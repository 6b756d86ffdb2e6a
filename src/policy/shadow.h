/*
 * shadow: the copy of a primary request sent to a shadow version, and the
 * comparison of the two answers (docs/traffic.md, "Shadow traffic").
 *
 * A shadow copy never touches the primary's answer: its inputs are copied
 * out of the primary's request, it runs as background work of the shadow
 * version's scheduler (behind every primary request, never batched with
 * them, started only while none waits, on the pool of lowest CPU priority;
 * dropped when that queue is long or after SHADOW_TIMEOUT_US waiting; the
 * backend sees it flagged as shadow work) and it is never counted as primary traffic (no infer statistics,
 * no access log line). When both answers are in — the primary's outputs
 * are copied when its call ends — the outputs they share are compared
 * (diff.h) on whichever thread came last, and recorded per
 * (model, version, shadow model, shadow version) and output:
 *
 *   inferd_shadow_requests_total       compared pairs
 *   inferd_shadow_dropped_total        copies that could not be compared,
 *                                      by reason
 *   inferd_shadow_mismatch_total       per output: pairs that differ
 *                                      (floats: max |a-b| above the
 *                                      tolerance; others: any element)
 *   inferd_shadow_max_abs_difference   per output (floats): histogram of
 *                                      each pair's max |a-b|
 *   inferd_shadow_argmax_agreement_ratio, _argmax_rows_total,
 *   _argmax_agreements_total           per output (score vectors)
 *   inferd_shadow_exact_match_ratio, _elements_total,
 *   _equal_elements_total              per output, element-wise
 *
 * One in `log_every` mismatching pairs is logged (info): request id, both
 * versions, and the worst element of each output that differs.
 */
#ifndef INFERD_POLICY_SHADOW_H
#define INFERD_POLICY_SHADOW_H

#include <stdbool.h>

#include "base/buf.h"
#include "base/json.h"
#include "model/model.h"
#include "policy/route.h"
#include "serve/call.h"

/* A shadow copy waits at most this long in the shadow version's queue. */
#define SHADOW_TIMEOUT_US 1000000u

/* The shadow statistics of one primary model (reference counted: the
 * routing store holds one, every shadow copy in flight another). */
struct shadow_stats;
struct shadow_stats *shadow_stats_new(const char *model);
void shadow_stats_unref(struct shadow_stats *s);

struct shadow_job;

/* Sends a copy of call's decoded request to `target` (a reference the job
 * takes over, released in every case). NULL when no copy went out (the
 * reason is counted). Loop thread of the call. */
struct shadow_job *shadow_start(struct shadow_stats *s, const struct route_table *t,
                                struct model *target, const struct infer_call *call);
/* The primary call ended (its done hook): its outputs are copied, or its
 * failure noted; the job is the caller's no longer. */
void shadow_primary_done(struct shadow_job *job, const struct infer_call *call);

/* Prometheus text for every stats object of `all` (headers once). */
void shadow_write_metrics(struct shadow_stats *const *all, uint32_t n, struct buf *b);
/* {"compared": n, "dropped": n, "mismatches": n, "argmax_agreement": r,
 *  "max_abs_difference": x} summed over s's series (dashboard). */
void shadow_write_summary(const struct shadow_stats *s, struct json_writer *w);

#endif
