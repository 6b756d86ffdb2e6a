/*
 * limiter: adaptive concurrency per model version (docs/limits.md,
 * "Adaptive concurrency"): the configuration section `concurrency`, the
 * process-wide store of the versions' limiters (gradient.h) and the
 * serving-pipeline stage that applies them.
 *
 * Section (a list; every key but `model` optional):
 *
 *   concurrency:
 *     - model: digits             # required
 *       version: "1"              # absent: each version its own limiter
 *       min: 3                    # floor, 1 .. 100000 (default 3)
 *       max: 1000                 # ceiling, min .. 100000 (default 1000)
 *       initial: 16               # after the first measurement (default 16, within min..max)
 *       sample-window-ms: 100     # 1 .. 60000
 *       min-rtt-interval-secs: 30 # 1 .. 86400
 *       min-rtt-samples: 50       # 1 .. 128
 *       tolerance: 0.5            # 0 .. 10
 *       low-priority-share: 0.9   # 0.01 .. 1
 *       queue: true               # false: over the limit is refused at once
 *
 * An entry with a version applies to that version, before an entry of the
 * same model without one; a (model, version) pair may appear once.
 *
 * Stage (serve/call.h), cfg = the struct limiter, after decode (it needs
 * the call's `priority` and `timeout` parameters, which the request body
 * carries) and before shadow: a call of a limited version is admitted, or
 * waits (STAGE_DEFER) when the limiter queues and its deadline
 * (call->deadline_ns, or its `timeout` from its arrival, the earlier)
 * leaves more than the sampled latency, or is refused with 503 and
 * Retry-After = the sampled latency in seconds rounded up (at least 1):
 * "concurrency limit of digits version 1 reached (2 in flight)". Its done
 * hook ends the admitted call's slot: a successful call's latency is a
 * sample. A waiter whose client left is answered 499.
 *
 * State. A version's limiter is created on its first call. limiter_apply()
 * keeps the limiters whose entry is unchanged (limit, measurements,
 * counters carry over); a changed entry starts a new limiter, and calls
 * admitted by the old one finish on it.
 */
#ifndef INFERD_POLICY_LIMITER_H
#define INFERD_POLICY_LIMITER_H

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "serve/call.h"

#define LIMITER_MAX_ENTRIES 256
#define LIMITER_MAX_STATES 4096 /* versions with a limiter; beyond: not limited (logged) */

struct limiter_config;
struct limiter;

/* section: the value of `concurrency`, or NULL or null (nothing limited). 0 and
 * *out (limiter_config_free), or ST_ERROR with err (400 naming the path). */
int limiter_config_parse(const struct json_value *section, struct limiter_config **out,
                         struct error *err);
void limiter_config_free(struct limiter_config *c);

struct limiter *limiter_new(void);
void limiter_free(struct limiter *l); /* after every I/O thread stopped */
/* Publishes c (owned from now on); any thread. */
void limiter_apply(struct limiter *l, struct limiter_config *c);

/* inferd_concurrency_limit, _in_flight, _waiting, _min_latency_us,
 * _sampled_latency_us (gauges) and _refusals_total{reason} per version
 * with a limiter (docs/metrics.md). */
void limiter_write_metrics(struct limiter *l, struct buf *out);

enum stage_result limiter_stage(struct infer_call *call, const void *cfg);
void limiter_done(struct infer_call *call, const void *cfg);

/* Stage (cfg = the struct limiter) before decode, so on a request's head
 * when the front end starts calls there (serve/call.h): refuses, with the
 * answer limiter_stage would give, a call that limiter_stage would refuse
 * whatever its body says (gradient_refuses: the limit is reached and it
 * could not wait). It takes no slot: a slot is held only from
 * limiter_stage on, after decode, so a client slow to send its body never
 * holds one. */
enum stage_result limiter_head_stage(struct infer_call *call, const void *cfg);

#endif
