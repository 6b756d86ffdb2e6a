/*
 * pipeline: the production stage list of the serving pipeline
 * (serve/call.h), in the design's order. This file is the one place that
 * lists the stages: a new stage is its own file plus one line here.
 *
 *   auth (API key, infer scope; sets the tenant)
 *            → ratelimit (token buckets; 429)
 *            → resolve (the model from the registry snapshot)
 *            → route (pin, A/B, canary; decides the shadow copy)
 *            → breaker (may switch to the fallback version) → decode
 *            → limiter (adaptive concurrency)
 *            → preprocess (raw images, sounds, texts into tensors, on
 *              the preprocessing pool) → shadow (sends the copy) → submit
 *
 * Auth and rate limits come before resolve: they need only the model's
 * name, so a caller without a key learns nothing of which models exist
 * (401, never 404) and a refusal takes no registry snapshot. The
 * concurrency limiter runs after decode, not before it as the design
 * first placed it: the call's priority level and `timeout` come with the
 * request body (REST parameters), and the limiter needs both.
 * Preprocessing comes after the limiter (a request waiting for its slot
 * has not paid for decoding yet) and before shadow, so that a shadow copy
 * carries the tensors and is not decoded twice.
 */
#ifndef INFERD_CLI_PIPELINE_H
#define INFERD_CLI_PIPELINE_H

#include "policy/auth.h"
#include "policy/breaker.h"
#include "policy/limiter.h"
#include "policy/ratelimit.h"
#include "policy/routing.h"
#include "policy/tokenquota.h"
#include "preprocess/prep.h"
#include "serve/call.h"

/* What the stages read (process-wide; outlives every I/O thread). */
struct pipeline_parts {
    struct routing *routing;
    struct auth *auth;
    struct ratelimit *ratelimit;
    struct breaker *breaker;
    struct limiter *limiter;
    struct tokenquota *tokenquota;
    struct prep_stage_cfg *prep;
};

/* Fills *p with the stages, each configured from parts. */
void pipeline_build(struct serve_pipeline *p, const struct pipeline_parts *parts);

#endif
