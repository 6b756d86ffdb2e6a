/*
 * Fuzz target for policy/auth: the `auth` section of the configuration
 * file (as the JSON value tree the loader hands over) and the key a
 * request presents (the Authorization and x-api-key headers). The first
 * byte chooses:
 *   even  the rest is the section as JSON text: auth_config_parse succeeds,
 *         or fails with a 400 (500: out of memory) whose message names the
 *         section ("auth" first); a parsed configuration respects its
 *         limits (at most AUTH_MAX_KEYS keys, every key's tenant exists,
 *         names of 1 to AUTH_TENANT_MAX characters of [A-Za-z0-9._-],
 *         scopes known) and a tenant is found by its name;
 *   odd   the rest is "<Authorization value>\n<x-api-key value>" (no
 *         newline: no x-api-key), checked against a store with one tenant:
 *         allowed exactly when the key is the tenant's (by either header,
 *         or both the same), else 401 with one of the three messages; the
 *         tenant is named only when allowed.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/arena.h"
#include "base/json.h"
#include "policy/auth.h"

#define KEY "inferd_fuzz-target-key-0123456789"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_auth: %s\n", what);
        abort();
    }
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

static void fuzz_section(const char *text, size_t len)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 24);
    struct json_value *v;
    const char *msg;
    size_t off;
    if (json_parse(&a, text, len, NULL, &v, &msg, &off) != 0) {
        arena_free(&a);
        return;
    }
    struct auth_config *c = NULL;
    struct error err;
    error_clear(&err);
    if (auth_config_parse(v, &c, &err) != 0) {
        check(c == NULL, "a failed parse returned a configuration");
        check(err.status == 400 || err.status == 500, "a parse error is not a 400");
        check(err.status == 500 || strncmp(err.msg, "auth", 4) == 0,
              "a parse error does not name the section");
        arena_free(&a);
        return;
    }
    check(c->nkeys <= AUTH_MAX_KEYS && c->ntenants <= AUTH_MAX_KEYS, "over the key cap");
    for (uint32_t i = 0; i < c->nkeys; i++)
        check(c->keys[i].tenant < c->ntenants, "a key of no tenant");
    for (uint32_t i = 0; i < c->ntenants; i++) {
        const struct auth_tenant *t = &c->tenants[i];
        size_t n = strlen(t->name);
        check(n >= 1 && n <= AUTH_TENANT_MAX, "a name of a bad length");
        for (size_t k = 0; k < n; k++)
            check(name_char(t->name[k]), "a name with a bad character");
        check((t->scopes & ~7u) == 0, "an unknown scope");
        check(t->scopes || t->nmodels, "a tenant without a scope");
        check(t->nmodels <= AUTH_MAX_MODEL_SCOPES, "too many model scopes");
        check(t->config == c, "a tenant of another configuration");
        check(auth_config_has_tenant(c, t->name), "a tenant not found by its name");
    }
    auth_config_free(c);
    arena_free(&a);
}

struct headers {
    const char *authz, *x;
    size_t authz_len, x_len;
};

static const char *header(const void *ctx, const char *name, size_t *len)
{
    const struct headers *h = ctx;
    if (strcmp(name, "authorization") == 0 && h->authz) {
        *len = h->authz_len;
        return h->authz;
    }
    if (strcmp(name, "x-api-key") == 0 && h->x) {
        *len = h->x_len;
        return h->x;
    }
    return NULL;
}

static struct auth *store(void)
{
    static struct auth *a;
    if (a)
        return a;
    char hash[AUTH_HASH_LEN + 1], json[512];
    struct auth_key_hash h;
    check(auth_key_hash(KEY, strlen(KEY), &h) == 0, "cannot hash the key");
    auth_key_format(&h, hash);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"t\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}]}",
             hash);
    struct arena ar;
    arena_init(&ar, 4096, 1 << 20);
    struct json_value *v;
    const char *msg;
    size_t off;
    check(json_parse(&ar, json, strlen(json), NULL, &v, &msg, &off) == 0, "store JSON");
    struct auth_config *c;
    struct error err;
    check(auth_config_parse(v, &c, &err) == 0, "store section");
    arena_free(&ar);
    a = auth_new();
    check(a != NULL, "out of memory");
    auth_apply(a, c);
    return a;
}

/* The Bearer token of an Authorization value as the check reads it. */
static bool bearer_token(const char *v, size_t n, const char **tok, size_t *tlen)
{
    if (n <= 7 || strncasecmp(v, "bearer ", 7) != 0)
        return false;
    size_t i = 7;
    while (i < n && v[i] == ' ')
        i++;
    size_t e = n;
    while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t'))
        e--;
    *tok = v + i;
    *tlen = e - i;
    return e > i;
}

static bool is_key(const char *s, size_t n)
{
    return n == strlen(KEY) && memcmp(s, KEY, n) == 0;
}

static void fuzz_headers(const char *data, size_t len)
{
    struct headers h = {data, NULL, len, 0};
    const char *nl = memchr(data, '\n', len);
    if (nl) {
        h.authz_len = (size_t)(nl - data);
        h.x = nl + 1;
        h.x_len = len - h.authz_len - 1;
    }
    const char *tok = NULL;
    size_t tlen = 0;
    bool has_bearer = bearer_token(h.authz, h.authz_len, &tok, &tlen);
    bool has_x = h.x && h.x_len;
    bool conflict = has_bearer && has_x && (tlen != h.x_len || memcmp(tok, h.x, tlen) != 0);
    bool allowed = !conflict && ((has_bearer && is_key(tok, tlen)) ||
                                 (!has_bearer && has_x && is_key(h.x, h.x_len)));
    struct auth_result res;
    struct error err;
    error_clear(&err);
    int rc = auth_check(store(), AUTH_READ, NULL, header, &h, &res, &err);
    check((rc == 0) == allowed, "allowed a wrong key or refused the right one");
    if (allowed) {
        check(strcmp(res.tenant, "t") == 0, "allowed without its tenant");
        return;
    }
    check(err.status == 401 && res.tenant[0] == '\0', "a refusal is not a 401 without tenant");
    check(strcmp(err.msg, conflict              ? AUTH_MSG_CONFLICT
                          : has_bearer || has_x ? AUTH_MSG_INVALID
                                                : AUTH_MSG_MISSING) == 0,
          "a refusal with the wrong message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_section((const char *)data + 1, size - 1);
    else
        fuzz_headers((const char *)data + 1, size - 1);
    return 0;
}
