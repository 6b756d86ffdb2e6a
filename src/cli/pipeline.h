/*
 * pipeline: the production stage list of the serving pipeline
 * (serve/call.h), in the design's order. This file is the one place that
 * lists the stages: a new stage is its own file plus one line here.
 *
 *   auth (API key, infer scope; sets the tenant)
 *            → ratelimit (token buckets; 429)
 *            → resolve (the model from the registry snapshot)
 *            → route (pin, A/B, canary; decides the shadow copy)
 *            → breaker (may switch to the fallback version)
 *            → limiter-head (refuses what the limiter surely would; no slot)
 *            → queue (refuses when the version's queue is full)
 *            → decode (waits for the body of a call started on its head)
 *            → sequence (stateful models: one request of a sequence at a
 *              time, in order; control inputs and implicit state)
 *            → tokens (generative models: reserve prompt + max_tokens
 *              against the token budgets; 429; settled and metered at
 *              the end)
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
 * Everything before decode needs only the request's head, so a call that
 * an HTTP front end starts on the head (serve/call.h) is refused by any of
 * them before its body is read: the key, the rate limits, the breaker,
 * and, as hints, the limiter and the queue as they stand when the head
 * arrives (limiter-head and queue refuse only what limiter and submit
 * would refuse whatever the body says; both decide again later). Taking
 * the limiter's slot on the head instead would let a client slow to send
 * its body hold a slot it is not using.
 * The sequence stage comes right after decode: a stateful model's
 * requests are ordered as their bodies complete, a request waiting for its
 * sequence's previous one holds nothing the later stages hand out (a
 * concurrency slot, a token reservation), and the shadow copy, which skips
 * such models, never sees the server's control and state tensors.
 * The token budgets come right after decode (the prompt and max_tokens
 * are in the request body) and before the limiter, so that a call over
 * its tenant's budget never holds a concurrency slot.
 * Preprocessing comes after the limiter (a request waiting for its slot
 * has not paid for decoding yet) and before shadow, so that a shadow copy
 * carries the tensors and is not decoded twice.
 */
#ifndef INFERD_CLI_PIPELINE_H
#define INFERD_CLI_PIPELINE_H

#include "obs/usage.h"
#include "policy/auth.h"
#include "policy/breaker.h"
#include "policy/limiter.h"
#include "policy/ratelimit.h"
#include "policy/routing.h"
#include "policy/tokenquota.h"
#include "preprocess/prep.h"
#include "serve/call.h"
#include "serve/seqbatch.h"

/* What the stages read (process-wide; outlives every I/O thread). */
struct pipeline_parts {
    struct routing *routing;
    struct auth *auth;
    struct ratelimit *ratelimit;
    struct breaker *breaker;
    struct limiter *limiter;
    /* Token budgets (tokens.quotas) and metering (tokens.usage, obs/usage.h):
     * both never NULL in the server. */
    struct tokens_stage_cfg tokens;
    struct prep_stage_cfg *prep;
    /* The remote-models section and its pools (cluster/remote.h); never
     * NULL in the server. */
    struct remote_models *remote;
};

/* Fills *p with the stages, each configured from parts. */
void pipeline_build(struct serve_pipeline *p, const struct pipeline_parts *parts);

#endif
