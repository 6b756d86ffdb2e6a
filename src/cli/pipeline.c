#include "cli/pipeline.h"

void pipeline_build(struct serve_pipeline *p, const struct pipeline_parts *parts)
{
    const struct serve_stage stages[] = {
        {"auth", auth_stage, parts->auth, auth_stage_done},
        {"ratelimit", ratelimit_stage, parts->ratelimit, NULL},
        {"resolve", serve_stage_resolve, NULL, NULL},
        {"route", routing_stage_route, parts->routing, routing_route_done},
        {"breaker", breaker_stage, parts->breaker, breaker_done},
        {"limiter-head", limiter_head_stage, parts->limiter, NULL},
        {"queue", serve_stage_queue, NULL, NULL},
        {"decode", serve_stage_decode, NULL, NULL},
        {"sequence", seqbatch_stage, NULL, seqbatch_done},
        {"tokens", tokens_stage, &parts->tokens, tokens_done},
        {"limiter", limiter_stage, parts->limiter, limiter_done},
        {"preprocess", prep_stage, parts->prep, prep_stage_done},
        {"shadow", routing_stage_shadow, parts->routing, routing_shadow_done},
        {"submit", serve_stage_submit, NULL, NULL},
    };
    _Static_assert(sizeof stages / sizeof stages[0] <= SERVE_MAX_STAGES, "too many stages");
    p->nstages = sizeof stages / sizeof stages[0];
    for (uint32_t i = 0; i < p->nstages; i++)
        p->stages[i] = stages[i];
}
