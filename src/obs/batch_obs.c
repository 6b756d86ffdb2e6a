#include "obs/batch_obs.h"

#include "obs/stats.h"
#include "obs/trace.h"

static void on_batch(void *ctx, const struct sched_model *m, const struct sched_batch_report *b)
{
    if (!b->err->status) {
        struct stats_execution e = {.batch_size = (uint32_t)b->samples, .elements = b->elements,
                                    .padding = b->padding, .inline_run = b->inline_run};
        stats_record_execution(ctx, &e, b->infer_start_ns - b->start_ns,
                               b->infer_end_ns - b->infer_start_ns, b->end_ns - b->infer_end_ns);
    }
    trace_batch_span(b->members, b->n, m->name, m->version, b->samples, b->start_ns, b->end_ns,
                     b->err);
}

static void on_refuse(void *ctx, const struct sched_model *m, enum sched_refusal why)
{
    (void)m;
    _Static_assert((int)SCHED_REFUSALS == (int)STATS_QUEUE_REFUSALS, "one reason for each");
    stats_record_queue_refusal(ctx, why == SCHED_REFUSED_FULL       ? STATS_QUEUE_FULL
                                    : why == SCHED_REFUSED_DEADLINE ? STATS_QUEUE_DEADLINE
                                                                    : STATS_QUEUE_BUDGET);
}

static void on_stop(void *ctx)
{
    stats_model_put(ctx);
}

void batch_obs_attach(const char *name, int64_t version, struct sched_observer *out)
{
    /* Without memory for the statistics (NULL), batch spans are still
     * recorded: every stats_* function accepts NULL. */
    out->on_batch = on_batch;
    out->on_refuse = on_refuse;
    out->on_stop = on_stop;
    out->ctx = stats_model_get(name, version);
}

struct stats_model *sched_stats(const struct sched *s)
{
    const struct sched_observer *o = sched_get_observer(s);
    return o->on_batch == on_batch ? o->ctx : NULL;
}
