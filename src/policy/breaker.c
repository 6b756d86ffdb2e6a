#include "policy/breaker.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "model/model.h"
#include "obs/metrics.h"
#include "policy/circuit.h"
#include "policy/fields.h"

#define MODEL_NAME_MAX 256

struct breaker_entry {
    char model[MODEL_NAME_MAX];
    int64_t version;  /* -1: every version */
    int64_t fallback; /* -1: none */
    struct circuit_params p;
};

struct breaker_config {
    uint32_t n;
    struct breaker_entry e[];
};

/* One version's breaker; reference counted (the store, calls). */
struct brk_state {
    atomic_uint refs;
    char model[MODEL_NAME_MAX];
    int64_t version;
    char version_str[24];
    int64_t fallback;
    struct circuit c;
};

struct breaker {
    pthread_mutex_t lock; /* cfg, states */
    struct breaker_config *cfg;
    atomic_uint nentries;
    struct brk_state *states[BREAKER_MAX_STATES];
    uint32_t nstates;
    bool full_logged;
};

/* What a passed call holds until its done hook (call arena). */
struct brk_hold {
    struct brk_state *st;
    struct circuit_ticket ticket;
};

/* ---- the section --------------------------------------------------------------------- */

static int parse_entry(const struct json_value *v, const char *path, struct breaker_entry *e,
                       struct error *err)
{
    static const char *const known[] = {
        "model",        "version",   "consecutive-failures", "failure-ratio",    "window-secs",
        "min-requests", "open-secs", "half-open-probes",     "fallback-version", NULL};
    uint32_t window_s = 10, open_s = 5;
    struct circuit_params *p = &e->p;
    *p = (struct circuit_params){.consecutive = 5, .min_requests = 20, .probes = 1};
    if (fields_check_object(v, path, known, err) != 0 ||
        fields_name(v, path, "model", e->model, sizeof e->model, true, err) != 0 ||
        fields_version(v, path, "version", &e->version, err) != 0 ||
        fields_u32(v, path, "consecutive-failures", 0, 1000000, &p->consecutive, err) != 0 ||
        fields_double(v, path, "failure-ratio", 0, 1, &p->ratio, err) != 0 ||
        fields_u32(v, path, "window-secs", 1, 3600, &window_s, err) != 0 ||
        fields_u32(v, path, "min-requests", 1, 1000000, &p->min_requests, err) != 0 ||
        fields_u32(v, path, "open-secs", 1, 3600, &open_s, err) != 0 ||
        fields_u32(v, path, "half-open-probes", 1, 1000, &p->probes, err) != 0 ||
        fields_version(v, path, "fallback-version", &e->fallback, err) != 0)
        return -1;
    if (!p->consecutive && p->ratio == 0)
        return error_set(err, 400,
                         "%s: consecutive-failures and failure-ratio are both 0: the "
                         "breaker could never open",
                         path);
    if (e->fallback >= 0 && e->fallback == e->version)
        return error_set(err, 400, "%s.fallback-version: the version the breaker protects", path);
    p->window_ns = (uint64_t)window_s * 1000000000u;
    p->open_ns = (uint64_t)open_s * 1000000000u;
    return 0;
}

int breaker_config_parse(const struct json_value *section, struct breaker_config **out,
                         struct error *err)
{
    if (section && section->type == JSON_NULL)
        section = NULL; /* `breakers:` with nothing under it */
    uint32_t n = section ? section->len : 0;
    *out = NULL;
    if (section && fields_check_list(section, "breakers", BREAKER_MAX_ENTRIES, err) != 0)
        return -1;
    struct breaker_config *c = mem_calloc(1, sizeof *c + n * sizeof c->e[0]);
    if (!c)
        return error_set(err, 500, "out of memory reading the breakers section");
    for (uint32_t i = 0; i < n; i++) {
        char path[48];
        snprintf(path, sizeof path, "breakers[%u]", i);
        struct breaker_entry *e = &c->e[i];
        if (parse_entry(&section->u.items[i], path, e, err) != 0)
            goto fail;
        for (uint32_t k = 0; k < i; k++)
            if (c->e[k].version == e->version && strcmp(c->e[k].model, e->model) == 0) {
                error_set(err, 400, "%s: model %.64s%s already has a breaker in breakers[%u]", path,
                          e->model, e->version < 0 ? "" : " (this version)", k);
                goto fail;
            }
        c->n++;
    }
    *out = c;
    return 0;
fail:
    mem_free(c);
    return -1;
}

void breaker_config_free(struct breaker_config *c)
{
    mem_free(c);
}

static const struct breaker_entry *entry_for(const struct breaker_config *c, const char *model,
                                             int64_t version)
{
    const struct breaker_entry *any = NULL;
    for (uint32_t i = 0; c && i < c->n; i++) {
        if (strcmp(c->e[i].model, model) != 0)
            continue;
        if (c->e[i].version == version)
            return &c->e[i];
        if (c->e[i].version < 0)
            any = &c->e[i];
    }
    return any;
}

static bool same_entry(const struct breaker_entry *e, const struct brk_state *st)
{
    const struct circuit_params *a = &e->p, *b = &st->c.p;
    return e->fallback == st->fallback && a->consecutive == b->consecutive &&
           a->ratio == b->ratio && a->window_ns == b->window_ns &&
           a->min_requests == b->min_requests && a->open_ns == b->open_ns && a->probes == b->probes;
}

/* ---- the store --------------------------------------------------------------------------- */

static void state_unref(struct brk_state *st)
{
    if (st && atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1) {
        circuit_destroy(&st->c);
        mem_free(st);
    }
}

struct breaker *breaker_new(void)
{
    struct breaker *b = mem_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    return b;
}

void breaker_free(struct breaker *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < b->nstates; i++)
        state_unref(b->states[i]);
    breaker_config_free(b->cfg);
    pthread_mutex_destroy(&b->lock);
    mem_free(b);
}

void breaker_apply(struct breaker *b, struct breaker_config *c)
{
    pthread_mutex_lock(&b->lock);
    struct breaker_config *old = b->cfg;
    b->cfg = c;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < b->nstates; i++) {
        struct brk_state *st = b->states[i];
        const struct breaker_entry *e = entry_for(c, st->model, st->version);
        if (e && same_entry(e, st))
            b->states[kept++] = st;
        else
            state_unref(st);
    }
    b->nstates = kept;
    b->full_logged = false;
    atomic_store_explicit(&b->nentries, c ? c->n : 0, memory_order_relaxed);
    pthread_mutex_unlock(&b->lock);
    breaker_config_free(old);
}

/* The breaker of model m, with a reference; NULL when it has none. */
static struct brk_state *state_for(struct breaker *b, const struct model *m)
{
    struct brk_state *st = NULL;
    pthread_mutex_lock(&b->lock);
    const struct breaker_entry *e = entry_for(b->cfg, m->name, m->version);
    if (!e)
        goto out;
    for (uint32_t i = 0; i < b->nstates && !st; i++)
        if (b->states[i]->version == m->version && strcmp(b->states[i]->model, m->name) == 0)
            st = b->states[i];
    if (!st) {
        if (b->nstates == BREAKER_MAX_STATES || !(st = mem_calloc(1, sizeof *st))) {
            if (!b->full_logged)
                log_error("breaker: none for %s version %s (%s)", m->name, m->version_str,
                          b->nstates == BREAKER_MAX_STATES ? "too many versions" : "out of memory");
            b->full_logged = true;
            goto out;
        }
        atomic_init(&st->refs, 1);
        snprintf(st->model, sizeof st->model, "%s", m->name);
        st->version = m->version;
        snprintf(st->version_str, sizeof st->version_str, "%s", m->version_str);
        st->fallback = e->fallback;
        char name[CIRCUIT_NAME_MAX];
        snprintf(name, sizeof name, "%.256s version %s", m->name, m->version_str);
        circuit_init(&st->c, &e->p, name);
        b->states[b->nstates++] = st;
    }
    atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
out:
    pthread_mutex_unlock(&b->lock);
    return st;
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
    if (atomic_load_explicit(&b->nentries, memory_order_relaxed) == 0 || !call->req.model)
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
            state_unref(st);
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
        state_unref(st);
        return STAGE_CONTINUE;
    }
    uint64_t secs = (retry_ns + 999999999u) / 1000000000u;
    if (retry_ns)
        serve_call_error(call, 503,
                         "circuit breaker of %s version %s is open (half-open in %llu s)",
                         st->model, st->version_str, (unsigned long long)secs);
    else
        serve_call_error(
            call, 503, "circuit breaker of %s version %s is half-open (%u probe%s in flight)",
            st->model, st->version_str, st->c.p.probes, st->c.p.probes == 1 ? "" : "s");
    call->req.err.retry_after_s = secs < 1 ? 1 : (unsigned)secs;
    state_unref(st);
    return STAGE_DONE;
}

void breaker_done(struct infer_call *call, const void *cfg)
{
    (void)cfg;
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
    state_unref(h->st);
    call->breaker_ctx = NULL;
}

/* ---- metrics ------------------------------------------------------------------------------- */

void breaker_write_metrics(struct breaker *b, struct buf *out)
{
    pthread_mutex_lock(&b->lock);
    metrics_write_header(out, "inferd_breaker_state", "gauge",
                         "Circuit breaker of a model version: 0 closed, 1 open, 2 half-open");
    for (uint32_t i = 0; i < b->nstates; i++) {
        const char *labels[] = {"model", b->states[i]->model, "version", b->states[i]->version_str};
        metrics_write_u64(
            out, "inferd_breaker_state", labels, 2,
            (uint64_t)atomic_load_explicit(&b->states[i]->c.state, memory_order_relaxed));
    }
    metrics_write_header(out, "inferd_breaker_transitions_total", "counter",
                         "Circuit breaker transitions, by the state entered");
    for (uint32_t i = 0; i < b->nstates; i++)
        for (uint32_t s = 0; s < CIRCUIT_STATES; s++) {
            const char *labels[] = {"model",   b->states[i]->model,
                                    "version", b->states[i]->version_str,
                                    "to",      circuit_state_name(s)};
            metrics_write_u64(
                out, "inferd_breaker_transitions_total", labels, 3,
                atomic_load_explicit(&b->states[i]->c.transitions[s], memory_order_relaxed));
        }
    pthread_mutex_unlock(&b->lock);
}
