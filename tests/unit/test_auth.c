/*
 * API keys, tenants and scopes (policy/auth*.c), without a server: the key
 * hash format and its verification, the constant-time compare, the `auth`
 * section's errors (each naming its path, none quoting a key or a hash),
 * the checks of every endpoint class, the per-thread key hints (a hint
 * that points at the wrong key, slots shared by many keys), reloads, the
 * infer stage and the refusal metrics.
 *
 * auth.c is compiled into this test (white box: its hint table and hash),
 * so the library's copy is not linked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../src/policy/auth.c"

/* ---- helpers ------------------------------------------------------------------------ */

struct headers {
    const char *names[4];
    const char *values[4];
    int n;
};

static const char *get_header(const void *ctx, const char *name, size_t *len)
{
    const struct headers *h = ctx;
    for (int i = 0; i < h->n; i++)
        if (strcasecmp(h->names[i], name) == 0) {
            *len = strlen(h->values[i]);
            return h->values[i];
        }
    return NULL;
}

static struct headers bearer(const char *key)
{
    static char value[512];
    snprintf(value, sizeof value, "Bearer %s", key);
    return (struct headers){{"Authorization"}, {value}, 1};
}

static struct headers api_key(const char *key)
{
    return (struct headers){{"x-api-key"}, {key}, 1};
}

static void hash_text(const char *key, char out[AUTH_HASH_LEN + 1])
{
    struct auth_key_hash h;
    assert_int_equal(auth_key_hash(key, strlen(key), &h), 0);
    auth_key_format(&h, out);
}

static struct auth_config *parse_ok(const char *json)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 24);
    struct json_value *v;
    const char *msg;
    size_t off;
    if (json_parse(&a, json, strlen(json), NULL, &v, &msg, &off) != 0)
        fail_msg("test JSON does not parse at %zu: %s", off, msg);
    struct auth_config *c = NULL;
    struct error err;
    error_clear(&err);
    if (auth_config_parse(v, &c, &err) != 0)
        fail_msg("auth_config_parse: %s", err.msg);
    arena_free(&a);
    return c;
}

/* The section must not parse; its error must name `path` and quote none
 * of `secret` (may be NULL). */
static void parse_fails(const char *json, const char *path, const char *secret)
{
    struct arena a;
    arena_init(&a, 4096, 1 << 24);
    struct json_value *v;
    const char *msg;
    size_t off;
    if (json_parse(&a, json, strlen(json), NULL, &v, &msg, &off) != 0)
        fail_msg("test JSON does not parse at %zu: %s", off, msg);
    struct auth_config *c = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(auth_config_parse(v, &c, &err), -1);
    assert_null(c);
    assert_int_equal(err.status, 400);
    if (!strstr(err.msg, path))
        fail_msg("error '%s' does not name '%s'", err.msg, path);
    if (secret && strstr(err.msg, secret))
        fail_msg("error '%s' quotes a secret", err.msg);
    arena_free(&a);
}

#define KEY_A "key-of-team-a-0123456789"
#define KEY_A2 "second-key-of-team-a-xyz"
#define KEY_B "key-of-team-b-0123456789"
#define KEY_R "key-of-readers-012345678"
#define KEY_D "key-of-digits-only-01234"

/* A store with four tenants: team-a (infer, two keys), team-b (admin,
 * read), readers (read), digits (infer:digits); open as given. */
static struct auth *store_with_tenants(const char *open)
{
    char ha[AUTH_HASH_LEN + 1], ha2[AUTH_HASH_LEN + 1], hb[AUTH_HASH_LEN + 1],
        hr[AUTH_HASH_LEN + 1], hd[AUTH_HASH_LEN + 1];
    hash_text(KEY_A, ha);
    hash_text(KEY_A2, ha2);
    hash_text(KEY_B, hb);
    hash_text(KEY_R, hr);
    hash_text(KEY_D, hd);
    char json[4096];
    snprintf(json, sizeof json,
             "{%s%s%s\"tenants\": ["
             "{\"name\": \"team-a\", \"keys\": [\"%s\", \"%s\"], \"scopes\": [\"infer\"]},"
             "{\"name\": \"team-b\", \"keys\": [\"%s\"], \"scopes\": [\"admin\", \"read\"]},"
             "{\"name\": \"readers\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]},"
             "{\"name\": \"digits\", \"keys\": [\"%s\"], \"scopes\": [\"infer:digits\"]}]}",
             open ? "\"open\": " : "", open ? open : "", open ? "," : "", ha, ha2, hb, hr, hd);
    struct auth *a = auth_new();
    assert_non_null(a);
    auth_apply(a, parse_ok(json));
    return a;
}

/* The check's outcome: 0 or the error status; tenant into *tenant. */
static int check(struct auth *a, enum auth_class cls, const char *model, struct headers h,
                 char *tenant, struct error *err)
{
    struct auth_result res;
    error_clear(err);
    int rc = auth_check(a, cls, model, get_header, &h, &res, err);
    if (tenant)
        strcpy(tenant, res.tenant);
    return rc == 0 ? 0 : err->status;
}

/* ---- keys and hashes ---------------------------------------------------------------- */

static void test_key_hash_format(void **state)
{
    (void)state;
    struct auth_key_hash h, back;
    assert_int_equal(auth_key_hash(KEY_A, strlen(KEY_A), &h), 0);
    /* digest = SHA-256(salt || key) */
    uint8_t msg[AUTH_SALT_SIZE + sizeof KEY_A], want[SHA256_DIGEST_SIZE];
    memcpy(msg, h.salt, AUTH_SALT_SIZE);
    memcpy(msg + AUTH_SALT_SIZE, KEY_A, strlen(KEY_A));
    sha256(msg, AUTH_SALT_SIZE + strlen(KEY_A), want);
    assert_memory_equal(h.digest, want, sizeof want);

    char text[AUTH_HASH_LEN + 1];
    auth_key_format(&h, text);
    assert_int_equal(strlen(text), AUTH_HASH_LEN);
    assert_int_equal(strncmp(text, "inferd-sha256$", 14), 0);
    assert_int_equal(text[14 + 32], '$');
    assert_null(strstr(text, KEY_A));
    assert_int_equal(auth_key_parse(text, strlen(text), &back), 0);
    assert_memory_equal(&back, &h, sizeof h);
    /* Upper-case hex reads too. */
    for (char *p = text + 14; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char)(*p - 'a' + 'A');
    assert_int_equal(auth_key_parse(text, strlen(text), &back), 0);
    assert_memory_equal(&back, &h, sizeof h);

    assert_true(auth_key_matches(&h, KEY_A, strlen(KEY_A)));
    assert_false(auth_key_matches(&h, KEY_B, strlen(KEY_B)));
    assert_false(auth_key_matches(&h, KEY_A, strlen(KEY_A) - 1));

    /* A new salt every time: the same key, another hash. */
    struct auth_key_hash h2;
    assert_int_equal(auth_key_hash(KEY_A, strlen(KEY_A), &h2), 0);
    assert_memory_not_equal(h.salt, h2.salt, AUTH_SALT_SIZE);
    assert_true(auth_key_matches(&h2, KEY_A, strlen(KEY_A)));
}

static void test_key_hash_parse_errors(void **state)
{
    (void)state;
    char good[AUTH_HASH_LEN + 1], bad[AUTH_HASH_LEN + 2];
    struct auth_key_hash h;
    hash_text(KEY_A, good);
    assert_int_equal(auth_key_parse(good, AUTH_HASH_LEN - 1, &h), -1);
    memcpy(bad, good, sizeof good);
    bad[0] = 'X';
    assert_int_equal(auth_key_parse(bad, AUTH_HASH_LEN, &h), -1);
    memcpy(bad, good, sizeof good);
    bad[20] = 'g';
    assert_int_equal(auth_key_parse(bad, AUTH_HASH_LEN, &h), -1);
    memcpy(bad, good, sizeof good);
    bad[14 + 32] = ':';
    assert_int_equal(auth_key_parse(bad, AUTH_HASH_LEN, &h), -1);
    memcpy(bad, good, sizeof good);
    bad[AUTH_HASH_LEN - 1] = 'z';
    assert_int_equal(auth_key_parse(bad, AUTH_HASH_LEN, &h), -1);
    snprintf(bad, sizeof bad, "%s0", good);
    assert_int_equal(auth_key_parse(bad, AUTH_HASH_LEN + 1, &h), -1);
}

static void test_key_validity(void **state)
{
    (void)state;
    char key[AUTH_KEY_MAX + 2];
    memset(key, 'k', sizeof key);
    assert_false(auth_key_valid(key, 15));
    assert_true(auth_key_valid(key, 16));
    assert_true(auth_key_valid(key, AUTH_KEY_MAX));
    assert_false(auth_key_valid(key, AUTH_KEY_MAX + 1));
    key[5] = ' ';
    assert_false(auth_key_valid(key, 16));
    key[5] = '\x7f';
    assert_false(auth_key_valid(key, 16));
    struct auth_key_hash h;
    assert_int_equal(auth_key_hash("too-short-key", 13, &h), -EINVAL);
}

static void test_key_new(void **state)
{
    (void)state;
    char k1[AUTH_NEW_KEY_LEN + 1], k2[AUTH_NEW_KEY_LEN + 1];
    assert_int_equal(auth_key_new(k1), 0);
    assert_int_equal(auth_key_new(k2), 0);
    assert_int_equal(strlen(k1), 50);
    assert_int_equal(strncmp(k1, "inferd_", 7), 0);
    assert_string_not_equal(k1, k2);
    for (const char *p = k1 + 7; *p; p++)
        assert_non_null(
            strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
    assert_true(auth_key_valid(k1, strlen(k1)));
}

static void test_ct_equal(void **state)
{
    (void)state;
    uint8_t a[32], b[32];
    for (int i = 0; i < 32; i++)
        a[i] = b[i] = (uint8_t)(i * 7);
    assert_true(auth_ct_equal(a, b, 32));
    assert_true(auth_ct_equal(a, b, 0));
    for (int i = 0; i < 32; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            assert_false(auth_ct_equal(a, b, 32));
            b[i] ^= (uint8_t)(1u << bit);
        }
    }
    assert_true(auth_ct_equal(a, b, 32));
}

/* ---- the section ----------------------------------------------------------------------- */

static void test_parse_defaults(void **state)
{
    (void)state;
    struct auth_config *c = NULL;
    struct error err;
    assert_int_equal(auth_config_parse(NULL, &c, &err), 0);
    assert_int_equal(c->ntenants, 0);
    assert_int_equal(c->open, AUTH_OPEN_HEALTH | AUTH_OPEN_METRICS);
    auth_config_free(c);
    c = parse_ok("null");
    assert_int_equal(c->open, AUTH_OPEN_HEALTH | AUTH_OPEN_METRICS);
    auth_config_free(c);
    c = parse_ok("{\"open\": [], \"tenants\": []}");
    assert_int_equal(c->open, 0);
    assert_int_equal(c->ntenants, 0);
    auth_config_free(c);
    c = parse_ok("{\"open\": [\"dashboard\", \"metadata\"]}");
    assert_int_equal(c->open, AUTH_OPEN_DASHBOARD | AUTH_OPEN_METADATA);
    auth_config_free(c);
    auth_config_free(NULL);
}

static void test_parse_tenants(void **state)
{
    (void)state;
    char h1[AUTH_HASH_LEN + 1], h2[AUTH_HASH_LEN + 1];
    hash_text(KEY_A, h1);
    hash_text(KEY_B, h2);
    char json[2048];
    /* A number is a name as written (YAML `name: 42`). */
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"team.A_1-x\", \"keys\": [\"%s\"], "
             "\"scopes\": [\"infer:digits\", \"read\", \"infer:simple\"]},"
             "{\"name\": 42, \"keys\": [\"%s\"], \"scopes\": [\"admin\", \"infer\"]}]}",
             h1, h2);
    struct auth_config *c = parse_ok(json);
    assert_int_equal(c->ntenants, 2);
    assert_int_equal(c->nkeys, 2);
    assert_string_equal(c->tenants[0].name, "team.A_1-x");
    assert_int_equal(c->tenants[0].scopes, AUTH_SCOPE_READ);
    assert_int_equal(c->tenants[0].nmodels, 2);
    assert_string_equal(c->tenants[0].models[0], "digits");
    assert_string_equal(c->tenants[0].models[1], "simple");
    assert_string_equal(c->tenants[1].name, "42");
    assert_int_equal(c->tenants[1].scopes, AUTH_SCOPE_ADMIN | AUTH_SCOPE_INFER);
    assert_int_equal(c->keys[1].tenant, 1);
    assert_true(auth_config_has_tenant(c, "42"));
    assert_true(auth_config_has_tenant(c, "team.A_1-x"));
    assert_false(auth_config_has_tenant(c, "team"));
    assert_false(auth_config_has_tenant(NULL, "42"));
    auth_config_free(c);
}

static void test_parse_errors(void **state)
{
    (void)state;
    char h[AUTH_HASH_LEN + 1], json[4096];
    hash_text(KEY_A, h);
    parse_fails("[]", "auth: expected a mapping", NULL);
    parse_fails("{\"tenant\": []}", "auth.tenant: unknown key", NULL);
    parse_fails("{\"open\": \"health\"}", "auth.open: expected a list", NULL);
    parse_fails("{\"open\": [\"health\", \"admin\"]}", "auth.open[1]: expected one of", NULL);
    parse_fails("{\"open\": [\"health\", \"health\"]}", "auth.open[1]: 'health' is named twice",
                NULL);
    parse_fails("{\"tenants\": {}}", "auth.tenants: expected a list", NULL);
    parse_fails("{\"tenants\": [\"team-a\"]}", "auth.tenants[0]: expected a mapping", NULL);
#define TENANT(fmt)                                                                                \
    "{\"tenants\": [{\"name\": \"t0\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}, " fmt "]}"
    snprintf(json, sizeof json, TENANT("{\"name\": \"t1\", \"key\": []}"), h);
    parse_fails(json, "auth.tenants[1].key: unknown key", NULL);
    snprintf(json, sizeof json, TENANT("{\"keys\": [], \"scopes\": []}"), h);
    parse_fails(json, "auth.tenants[1]: missing key 'name'", NULL);
    snprintf(json, sizeof json, TENANT("{\"name\": \"a b\", \"keys\": [], \"scopes\": []}"), h);
    parse_fails(json, "auth.tenants[1].name: a name has only", NULL);
    snprintf(json, sizeof json, TENANT("{\"name\": \"%s\", \"keys\": [], \"scopes\": []}"), h,
             "x12345678901234567890123456789012345678901234567890123456789012345");
    parse_fails(json, "auth.tenants[1].name: expected a name of 1 to 64", NULL);
    snprintf(json, sizeof json, TENANT("{\"name\": \"t0\", \"keys\": [], \"scopes\": []}"), h);
    parse_fails(json, "auth.tenants[1].name: tenant 't0' is already defined", NULL);
    snprintf(json, sizeof json, TENANT("{\"name\": \"t1\", \"scopes\": [\"read\"]}"), h);
    parse_fails(json, "auth.tenants[1]: missing key 'keys'", NULL);
    snprintf(json, sizeof json, TENANT("{\"name\": \"t1\", \"keys\": [], \"scopes\": [\"read\"]}"),
             h);
    parse_fails(json, "auth.tenants[1].keys: expected a list of one or more", NULL);
    /* A hash listed twice (even for another tenant) is refused... */
    snprintf(json, sizeof json,
             TENANT("{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}"), h, h);
    parse_fails(json, "auth.tenants[1].keys[0]: the same key hash is already listed", h);
    /* ...a malformed one is never quoted, nor a key pasted in its place. */
    char broken[AUTH_HASH_LEN + 1];
    memcpy(broken, h, sizeof h);
    broken[40] = 'x';
    snprintf(json, sizeof json,
             TENANT("{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}"), h, broken);
    parse_fails(json, "auth.tenants[1].keys[0]: expected a key hash", broken + 14);
    snprintf(json, sizeof json,
             TENANT("{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}"), h,
             "inferd_z6zCChYGmu9bNLu31Nfgu35syOhYXzB5UiVTJmBmDww");
    parse_fails(json, "auth.tenants[1].keys[0]: this looks like a key itself", "z6zCChYG");
    snprintf(json, sizeof json, TENANT("{\"name\": \"t1\", \"keys\": [\"%s\", 12]}"), h, h);
    parse_fails(json, "auth.tenants[1].keys[0]", NULL);
    snprintf(json, sizeof json, "{\"tenants\": [{\"name\": \"t1\", \"keys\": [\"%s\"]}]}", h);
    parse_fails(json, "auth.tenants[0]: missing key 'scopes'", NULL);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": []}]}", h);
    parse_fails(json, "auth.tenants[0].scopes: expected a list of one or more", NULL);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"read\", "
             "\"write\"]}]}",
             h);
    parse_fails(json, "auth.tenants[0].scopes[1]: expected infer, infer:<model>, read or admin",
                NULL);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"read\", "
             "\"read\"]}]}",
             h);
    parse_fails(json, "auth.tenants[0].scopes[1]: 'read' is named twice", NULL);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"infer:a/b\"]}]}",
             h);
    parse_fails(json, "auth.tenants[0].scopes[0]: a model name", NULL);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"t1\", \"keys\": [\"%s\"], \"scopes\": [\"infer:\"]}]}",
             h);
    parse_fails(json, "auth.tenants[0].scopes[0]: expected infer", NULL);
#undef TENANT
}

/* Every allocation of a parse failing in turn: a 500 and nothing kept
 * (the sanitizer build checks that nothing leaks), until one succeeds. */
static void test_parse_out_of_memory(void **state)
{
    (void)state;
    char h1[AUTH_HASH_LEN + 1], h2[AUTH_HASH_LEN + 1], json[2048];
    hash_text(KEY_A, h1);
    hash_text(KEY_B, h2);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"a\", \"keys\": [\"%s\"], \"scopes\": [\"infer:x\", "
             "\"infer:y\"]}, {\"name\": \"b\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}]}",
             h1, h2);
    struct arena a;
    arena_init(&a, 4096, 1 << 20);
    struct json_value *v;
    const char *msg;
    size_t off;
    assert_int_equal(json_parse(&a, json, strlen(json), NULL, &v, &msg, &off), 0);
    bool parsed = false;
    for (long n = 0; n < 100 && !parsed; n++) {
        struct auth_config *c = NULL;
        struct error err;
        error_clear(&err);
        mem_fail_after(n);
        int rc = auth_config_parse(v, &c, &err);
        mem_fail_reset();
        if (rc == 0) {
            assert_int_equal(c->ntenants, 2);
            assert_int_equal(c->tenants[0].nmodels, 2);
            auth_config_free(c);
            parsed = true;
        } else {
            assert_null(c);
            assert_int_equal(err.status, 500);
        }
    }
    assert_true(parsed);
    arena_free(&a);
}

/* 1024 keys in all; the 1025th is refused, naming where it is. */
static void test_parse_key_cap(void **state)
{
    (void)state;
    size_t cap = 1100 * (AUTH_HASH_LEN + 4) + 256;
    char *json = malloc(cap);
    assert_non_null(json);
    for (int total = AUTH_MAX_KEYS; total <= AUTH_MAX_KEYS + 1; total++) {
        size_t n = (size_t)snprintf(json, cap,
                                    "{\"tenants\": [{\"name\": \"t0\", \"scopes\": [\"read\"], "
                                    "\"keys\": [");
        for (int i = 0; i < total; i++) {
            char h[AUTH_HASH_LEN + 1];
            char key[32];
            snprintf(key, sizeof key, "key-number-%08d", i);
            hash_text(key, h);
            n += (size_t)snprintf(json + n, cap - n, "%s\"%s\"", i ? "," : "", h);
        }
        snprintf(json + n, cap - n, "]}]}");
        if (total == AUTH_MAX_KEYS) {
            struct auth_config *c = parse_ok(json);
            assert_int_equal(c->nkeys, AUTH_MAX_KEYS);
            auth_config_free(c);
        } else {
            parse_fails(json, "auth.tenants[0].keys[1024]: at most 1024 keys", NULL);
        }
    }
    free(json);
}

/* ---- checks ----------------------------------------------------------------------------- */

static void test_no_tenants_checks_nothing(void **state)
{
    (void)state;
    struct auth *a = auth_new();
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    struct headers none = {0};
    assert_int_equal(check(a, AUTH_ADMIN, NULL, none, tenant, &err), 0);
    assert_string_equal(tenant, "");
    assert_int_equal(check(a, AUTH_ADMIN, NULL, bearer("whatever-wrong-key-123"), tenant, &err), 0);
    assert_int_equal(check(NULL, AUTH_ADMIN, NULL, none, tenant, &err), 0);
    /* An explicit empty tenant list is the same. */
    auth_apply(a, parse_ok("{\"open\": [], \"tenants\": []}"));
    assert_int_equal(check(a, AUTH_METRICS, NULL, none, tenant, &err), 0);
    auth_free(a);
}

static void test_missing_and_invalid(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    struct headers none = {0};
    assert_int_equal(check(a, AUTH_READ, NULL, none, tenant, &err), 401);
    assert_string_equal(err.msg, AUTH_MSG_MISSING);
    assert_string_equal(auth_challenge(&err), "Bearer realm=\"inferd\"");
    assert_int_equal(check(a, AUTH_READ, NULL, bearer("not-a-configured-key-00"), tenant, &err),
                     401);
    assert_string_equal(err.msg, AUTH_MSG_INVALID);
    assert_string_equal(auth_challenge(&err), "Bearer realm=\"inferd\", error=\"invalid_token\"");
    assert_string_equal(tenant, "");
    /* Too short or too long to be a key: invalid, never hashed. */
    assert_int_equal(check(a, AUTH_READ, NULL, api_key("short"), tenant, &err), 401);
    assert_string_equal(err.msg, AUTH_MSG_INVALID);
    /* Another scheme is no API key; an empty bearer neither. */
    struct headers basic = {{"authorization"}, {"Basic " KEY_R}, 1};
    assert_int_equal(check(a, AUTH_READ, NULL, basic, tenant, &err), 401);
    assert_string_equal(err.msg, AUTH_MSG_MISSING);
    struct headers empty = {{"authorization"}, {"Bearer   "}, 1};
    assert_int_equal(check(a, AUTH_READ, NULL, empty, tenant, &err), 401);
    assert_string_equal(err.msg, AUTH_MSG_MISSING);
    /* Two different keys: refused even when one of them is right. */
    struct headers both = {{"authorization", "x-api-key"}, {"Bearer " KEY_R, KEY_B}, 2};
    assert_int_equal(check(a, AUTH_READ, NULL, both, tenant, &err), 401);
    assert_string_equal(err.msg, AUTH_MSG_CONFLICT);
    assert_string_equal(auth_challenge(&err), "Bearer realm=\"inferd\", error=\"invalid_request\"");
    struct headers same = {{"authorization", "x-api-key"}, {"Bearer " KEY_R, KEY_R}, 2};
    assert_int_equal(check(a, AUTH_READ, NULL, same, tenant, &err), 0);
    assert_string_equal(tenant, "readers");
    /* Nothing in an answer quotes the key. */
    assert_null(strstr(err.msg, KEY_R));
    auth_free(a);
}

static void test_bearer_and_x_api_key(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_R), tenant, &err), 0);
    assert_string_equal(tenant, "readers");
    assert_int_equal(check(a, AUTH_READ, NULL, api_key(KEY_R), tenant, &err), 0);
    assert_string_equal(tenant, "readers");
    struct headers lower = {{"authorization"}, {"bearer  " KEY_B " "}, 1};
    assert_int_equal(check(a, AUTH_ADMIN, NULL, lower, tenant, &err), 0);
    assert_string_equal(tenant, "team-b");
    /* Both keys of a tenant (a rotation) work. */
    assert_int_equal(check(a, AUTH_INFER, "simple", bearer(KEY_A), tenant, &err), 0);
    assert_string_equal(tenant, "team-a");
    assert_int_equal(check(a, AUTH_INFER, "simple", bearer(KEY_A2), tenant, &err), 0);
    assert_string_equal(tenant, "team-a");
    auth_free(a);
}

static void test_scopes(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    /* read vs admin */
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_R), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_ADMIN, NULL, bearer(KEY_R), tenant, &err), 403);
    assert_string_equal(err.msg, "API key of tenant 'readers' lacks scope 'admin'");
    assert_string_equal(tenant, "readers");
    assert_int_equal(check(a, AUTH_ADMIN, NULL, bearer(KEY_B), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_B), tenant, &err), 0);
    /* infer on every model, and on one */
    assert_int_equal(check(a, AUTH_INFER, "anything", bearer(KEY_A), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_A), tenant, &err), 403);
    assert_string_equal(err.msg, "API key of tenant 'team-a' lacks scope 'read'");
    assert_int_equal(check(a, AUTH_INFER, "digits", bearer(KEY_D), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_INFER, "digits2", bearer(KEY_D), tenant, &err), 403);
    assert_string_equal(err.msg, "API key of tenant 'digits' lacks scope 'infer' for model "
                                 "'digits2'");
    assert_int_equal(check(a, AUTH_INFER, "simple", bearer(KEY_B), tenant, &err), 403);
    /* any infer scope is enough where no model is named (shared memory) */
    assert_int_equal(check(a, AUTH_INFER, NULL, bearer(KEY_D), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_INFER, NULL, bearer(KEY_R), tenant, &err), 403);
    /* a stream needs a key, any scope */
    assert_int_equal(check(a, AUTH_ANY_KEY, NULL, bearer(KEY_R), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_ANY_KEY, NULL, (struct headers){0}, tenant, &err), 401);
    /* the stage's class is not checked here */
    assert_int_equal(check(a, AUTH_IN_PIPELINE, NULL, (struct headers){0}, tenant, &err), 0);
    auth_free(a);
}

static void test_open_endpoints(void **state)
{
    (void)state;
    struct headers none = {0};
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    struct auth *a = store_with_tenants(NULL); /* default: health, metrics */
    assert_int_equal(check(a, AUTH_HEALTH, NULL, none, tenant, &err), 0);
    assert_int_equal(check(a, AUTH_METRICS, NULL, none, tenant, &err), 0);
    assert_int_equal(check(a, AUTH_METADATA, NULL, none, tenant, &err), 401);
    assert_int_equal(check(a, AUTH_DASHBOARD, NULL, none, tenant, &err), 401);
    assert_int_equal(check(a, AUTH_DASHBOARD, NULL, bearer(KEY_R), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_METADATA, NULL, bearer(KEY_A), tenant, &err), 403);
    /* An open endpoint ignores a wrong key (health probes carry none). */
    assert_int_equal(check(a, AUTH_HEALTH, NULL, bearer("a-wrong-key-0123456"), tenant, &err), 0);
    auth_free(a);

    a = store_with_tenants("[\"metadata\", \"dashboard\"]");
    assert_int_equal(check(a, AUTH_HEALTH, NULL, none, tenant, &err), 401);
    assert_int_equal(check(a, AUTH_METRICS, NULL, none, tenant, &err), 401);
    assert_int_equal(check(a, AUTH_METRICS, NULL, bearer(KEY_R), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_METADATA, NULL, none, tenant, &err), 0);
    assert_int_equal(check(a, AUTH_DASHBOARD, NULL, none, tenant, &err), 0);
    assert_int_equal(check(a, AUTH_READ, NULL, none, tenant, &err), 401);
    auth_free(a);
}

/* ---- hints ------------------------------------------------------------------------------- */

static const struct auth_tenant *tenant_of_key(struct auth *a, const char *key)
{
    struct auth_config *c = a->current;
    int64_t k = find_key(a, c, key, strlen(key));
    return k < 0 ? NULL : &c->tenants[c->keys[k].tenant];
}

static int64_t index_of_key(struct auth *a, const char *key)
{
    struct auth_config *c = a->current;
    for (uint32_t i = 0; i < c->nkeys; i++)
        if (auth_key_matches(&c->keys[i].hash, key, strlen(key)))
            return i;
    return -1;
}

static void test_hint_is_only_a_hint(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    struct auth_config *c = a->current;
    /* A lookup leaves a hint for the key it found. */
    assert_string_equal(tenant_of_key(a, KEY_B)->name, "team-b");
    uint64_t tag = key_tag(a->seed, KEY_B, strlen(KEY_B));
    struct hint *h = &hints[tag % HINT_SLOTS];
    assert_int_equal(h->tag, tag);
    assert_int_equal(h->generation, c->generation);
    assert_int_equal(h->key, index_of_key(a, KEY_B));

    /* A hint with the right tag pointing at another tenant's key (as a
     * colliding hash would): the digest decides, and the hint is fixed. */
    h->key = (uint32_t)index_of_key(a, KEY_R);
    assert_string_equal(tenant_of_key(a, KEY_B)->name, "team-b");
    assert_int_equal(h->key, index_of_key(a, KEY_B));

    /* A wrong key whose hint points at a real key is still wrong. */
    const char *wrong = "no-such-key-anywhere-00";
    uint64_t wtag = key_tag(a->seed, wrong, strlen(wrong));
    hints[wtag % HINT_SLOTS] = (struct hint){.tag = wtag, .generation = c->generation, .key = 0};
    assert_null(tenant_of_key(a, wrong));

    /* A hint past the end of the keys (another configuration's) is ignored. */
    hints[tag % HINT_SLOTS].key = c->nkeys + 5;
    assert_string_equal(tenant_of_key(a, KEY_B)->name, "team-b");
    auth_free(a);
}

/* A wrong key is remembered as wrong under its configuration only, and
 * only that very key: a reload that adds it lets it in at once. */
static void test_wrong_key_remembered(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    const char *wrong = "a-key-added-later-0000";
    uint64_t tag = key_tag(a->seed, wrong, strlen(wrong));
    struct miss *m = &misses[tag % MISS_SLOTS];
    assert_null(tenant_of_key(a, wrong));
    assert_int_equal(m->generation, a->current->generation);
    /* From the table now: even a configuration changed behind the
     * store's back (never done outside this test) is not hashed again. */
    struct auth_key_hash saved = a->current->keys[0].hash;
    assert_int_equal(auth_key_hash(wrong, strlen(wrong), &a->current->keys[0].hash), 0);
    assert_null(tenant_of_key(a, wrong));
    a->current->keys[0].hash = saved;

    /* Another key in the same slot is looked up as usual. */
    const char *right = KEY_B;
    uint64_t rtag = key_tag(a->seed, right, strlen(right));
    misses[rtag % MISS_SLOTS] = *m;
    hints[rtag % HINT_SLOTS].generation = 0;
    assert_string_equal(tenant_of_key(a, right)->name, "team-b");

    char h[AUTH_HASH_LEN + 1], json[512];
    hash_text(wrong, h);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"late\", \"keys\": [\"%s\"], \"scopes\": "
             "[\"read\"]}]}",
             h);
    auth_apply(a, parse_ok(json));
    assert_string_equal(tenant_of_key(a, wrong)->name, "late");
    auth_free(a);
}

/* More keys than slots: hints evict each other, answers stay right. */
static void test_hints_shared_slots(void **state)
{
    (void)state;
    enum { N = 300 };
    size_t cap = N * (AUTH_HASH_LEN + 80) + 64;
    char *json = malloc(cap);
    assert_non_null(json);
    size_t n = (size_t)snprintf(json, cap, "{\"tenants\": [");
    for (int i = 0; i < N; i++) {
        char key[32], h[AUTH_HASH_LEN + 1];
        snprintf(key, sizeof key, "shared-slot-key-%05d", i);
        hash_text(key, h);
        n += (size_t)snprintf(json + n, cap - n,
                              "%s{\"name\": \"t%d\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}",
                              i ? "," : "", i, h);
    }
    snprintf(json + n, cap - n, "]}");
    struct auth *a = auth_new();
    auth_apply(a, parse_ok(json));
    free(json);
    bool shared = false;
    uint32_t used[HINT_SLOTS] = {0};
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            char key[32], want[16];
            snprintf(key, sizeof key, "shared-slot-key-%05d", i);
            snprintf(want, sizeof want, "t%d", i);
            const struct auth_tenant *t = tenant_of_key(a, key);
            assert_non_null(t);
            assert_string_equal(t->name, want);
            if (round == 0)
                shared |= used[key_tag(a->seed, key, strlen(key)) % HINT_SLOTS]++ > 0;
        }
    assert_true(shared); /* 300 keys, 256 slots */
    auth_free(a);
}

/* ---- reloads and the stage ------------------------------------------------------------------ */

static void test_reload(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_R), tenant, &err), 0);
    assert_int_equal(check(a, AUTH_ADMIN, NULL, bearer(KEY_B), tenant, &err), 0);
    /* KEY_R is removed; KEY_B moves to another tenant, at another index. */
    char hb[AUTH_HASH_LEN + 1], hx[AUTH_HASH_LEN + 1], json[1024];
    hash_text(KEY_B, hb);
    hash_text("a-brand-new-key-0000", hx);
    snprintf(json, sizeof json,
             "{\"tenants\": [{\"name\": \"new\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]},"
             "{\"name\": \"team-b2\", \"keys\": [\"%s\"], \"scopes\": [\"read\"]}]}",
             hx, hb);
    auth_apply(a, parse_ok(json));
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_R), tenant, &err), 401);
    assert_int_equal(check(a, AUTH_READ, NULL, bearer(KEY_B), tenant, &err), 0);
    assert_string_equal(tenant, "team-b2");
    assert_int_equal(check(a, AUTH_ADMIN, NULL, bearer(KEY_B), tenant, &err), 403);
    /* Back to no tenant: open again. */
    auth_apply(a, parse_ok("{}"));
    assert_int_equal(check(a, AUTH_ADMIN, NULL, (struct headers){0}, tenant, &err), 0);
    auth_free(a);
}

static const char *call_headers(const struct infer_call *call, const char *name, size_t *len)
{
    return get_header(call->fe.request, name, len);
}

static void test_stage(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    struct headers h = bearer(KEY_D);
    struct infer_call call;
    memset(&call, 0, sizeof call);
    call.header = call_headers;
    call.fe.request = &h;
    call.model_name = "digits";
    assert_int_equal(auth_stage(&call, a), STAGE_CONTINUE);
    assert_string_equal(call.tenant, "digits");
    /* A reload while the call runs: its tenant stays valid until done. */
    auth_apply(a, parse_ok("{}"));
    assert_string_equal(call.tenant, "digits");
    auth_stage_done(&call, a);
    assert_null(call.tenant);

    /* Another model: 403, answered by the stage, the tenant still known. */
    auth_free(a);
    a = store_with_tenants(NULL);
    memset(&call, 0, sizeof call);
    call.header = call_headers;
    call.fe.request = &h;
    call.model_name = "simple";
    assert_int_equal(auth_stage(&call, a), STAGE_DONE);
    assert_int_equal(call.req.err.status, 403);
    assert_string_equal(call.tenant, "digits");
    auth_stage_done(&call, a);
    assert_null(call.tenant);

    /* No key: 401 and no tenant. */
    struct headers none = {0};
    memset(&call, 0, sizeof call);
    call.header = call_headers;
    call.fe.request = &none;
    call.model_name = "digits";
    assert_int_equal(auth_stage(&call, a), STAGE_DONE);
    assert_int_equal(call.req.err.status, 401);
    assert_string_equal(call.req.err.msg, AUTH_MSG_MISSING);
    assert_null(call.tenant);
    auth_stage_done(&call, a);

    /* Nothing configured: nothing checked, no tenant. */
    auth_apply(a, parse_ok("{}"));
    memset(&call, 0, sizeof call);
    call.header = call_headers;
    call.fe.request = &none;
    call.model_name = "digits";
    assert_int_equal(auth_stage(&call, a), STAGE_CONTINUE);
    assert_null(call.tenant);
    auth_stage_done(&call, a);
    auth_free(a);
}

static void test_metrics(void **state)
{
    (void)state;
    struct auth *a = store_with_tenants(NULL);
    char tenant[AUTH_TENANT_MAX + 1];
    struct error err;
    check(a, AUTH_READ, NULL, (struct headers){0}, tenant, &err);
    check(a, AUTH_READ, NULL, (struct headers){0}, tenant, &err);
    check(a, AUTH_READ, NULL, bearer("wrong-key-wrong-key-1"), tenant, &err);
    check(a, AUTH_ADMIN, NULL, bearer(KEY_R), tenant, &err);
    check(a, AUTH_READ, NULL, bearer(KEY_R), tenant, &err);
    struct buf b;
    buf_init(&b, 1 << 16);
    auth_write_metrics(a, &b);
    buf_append(&b, "", 1);
    assert_non_null(strstr(b.data, "# TYPE inferd_auth_refusals_total counter\n"));
    assert_non_null(strstr(b.data, "inferd_auth_refusals_total{reason=\"missing\"} 2\n"));
    assert_non_null(strstr(b.data, "inferd_auth_refusals_total{reason=\"invalid\"} 1\n"));
    assert_non_null(strstr(b.data, "inferd_auth_refusals_total{reason=\"scope\"} 1\n"));
    assert_null(strstr(b.data, "inferd-sha256"));
    buf_free(&b);
    auth_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_hash_format),
        cmocka_unit_test(test_key_hash_parse_errors),
        cmocka_unit_test(test_key_validity),
        cmocka_unit_test(test_key_new),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_parse_defaults),
        cmocka_unit_test(test_parse_tenants),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_key_cap),
        cmocka_unit_test(test_parse_out_of_memory),
        cmocka_unit_test(test_no_tenants_checks_nothing),
        cmocka_unit_test(test_missing_and_invalid),
        cmocka_unit_test(test_bearer_and_x_api_key),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_open_endpoints),
        cmocka_unit_test(test_hint_is_only_a_hint),
        cmocka_unit_test(test_hints_shared_slots),
        cmocka_unit_test(test_wrong_key_remembered),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_stage),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
