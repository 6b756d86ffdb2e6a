/*
 * otlp: exports span records to an OpenTelemetry collector with OTLP/HTTP
 * in its JSON encoding (POST <endpoint>, Content-Type: application/json,
 * body {"resourceSpans":[...]}; trace and span ids as lower-case hex,
 * 64-bit integers and unix-nano times as decimal strings, enums as
 * integers).
 *
 * otlp_submit() copies the part of a record it uses to a bounded queue
 * under a short lock; it never encodes and never blocks on I/O. The queue
 * holds at most buffer_spans spans (and 4 KiB per span on average); a span
 * that does not fit is dropped and counted. A background thread swaps the
 * queue for its own whenever batch_size spans are waiting or interval_ms
 * has passed, encodes the spans and POSTs them, batch_size spans per request,
 * with its own small blocking HTTP/1.1 client (keep-alive, connect/read/
 * write timeouts). A failed export drops that batch (counted); there are
 * no retries, so a dead collector costs one failed connection per batch.
 *
 * Lifecycle: otlp_start() once (before spans are submitted; without it
 * otlp_submit() drops silently, uncounted); otlp_stop() flushes what is
 * buffered (one attempt) and joins the thread.
 */
#ifndef INFERD_OBS_OTLP_H
#define INFERD_OBS_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/numfmt.h"
#include "obs/span.h"

struct otlp_config {
    const char *endpoint;   /* http://host:port/path */
    uint32_t batch_size;    /* spans per POST (default 256) */
    uint32_t interval_ms;   /* longest wait before a partial batch goes (default 1000) */
    uint32_t buffer_spans;  /* spans waiting at most (default 2048) */
    uint32_t timeout_ms;    /* connect, send and receive (default 2000) */
    const char *service_name; /* resource attribute service.name (default "inferd") */
};

/* Parses the endpoint and starts the exporter. Returns 0, or ST_ERROR with a
 * message in err (bad URL, out of memory, thread). */
int otlp_start(const struct otlp_config *cfg, struct error *err);
void otlp_stop(void);

/* Any thread; copies r. */
void otlp_submit(const struct span_record *r);

struct otlp_stats {
    uint64_t spans_exported; /* accepted by the collector (2xx) */
    uint64_t spans_dropped;  /* queue full */
    uint64_t spans_failed;   /* lost in a failed export */
    uint64_t exports_failed; /* POSTs that failed */
};
void otlp_stats(struct otlp_stats *out);

/* The longest span otlp_encode writes: every text byte escaped (6x), every
 * attribute (its key escaped at SPAN_KEY_MAX, its value at its longest
 * number) and link at its longest, and the keys and punctuation around
 * them (under 600 bytes). The encoder checks nothing per field. */
#define OTLP_SPAN_ATTR_JSON_MAX (6 * SPAN_KEY_MAX + 2 + NUMFMT_MAX + 48)
#define OTLP_SPAN_LINK_JSON_MAX (2 * TRACE_ID_BYTES + 2 * SPAN_ID_BYTES + 32)
#define OTLP_SPAN_JSON_MAX                                                                     \
    (6 * SPAN_TEXT_MAX + SPAN_MAX_ATTRS * OTLP_SPAN_ATTR_JSON_MAX +                            \
     SPAN_MAX_LINKS * OTLP_SPAN_LINK_JSON_MAX + 1024)

/* Appends one ExportTraceServiceRequest with the n records (one resource,
 * one scope "inferd") to out. Errors are sticky in out->err. */
void otlp_encode(struct buf *out, const struct span_record *spans, size_t n,
                 const char *service_name);

/* Splits "http://host[:port][/path]" (port default 80, path default
 * "/v1/traces"). Returns 0 or ST_ERROR (no https, bad port, too long). */
int otlp_parse_url(const char *url, char *host, size_t host_cap, int *port, char *path,
                   size_t path_cap);

#endif
