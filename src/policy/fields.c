#include "policy/fields.h"

#include <stdio.h>
#include <string.h>

void fields_describe(const struct json_value *v, char *out, size_t size)
{
    switch (v->type) {
    case JSON_NUMBER:
        snprintf(out, size, "%.32s", v->u.num);
        break;
    case JSON_STRING:
        snprintf(out, size, "\"%.32s\"", v->u.str);
        break;
    case JSON_TRUE:
        snprintf(out, size, "true");
        break;
    case JSON_FALSE:
        snprintf(out, size, "false");
        break;
    case JSON_NULL:
        snprintf(out, size, "null");
        break;
    case JSON_ARRAY:
    case JSON_RAW:
        snprintf(out, size, "a list");
        break;
    case JSON_OBJECT:
        snprintf(out, size, "a mapping");
        break;
    }
}

static int expected(const struct json_value *v, const char *path, const char *key,
                    struct error *err, const char *what)
{
    char got[48];
    fields_describe(v, got, sizeof got);
    return error_set(err, 400, "%s%s%s: expected %s, got %s", path, key[0] ? "." : "", key, what,
                     got);
}

int fields_check_object(const struct json_value *v, const char *path, const char *const *known,
                        struct error *err)
{
    if (v->type != JSON_OBJECT)
        return expected(v, path, "", err, "a mapping");
    for (uint32_t i = 0; i < v->len; i++) {
        const char *k = v->u.members[i].key;
        bool ok = false;
        for (const char *const *n = known; *n && !ok; n++)
            ok = strcmp(*n, k) == 0;
        if (!ok || strlen(k) != v->u.members[i].key_len)
            return error_set(err, 400, "%s.%.48s: unknown key", path, k);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(v->u.members[j].key, k) == 0)
                return error_set(err, 400, "%s.%.48s: given twice", path, k);
    }
    return 0;
}

int fields_check_list(const struct json_value *v, const char *path, uint32_t max, struct error *err)
{
    if (v->type != JSON_ARRAY)
        return expected(v, path, "", err, "a list");
    if (v->len > max)
        return error_set(err, 400, "%s: at most %u entries, got %u", path, max, v->len);
    return 0;
}

static const struct json_value *member(const struct json_value *obj, const char *key)
{
    const struct json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

int fields_u32(const struct json_value *obj, const char *path, const char *key, uint32_t lo,
               uint32_t hi, uint32_t *out, struct error *err)
{
    const struct json_value *v = member(obj, key);
    uint64_t u;
    if (!v)
        return 0;
    if (json_num_u64(v, &u) != 0 || u < lo || u > hi) {
        char what[64];
        snprintf(what, sizeof what, "an integer from %u to %u", lo, hi);
        return expected(v, path, key, err, what);
    }
    *out = (uint32_t)u;
    return 0;
}

int fields_u64(const struct json_value *obj, const char *path, const char *key, uint64_t lo,
               uint64_t hi, uint64_t *out, struct error *err)
{
    const struct json_value *v = member(obj, key);
    uint64_t u;
    if (!v)
        return 0;
    if (json_num_u64(v, &u) != 0 || u < lo || u > hi) {
        char what[80];
        snprintf(what, sizeof what, "an integer from %llu to %llu", (unsigned long long)lo,
                 (unsigned long long)hi);
        return expected(v, path, key, err, what);
    }
    *out = u;
    return 0;
}

int fields_double(const struct json_value *obj, const char *path, const char *key, double lo,
                  double hi, double *out, struct error *err)
{
    const struct json_value *v = member(obj, key);
    double d;
    if (!v)
        return 0;
    if (v->type != JSON_NUMBER || json_num_f64(v, &d) != 0 || !(d >= lo && d <= hi)) {
        char what[64];
        snprintf(what, sizeof what, "a number from %g to %g", lo, hi);
        return expected(v, path, key, err, what);
    }
    *out = d;
    return 0;
}

int fields_bool(const struct json_value *obj, const char *path, const char *key, bool *out,
                struct error *err)
{
    const struct json_value *v = member(obj, key);
    if (!v)
        return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return expected(v, path, key, err, "true or false");
    *out = v->type == JSON_TRUE;
    return 0;
}

int fields_name(const struct json_value *obj, const char *path, const char *key, char *out,
                size_t size, bool required, struct error *err)
{
    const struct json_value *v = member(obj, key);
    if (!v)
        return required ? error_set(err, 400, "%s.%s: required", path, key) : 0;
    if (v->type != JSON_STRING || v->len == 0 || v->len >= size || strlen(v->u.str) != v->len) {
        char what[64];
        snprintf(what, sizeof what, "a name of 1 to %zu characters", size - 1);
        return expected(v, path, key, err, what);
    }
    memcpy(out, v->u.str, v->len + 1);
    return 0;
}

int fields_version(const struct json_value *obj, const char *path, const char *key, int64_t *out,
                   struct error *err)
{
    const struct json_value *v = member(obj, key);
    *out = -1;
    if (!v)
        return 0;
    int64_t n = 0;
    bool ok = false;
    if (v->type == JSON_NUMBER) {
        ok = json_num_i64(v, &n) == 0;
    } else if (v->type == JSON_STRING && v->len > 0 && v->len <= 18) {
        ok = true;
        for (uint32_t i = 0; i < v->len && ok; i++) {
            ok = v->u.str[i] >= '0' && v->u.str[i] <= '9';
            n = n * 10 + (v->u.str[i] - '0');
        }
    }
    if (!ok || n < 1)
        return expected(v, path, key, err, "a version number (an integer >= 1)");
    *out = n;
    return 0;
}
