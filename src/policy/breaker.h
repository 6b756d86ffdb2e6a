/*
 * breaker: circuit breakers per model version (docs/limits.md, "Circuit
 * breakers"): the configuration section `breakers`, the process-wide store
 * of the versions' breakers (circuit.h) and the serving-pipeline stage
 * that applies them.
 *
 * Section (a list; every key but `model` optional):
 *
 *   breakers:
 *     - model: digits
 *       version: "2"             # absent: each version its own breaker
 *       consecutive-failures: 5  # open after this many failures in a row (0 = off; default 5)
 *       failure-ratio: 0.5       # open at failures/calls >= ratio in the window (0 = off, default)
 *       window-secs: 10          # 1 .. 3600
 *       min-requests: 20         # calls the window needs before the ratio counts
 *       open-secs: 5             # 1 .. 3600
 *       half-open-probes: 1      # 1 .. 1000
 *       fallback-version: "1"    # while open, serve this version instead of refusing
 *
 * A failure is an answer with status 500 (the model failed) or 504 (its
 * deadline passed); a success is a 200. Client errors, refusals (429,
 * 503) and cancelled calls count neither way.
 *
 * Stage (serve/call.h), cfg = the struct breaker, after route and before
 * the concurrency limiter and decode: a call to a version whose breaker is
 * open is refused with 503 and Retry-After (the seconds until half-open,
 * rounded up): "circuit breaker of digits version 2 is open (half-open in
 * 4 s)"; with a fallback version that is loaded, a call whose version no
 * client named (URL, gRPC model_version, pin header) is served by the
 * fallback instead, with route kind "fallback" (x-inferd-route). Calls
 * served by a fallback are not counted by any breaker. The done hook
 * records the outcome.
 *
 * State. A version's breaker is created on its first call. breaker_apply()
 * keeps the breakers whose entry is unchanged (state and counters carry
 * over); a changed entry starts closed.
 */
#ifndef INFERD_POLICY_BREAKER_H
#define INFERD_POLICY_BREAKER_H

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "serve/call.h"

#define BREAKER_MAX_ENTRIES 256
#define BREAKER_MAX_STATES 4096 /* versions with a breaker; beyond: none (logged) */

struct breaker_config;
struct breaker;

/* section: the value of `breakers`, or NULL or null (no breaker). 0 and *out
 * (breaker_config_free), or ST_ERROR with err (400 naming the path). */
int breaker_config_parse(const struct json_value *section, struct breaker_config **out,
                         struct error *err);
void breaker_config_free(struct breaker_config *c);

struct breaker *breaker_new(void);
void breaker_free(struct breaker *b); /* after every I/O thread stopped */
/* Publishes c (owned from now on); any thread. */
void breaker_apply(struct breaker *b, struct breaker_config *c);

/* inferd_breaker_state (0 closed, 1 open, 2 half-open) and
 * inferd_breaker_transitions_total{to} per version with a breaker. */
void breaker_write_metrics(struct breaker *b, struct buf *out);

enum stage_result breaker_stage(struct infer_call *call, const void *cfg);
void breaker_done(struct infer_call *call, const void *cfg);

#endif
