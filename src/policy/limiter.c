#include "policy/limiter.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "model/model.h"
#include "obs/metrics.h"
#include "policy/fields.h"
#include "policy/gradient.h"
#include "policy/version_entries.h"
#include "policy/version_states.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct limiter_entry {
    struct version_key key;
    struct gradient_params p;
};

struct limiter_config {
    struct version_entries l; /* of struct limiter_entry */
};

/* One version's limiter (version_states.h). */
struct lim_state {
    struct version_state v;
    struct gradient g;
};

struct limiter {
    struct version_states t; /* of struct lim_state */
};

/* What a call holds from the stage to its done hook (call arena). */
struct lim_hold {
    struct gradient_waiter w;
    struct lim_state *st;
    struct infer_call *call;
};

/* ---- the section --------------------------------------------------------------------- */

static int parse_entry(const struct json_value *v, const char *path, void *entry, struct error *err)
{
    struct limiter_entry *e = entry;
    static const char *const known[] = {"model",
                                        "version",
                                        "min",
                                        "max",
                                        "initial",
                                        "sample-window-ms",
                                        "min-rtt-interval-secs",
                                        "min-rtt-samples",
                                        "tolerance",
                                        "low-priority-share",
                                        "queue",
                                        NULL};
    uint32_t window_ms = 100, interval_s = 30;
    struct gradient_params *p = &e->p;
    *p = (struct gradient_params){.min = 3,
                                  .max = 1000,
                                  .min_rtt_samples = 50,
                                  .tolerance = 0.5,
                                  .low_share = 0.9,
                                  .queue = true};
    if (fields_check_object(v, path, known, err) != 0 ||
        fields_name(v, path, "model", e->key.model, sizeof e->key.model, true, err) != 0 ||
        fields_version(v, path, "version", &e->key.version, err) != 0 ||
        fields_u32(v, path, "min", 1, GRADIENT_LIMIT_MAX, &p->min, err) != 0 ||
        fields_u32(v, path, "max", p->min, GRADIENT_LIMIT_MAX, &p->max, err) != 0)
        return ST_ERROR;
    p->initial = 16 < p->min ? p->min : 16 > p->max ? p->max : 16;
    if (fields_u32(v, path, "initial", p->min, p->max, &p->initial, err) != 0 ||
        fields_u32(v, path, "sample-window-ms", 1, 60000, &window_ms, err) != 0 ||
        fields_u32(v, path, "min-rtt-interval-secs", 1, 86400, &interval_s, err) != 0 ||
        fields_u32(v, path, "min-rtt-samples", 1, GRADIENT_SAMPLES, &p->min_rtt_samples, err) !=
            0 ||
        fields_double(v, path, "tolerance", 0, 10, &p->tolerance, err) != 0 ||
        fields_double(v, path, "low-priority-share", 0.01, 1, &p->low_share, err) != 0 ||
        fields_bool(v, path, "queue", &p->queue, err) != 0)
        return ST_ERROR;
    p->window_ns = (uint64_t)window_ms * 1000000u;
    p->min_rtt_interval_ns = (uint64_t)interval_s * 1000000000u;
    return 0;
}

static const struct version_entries_spec section_spec = {
    .section = "concurrency",
    .max = LIMITER_MAX_ENTRIES,
    .size = sizeof(struct limiter_entry),
    .taken = "is already limited by",
    .parse = parse_entry,
};

int limiter_config_parse(const struct json_value *section, struct limiter_config **out,
                         struct error *err)
{
    *out = NULL;
    struct limiter_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory reading the concurrency section");
    if (version_entries_parse(section, &section_spec, &c->l, err) != 0) {
        mem_free(c);
        return ST_ERROR;
    }
    *out = c;
    return 0;
}

void limiter_config_free(struct limiter_config *c)
{
    if (c)
        version_entries_release(&c->l);
    mem_free(c);
}

/* ---- the store --------------------------------------------------------------------------- */

static void wake(struct gradient_waiter *w);

static void state_init(struct version_state *v, const void *entry, const struct model *m)
{
    (void)m;
    const struct limiter_entry *e = entry;
    gradient_init(&((struct lim_state *)v)->g, &e->p, wake, clock_now_ns());
}

static bool same_params(const void *entry, const struct version_state *v)
{
    const struct gradient_params *a = &((const struct limiter_entry *)entry)->p;
    const struct gradient_params *b = &((const struct lim_state *)v)->g.p;
    return a->min == b->min && a->max == b->max && a->initial == b->initial &&
           a->window_ns == b->window_ns && a->min_rtt_interval_ns == b->min_rtt_interval_ns &&
           a->min_rtt_samples == b->min_rtt_samples && a->tolerance == b->tolerance &&
           a->low_share == b->low_share && a->queue == b->queue;
}

static void state_destroy(struct version_state *v)
{
    gradient_destroy(&((struct lim_state *)v)->g);
}

static const struct version_states_ops store_ops = {
    .size = sizeof(struct lim_state),
    .max = LIMITER_MAX_STATES,
    .none_prefix = "concurrency: no limiter for",
    .none_suffix = ": not limited",
    .init = state_init,
    .same = same_params,
    .destroy = state_destroy,
};

struct limiter *limiter_new(void)
{
    struct limiter *l = mem_calloc(1, sizeof *l);
    if (!l || version_states_init(&l->t, &store_ops) != 0) {
        mem_free(l);
        return NULL;
    }
    return l;
}

void limiter_free(struct limiter *l)
{
    if (!l)
        return;
    limiter_config_free(version_states_destroy(&l->t));
    mem_free(l);
}

void limiter_apply(struct limiter *l, struct limiter_config *c)
{
    limiter_config_free(version_states_apply(&l->t, c, c ? &c->l : NULL));
}

/* The limiter of model m, with a reference; NULL when m is not limited (or
 * out of memory: then it is not limited either, and that is logged). */
static struct lim_state *state_for(struct limiter *l, const struct model *m)
{
    return (struct lim_state *)version_states_get(&l->t, m);
}

static void state_unref(struct limiter *l, struct lim_state *st)
{
    version_states_unref(&l->t, &st->v);
}

/* ---- the stage ------------------------------------------------------------------------------ */

/* The earlier of the call's deadline and its `timeout` from its arrival;
 * 0: none. */
static uint64_t deadline_of(const struct infer_call *call)
{
    uint64_t d = call->deadline_ns;
    if (call->req.timeout_us) {
        uint64_t t = call->received_ns + call->req.timeout_us * 1000u;
        d = d && d < t ? d : t;
    }
    return d;
}

/* Whether the call is of a lower priority level than the model's highest
 * (level 1; sched.h's rule for the level of a request). */
static bool low_priority(const struct infer_call *call)
{
    const struct sched_config *c = &call->req.model->sched_cfg;
    uint32_t nlevels = c->nlevels ? c->nlevels : 1;
    uint32_t fallback = c->default_level < nlevels ? c->default_level : 0;
    uint64_t p = call->req.priority;
    uint32_t level = p && p <= nlevels ? (uint32_t)p - 1 : fallback;
    return level > 0;
}

static enum stage_result refuse(struct infer_call *call, struct lim_state *st,
                                enum gradient_refusal why)
{
    uint32_t n = atomic_load_explicit(&st->g.in_flight, memory_order_relaxed);
    uint64_t expect = gradient_expected_ns(&st->g);
    switch (why) {
    case GRADIENT_REFUSED_QUEUE_FULL:
        serve_call_error(call, 503,
                         "concurrency limit of %s version %s reached (%u in flight, %u waiting: "
                         "the queue is full)",
                         st->v.model, st->v.version_str, n, GRADIENT_QUEUE_MAX);
        break;
    case GRADIENT_REFUSED_EXPIRED:
        serve_call_error(call, 503,
                         "concurrency limit of %s version %s reached (%u in flight): the "
                         "deadline leaves no time to wait for a slot",
                         st->v.model, st->v.version_str, n);
        break;
    default:
        serve_call_error(call, 503, "concurrency limit of %s version %s reached (%u in flight)",
                         st->v.model, st->v.version_str, n);
        break;
    }
    uint64_t secs = (expect + 999999999u) / 1000000000u;
    call->req.err.retry_after_s = secs < 1 ? 1 : secs > 3600 ? 3600 : (unsigned)secs;
    return STAGE_DONE;
}

/* A waiter's fate is decided (any thread): the call goes on, or is
 * answered, on its loop. */
static void wake(struct gradient_waiter *w)
{
    struct lim_hold *h = container_of(w, struct lim_hold, w);
    if (w->verdict == GRADIENT_EXPIRED)
        refuse(h->call, h->st, GRADIENT_REFUSED_EXPIRED);
    else if (w->verdict == GRADIENT_CANCELLED)
        serve_call_error(h->call, 499, "the client cancelled the request");
    serve_call_resume(h->call);
}

/* The limiter of the call's version, with a reference; NULL when it has
 * none (state_for). */
static struct lim_state *limiter_of(struct limiter *l, const struct infer_call *call)
{
    if (!version_states_any(&l->t) || !call->req.model)
        return NULL;
    return state_for(l, call->req.model);
}

enum stage_result limiter_stage(struct infer_call *call, const void *cfg)
{
    struct limiter *l = (struct limiter *)cfg;
    struct lim_state *st = limiter_of(l, call);
    if (!st)
        return STAGE_CONTINUE;
    struct lim_hold *h = arena_calloc(&call->req.arena, 1, sizeof *h);
    if (!h) {
        state_unref(l, st);
        return serve_call_error(call, 503, "out of memory");
    }
    h->st = st;
    h->call = call;
    h->w.deadline_ns = deadline_of(call);
    h->w.low = low_priority(call);
    h->w.cancelled = &call->req.cancelled;
    call->limiter_ctx = h;
    enum gradient_refusal why;
    switch (gradient_admit(&st->g, &h->w, clock_now_ns(), &why)) {
    case GRADIENT_ADMITTED:
        return STAGE_CONTINUE;
    case GRADIENT_WAITING:
        return STAGE_DEFER; /* h and call belong to wake() now */
    case GRADIENT_CANCELLED:
        return serve_call_error(call, 499, "the client cancelled the request");
    case GRADIENT_EXPIRED:
        break;
    }
    return refuse(call, st, why);
}

enum stage_result limiter_head_stage(struct infer_call *call, const void *cfg)
{
    struct limiter *l = (struct limiter *)cfg;
    struct lim_state *st = limiter_of(l, call);
    enum gradient_refusal why;
    enum stage_result r = STAGE_CONTINUE;
    if (st && gradient_refuses(&st->g, &why))
        r = refuse(call, st, why);
    if (st)
        state_unref(l, st);
    return r;
}

void limiter_done(struct infer_call *call, const void *cfg)
{
    struct limiter *l = (struct limiter *)cfg;
    struct lim_hold *h = call->limiter_ctx;
    if (!h)
        return;
    if (h->w.verdict == GRADIENT_ADMITTED) {
        bool cancelled = atomic_load_explicit(&call->req.cancelled, memory_order_relaxed);
        gradient_complete(&h->st->g, &h->w, call->req.rc == 0 && !cancelled, clock_now_ns());
    }
    state_unref(l, h->st);
    call->limiter_ctx = NULL;
}

/* ---- metrics ------------------------------------------------------------------------------- */

void limiter_write_metrics(struct limiter *l, struct buf *out)
{
    static const struct {
        const char *name, *help;
    } gauges[] = {
        {"inferd_concurrency_limit", "Adaptive concurrency limit of a model version"},
        {"inferd_concurrency_in_flight", "Calls a model version's concurrency limiter admitted "
                                         "that have not ended"},
        {"inferd_concurrency_waiting", "Calls waiting for a slot of a model version's "
                                       "concurrency limit"},
        {"inferd_concurrency_min_latency_us", "Minimum latency the concurrency limiter last "
                                              "measured (p90 at the floor), microseconds"},
        {"inferd_concurrency_sampled_latency_us", "Latency of the concurrency limiter's last "
                                                  "sample window (p90), microseconds"},
    };
    version_states_lock(&l->t);
    for (uint32_t k = 0; k < sizeof gauges / sizeof gauges[0]; k++) {
        metrics_write_header(out, gauges[k].name, "gauge", gauges[k].help);
        for (uint32_t i = 0; i < l->t.nstates; i++) {
            const struct lim_state *st = (const struct lim_state *)l->t.states[i];
            const struct gradient *g = &st->g;
            const char *labels[] = {"model", st->v.model, "version", st->v.version_str};
            uint64_t v[] = {
                atomic_load_explicit(&g->limit, memory_order_relaxed),
                atomic_load_explicit(&g->in_flight, memory_order_relaxed),
                atomic_load_explicit(&g->nwaiting, memory_order_relaxed),
                atomic_load_explicit(&g->min_rtt_ns, memory_order_relaxed) / 1000u,
                atomic_load_explicit(&g->sampled_ns, memory_order_relaxed) / 1000u,
            };
            metrics_write_u64(out, gauges[k].name, labels, 2, v[k]);
        }
    }
    metrics_write_header(out, "inferd_concurrency_refusals_total", "counter",
                         "Calls the concurrency limiter refused (503), by reason: limit, "
                         "queue_full, expired");
    for (uint32_t i = 0; i < l->t.nstates; i++)
        for (uint32_t r = 0; r < GRADIENT_REFUSALS; r++) {
            const struct lim_state *st = (const struct lim_state *)l->t.states[i];
            const char *labels[] = {"model",           st->v.model, "version",
                                    st->v.version_str, "reason",    gradient_refusal_name(r)};
            metrics_write_u64(out, "inferd_concurrency_refusals_total", labels, 3,
                              atomic_load_explicit(&st->g.refused[r], memory_order_relaxed));
        }
    version_states_unlock(&l->t);
}
