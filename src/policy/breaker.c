#include "policy/breaker.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "model/model.h"
#include "obs/metrics.h"
#include "policy/circuit.h"
#include "policy/fields.h"
#include "policy/version_entries.h"
#include "policy/version_states.h"

struct breaker_entry {
    struct version_key key;
    int64_t fallback; /* -1: none */
    struct circuit_params p;
};

struct breaker_config {
    struct version_entries l; /* of struct breaker_entry */
};

/* One version's breaker (version_states.h). */
struct brk_state {
    struct version_state v;
    int64_t fallback;
    struct circuit c;
};

struct breaker {
    struct version_states t; /* of struct brk_state */
};

/* What a passed call holds until its done hook (call arena). */
struct brk_hold {
    struct brk_state *st;
    struct circuit_ticket ticket;
};

/* ---- the section --------------------------------------------------------------------- */

static int parse_entry(const struct json_value *v, const char *path, void *entry, struct error *err)
{
    struct breaker_entry *e = entry;
    static const char *const known[] = {
        "model",        "version",   "consecutive-failures", "failure-ratio",    "window-secs",
        "min-requests", "open-secs", "half-open-probes",     "fallback-version", NULL};
    uint32_t window_s = 10, open_s = 5;
    struct circuit_params *p = &e->p;
    *p = (struct circuit_params){.consecutive = 5, .min_requests = 20, .probes = 1};
    if (fields_check_object(v, path, known, err) != 0 ||
        fields_name(v, path, "model", e->key.model, sizeof e->key.model, true, err) != 0 ||
        fields_version(v, path, "version", &e->key.version, err) != 0 ||
        fields_u32(v, path, "consecutive-failures", 0, 1000000, &p->consecutive, err) != 0 ||
        fields_double(v, path, "failure-ratio", 0, 1, &p->ratio, err) != 0 ||
        fields_u32(v, path, "window-secs", 1, 3600, &window_s, err) != 0 ||
        fields_u32(v, path, "min-requests", 1, 1000000, &p->min_requests, err) != 0 ||
        fields_u32(v, path, "open-secs", 1, 3600, &open_s, err) != 0 ||
        fields_u32(v, path, "half-open-probes", 1, 1000, &p->probes, err) != 0 ||
        fields_version(v, path, "fallback-version", &e->fallback, err) != 0)
        return ST_ERROR;
    if (!p->consecutive && p->ratio == 0)
        return error_set(err, 400,
                         "%s: consecutive-failures and failure-ratio are both 0: the "
                         "breaker could never open",
                         path);
    if (e->fallback >= 0 && e->fallback == e->key.version)
        return error_set(err, 400, "%s.fallback-version: the version the breaker protects", path);
    p->window_ns = (uint64_t)window_s * 1000000000u;
    p->open_ns = (uint64_t)open_s * 1000000000u;
    return 0;
}

static const struct version_entries_spec section_spec = {
    .section = "breakers",
    .max = BREAKER_MAX_ENTRIES,
    .size = sizeof(struct breaker_entry),
    .taken = "already has a breaker in",
    .parse = parse_entry,
};

int breaker_config_parse(const struct json_value *section, struct breaker_config **out,
                         struct error *err)
{
    *out = NULL;
    struct breaker_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory reading the breakers section");
    if (version_entries_parse(section, &section_spec, &c->l, err) != 0) {
        mem_free(c);
        return ST_ERROR;
    }
    *out = c;
    return 0;
}

void breaker_config_free(struct breaker_config *c)
{
    if (c)
        version_entries_release(&c->l);
    mem_free(c);
}

/* ---- the store --------------------------------------------------------------------------- */

static void state_init(struct version_state *v, const void *entry, const struct model *m)
{
    struct brk_state *st = (struct brk_state *)v;
    const struct breaker_entry *e = entry;
    st->fallback = e->fallback;
    char name[CIRCUIT_NAME_MAX];
    snprintf(name, sizeof name, "%.256s version %s", m->name, m->version_str);
    circuit_init(&st->c, &e->p, name);
}

static bool same_entry(const void *entry, const struct version_state *v)
{
    const struct breaker_entry *e = entry;
    const struct brk_state *st = (const struct brk_state *)v;
    const struct circuit_params *a = &e->p, *b = &st->c.p;
    return e->fallback == st->fallback && a->consecutive == b->consecutive &&
           a->ratio == b->ratio && a->window_ns == b->window_ns &&
           a->min_requests == b->min_requests && a->open_ns == b->open_ns && a->probes == b->probes;
}

static void state_destroy(struct version_state *v)
{
    circuit_destroy(&((struct brk_state *)v)->c);
}

static const struct version_states_ops store_ops = {
    .size = sizeof(struct brk_state),
    .max = BREAKER_MAX_STATES,
    .none_prefix = "breaker: none for",
    .none_suffix = "",
    .init = state_init,
    .same = same_entry,
    .destroy = state_destroy,
};

struct breaker *breaker_new(void)
{
    struct breaker *b = mem_calloc(1, sizeof *b);
    if (!b || version_states_init(&b->t, &store_ops) != 0) {
        mem_free(b);
        return NULL;
    }
    return b;
}

void breaker_free(struct breaker *b)
{
    if (!b)
        return;
    breaker_config_free(version_states_destroy(&b->t));
    mem_free(b);
}

void breaker_apply(struct breaker *b, struct breaker_config *c)
{
    breaker_config_free(version_states_apply(&b->t, c, c ? &c->l : NULL));
}

/* The breaker of model m, with a reference; NULL when it has none. */
static struct brk_state *state_for(struct breaker *b, const struct model *m)
{
    return (struct brk_state *)version_states_get(&b->t, m);
}

static void state_unref(struct breaker *b, struct brk_state *st)
{
    version_states_unref(&b->t, &st->v);
}

/* ---- the stage ------------------------------------------------------------------------------ */

/* The fallback version of an open breaker, when it may serve this call. */
static const struct model *fallback_of(const struct infer_call *call, const struct brk_state *st)
{
    if (st->fallback < 0 || call->route == ROUTE_URL || call->route == ROUTE_PIN || !call->entry)
        return NULL;
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)st->fallback);
    return registry_version(call->entry, text);
}

enum stage_result breaker_stage(struct infer_call *call, const void *cfg)
{
    struct breaker *b = (struct breaker *)cfg;
    if (!version_states_any(&b->t) || !call->req.model)
        return STAGE_CONTINUE;
    struct brk_state *st = state_for(b, call->req.model);
    if (!st)
        return STAGE_CONTINUE;
    struct circuit_ticket ticket;
    uint64_t retry_ns = 0;
    if (circuit_admit(&st->c, clock_now_ns(), &ticket, &retry_ns) != CIRCUIT_REFUSE) {
        struct brk_hold *h = arena_calloc(&call->req.arena, 1, sizeof *h);
        if (!h) {
            /* The probe (if it was one) is given back. */
            circuit_record(&st->c, &ticket, CIRCUIT_NEITHER, clock_now_ns());
            state_unref(b, st);
            return serve_call_error(call, 503, "out of memory");
        }
        h->st = st;
        h->ticket = ticket;
        call->breaker_ctx = h;
        return STAGE_CONTINUE;
    }
    const struct model *fb = fallback_of(call, st);
    if (fb) {
        model_unref(call->req.model);
        call->req.model = model_ref((struct model *)fb);
        call->route = ROUTE_FALLBACK;
        state_unref(b, st);
        return STAGE_CONTINUE;
    }
    uint64_t secs = (retry_ns + 999999999u) / 1000000000u;
    if (retry_ns)
        serve_call_error(call, 503,
                         "circuit breaker of %s version %s is open (half-open in %llu s)",
                         st->v.model, st->v.version_str, (unsigned long long)secs);
    else
        serve_call_error(
            call, 503, "circuit breaker of %s version %s is half-open (%u probe%s in flight)",
            st->v.model, st->v.version_str, st->c.p.probes, st->c.p.probes == 1 ? "" : "s");
    call->req.err.retry_after_s = secs < 1 ? 1 : (unsigned)secs;
    state_unref(b, st);
    return STAGE_DONE;
}

void breaker_done(struct infer_call *call, const void *cfg)
{
    struct breaker *b = (struct breaker *)cfg;
    struct brk_hold *h = call->breaker_ctx;
    if (!h)
        return;
    const struct infer_request *req = &call->req;
    enum circuit_outcome o = CIRCUIT_NEITHER;
    if (atomic_load_explicit(&req->cancelled, memory_order_relaxed))
        ; /* the client left: says nothing about the version */
    else if (req->rc == 0)
        o = CIRCUIT_SUCCESS;
    else if (req->err.status == 500 || req->err.status == 504)
        o = CIRCUIT_FAILURE;
    circuit_record(&h->st->c, &h->ticket, o, clock_now_ns());
    state_unref(b, h->st);
    call->breaker_ctx = NULL;
}

/* ---- metrics ------------------------------------------------------------------------------- */

void breaker_write_metrics(struct breaker *b, struct buf *out)
{
    version_states_lock(&b->t);
    metrics_write_header(out, "inferd_breaker_state", "gauge",
                         "Circuit breaker of a model version: 0 closed, 1 open, 2 half-open");
    for (uint32_t i = 0; i < b->t.nstates; i++) {
        const struct brk_state *st = (const struct brk_state *)b->t.states[i];
        const char *labels[] = {"model", st->v.model, "version", st->v.version_str};
        metrics_write_u64(out, "inferd_breaker_state", labels, 2,
                          (uint64_t)atomic_load_explicit(&st->c.state, memory_order_relaxed));
    }
    metrics_write_header(out, "inferd_breaker_transitions_total", "counter",
                         "Circuit breaker transitions, by the state entered");
    for (uint32_t i = 0; i < b->t.nstates; i++)
        for (uint32_t s = 0; s < CIRCUIT_STATES; s++) {
            const struct brk_state *st = (const struct brk_state *)b->t.states[i];
            const char *labels[] = {"model",           st->v.model, "version",
                                    st->v.version_str, "to",        circuit_state_name(s)};
            metrics_write_u64(out, "inferd_breaker_transitions_total", labels, 3,
                              atomic_load_explicit(&st->c.transitions[s], memory_order_relaxed));
        }
    version_states_unlock(&b->t);
}
