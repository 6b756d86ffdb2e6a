/*
 * trace: W3C trace context, ids, head sampling and span records.
 *
 * - traceparent / tracestate parsing and formatting (W3C Trace Context,
 *   level 1): strict, bounded, no allocation. An invalid traceparent means
 *   "start a new trace"; an invalid tracestate is dropped.
 * - Ids: 16-byte trace ids, 8-byte span ids and request ids from a per-thread
 *   xoshiro256** generator seeded from getrandom(2): fast and unique enough
 *   for correlation (not for secrets).
 * - Sampling settings (Triton's trace extension: level, rate, count), global
 *   and per model, changed at run time from any thread; trace_sample() is
 *   the decision, parent-based: an incoming sampled flag is honoured, an
 *   incoming unsampled one too; without a parent the rate decides.
 * - Span records (span.h), handed to the OTLP exporter (otlp_submit).
 *
 * Every function may be called from any thread.
 */
#ifndef INFERD_OBS_TRACE_H
#define INFERD_OBS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "core/infer.h"
#include "obs/span.h"

#define TRACEPARENT_LEN 55 /* "00-" 32 "-" 16 "-" 2 */
#define TRACESTATE_MAX 512 /* bytes kept of a tracestate (W3C: propagate at least 512) */

struct trace_parent {
    uint8_t trace_id[TRACE_ID_BYTES];
    uint8_t span_id[SPAN_ID_BYTES];
    uint8_t flags; /* bit 0: sampled */
};

/* Parses a traceparent header value (n bytes, not NUL-terminated). Version
 * 00 must be exactly 55 characters; a later version (not ff) at least 55,
 * with '-' after the flags if longer. Lower-case hex only, ids not all zero.
 * Returns 0, or ST_ERROR when invalid (*out unspecified). */
int trace_parse_traceparent(const char *s, size_t n, struct trace_parent *out);

/* Writes "00-<trace>-<span>-<flags>" and a NUL: out needs
 * TRACEPARENT_LEN + 1 bytes. */
void trace_format_traceparent(char *out, const uint8_t trace_id[TRACE_ID_BYTES],
                              const uint8_t span_id[SPAN_ID_BYTES], uint8_t flags);

/* Validates a tracestate header value: at most 32 list members
 * "key=value" (W3C key and value grammar), no duplicate keys, empty members
 * and optional white space around them allowed. On success writes the
 * members joined by ',' into out (cap bytes incl. NUL), truncated as W3C
 * says when longer than cap - 1: members over 128 bytes go first, then
 * members from the end. Returns the length written, or ST_ERROR when invalid
 * (the caller drops the tracestate). */
int trace_parse_tracestate(const char *s, size_t n, char *out, size_t cap);

/* Fills out with n random bytes from this thread's generator. */
void trace_random(uint8_t *out, size_t n);
/* A random double in [0, 1). */
double trace_random_unit(void);
/* New ids: random and never all zero. */
void trace_new_trace_id(uint8_t id[TRACE_ID_BYTES]);
void trace_new_span_id(uint8_t id[SPAN_ID_BYTES]);
bool trace_id_is_zero(const uint8_t *id, size_t n);

/* ---- sampling settings ----------------------------------------------- */

/* Triton's trace_level: OFF disables tracing; TIMESTAMPS records spans. */
enum trace_level { TRACE_LEVEL_OFF, TRACE_LEVEL_TIMESTAMPS };

struct trace_settings {
    enum trace_level level;
    double rate;      /* head-sampling probability, 0..1 */
    int64_t count;    /* traces left to take; -1 = no limit */
    uint32_t log_frequency; /* reported, not used (traces go to OTLP) */
    char file[256];         /* reported, not used */
};

/* Startup settings (from the command line); also what a global setting
 * reset with JSON null returns to. */
void trace_settings_init(const struct trace_settings *global);
/* Current settings: global, or for a model (its overrides on top of the
 * global ones; the global ones when it has none). */
void trace_settings_get(const char *model, struct trace_settings *out);
/* A change of the global settings or of a model's: the fields set take
 * their value from `values`; the fields cleared (and not set) go back to the
 * global value (a model's) or to the startup value (the global ones).
 * Triton's request forms are parsed by obs/settings.h. */
enum trace_field {
    TRACE_FIELD_LEVEL,
    TRACE_FIELD_RATE,
    TRACE_FIELD_COUNT,
    TRACE_FIELD_LOG_FREQUENCY,
    TRACE_FIELD_FILE,
    TRACE_FIELDS
};
struct trace_update {
    bool set[TRACE_FIELDS], clear[TRACE_FIELDS];
    struct trace_settings values;
};
/* Applies u to the global settings (model NULL) or to a model's overrides.
 * -1 with a 400 in err, and nothing changed, when the model name is too
 * long or too many models have settings of their own. */
int trace_settings_update(const char *model, const struct trace_update *u, struct error *err);
/* Forgets every per-model override (tests). */
void trace_settings_reset_models(void);

/* The head-sampling decision for a request of `model` (NULL when none is
 * known yet), given the incoming parent (NULL if none or invalid). Takes one
 * from trace_count when it samples. *rate_out (may be NULL) gets the rate
 * that applied. */
bool trace_sample(const char *model, const struct trace_parent *parent, double *rate_out);
/* For a model with trace settings of its own: the decision with those
 * (0 or 1, as trace_sample). -1 when the model has none (the global
 * decision stands). */
int trace_sample_model(const char *model, const struct trace_parent *parent, double *rate_out);
/* True when some request could be sampled (any level on): lets front ends
 * skip all trace work otherwise. */
bool trace_enabled(void);
/* True when some model has trace settings of its own. */
bool trace_has_model_settings(void);

/* Called by the scheduler's worker after running a batch: when any member
 * is sampled, records one INTERNAL span for the batch (a trace of its own)
 * with a link to every sampled member's request span, and stores the batch
 * span's ids in those members (req->trace.batch_*) so that their request
 * spans link back. `err` is NULL on success. */
void trace_batch_span(struct infer_request *const *members, uint32_t n, const char *model,
                      const char *version, int64_t batch_size, uint64_t start_ns,
                      uint64_t end_ns, const struct error *err);

#endif
