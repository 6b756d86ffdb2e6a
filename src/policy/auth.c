/* The auth store, its checks and its stage (policy/auth.h). */
#include "policy/auth.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/status.h"
#include "obs/metrics.h"
#include "obs/request.h"
#include "obs/trace.h"

_Static_assert(AUTH_TENANT_MAX == OBSREQ_TENANT_MAX, "the access log keeps whole tenant names");

/* Per-thread key hints: a direct-mapped table (see the top of auth.h). */
#define HINT_SLOTS 256
/* Per-thread wrong keys seen last: a client that repeats a wrong key (a
 * stale one after a rotation) costs one SHA-256, not one per key. */
#define MISS_SLOTS 64

enum refusal { REFUSED_MISSING, REFUSED_INVALID, REFUSED_SCOPE, REFUSALS };
static const char *const refusal_names[REFUSALS] = {"missing", "invalid", "scope"};

struct auth {
    pthread_mutex_t lock; /* current: taking a reference, swapping */
    struct auth_config *current;
    /* current->ntenants > 0, read without the lock: with no tenant a check
     * takes nothing at all. */
    atomic_bool enforcing;
    uint64_t seed; /* of the hint hash */
    _Atomic uint64_t refusals[REFUSALS];
};

struct hint {
    uint64_t tag;        /* the presented key's hash */
    uint64_t generation; /* of the configuration whose key index this is; 0 = empty */
    uint32_t key;
};

static _Thread_local struct hint hints[HINT_SLOTS];

/* A wrong key, by its digest under an all-zero salt (compared whole:
 * exact, unlike a hint's tag; never logged, like everything here). */
struct miss {
    uint8_t digest[SHA256_DIGEST_SIZE];
    uint64_t generation; /* of the configuration that refused it; 0 = empty */
};

static _Thread_local struct miss misses[MISS_SLOTS];

/* Configurations get unique generations across stores, so that a hint of
 * one never applies to another. */
static _Atomic uint64_t next_generation = 1;

/* ---- the store -------------------------------------------------------------------- */

struct auth *auth_new(void)
{
    struct auth *a = mem_calloc(1, sizeof *a);
    if (!a)
        return NULL;
    struct error err;
    if (auth_config_parse(NULL, &a->current, &err) != 0) {
        mem_free(a);
        return NULL;
    }
    a->current->generation = atomic_fetch_add(&next_generation, 1);
    trace_random((uint8_t *)&a->seed, sizeof a->seed);
    pthread_mutex_init(&a->lock, NULL);
    return a;
}

void auth_free(struct auth *a)
{
    if (!a)
        return;
    auth_config_unref(a->current);
    pthread_mutex_destroy(&a->lock);
    mem_free(a);
}

static struct auth_config *acquire(struct auth *a)
{
    pthread_mutex_lock(&a->lock);
    struct auth_config *c = a->current;
    auth_config_ref(c);
    pthread_mutex_unlock(&a->lock);
    return c;
}

static void describe_open(uint32_t open, char *out, size_t size)
{
    static const char *const names[] = {"health", "metrics", "metadata", "dashboard"};
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (open & (1u << i) && n < size)
            n += (size_t)snprintf(out + n, size - n, "%s%s", n ? ", " : "", names[i]);
    if (!n)
        snprintf(out, size, "nothing");
}

void auth_apply(struct auth *a, struct auth_config *c)
{
    c->generation = atomic_fetch_add(&next_generation, 1);
    pthread_mutex_lock(&a->lock);
    struct auth_config *old = a->current;
    a->current = c;
    atomic_store(&a->enforcing, c->ntenants > 0);
    pthread_mutex_unlock(&a->lock);
    auth_config_unref(old);
    if (!c->ntenants) {
        log_warn("auth: no API keys configured: every endpoint, the admin API included, is "
                 "open to anyone who can reach the ports");
        return;
    }
    char open[64];
    describe_open(c->open, open, sizeof open);
    log_info("auth: %u tenant%s, %u key%s; open without a key: %s", c->ntenants,
             c->ntenants == 1 ? "" : "s", c->nkeys, c->nkeys == 1 ? "" : "s", open);
}

void auth_write_metrics(struct auth *a, struct buf *out)
{
    metrics_write_header(out, "inferd_auth_refusals_total", "counter",
                         "Requests refused by API-key checks, by reason: no key, a wrong key, "
                         "a key without the scope");
    for (int r = 0; r < REFUSALS; r++) {
        const char *labels[] = {"reason", refusal_names[r]};
        metrics_write_u64(out, "inferd_auth_refusals_total", labels, 1,
                          atomic_load_explicit(&a->refusals[r], memory_order_relaxed));
    }
}

/* ---- verifying a key ----------------------------------------------------------------- */

/* Seeded FNV-1a, finalized: not cryptographic, and it need not be — a
 * wrong hint costs one more SHA-256, never a wrong answer. */
static uint64_t key_tag(uint64_t seed, const char *key, size_t len)
{
    return hash_fmix64(hash_fnv1a(HASH_FNV_OFFSET ^ seed, key, len) ^ seed);
}

/* The index of the configured key that key is, or -1. */
static int64_t find_key(const struct auth *a, const struct auth_config *c, const char *key,
                        size_t len)
{
    if (!auth_key_valid(key, len))
        return NOT_FOUND; /* could never have been hashed */
    uint64_t tag = key_tag(a->seed, key, len);
    struct hint *h = &hints[tag % HINT_SLOTS];
    uint32_t tried = UINT32_MAX;
    if (h->generation == c->generation && h->tag == tag && h->key < c->nkeys) {
        if (auth_key_matches(&c->keys[h->key].hash, key, len))
            return h->key;
        tried = h->key;
    }
    static const uint8_t zero_salt[AUTH_SALT_SIZE];
    uint8_t digest[SHA256_DIGEST_SIZE];
    auth_key_digest(zero_salt, key, len, digest);
    struct miss *m = &misses[tag % MISS_SLOTS];
    int64_t found = -1;
    if (m->generation == c->generation && auth_ct_equal(m->digest, digest, sizeof digest))
        goto out; /* refused before, under this configuration */
    for (uint32_t i = 0; i < c->nkeys && found < 0; i++)
        if (i != tried && auth_key_matches(&c->keys[i].hash, key, len))
            found = i;
    if (found >= 0) {
        *h = (struct hint){.tag = tag, .generation = c->generation, .key = (uint32_t)found};
    } else {
        memcpy(m->digest, digest, sizeof digest);
        m->generation = c->generation;
    }
out:
    explicit_bzero(digest, sizeof digest);
    return found;
}

/* The key the request presents: *key NULL when none. 0, or ST_ERROR when the
 * two headers carry different keys. */
static int presented_key(auth_header_fn header, const void *ctx, const char **key, size_t *len)
{
    size_t alen = 0, xlen = 0;
    const char *authz = header ? header(ctx, "authorization", &alen) : NULL;
    const char *x = header ? header(ctx, "x-api-key", &xlen) : NULL;
    const char *bearer = NULL;
    size_t blen = 0;
    /* RFC 6750: "Bearer" (any case), one or more spaces, the token. Another
     * scheme is not an API key. */
    if (authz && alen > 7 && strncasecmp(authz, "bearer ", 7) == 0) {
        size_t i = 7;
        while (i < alen && authz[i] == ' ')
            i++;
        bearer = authz + i;
        blen = alen - i;
        while (blen && (bearer[blen - 1] == ' ' || bearer[blen - 1] == '\t'))
            blen--;
        if (!blen)
            bearer = NULL;
    }
    if (x && !xlen)
        x = NULL;
    if (bearer && x && (blen != xlen || !auth_ct_equal(bearer, x, blen)))
        return ST_ERROR;
    *key = bearer ? bearer : x;
    *len = bearer ? blen : xlen;
    return 0;
}

static bool has_scope(const struct auth_tenant *t, enum auth_class cls, const char *model,
                      const char **missing)
{
    switch (cls) {
    case AUTH_IN_PIPELINE:
    case AUTH_ANY_KEY:
        return true;
    case AUTH_HEALTH:
    case AUTH_METRICS:
    case AUTH_METADATA:
    case AUTH_DASHBOARD:
    case AUTH_READ:
        *missing = "read";
        return t->scopes & AUTH_SCOPE_READ;
    case AUTH_ADMIN:
        *missing = "admin";
        return t->scopes & AUTH_SCOPE_ADMIN;
    case AUTH_INFER:
        *missing = "infer";
        if (t->scopes & AUTH_SCOPE_INFER)
            return true;
        if (!model)
            return t->nmodels > 0;
        for (uint32_t i = 0; i < t->nmodels; i++)
            if (strcmp(t->models[i], model) == 0)
                return true;
        return false;
    }
    return false;
}

static bool is_open(const struct auth_config *c, enum auth_class cls)
{
    switch (cls) {
    case AUTH_IN_PIPELINE:
        return true;
    case AUTH_HEALTH:
        return c->open & AUTH_OPEN_HEALTH;
    case AUTH_METRICS:
        return c->open & AUTH_OPEN_METRICS;
    case AUTH_METADATA:
        return c->open & AUTH_OPEN_METADATA;
    case AUTH_DASHBOARD:
        return c->open & AUTH_OPEN_DASHBOARD;
    default:
        return false;
    }
}

static int refuse(struct auth *a, enum refusal why, struct error *err, int status, const char *msg)
{
    atomic_fetch_add_explicit(&a->refusals[why], 1, memory_order_relaxed);
    return error_set(err, status, "%s", msg);
}

/* The check under configuration c: 0 with *tenant (NULL: the endpoint is
 * open or nothing is enforced), or ST_ERROR with err (and *tenant on a 403). */
static int authorize(struct auth *a, const struct auth_config *c, enum auth_class cls,
                     const char *model, auth_header_fn header, const void *ctx,
                     const struct auth_tenant **tenant, struct error *err)
{
    *tenant = NULL;
    if (c->ntenants == 0 || is_open(c, cls))
        return 0;
    const char *key;
    size_t len;
    if (presented_key(header, ctx, &key, &len) != 0)
        return refuse(a, REFUSED_INVALID, err, 401, AUTH_MSG_CONFLICT);
    if (!key)
        return refuse(a, REFUSED_MISSING, err, 401, AUTH_MSG_MISSING);
    int64_t k = find_key(a, c, key, len);
    if (k < 0)
        return refuse(a, REFUSED_INVALID, err, 401, AUTH_MSG_INVALID);
    const struct auth_tenant *t = &c->tenants[c->keys[k].tenant];
    *tenant = t;
    const char *missing = "";
    if (has_scope(t, cls, model, &missing))
        return 0;
    atomic_fetch_add_explicit(&a->refusals[REFUSED_SCOPE], 1, memory_order_relaxed);
    if (cls == AUTH_INFER && model)
        return error_set(err, 403, "API key of tenant '%s' lacks scope 'infer' for model '%.256s'",
                         t->name, model);
    return error_set(err, 403, "API key of tenant '%s' lacks scope '%s'", t->name, missing);
}

int auth_check(struct auth *a, enum auth_class cls, const char *model, auth_header_fn header,
               const void *ctx, struct auth_result *res, struct error *err)
{
    res->tenant[0] = '\0';
    if (!a || !atomic_load_explicit(&a->enforcing, memory_order_relaxed))
        return 0;
    struct auth_config *c = acquire(a);
    const struct auth_tenant *t;
    int rc = authorize(a, c, cls, model, header, ctx, &t, err);
    if (t)
        memcpy(res->tenant, t->name, sizeof res->tenant);
    auth_config_unref(c);
    return rc;
}

const char *auth_challenge(const struct error *err)
{
    if (strcmp(err->msg, AUTH_MSG_INVALID) == 0)
        return "Bearer realm=\"inferd\", error=\"invalid_token\"";
    if (strcmp(err->msg, AUTH_MSG_CONFLICT) == 0)
        return "Bearer realm=\"inferd\", error=\"invalid_request\"";
    return "Bearer realm=\"inferd\"";
}

/* ---- the stage ---------------------------------------------------------------------- */

static const char *call_header(const void *ctx, const char *name, size_t *len)
{
    const struct infer_call *call = ctx;
    return call->header ? call->header(call, name, len) : NULL;
}

enum stage_result auth_stage(struct infer_call *call, const void *cfg)
{
    struct auth *a = (struct auth *)cfg;
    if (!atomic_load_explicit(&a->enforcing, memory_order_relaxed))
        return STAGE_CONTINUE;
    struct auth_config *c = acquire(a);
    const struct auth_tenant *t;
    struct error err;
    int rc = authorize(a, c, AUTH_INFER, call->model_name, call_header, call, &t, &err);
    if (t)
        call->tenant = t->name; /* c's reference goes to auth_stage_done (on a 403 too) */
    else
        auth_config_unref(c);
    return rc == 0 ? STAGE_CONTINUE : serve_call_error(call, err.status, "%s", err.msg);
}

void auth_stage_done(struct infer_call *call, const void *cfg)
{
    (void)cfg;
    if (!call->tenant)
        return;
    const struct auth_tenant *t =
        (const struct auth_tenant *)(call->tenant - offsetof(struct auth_tenant, name));
    call->tenant = NULL;
    auth_config_unref(t->config);
}
