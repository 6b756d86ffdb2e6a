#include "policy/route.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"
#include "base/mem.h"
#include "base/status.h"

#define DEFAULT_ARM_HEADER "x-ab-group"
#define DEFAULT_WINDOW_S 60u
#define DEFAULT_MIN_REQUESTS 100u
#define DEFAULT_LOG_EVERY 100u
#define MAX_WINDOW_S 86400u
/* Largest JSON text of a table (the file and the PUT body). */
#define ROUTE_JSON_MAX ((size_t)1 << 20)

/* ---- reference counting ------------------------------------------------------- */

static struct route_table *table_new(void)
{
    struct route_table *t = mem_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    atomic_init(&t->refs, 1);
    memcpy(t->pin_header, ROUTE_DEFAULT_PIN_HEADER, sizeof ROUTE_DEFAULT_PIN_HEADER);
    memcpy(t->arm_header, DEFAULT_ARM_HEADER, sizeof DEFAULT_ARM_HEADER);
    t->default_version = -1;
    t->shadow_log_every = DEFAULT_LOG_EVERY;
    return t;
}

struct route_table *route_table_ref(struct route_table *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void route_table_unref(struct route_table *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) {
        mem_free(t->bucket_owner);
        mem_free(t);
    }
}

/* ---- hashing ------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n)
{
    return hash_fnv1a(HASH_FNV_OFFSET, s, n);
}

uint32_t route_bucket(const char *key, size_t len)
{
    return (uint32_t)(hash_fmix64(fnv1a(key, len)) % ROUTE_BUCKETS);
}

/* ---- parsing -------------------------------------------------------------------- */

/* A version number in JSON: a non-negative integer. */
static int get_version(const struct json_value *v, const char *field, int64_t *out,
                       struct error *err)
{
    if (!v || json_num_i64(v, out) != 0 || *out < 0)
        return error_set(err, 400, "%s: must be a version number (an integer >= 0)", field);
    return 0;
}

/* A percent with at most two decimals, as basis points. */
static int get_percent(const struct json_value *v, const char *field, uint32_t *out,
                       struct error *err)
{
    double d;
    if (!v || v->type != JSON_NUMBER || json_num_f64(v, &d) != 0 || !(d >= 0 && d <= 100))
        return error_set(err, 400, "%s: must be a number from 0 to 100 (percent)", field);
    double bp = d * 100.0;
    if (fabs(bp - round(bp)) > 1e-6)
        return error_set(err, 400, "%s: at most two decimals (%u buckets)", field,
                         ROUTE_BUCKETS);
    *out = (uint32_t)llround(bp);
    return 0;
}

static int get_double(const struct json_value *v, const char *field, double lo, double hi,
                      double *out, struct error *err)
{
    if (!v || v->type != JSON_NUMBER || json_num_f64(v, out) != 0 || !(*out >= lo && *out <= hi))
        return error_set(err, 400, "%s: must be a number from %g to %g", field, lo, hi);
    return 0;
}

static int get_u32(const struct json_value *v, const char *field, uint32_t lo, uint32_t hi,
                   uint32_t *out, struct error *err)
{
    uint64_t u;
    if (!v || json_num_u64(v, &u) != 0 || u < lo || u > hi)
        return error_set(err, 400, "%s: must be an integer from %u to %u", field, lo, hi);
    *out = (uint32_t)u;
    return 0;
}

/* A header name: 1..63 token characters, stored lower-case. */
static int get_header(const struct json_value *v, const char *field, char out[ROUTE_HEADER_MAX],
                      struct error *err)
{
    if (!v || v->type != JSON_STRING || v->len == 0 || v->len >= ROUTE_HEADER_MAX)
        return error_set(err, 400, "%s: must be a header name of 1 to %d characters", field,
                         ROUTE_HEADER_MAX - 1);
    for (uint32_t i = 0; i < v->len; i++) {
        char c = v->u.str[i];
        bool token = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     strchr("!#$%&'*+-.^_`|~", c);
        if (!token || c == '\0')
            return error_set(err, 400, "%s: '%.*s' is not a header name", field, (int)v->len,
                             v->u.str);
        out[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    out[v->len] = '\0';
    static const char *const reserved[] = {"x-request-id", "traceparent", "tracestate",
                                           "content-type", "content-length", "host", "te",
                                           "inference-header-content-length", NULL};
    for (const char *const *r = reserved; *r; r++)
        if (strcmp(out, *r) == 0)
            return error_set(err, 400, "%s: '%s' is set by clients or the protocol for other "
                                       "purposes; choose another header",
                             field, out);
    return 0;
}

/* Fails unless v is an object (`hint` shows its form) whose members are
 * all in `known` (NULL-terminated). where: the field's path, "" for the
 * table itself. */
static int check_object(const struct json_value *v, const char *where, const char *hint,
                        const char *const *known, struct error *err)
{
    if (v->type != JSON_OBJECT)
        return where[0] ? error_set(err, 400, "%s: must be an object%s%s", where,
                                    hint[0] ? " " : "", hint)
                        : error_set(err, 400, "the routing table must be a JSON object");
    for (uint32_t i = 0; i < v->len; i++) {
        const char *k = v->u.members[i].key;
        bool ok = false;
        for (const char *const *n = known; *n && !ok; n++)
            ok = strcmp(*n, k) == 0;
        if (!ok)
            return error_set(err, 400, "%s%s%.64s: unknown field", where, where[0] ? "." : "",
                             k);
    }
    return 0;
}

static int parse_arms(const struct json_value *v, struct route_table *t, struct error *err)
{
    if (v->type != JSON_OBJECT)
        return error_set(err, 400, "arms: must be an object of arm name to version");
    if (v->len > ROUTE_MAX_ARMS)
        return error_set(err, 400, "arms: at most %d arms", ROUTE_MAX_ARMS);
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_member *m = &v->u.members[i];
        char field[96];
        snprintf(field, sizeof field, "arms.%.64s", m->key);
        if (m->key_len == 0 || m->key_len >= ROUTE_ARM_NAME_MAX || strlen(m->key) != m->key_len)
            return error_set(err, 400, "%s: an arm name has 1 to %d characters", field,
                             ROUTE_ARM_NAME_MAX - 1);
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(t->arms[k].name, m->key) == 0)
                return error_set(err, 400, "%s: named twice", field);
        memcpy(t->arms[i].name, m->key, m->key_len + 1);
        if (get_version(&m->value, field, &t->arms[i].version, err) != 0)
            return ST_ERROR;
    }
    t->narms = v->len;
    return 0;
}

/* Explicit bucket ranges of split i: [[lo, hi], ...], inclusive. */
static int parse_ranges(const struct json_value *v, uint32_t i, struct route_table *t,
                        struct error *err)
{
    char field[64];
    snprintf(field, sizeof field, "sticky[%u].buckets", i);
    if (v->type != JSON_ARRAY)
        return error_set(err, 400, "%s: must be an array of [first, last] bucket ranges", field);
    uint32_t count = 0;
    for (uint32_t r = 0; r < v->len; r++) {
        const struct json_value *pair = &v->u.items[r];
        uint64_t lo, hi;
        if (pair->type != JSON_ARRAY || pair->len != 2 ||
            json_num_u64(&pair->u.items[0], &lo) != 0 ||
            json_num_u64(&pair->u.items[1], &hi) != 0 || lo > hi || hi >= ROUTE_BUCKETS)
            return error_set(err, 400, "%s[%u]: must be [first, last] with 0 <= first <= last <= %u",
                             field, r, ROUTE_BUCKETS - 1);
        for (uint64_t b = lo; b <= hi; b++) {
            if (t->bucket_owner[b])
                return error_set(err, 400, "%s[%u]: bucket %llu is owned twice", field, r,
                                 (unsigned long long)b);
            t->bucket_owner[b] = (uint8_t)(i + 1);
        }
        count += (uint32_t)(hi - lo + 1);
    }
    t->sticky[i].buckets = count;
    return 0;
}

/* Gives each split without explicit buckets its share, starting from the
 * previous table's owners: a split keeps (the lowest of) the buckets its
 * version owned, up to its new count; the others are free and go, in
 * ascending order, to the splits that need more. So only the buckets whose
 * version must change move. */
static void derive_buckets(struct route_table *t, const uint32_t *want,
                           const struct route_table *prev)
{
    uint32_t have[ROUTE_MAX_ARMS] = {0};
    if (prev && prev->bucket_owner) {
        for (uint32_t b = 0; b < ROUTE_BUCKETS; b++) {
            uint8_t o = prev->bucket_owner[b];
            if (!o)
                continue;
            int64_t version = prev->sticky[o - 1].version;
            for (uint32_t i = 0; i < t->nsticky; i++) {
                if (t->sticky[i].version != version || have[i] >= want[i])
                    continue;
                t->bucket_owner[b] = (uint8_t)(i + 1);
                have[i]++;
                break;
            }
        }
    }
    uint32_t i = 0;
    for (uint32_t b = 0; b < ROUTE_BUCKETS && i < t->nsticky; b++) {
        while (i < t->nsticky && have[i] >= want[i])
            i++;
        if (i < t->nsticky && !t->bucket_owner[b]) {
            t->bucket_owner[b] = (uint8_t)(i + 1);
            have[i]++;
        }
    }
    for (uint32_t k = 0; k < t->nsticky; k++)
        t->sticky[k].buckets = have[k];
}

static int parse_sticky(const struct json_value *v, const struct route_table *prev,
                        struct route_table *t, struct error *err)
{
    static const char *const known[] = {"version", "percent", "buckets", NULL};
    if (v->type != JSON_ARRAY)
        return error_set(err, 400, "sticky: must be an array of {version, percent}");
    if (v->len > ROUTE_MAX_ARMS)
        return error_set(err, 400, "sticky: at most %d arms", ROUTE_MAX_ARMS);
    if (v->len == 0)
        return 0;
    t->bucket_owner = mem_calloc(ROUTE_BUCKETS, 1);
    if (!t->bucket_owner)
        return error_set(err, 500, "out of memory");
    t->nsticky = v->len;
    uint32_t want[ROUTE_MAX_ARMS], total = 0, explicit_n = 0;
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_value *s = &v->u.items[i];
        char field[48];
        snprintf(field, sizeof field, "sticky[%u]", i);
        if (check_object(s, field, "{version, percent}", known, err) != 0)
            return ST_ERROR;
        char sub[64];
        snprintf(sub, sizeof sub, "%s.version", field);
        if (get_version(json_get(s, "version"), sub, &t->sticky[i].version, err) != 0)
            return ST_ERROR;
        for (uint32_t k = 0; k < i; k++)
            if (t->sticky[k].version == t->sticky[i].version)
                return error_set(err, 400, "%s: version %lld has two arms", sub,
                                 (long long)t->sticky[i].version);
        const struct json_value *pct = json_get(s, "percent");
        const struct json_value *ranges = json_get(s, "buckets");
        snprintf(sub, sizeof sub, "%s.percent", field);
        if (!pct && !ranges)
            return error_set(err, 400, "%s: required", sub);
        if (pct && get_percent(pct, sub, &want[i], err) != 0)
            return ST_ERROR;
        if (ranges) {
            if (parse_ranges(ranges, i, t, err) != 0)
                return ST_ERROR;
            if (pct && want[i] != t->sticky[i].buckets)
                return error_set(err, 400,
                                 "%s: %u buckets are %.2f percent, not the percent given", sub,
                                 t->sticky[i].buckets, t->sticky[i].buckets / 100.0);
            want[i] = t->sticky[i].buckets;
            explicit_n++;
        }
        total += want[i];
    }
    if (total > ROUTE_BUCKETS)
        return error_set(err, 400, "sticky: the percents add up to %.2f, more than 100",
                         total / 100.0);
    if (explicit_n && explicit_n != t->nsticky)
        return error_set(err, 400, "sticky: give `buckets` for every arm or for none");
    if (!explicit_n)
        derive_buckets(t, want, prev);
    return 0;
}

static int parse_guard(const struct json_value *v, struct route_table *t, struct error *err)
{
    static const char *const known[] = {"max_error_ratio", "max_p99_ratio", "window_s",
                                        "min_requests", NULL};
    if (check_object(v, "canary.guard", "", known, err) != 0)
        return ST_ERROR;
    struct route_guard *g = &t->guard;
    g->max_error_ratio = -1;
    g->max_p99_ratio = 0;
    g->window_s = DEFAULT_WINDOW_S;
    g->min_requests = DEFAULT_MIN_REQUESTS;
    const struct json_value *x;
    if ((x = json_get(v, "max_error_ratio")) &&
        get_double(x, "canary.guard.max_error_ratio", 0, 1, &g->max_error_ratio, err) != 0)
        return ST_ERROR;
    if ((x = json_get(v, "max_p99_ratio")) &&
        get_double(x, "canary.guard.max_p99_ratio", 1, 1e6, &g->max_p99_ratio, err) != 0)
        return ST_ERROR;
    if ((x = json_get(v, "window_s")) &&
        get_u32(x, "canary.guard.window_s", 1, MAX_WINDOW_S, &g->window_s, err) != 0)
        return ST_ERROR;
    if ((x = json_get(v, "min_requests")) &&
        get_u32(x, "canary.guard.min_requests", 1, 1000000000u, &g->min_requests, err) != 0)
        return ST_ERROR;
    if (g->max_error_ratio < 0 && g->max_p99_ratio == 0)
        return error_set(err, 400,
                         "canary.guard: needs max_error_ratio or max_p99_ratio (or both)");
    t->has_guard = true;
    return 0;
}

/* The record of a rollback (GET's form, the file): kept while the weight
 * stays 0; a canary given a weight again starts without it. */
static int parse_rollback(const struct json_value *v, struct route_table *t, struct error *err)
{
    static const char *const known[] = {"time_ms", "weight", "reason", NULL};
    if (check_object(v, "canary.rollback", "", known, err) != 0)
        return ST_ERROR;
    const struct json_value *time = json_get(v, "time_ms"), *reason = json_get(v, "reason");
    if (!time || json_num_i64(time, &t->rollback_ms) != 0 || t->rollback_ms < 0)
        return error_set(err, 400, "canary.rollback.time_ms: must be an integer >= 0");
    if (get_percent(json_get(v, "weight"), "canary.rollback.weight", &t->rollback_weight_bp,
                    err) != 0)
        return ST_ERROR;
    if (!reason || reason->type != JSON_STRING || strlen(reason->u.str) != reason->len ||
        reason->len >= ROUTE_REASON_MAX)
        return error_set(err, 400, "canary.rollback.reason: must be a string of at most %d bytes",
                         ROUTE_REASON_MAX - 1);
    snprintf(t->rollback_reason, sizeof t->rollback_reason, "%s", reason->u.str);
    t->rolled_back = t->weight_bp == 0;
    return 0;
}

static int parse_canary(const struct json_value *v, struct route_table *t, struct error *err)
{
    static const char *const known[] = {"stable", "version", "weight", "guard", "rollback",
                                        NULL};
    if (check_object(v, "canary", "{stable, version, weight}", known, err) != 0)
        return ST_ERROR;
    if (get_version(json_get(v, "stable"), "canary.stable", &t->stable, err) != 0 ||
        get_version(json_get(v, "version"), "canary.version", &t->canary_version, err) != 0 ||
        get_percent(json_get(v, "weight"), "canary.weight", &t->weight_bp, err) != 0)
        return ST_ERROR;
    if (t->stable == t->canary_version)
        return error_set(err, 400, "canary.version: the same as canary.stable (%lld)",
                         (long long)t->stable);
    const struct json_value *g = json_get(v, "guard");
    if (g && parse_guard(g, t, err) != 0)
        return ST_ERROR;
    const struct json_value *rb = json_get(v, "rollback");
    if (rb && parse_rollback(rb, t, err) != 0)
        return ST_ERROR;
    t->canary = true;
    return 0;
}

static int parse_shadow(const struct json_value *v, struct route_table *t, struct error *err)
{
    static const char *const known[] = {"model", "version", "percent", "tolerance", "log_every",
                                        NULL};
    if (check_object(v, "shadow", "{version, percent}", known, err) != 0)
        return ST_ERROR;
    const struct json_value *m = json_get(v, "model");
    if (m) {
        if (m->type != JSON_STRING || m->len == 0 || m->len >= ROUTE_MODEL_MAX ||
            strlen(m->u.str) != m->len)
            return error_set(err, 400, "shadow.model: must be a model name");
        memcpy(t->shadow_model, m->u.str, m->len + 1);
    }
    if (get_version(json_get(v, "version"), "shadow.version", &t->shadow_version, err) != 0 ||
        get_percent(json_get(v, "percent"), "shadow.percent", &t->shadow_bp, err) != 0)
        return ST_ERROR;
    const struct json_value *x;
    if ((x = json_get(v, "tolerance")) &&
        get_double(x, "shadow.tolerance", 0, 1e300, &t->shadow_tolerance, err) != 0)
        return ST_ERROR;
    if ((x = json_get(v, "log_every")) &&
        get_u32(x, "shadow.log_every", 0, 1000000000u, &t->shadow_log_every, err) != 0)
        return ST_ERROR;
    t->shadow = true;
    return 0;
}

static int parse_object(const struct json_value *root, const struct route_table *prev,
                        struct route_table *t, struct error *err)
{
    static const char *const known[] = {"model", "generation", "pin_header", "arm_header",
                                        "arms", "key_header", "sticky", "canary",
                                        "default_version", "shadow", NULL};
    if (check_object(root, "", "", known, err) != 0)
        return ST_ERROR;
    const struct json_value *x;
    uint64_t gen;
    if ((x = json_get(root, "generation"))) {
        if (json_num_u64(x, &gen) != 0)
            return error_set(err, 400, "generation: must be an integer >= 0");
        t->expect_generation = gen;
    }
    if ((x = json_get(root, "pin_header")) && get_header(x, "pin_header", t->pin_header, err))
        return ST_ERROR;
    if ((x = json_get(root, "arm_header")) && get_header(x, "arm_header", t->arm_header, err))
        return ST_ERROR;
    if ((x = json_get(root, "key_header")) && get_header(x, "key_header", t->key_header, err))
        return ST_ERROR;
    if ((x = json_get(root, "arms")) && parse_arms(x, t, err) != 0)
        return ST_ERROR;
    if ((x = json_get(root, "sticky")) && parse_sticky(x, prev, t, err) != 0)
        return ST_ERROR;
    if (strcmp(t->pin_header, t->arm_header) == 0 ||
        (t->key_header[0] && (strcmp(t->key_header, t->pin_header) == 0 ||
                              strcmp(t->key_header, t->arm_header) == 0)))
        return error_set(err, 400, "pin_header, arm_header and key_header must differ");
    if (t->nsticky && !t->key_header[0])
        return error_set(err, 400, "sticky: needs key_header (the header whose value is hashed)");
    if ((x = json_get(root, "canary")) && parse_canary(x, t, err) != 0)
        return ST_ERROR;
    if ((x = json_get(root, "default_version")) &&
        get_version(x, "default_version", &t->default_version, err) != 0)
        return ST_ERROR;
    if ((x = json_get(root, "shadow")) && parse_shadow(x, t, err) != 0)
        return ST_ERROR;
    return 0;
}

int route_parse(const char *text, size_t len, const struct route_table *prev,
                struct route_table **out, struct error *err)
{
    *out = NULL;
    if (len > ROUTE_JSON_MAX)
        return error_set(err, 413, "routing table larger than %zu bytes", ROUTE_JSON_MAX);
    struct arena a;
    arena_init(&a, 16 * 1024, ROUTE_JSON_MAX * 16);
    struct json_value *root;
    const char *msg;
    size_t off;
    int rc = ST_ERROR;
    struct route_table *t = NULL;
    if (json_parse(&a, text, len, NULL, &root, &msg, &off) != ST_OK) {
        error_set(err, 400, "malformed JSON at byte %zu: %s", off, msg);
        goto out;
    }
    t = table_new();
    if (!t) {
        error_set(err, 500, "out of memory");
        goto out;
    }
    if (parse_object(root, prev, t, err) != 0)
        goto out;
    *out = t;
    t = NULL;
    rc = 0;
out:
    route_table_unref(t);
    arena_free(&a);
    return rc;
}

/* ---- checking against the repository ------------------------------------------------ */

static int check_version(const struct model_entry *e, int64_t v, const char *field,
                         struct error *err)
{
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)v);
    if (!registry_version(e, text))
        return error_set(err, 400, "%s: version %lld of model '%s' is not loaded and ready",
                         field, (long long)v, e->name);
    return 0;
}

/* The shadow model takes the primary's inputs: same names, datatypes and
 * shapes (a dimension -1 on either side matches anything). */
static int check_same_inputs(const struct model *a, const struct model *b, struct error *err)
{
    const struct model_info *x = &a->info, *y = &b->info;
    if (x->ninputs != y->ninputs)
        return error_set(err, 400, "shadow: model '%s' has %u inputs, '%s' has %u", b->name,
                         y->ninputs, a->name, x->ninputs);
    for (uint32_t i = 0; i < x->ninputs; i++) {
        const struct model_io *p = &x->inputs[i];
        const struct model_io *q = NULL;
        for (uint32_t k = 0; k < y->ninputs && !q; k++)
            if (strcmp(y->inputs[k].name, p->name) == 0)
                q = &y->inputs[k];
        bool same = q && q->dtype == p->dtype && q->ndim == p->ndim;
        for (uint32_t d = 0; same && d < p->ndim; d++)
            same = p->dims[d] < 0 || q->dims[d] < 0 || p->dims[d] == q->dims[d];
        if (!same)
            return error_set(err, 400,
                             "shadow: input '%s' of model '%s' has no match (same name, "
                             "datatype and shape) in model '%s'",
                             p->name, a->name, b->name);
    }
    return 0;
}

int route_check(const struct route_table *t, const struct model_entry *e,
                const struct model_snapshot *s, struct error *err)
{
    if (e->state != MODEL_READY || !e->model)
        return error_set(err, 400, "model '%s' has no loaded version", e->name);
    char field[96];
    for (uint32_t i = 0; i < t->narms; i++) {
        snprintf(field, sizeof field, "arms.%s", t->arms[i].name);
        if (check_version(e, t->arms[i].version, field, err) != 0)
            return ST_ERROR;
    }
    for (uint32_t i = 0; i < t->nsticky; i++) {
        snprintf(field, sizeof field, "sticky[%u].version", i);
        if (check_version(e, t->sticky[i].version, field, err) != 0)
            return ST_ERROR;
    }
    if (t->canary && (check_version(e, t->stable, "canary.stable", err) != 0 ||
                      check_version(e, t->canary_version, "canary.version", err) != 0))
        return ST_ERROR;
    if (t->default_version >= 0 &&
        check_version(e, t->default_version, "default_version", err) != 0)
        return ST_ERROR;
    if (t->shadow) {
        const struct model_entry *se = e;
        if (t->shadow_model[0] && strcmp(t->shadow_model, e->name) != 0) {
            se = snapshot_find(s, t->shadow_model, strlen(t->shadow_model));
            if (!se || se->state != MODEL_READY)
                return error_set(err, 400, "shadow.model: model '%s' is not loaded and ready",
                                 t->shadow_model);
        }
        if (check_version(se, t->shadow_version, "shadow.version", err) != 0)
            return ST_ERROR;
        char text[24];
        snprintf(text, sizeof text, "%lld", (long long)t->shadow_version);
        if (se != e && check_same_inputs(e->model, registry_version(se, text), err) != 0)
            return ST_ERROR;
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------------------- */

static void write_percent(struct json_writer *w, uint32_t bp)
{
    if (bp % 100 == 0)
        json_w_uint(w, bp / 100);
    else
        json_w_f64(w, bp / 100.0);
}

static void write_ranges(struct json_writer *w, const struct route_table *t, uint32_t i)
{
    json_w_arr_begin(w);
    uint32_t b = 0;
    while (b < ROUTE_BUCKETS) {
        if (t->bucket_owner[b] != i + 1) {
            b++;
            continue;
        }
        uint32_t lo = b;
        while (b < ROUTE_BUCKETS && t->bucket_owner[b] == i + 1)
            b++;
        json_w_arr_begin(w);
        json_w_uint(w, lo);
        json_w_uint(w, b - 1);
        json_w_arr_end(w);
    }
    json_w_arr_end(w);
}

static void write_canary(struct json_writer *w, const struct route_table *t)
{
    json_w_key(w, "canary");
    json_w_obj_begin(w);
    json_w_key(w, "stable");
    json_w_int(w, t->stable);
    json_w_key(w, "version");
    json_w_int(w, t->canary_version);
    json_w_key(w, "weight");
    write_percent(w, t->weight_bp);
    if (t->has_guard) {
        json_w_key(w, "guard");
        json_w_obj_begin(w);
        if (t->guard.max_error_ratio >= 0) {
            json_w_key(w, "max_error_ratio");
            json_w_f64(w, t->guard.max_error_ratio);
        }
        if (t->guard.max_p99_ratio > 0) {
            json_w_key(w, "max_p99_ratio");
            json_w_f64(w, t->guard.max_p99_ratio);
        }
        json_w_key(w, "window_s");
        json_w_uint(w, t->guard.window_s);
        json_w_key(w, "min_requests");
        json_w_uint(w, t->guard.min_requests);
        json_w_obj_end(w);
    }
    if (t->rolled_back) {
        json_w_key(w, "rollback");
        json_w_obj_begin(w);
        json_w_key(w, "time_ms");
        json_w_int(w, t->rollback_ms);
        json_w_key(w, "weight");
        write_percent(w, t->rollback_weight_bp);
        json_w_key(w, "reason");
        json_w_cstr(w, t->rollback_reason);
        json_w_obj_end(w);
    }
    json_w_obj_end(w);
}

void route_write_json(const struct route_table *t, const char *model, struct json_writer *w)
{
    json_w_obj_begin(w);
    json_w_key(w, "model");
    json_w_cstr(w, model);
    json_w_key(w, "generation");
    json_w_uint(w, t->generation);
    json_w_key(w, "pin_header");
    json_w_cstr(w, t->pin_header);
    json_w_key(w, "arm_header");
    json_w_cstr(w, t->arm_header);
    if (t->key_header[0]) {
        json_w_key(w, "key_header");
        json_w_cstr(w, t->key_header);
    }
    if (t->narms) {
        json_w_key(w, "arms");
        json_w_obj_begin(w);
        for (uint32_t i = 0; i < t->narms; i++) {
            json_w_key(w, t->arms[i].name);
            json_w_int(w, t->arms[i].version);
        }
        json_w_obj_end(w);
    }
    if (t->nsticky) {
        json_w_key(w, "sticky");
        json_w_arr_begin(w);
        for (uint32_t i = 0; i < t->nsticky; i++) {
            json_w_obj_begin(w);
            json_w_key(w, "version");
            json_w_int(w, t->sticky[i].version);
            json_w_key(w, "percent");
            write_percent(w, t->sticky[i].buckets);
            json_w_key(w, "buckets");
            write_ranges(w, t, i);
            json_w_obj_end(w);
        }
        json_w_arr_end(w);
    }
    if (t->canary)
        write_canary(w, t);
    if (t->default_version >= 0) {
        json_w_key(w, "default_version");
        json_w_int(w, t->default_version);
    }
    if (t->shadow) {
        json_w_key(w, "shadow");
        json_w_obj_begin(w);
        json_w_key(w, "model");
        json_w_cstr(w, t->shadow_model[0] ? t->shadow_model : model);
        json_w_key(w, "version");
        json_w_int(w, t->shadow_version);
        json_w_key(w, "percent");
        write_percent(w, t->shadow_bp);
        json_w_key(w, "tolerance");
        json_w_f64(w, t->shadow_tolerance);
        json_w_key(w, "log_every");
        json_w_uint(w, t->shadow_log_every);
        json_w_obj_end(w);
    }
    json_w_obj_end(w);
}

struct route_table *route_rolled_back(const struct route_table *t, int64_t now_ms,
                                      const char *reason)
{
    struct route_table *c = mem_alloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *t;
    atomic_init(&c->refs, 1);
    c->bucket_owner = NULL;
    if (t->bucket_owner) {
        c->bucket_owner = mem_alloc(ROUTE_BUCKETS);
        if (!c->bucket_owner) {
            mem_free(c);
            return NULL;
        }
        memcpy(c->bucket_owner, t->bucket_owner, ROUTE_BUCKETS);
    }
    c->rolled_back = true;
    c->rollback_ms = now_ms;
    c->rollback_weight_bp = t->weight_bp;
    c->weight_bp = 0;
    snprintf(c->rollback_reason, sizeof c->rollback_reason, "%s", reason);
    return c;
}

/* ---- choosing ------------------------------------------------------------------------ */

static bool header_is(const char *v, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(v, s, n) == 0;
}

void route_choose(const struct route_table *t, route_header_fn header, const void *ctx,
                  uint64_t draw, struct route_choice *out)
{
    size_t n;
    const char *v;
    memset(out, 0, sizeof *out);
    out->kind = ROUTE_DEFAULT;
    out->version = t->default_version;
    if ((v = header(ctx, t->pin_header, &n))) {
        out->kind = ROUTE_PIN;
        out->pin = v;
        out->pin_len = n;
        return;
    }
    if (t->narms && (v = header(ctx, t->arm_header, &n))) {
        for (uint32_t i = 0; i < t->narms; i++) {
            if (header_is(v, n, t->arms[i].name)) {
                out->kind = ROUTE_AB;
                out->version = t->arms[i].version;
                return;
            }
        }
    }
    const char *key = t->key_header[0] ? header(ctx, t->key_header, &n) : NULL;
    uint64_t h = 0;
    if (key) {
        h = hash_fmix64(fnv1a(key, n));
        uint8_t owner = t->bucket_owner ? t->bucket_owner[h % ROUTE_BUCKETS] : 0;
        if (owner) {
            out->kind = ROUTE_AB;
            out->version = t->sticky[owner - 1].version;
            return;
        }
    }
    if (!t->canary)
        return;
    /* The canary draw: the key (another bit mix of its hash than the
     * sticky bucket's, so the two splits are independent), else the
     * request id, else the random draw. */
    if (key)
        h = hash_fmix64(h ^ 0x9e3779b97f4a7c15ull);
    else if ((v = header(ctx, "x-request-id", &n)))
        h = hash_fmix64(fnv1a(v, n) ^ 0x9e3779b97f4a7c15ull);
    else
        h = draw;
    out->kind = ROUTE_CANARY;
    out->version = h % ROUTE_BUCKETS < t->weight_bp ? t->canary_version : t->stable;
}
