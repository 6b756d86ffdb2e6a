/*
 * span: span records and the ids they carry, shared by the tracing code
 * that builds them (trace.h, request.h) and the OTLP exporter that sends
 * them (otlp.h), which otherwise would include each other.
 *
 * Records are fixed-size (no allocation), built on the caller's stack and
 * handed to the OTLP exporter (otlp_submit), which copies them. Every
 * function may be called from any thread.
 */
#ifndef INFERD_OBS_SPAN_H
#define INFERD_OBS_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_ID_BYTES 16
#define SPAN_ID_BYTES 8

/* Lower-case hex of n bytes into out (2n chars, then NUL). */
void span_hex(const uint8_t *in, size_t n, char *out);

/* ---- span records ------------------------------------------------------ */

enum span_kind { SPAN_KIND_INTERNAL = 1, SPAN_KIND_SERVER = 2 }; /* OTLP SpanKind */
enum span_attr_type { SPAN_ATTR_STRING, SPAN_ATTR_INT, SPAN_ATTR_DOUBLE, SPAN_ATTR_BOOL };

#define SPAN_MAX_ATTRS 12
#define SPAN_MAX_LINKS 64
#define SPAN_TEXT_MAX 1536
/* Longest attribute key: a longer one drops its attribute (dropped_attrs). */
#define SPAN_KEY_MAX 64

struct span_attr {
    const char *key; /* a static string */
    uint8_t key_len; /* at most SPAN_KEY_MAX */
    uint8_t type;
    uint16_t str_off, str_len; /* STRING: into text[] */
    union {
        int64_t i;
        double d;
        bool b;
    } v;
};

struct span_link {
    uint8_t trace_id[TRACE_ID_BYTES];
    uint8_t span_id[SPAN_ID_BYTES];
};

struct span_record {
    uint8_t trace_id[TRACE_ID_BYTES];
    uint8_t span_id[SPAN_ID_BYTES];
    uint8_t parent_span_id[SPAN_ID_BYTES];
    bool has_parent;
    uint8_t kind;
    uint8_t flags; /* W3C flags of the span's context */
    uint8_t nattrs;
    uint16_t nlinks;
    uint32_t dropped_attrs, dropped_links;
    uint64_t start_unix_ns, end_unix_ns;
    int status_code; /* OTLP: 0 unset, 1 ok, 2 error */
    uint16_t name_off, name_len, state_off, state_len, msg_off, msg_len;
    struct span_attr attrs[SPAN_MAX_ATTRS];
    struct span_link links[SPAN_MAX_LINKS];
    uint16_t text_len;
    char text[SPAN_TEXT_MAX]; /* name, trace state, status message, string attributes */
};

/* Starts a record: ids, kind, name, times (monotonic ns, converted to unix
 * time). parent may be NULL. */
void span_init(struct span_record *r, const uint8_t trace_id[TRACE_ID_BYTES],
               const uint8_t span_id[SPAN_ID_BYTES], const uint8_t *parent_span_id,
               enum span_kind kind, const char *name, size_t name_len, uint64_t start_ns,
               uint64_t end_ns);
/* Attributes beyond SPAN_MAX_ATTRS, or whose text does not fit, or whose
 * key is longer than SPAN_KEY_MAX are counted in dropped_attrs; links
 * beyond SPAN_MAX_LINKS in dropped_links. */
void span_attr_str(struct span_record *r, const char *key, const char *s, size_t n);
void span_attr_int(struct span_record *r, const char *key, int64_t v);
void span_attr_double(struct span_record *r, const char *key, double v);
void span_attr_bool(struct span_record *r, const char *key, bool v);
void span_add_link(struct span_record *r, const uint8_t trace_id[TRACE_ID_BYTES],
                   const uint8_t span_id[SPAN_ID_BYTES]);
void span_set_state(struct span_record *r, const char *s, size_t n);
void span_set_error(struct span_record *r, const char *msg);

/* Monotonic (clock_now_ns) → Unix epoch nanoseconds. */
uint64_t span_unix_ns(uint64_t mono_ns);

#endif
