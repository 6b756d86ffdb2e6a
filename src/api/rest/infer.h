/*
 * rest_infer: the REST front ends of the serving pipeline (serve/call.h).
 * They decode the HTTP request into the call and encode what comes back;
 * the rest (lookup, policy, submit, completion) is the pipeline's.
 *
 *   POST /v2/models/{m}[/versions/{v}]/infer            KServe v2 JSON and
 *        Triton's binary tensor extension (api/rest/infer_json.h); one
 *        response; decoupled models are refused (400), as in Triton
 *   POST .../generate                                   Triton's generate
 *        extension (api/rest/generate_json.h): one JSON response object; a
 *        decoupled model may answer, with one response (a second: 400)
 *   POST .../generate_stream                            the same request;
 *        every response is one Server-Sent Event (http/sse.h) with
 *        `id: <n>` (1, 2, ...) and `data: <response object>`, sent as the
 *        model makes it; an error after the stream began is a last event
 *        `data: {"error": "..."}`. Comments (": keep-alive") go out while
 *        the stream is idle for sse_keepalive_ms. A client that goes
 *        away stops the model at its next response.
 * 429 and 503 answers carry Retry-After: 1.
 *
 * All on the loop thread that owns the connection.
 */
#ifndef INFERD_API_REST_INFER_H
#define INFERD_API_REST_INFER_H

#include <stdint.h>

#include "base/buf.h"
#include "http/txn.h"
#include "model/model.h"
#include "serve/call.h"

/* Default of --sse-keepalive-ms. */
#define REST_SSE_KEEPALIVE_MS 15000

enum rest_infer_kind { REST_INFER, REST_GENERATE, REST_GENERATE_STREAM };

/* Per I/O thread. */
struct rest_infer_api {
    struct serve_thread *serve;
    uint64_t sse_keepalive_ms;
    /* The largest body once decompressed (Content-Encoding gzip or
     * deflate): --max-body-bytes, set by the caller after init (default
     * 64 MiB). */
    uint64_t max_body;
    struct infer_call *streams; /* generate_stream calls whose stream began */
    struct buf scratch;         /* one SSE event's JSON */
};

void rest_infer_init(struct rest_infer_api *api, struct serve_thread *serve,
                     uint64_t sse_keepalive_ms);
void rest_infer_free(struct rest_infer_api *api);
/* Starts the call for txn: model `name`, version "" or NULL for the
 * default. The answer comes through txn. */
void rest_infer_start(struct rest_infer_api *api, struct http_txn *txn, enum rest_infer_kind kind,
                      const char *name, const char *version);
/* About once a second: keep-alive comments on idle event streams. */
void rest_infer_tick(struct rest_infer_api *api, uint64_t now_ns);

#endif
