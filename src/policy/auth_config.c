/* The `auth` section's parser (policy/auth.h, policy/auth_config.h). */
#include "policy/auth_config.h"

#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "base/status.h"

#define SECTION "auth"
#define DEFAULT_OPEN (AUTH_OPEN_HEALTH | AUTH_OPEN_METRICS)

static const struct {
    const char *name;
    uint32_t bit;
} open_names[] = {
    {"health", AUTH_OPEN_HEALTH},
    {"metrics", AUTH_OPEN_METRICS},
    {"metadata", AUTH_OPEN_METADATA},
    {"dashboard", AUTH_OPEN_DASHBOARD},
};

static const struct {
    const char *name;
    uint32_t bit;
} scope_names[] = {
    {"read", AUTH_SCOPE_READ},
    {"admin", AUTH_SCOPE_ADMIN},
    {"infer", AUTH_SCOPE_INFER},
};

#define INFER_PREFIX "infer:"

/* ---- reference counting -------------------------------------------------------- */

void auth_config_ref(struct auth_config *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void auth_config_unref(struct auth_config *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < c->ntenants; i++) {
        struct auth_tenant *t = &c->tenants[i];
        for (uint32_t k = 0; k < t->nmodels; k++)
            mem_free(t->models[k]);
        mem_free(t->models);
    }
    mem_free(c->tenants);
    /* Hashes are not secrets, but nothing needs them in freed memory. */
    if (c->keys)
        explicit_bzero(c->keys, c->nkeys * sizeof *c->keys);
    mem_free(c->keys);
    mem_free(c);
}

void auth_config_free(struct auth_config *c)
{
    auth_config_unref(c);
}

bool auth_config_has_tenant(const struct auth_config *c, const char *name)
{
    for (uint32_t i = 0; c && i < c->ntenants; i++)
        if (strcmp(c->tenants[i].name, name) == 0)
            return true;
    return false;
}

/* ---- parsing ------------------------------------------------------------------------ */

/* json_type_name() in the words of the YAML file. */
static const char *type_name(const struct json_value *v)
{
    switch (v->type) {
    case JSON_NULL:
        return "nothing";
    case JSON_ARRAY:
    case JSON_RAW:
        return "a list";
    case JSON_OBJECT:
        return "a mapping";
    default:
        return json_type_name(v);
    }
}

/* Fails unless v is a mapping whose keys are all in known (NULL-terminated). */
static int check_object(const struct json_value *v, const char *where, const char *what,
                        const char *const *known, struct error *err)
{
    if (v->type != JSON_OBJECT)
        return error_set(err, 400, "%s: expected %s, got %s", where, what, type_name(v));
    for (uint32_t i = 0; i < v->len; i++) {
        const char *k = v->u.members[i].key;
        bool ok = false;
        for (const char *const *n = known; *n && !ok; n++)
            ok = strcmp(*n, k) == 0;
        if (!ok) {
            char list[128] = "";
            size_t used = 0;
            for (const char *const *n = known; *n; n++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                         n == known ? "" : ", ", *n);
            return error_set(err, 400, "%s.%.64s: unknown key (expected %s)", where, k, list);
        }
    }
    return 0;
}

/* A scalar's text (strings, and numbers as written: `name: 007`). */
static bool scalar_text(const struct json_value *v, const char **s, size_t *n)
{
    if (v->type == JSON_STRING) {
        *s = v->u.str;
        *n = v->len;
        return true;
    }
    if (v->type == JSON_NUMBER) {
        *s = v->u.num;
        *n = v->len;
        return true;
    }
    return false;
}

static int parse_open(const struct json_value *v, uint32_t *open, struct error *err)
{
    if (!v || v->type == JSON_NULL) {
        *open = DEFAULT_OPEN;
        return 0;
    }
    if (v->type != JSON_ARRAY)
        return error_set(err, 400,
                         SECTION ".open: expected a list of endpoint names (health, metrics, "
                                 "metadata, dashboard), got %s",
                         type_name(v));
    *open = 0;
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_value *it = &v->u.items[i];
        uint32_t bit = 0;
        for (size_t k = 0; it->type == JSON_STRING && k < sizeof open_names / sizeof open_names[0];
             k++)
            if (strlen(open_names[k].name) == it->len && strcmp(open_names[k].name, it->u.str) == 0)
                bit = open_names[k].bit;
        if (!bit)
            return error_set(err, 400,
                             SECTION ".open[%u]: expected one of health, metrics, metadata, "
                                     "dashboard",
                             i);
        if (*open & bit)
            return error_set(err, 400, SECTION ".open[%u]: '%s' is named twice", i, it->u.str);
        *open |= bit;
    }
    return 0;
}

static int parse_name(const struct json_value *v, const char *where, const struct auth_config *c,
                      struct auth_tenant *t, struct error *err)
{
    const char *s;
    size_t n;
    if (!v)
        return error_set(err, 400, "%s: missing key 'name'", where);
    if (!scalar_text(v, &s, &n) || n == 0 || n > AUTH_TENANT_MAX)
        return error_set(err, 400, "%s.name: expected a name of 1 to %d characters", where,
                         AUTH_TENANT_MAX);
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok)
            return error_set(err, 400, "%s.name: a name has only the characters A-Z a-z 0-9 . _ -",
                             where);
    }
    memcpy(t->name, s, n);
    t->name[n] = '\0';
    for (uint32_t i = 0; i < c->ntenants; i++)
        if (strcmp(c->tenants[i].name, t->name) == 0)
            return error_set(err, 400, "%s.name: tenant '%s' is already defined (tenants[%u])",
                             where, t->name, i);
    return 0;
}

/* The key hashes of tenant index ti, appended to c->keys. */
static int parse_keys(const struct json_value *v, const char *where, struct auth_config *c,
                      uint32_t ti, struct error *err)
{
    if (!v)
        return error_set(err, 400, "%s: missing key 'keys' (a list of key hashes)", where);
    if (v->type != JSON_ARRAY || v->len == 0)
        return error_set(err, 400,
                         "%s.keys: expected a list of one or more key hashes "
                         "(`inferd keys hash`), got %s",
                         where, v->type == JSON_ARRAY ? "an empty list" : type_name(v));
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_value *it = &v->u.items[i];
        if (c->nkeys == AUTH_MAX_KEYS)
            return error_set(err, 400, "%s.keys[%u]: at most %d keys in all", where, i,
                             AUTH_MAX_KEYS);
        struct auth_stored_key *k = &c->keys[c->nkeys];
        /* Never quote the value: it may be a key pasted by mistake. */
        if (it->type != JSON_STRING || auth_key_parse(it->u.str, it->len, &k->hash) != 0) {
            bool looks_like_key = it->type == JSON_STRING &&
                                  strncmp(it->u.str, AUTH_HASH_PREFIX, 7) != 0 &&
                                  auth_key_valid(it->u.str, it->len);
            return error_set(err, 400, "%s.keys[%u]: %s", where, i,
                             looks_like_key
                                 ? "this looks like a key itself; the configuration takes its "
                                   "hash (`inferd keys hash`), never the key"
                                 : "expected a key hash \"inferd-sha256$<32 hex digits>$<64 hex "
                                   "digits>\" (`inferd keys hash`)");
        }
        for (uint32_t j = 0; j < c->nkeys; j++)
            if (memcmp(&c->keys[j].hash, &k->hash, sizeof k->hash) == 0)
                return error_set(err, 400,
                                 "%s.keys[%u]: the same key hash is already listed "
                                 "(tenant '%s')",
                                 where, i, c->tenants[c->keys[j].tenant].name);
        k->tenant = ti;
        c->nkeys++;
    }
    return 0;
}

static int parse_scopes(const struct json_value *v, const char *where, struct auth_tenant *t,
                        struct error *err)
{
    if (!v)
        return error_set(err, 400, "%s: missing key 'scopes' (infer, infer:<model>, read, admin)",
                         where);
    if (v->type != JSON_ARRAY || v->len == 0)
        return error_set(err, 400,
                         "%s.scopes: expected a list of one or more of infer, infer:<model>, "
                         "read, admin, got %s",
                         where, v->type == JSON_ARRAY ? "an empty list" : type_name(v));
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_value *it = &v->u.items[i];
        const char *s = it->type == JSON_STRING ? it->u.str : "";
        size_t n = it->type == JSON_STRING ? it->len : 0;
        const size_t pn = sizeof INFER_PREFIX - 1;
        if (n > pn && memcmp(s, INFER_PREFIX, pn) == 0) {
            const char *model = s + pn;
            size_t mn = n - pn;
            if (mn > AUTH_MODEL_MAX || memchr(model, '\0', mn) || memchr(model, '/', mn))
                return error_set(err, 400,
                                 "%s.scopes[%u]: a model name has 1 to %d characters, "
                                 "without '/'",
                                 where, i, AUTH_MODEL_MAX);
            for (uint32_t k = 0; k < t->nmodels; k++)
                if (strcmp(t->models[k], model) == 0)
                    return error_set(err, 400, "%s.scopes[%u]: 'infer:%s' is named twice", where, i,
                                     model);
            if (t->nmodels == AUTH_MAX_MODEL_SCOPES)
                return error_set(err, 400, "%s.scopes[%u]: at most %d infer:<model> scopes", where,
                                 i, AUTH_MAX_MODEL_SCOPES);
            t->models[t->nmodels] = mem_strndup(model, mn);
            if (!t->models[t->nmodels])
                return error_set(err, 500, "out of memory");
            t->nmodels++;
            continue;
        }
        uint32_t bit = 0;
        for (size_t k = 0; k < sizeof scope_names / sizeof scope_names[0]; k++)
            if (strlen(scope_names[k].name) == n && memcmp(scope_names[k].name, s, n) == 0)
                bit = scope_names[k].bit;
        if (!bit)
            return error_set(
                err, 400, "%s.scopes[%u]: expected infer, infer:<model>, read or admin", where, i);
        if (t->scopes & bit)
            return error_set(err, 400, "%s.scopes[%u]: '%s' is named twice", where, i, s);
        t->scopes |= bit;
    }
    return 0;
}

static int parse_tenant(const struct json_value *v, uint32_t index, struct auth_config *c,
                        struct error *err)
{
    static const char *const known[] = {"name", "keys", "scopes", NULL};
    char where[48];
    snprintf(where, sizeof where, SECTION ".tenants[%u]", index);
    if (check_object(v, where, "a mapping with name, keys and scopes", known, err) != 0)
        return ST_ERROR;
    struct auth_tenant *t = &c->tenants[c->ntenants];
    t->config = c;
    if (parse_name(json_get(v, "name"), where, c, t, err) != 0)
        return ST_ERROR;
    const struct json_value *scopes = json_get(v, "scopes");
    if (scopes && scopes->type == JSON_ARRAY && scopes->len) {
        uint32_t n = scopes->len < AUTH_MAX_MODEL_SCOPES ? scopes->len : AUTH_MAX_MODEL_SCOPES;
        t->models = mem_calloc(n, sizeof *t->models);
        if (!t->models)
            return error_set(err, 500, "out of memory");
    }
    /* Counted now so that a failure below frees what the tenant holds. */
    c->ntenants++;
    if (parse_keys(json_get(v, "keys"), where, c, index, err) != 0 ||
        parse_scopes(scopes, where, t, err) != 0)
        return ST_ERROR;
    return 0;
}

/* Keys in the whole section, to size c->keys (each checked later). */
static uint32_t count_keys(const struct json_value *tenants)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < tenants->len; i++) {
        const struct json_value *keys = json_get(&tenants->u.items[i], "keys");
        if (keys && keys->type == JSON_ARRAY)
            n += keys->len;
    }
    return n > AUTH_MAX_KEYS ? AUTH_MAX_KEYS : (uint32_t)n;
}

int auth_config_parse(const struct json_value *section, struct auth_config **out, struct error *err)
{
    static const char *const known[] = {"open", "tenants", NULL};
    *out = NULL;
    if (section && section->type != JSON_NULL &&
        check_object(section, SECTION, "a mapping with open and tenants", known, err) != 0)
        return ST_ERROR;
    if (section && section->type == JSON_NULL)
        section = NULL;
    struct auth_config *c = mem_calloc(1, sizeof *c);
    if (!c)
        return error_set(err, 500, "out of memory");
    atomic_init(&c->refs, 1);
    const struct json_value *tenants = json_get(section, "tenants");
    if (parse_open(json_get(section, "open"), &c->open, err) != 0)
        goto out_free;
    if (tenants && tenants->type != JSON_NULL) {
        if (tenants->type != JSON_ARRAY) {
            error_set(err, 400, SECTION ".tenants: expected a list of tenants, got %s",
                      type_name(tenants));
            goto out_free;
        }
        if (tenants->len > AUTH_MAX_KEYS) {
            error_set(err, 400, SECTION ".tenants: at most %d tenants", AUTH_MAX_KEYS);
            goto out_free;
        }
        uint32_t nkeys = count_keys(tenants);
        c->tenants = mem_calloc(tenants->len ? tenants->len : 1, sizeof *c->tenants);
        c->keys = mem_calloc(nkeys ? nkeys : 1, sizeof *c->keys);
        if (!c->tenants || !c->keys) {
            error_set(err, 500, "out of memory");
            goto out_free;
        }
        for (uint32_t i = 0; i < tenants->len; i++)
            if (parse_tenant(&tenants->u.items[i], i, c, err) != 0)
                goto out_free;
    }
    *out = c;
    return 0;
out_free:
    auth_config_unref(c);
    return ST_ERROR;
}
