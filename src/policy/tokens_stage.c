/*
 * tokens_stage.c: the token-quota stage and its done hook
 * (policy/tokenquota.h): estimate, reserve, and at the end settle, meter
 * and log.
 */
#include "base/arena.h"
#include "base/clock.h"
#include "obs/request.h"
#include "policy/tokenquota.h"

static uint64_t wall_seconds(void)
{
    return (uint64_t)clock_wall_ms() / 1000u;
}

enum stage_result tokens_stage(struct infer_call *call, const void *cfg)
{
    const struct tokens_stage_cfg *c = cfg;
    struct model *m = call->req.model;
    if (!m->engine_ops || !m->engine_ops->estimate)
        return STAGE_CONTINUE; /* not generative: no tokens to count */
    struct error err;
    uint32_t prompt, completion;
    if (m->engine_ops->estimate(m->engine, &call->req, &prompt, &completion, &err) != 0)
        return serve_call_error(call, err.status, "%s", err.msg);
    struct tokenquota_reservation *res = arena_calloc(&call->req.arena, 1, sizeof *res);
    if (!res)
        return serve_call_error(call, 500, "out of memory");
    /* Metered whether admitted or refused (a refused call used nothing). */
    call->tokens_ctx = res;
    if (tokenquota_reserve(c->quotas, call->tenant, m->name, prompt, completion, clock_now_ns(),
                           wall_seconds(), res, &call->tokens, &err) != 0) {
        serve_call_error(call, err.status, "%s", err.msg);
        call->req.err.retry_after_s = err.retry_after_s;
        return STAGE_DONE;
    }
    /* Now: the log line may be written before the done hook runs. */
    if (call->tokens.set && call->fe.obs)
        obsreq_set_tokens_reserved(call->fe.obs, (uint64_t)prompt + completion);
    return STAGE_CONTINUE;
}

void tokens_done(struct infer_call *call, const void *cfg)
{
    const struct tokens_stage_cfg *c = cfg;
    struct tokenquota_reservation *res = call->tokens_ctx;
    if (!res)
        return; /* not generative, or its inputs were refused */
    call->tokens_ctx = NULL;
    uint32_t prompt = call->req.usage_prompt_tokens;
    uint32_t completion = call->req.usage_completion_tokens;
    uint64_t wall_s = wall_seconds();
    usage_record(c->usage, call->tenant, res->model, res->day, prompt, completion);
    tokenquota_settle(res, prompt, completion, clock_now_ns(), wall_s);
}
