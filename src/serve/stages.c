/*
 * stages: the order of the serving pipeline (serve/call.h). This table is
 * the one place that lists them; a new stage is its own file plus one
 * line here. The order is the design's: resolve → auth → rate limit →
 * route (+ shadow copy) → concurrency limit → breaker → decode →
 * preprocess → submit.
 */
#include "serve/call.h"

static const struct serve_pipeline default_pipeline = {
    .stages =
        {
            {"resolve", serve_stage_resolve, NULL},
            {"decode", serve_stage_decode, NULL},
            {"submit", serve_stage_submit, NULL},
        },
    .nstages = 3,
};

const struct serve_pipeline *serve_default_pipeline(void)
{
    return &default_pipeline;
}
