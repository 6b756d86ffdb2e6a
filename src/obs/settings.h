/*
 * settings: Triton's logging and trace-setting APIs without their wire
 * format, shared by the REST front end (GET/POST /v2/logging,
 * /v2[/models/{m}]/trace/setting, api/http_obs.c) and the gRPC one
 * (LogSettings, TraceSetting, api/grpc/admin.c).
 *
 * A front end turns its request into a list of struct setting (REST: the
 * JSON object, settings_from_json; gRPC: the request's settings map),
 * calls settings_log_apply or settings_trace_apply, and answers with the
 * values settings_log_get or settings_trace_get report. Validation, error
 * messages and the reported values are therefore the same whatever the
 * protocol. Errors are HTTP statuses in struct error (400 for an unknown
 * setting or a bad value, 404 for an unknown model); a change is applied
 * whole or not at all.
 *
 * Any thread: the values live in base/log.h and obs/trace.h, which lock or
 * use atomics.
 */
#ifndef INFERD_OBS_SETTINGS_H
#define INFERD_OBS_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "base/json.h"
#include "model/repository.h"

/* The type a setting's value arrived with. */
enum setting_kind {
    SETTING_NULL,    /* clear: JSON null; gRPC: a trace setting with no value */
    SETTING_BOOL,    /* b */
    SETTING_UINT,    /* u: an integer >= 0 (JSON number, gRPC uint32_param) */
    SETTING_STRING,  /* strs[0], n = 1: one string (JSON string, gRPC string_param) */
    SETTING_STRINGS, /* strs[0..n): a list (JSON array of strings, gRPC repeated value) */
    SETTING_OTHER,   /* anything else (a fractional or negative number, an object,
                        an array of non-strings, a gRPC value with nothing set) */
};

struct setting {
    const char *name; /* NUL-terminated */
    enum setting_kind kind;
    bool b;
    uint64_t u;
    const char *const *strs;
    uint32_t n;
};

/* The members of a JSON object as settings, allocated from arena a (which
 * also owns what they point to, with the JSON tree). Returns 0, or ST_ERROR with
 * a 400 in err when obj is not an object or out of memory (413). */
int settings_from_json(struct arena *a, const struct json_value *obj, struct setting **out,
                       uint32_t *n, struct error *err);

/* ---- logging (Triton's logging extension) ---------------------------------- */

/* log_info, log_warning (also log_warnings), log_error (also log_errors):
 * BOOL; log_verbose_level: UINT (> 0 turns debug lines on); log_format:
 * STRING "default", "ISO8601" (both the text format) or "json"; log_file:
 * STRING, only "" (inferd logs to stderr). */
int settings_log_apply(const struct setting *s, uint32_t n, struct error *err);

struct log_settings_view {
    bool info, warning, error;
    uint32_t verbose_level; /* 0 or 1 */
    const char *format;     /* "default", "ISO8601" or "json" (static) */
    const char *file;       /* always "" */
};
void settings_log_get(struct log_settings_view *out);

/* ---- tracing (Triton's trace extension) -------------------------------------- */

/* 0 when model (model_len bytes, not NUL-terminated) names a model of the
 * repository's current snapshot, else -1 with a 404 in err. */
int settings_trace_model_check(struct repository *repo, const char *model, size_t model_len,
                               struct error *err);

/* Changes the global settings (model NULL) or a model's own. Fields:
 * trace_level (STRING or STRINGS: OFF, TIMESTAMPS; TENSORS is refused),
 * trace_rate (one string: N = one of every N requests, "0" = none, or a
 * fraction below 1), trace_count (one string, -1 = unlimited),
 * log_frequency and trace_file (one string each; accepted and reported,
 * not used), trace_mode (only "opentelemetry"). One string is STRING or
 * STRINGS with n = 1. NULL clears a model's value (the global one applies
 * again) or resets a global one to its startup value. */
int settings_trace_apply(const char *model, const struct setting *s, uint32_t n, struct error *err);

/* The current values as Triton reports them, every one a string. */
struct trace_settings_view {
    const char *level; /* "OFF" or "TIMESTAMPS" (static) */
    char rate[32];     /* "N" (one of every N) or the fraction */
    char count[24];
    char log_frequency[16];
    char file[256];
    const char *mode; /* "opentelemetry" */
};
void settings_trace_get(const char *model, struct trace_settings_view *out);

#endif
