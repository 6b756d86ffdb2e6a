#include "obs/settings.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/status.h"
#include "model/lookup.h"
#include "obs/trace.h"

/* ---- the JSON form -------------------------------------------------------------- */

static void from_json_value(struct arena *a, const struct json_value *v, struct setting *s)
{
    uint64_t u = 0;
    switch (v->type) {
    case JSON_NULL:
        s->kind = SETTING_NULL;
        return;
    case JSON_TRUE:
    case JSON_FALSE:
        s->kind = SETTING_BOOL;
        s->b = v->type == JSON_TRUE;
        return;
    case JSON_NUMBER:
        s->kind = json_num_u64(v, &u) == 0 ? SETTING_UINT : SETTING_OTHER;
        s->u = u;
        return;
    case JSON_STRING:
        s->kind = SETTING_STRING;
        s->strs = &v->u.str;
        s->n = 1;
        return;
    case JSON_ARRAY:
        break;
    default:
        s->kind = SETTING_OTHER;
        return;
    }
    s->kind = SETTING_OTHER;
    const char **strs = arena_alloc(a, (v->len + 1) * sizeof *strs);
    if (!strs)
        return;
    for (uint32_t i = 0; i < v->len; i++) {
        if (v->u.items[i].type != JSON_STRING)
            return;
        strs[i] = v->u.items[i].u.str;
    }
    s->kind = SETTING_STRINGS;
    s->strs = strs;
    s->n = v->len;
}

int settings_from_json(struct arena *a, const struct json_value *obj, struct setting **out,
                       uint32_t *n, struct error *err)
{
    if (!obj || obj->type != JSON_OBJECT)
        return error_set(err, 400, "request body must be a JSON object");
    struct setting *s = arena_alloc(a, (obj->len + 1) * sizeof *s);
    if (!s)
        return error_set(err, 413, "too many settings");
    for (uint32_t i = 0; i < obj->len; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].name = obj->u.members[i].key;
        from_json_value(a, &obj->u.members[i].value, &s[i]);
    }
    *out = s;
    *n = obj->len;
    return 0;
}

/* ---- logging ------------------------------------------------------------------------ */

/* "default" or "ISO8601" (both inferd's text format), or "json". */
static _Atomic(const char *) text_format_name = "default";

int settings_log_apply(const struct setting *s, uint32_t n, struct error *err)
{
    /* Validate every field before changing anything. */
    int info = -1, warn = -1, error = -1, verbose = -1, format = -1;
    const char *format_name = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const char *k = s[i].name;
        int *flag = NULL;
        if (strcmp(k, "log_info") == 0)
            flag = &info;
        else if (strcmp(k, "log_warning") == 0 || strcmp(k, "log_warnings") == 0)
            flag = &warn;
        else if (strcmp(k, "log_error") == 0 || strcmp(k, "log_errors") == 0)
            flag = &error;
        if (flag) {
            if (s[i].kind != SETTING_BOOL)
                return error_set(err, 400, "'%s' must be a boolean", k);
            *flag = s[i].b;
        } else if (strcmp(k, "log_verbose_level") == 0) {
            if (s[i].kind != SETTING_UINT || s[i].u > UINT32_MAX)
                return error_set(err, 400, "'log_verbose_level' must be an integer >= 0");
            verbose = s[i].u > 0;
        } else if (strcmp(k, "log_format") == 0) {
            if (s[i].kind != SETTING_STRING)
                return error_set(err, 400, "'log_format' must be a string");
            const char *v = s[i].strs[0];
            if (strcmp(v, "default") == 0 || strcmp(v, "ISO8601") == 0) {
                format = LOG_FORMAT_TEXT;
                format_name = strcmp(v, "default") == 0 ? "default" : "ISO8601";
            } else if (strcmp(v, "json") == 0) {
                format = LOG_FORMAT_JSON;
            } else {
                return error_set(err, 400, "unknown log_format '%.64s' (default, ISO8601, json)",
                                 v);
            }
        } else if (strcmp(k, "log_file") == 0) {
            if (s[i].kind != SETTING_STRING)
                return error_set(err, 400, "'log_file' must be a string");
            if (s[i].strs[0][0] != '\0')
                return error_set(err, 400,
                                 "log_file cannot be set: inferd logs to stderr "
                                 "(redirect it, or use --access-log for requests)");
        } else {
            return error_set(err, 400, "unknown log setting '%.64s'", k);
        }
    }
    if (info >= 0)
        log_set_enabled(LOG_INFO, info);
    if (warn >= 0)
        log_set_enabled(LOG_WARN, warn);
    if (error >= 0)
        log_set_enabled(LOG_ERROR, error);
    if (verbose >= 0)
        log_set_enabled(LOG_DEBUG, verbose);
    if (format >= 0)
        log_set_format((enum log_format)format);
    if (format_name)
        atomic_store(&text_format_name, format_name);
    return 0;
}

void settings_log_get(struct log_settings_view *out)
{
    out->info = log_enabled(LOG_INFO);
    out->warning = log_enabled(LOG_WARN);
    out->error = log_enabled(LOG_ERROR);
    out->verbose_level = log_enabled(LOG_DEBUG) ? 1 : 0;
    out->format = log_get_format() == LOG_FORMAT_JSON ? "json" : atomic_load(&text_format_name);
    out->file = "";
}

/* ---- tracing ------------------------------------------------------------------------ */

int settings_trace_model_check(struct repository *repo, const char *model, size_t model_len,
                               struct error *err)
{
    struct model_snapshot *snap = repository_acquire(repo);
    bool known = model_lookup_entry(snap, model, model_len, err) != NULL;
    repository_release(repo, snap);
    return known ? ST_OK : ST_ERROR;
}

/* The one string of a setting that takes one: STRING, or STRINGS of one. */
static const char *one_string(const struct setting *s)
{
    return (s->kind == SETTING_STRING || s->kind == SETTING_STRINGS) && s->n == 1 ? s->strs[0]
                                                                                  : NULL;
}

static int parse_int_string(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    if (!s || !*s)
        return ST_ERROR;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi)
        return ST_ERROR;
    *out = v;
    return 0;
}

static int parse_level(const struct setting *s, enum trace_level *out, struct error *err)
{
    /* A list may name several levels (Triton: TIMESTAMPS and TENSORS). */
    if ((s->kind != SETTING_STRING && s->kind != SETTING_STRINGS) || s->n == 0)
        return error_set(err, 400, "trace_level must be a string or an array of strings");
    bool off = false, on = false;
    for (uint32_t i = 0; i < s->n; i++) {
        const char *x = s->strs[i];
        if (strcmp(x, "OFF") == 0)
            off = true;
        else if (strcmp(x, "TIMESTAMPS") == 0)
            on = true;
        else if (strcmp(x, "TENSORS") == 0)
            return error_set(err, 400, "trace_level TENSORS is not supported (OFF, TIMESTAMPS)");
        else
            return error_set(err, 400, "unknown trace_level '%.64s' (OFF, TIMESTAMPS)", x);
    }
    if (off && on)
        return error_set(err, 400, "trace_level cannot be both OFF and TIMESTAMPS");
    *out = on ? TRACE_LEVEL_TIMESTAMPS : TRACE_LEVEL_OFF;
    return 0;
}

/* Triton's trace_rate is "N": one of every N requests; inferd also takes a
 * probability below 1 ("0.25"), and "0" for no head sampling. */
static int parse_rate(const char *s, double *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return ST_ERROR;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v < 0)
        return ST_ERROR;
    if (v >= 1) {
        if (v != floor(v) || v > 1e12)
            return ST_ERROR;
        *out = 1.0 / v;
    } else {
        *out = v;
    }
    return 0;
}

int settings_trace_apply(const char *model, const struct setting *s, uint32_t n, struct error *err)
{
    /* Validate everything first; trace_settings_update applies it whole. */
    struct trace_update u;
    memset(&u, 0, sizeof u);
    for (uint32_t i = 0; i < n; i++) {
        const char *k = s[i].name;
        const char *str = one_string(&s[i]);
        int field;
        if (strcmp(k, "trace_level") == 0)
            field = TRACE_FIELD_LEVEL;
        else if (strcmp(k, "trace_rate") == 0)
            field = TRACE_FIELD_RATE;
        else if (strcmp(k, "trace_count") == 0)
            field = TRACE_FIELD_COUNT;
        else if (strcmp(k, "log_frequency") == 0)
            field = TRACE_FIELD_LOG_FREQUENCY;
        else if (strcmp(k, "trace_file") == 0)
            field = TRACE_FIELD_FILE;
        else if (strcmp(k, "trace_mode") == 0) {
            if (s[i].kind != SETTING_NULL && (!str || strcmp(str, "opentelemetry") != 0))
                return error_set(err, 400, "trace_mode must be \"opentelemetry\"");
            continue;
        } else {
            return error_set(err, 400, "unknown trace setting '%.64s'", k);
        }
        if (s[i].kind == SETTING_NULL) {
            u.clear[field] = true;
            continue;
        }
        u.set[field] = true;
        long long num;
        switch (field) {
        case TRACE_FIELD_LEVEL:
            if (parse_level(&s[i], &u.values.level, err) != 0)
                return ST_ERROR;
            break;
        case TRACE_FIELD_RATE:
            if (parse_rate(str, &u.values.rate) != 0)
                return error_set(err, 400,
                                 "trace_rate must be a string: a whole number N (one "
                                 "of every N requests), 0, or a fraction below 1");
            break;
        case TRACE_FIELD_COUNT:
            if (parse_int_string(str, -1, INT64_MAX, &num) != 0)
                return error_set(err, 400, "trace_count must be a string: -1 or a number >= 0");
            u.values.count = num;
            break;
        case TRACE_FIELD_LOG_FREQUENCY:
            if (parse_int_string(str, 0, UINT32_MAX, &num) != 0)
                return error_set(err, 400, "log_frequency must be a string: a number >= 0");
            u.values.log_frequency = (uint32_t)num;
            break;
        default:
            if (!str)
                return error_set(err, 400, "trace_file must be a string");
            if (strlen(str) >= sizeof u.values.file)
                return error_set(err, 400, "trace_file too long");
            snprintf(u.values.file, sizeof u.values.file, "%s", str);
            break;
        }
    }
    return trace_settings_update(model, &u, err);
}

void settings_trace_get(const char *model, struct trace_settings_view *out)
{
    struct trace_settings s;
    trace_settings_get(model, &s);
    out->level = s.level == TRACE_LEVEL_OFF ? "OFF" : "TIMESTAMPS";
    if (s.rate <= 0)
        snprintf(out->rate, sizeof out->rate, "0");
    else if (fabs(1.0 / s.rate - round(1.0 / s.rate)) < 1e-9)
        snprintf(out->rate, sizeof out->rate, "%.0f", round(1.0 / s.rate));
    else
        snprintf(out->rate, sizeof out->rate, "%.15g", s.rate);
    snprintf(out->count, sizeof out->count, "%lld", (long long)s.count);
    snprintf(out->log_frequency, sizeof out->log_frequency, "%u", s.log_frequency);
    snprintf(out->file, sizeof out->file, "%s", s.file);
    out->mode = "opentelemetry";
}
