/*
 * openai: the OpenAI-compatible REST API of generative models (docs/openai.md).
 *
 *   GET    /v1/models                 the generative models of the registry
 *   GET    /v1/models/{id}            one of them (404 model_not_found)
 *   POST   /v1/completions            a completion (api/openai/call.h):
 *   POST   /v1/chat/completions         one JSON body, or with "stream": true
 *                                       Server-Sent Events, resumable
 *   GET    /v1/streams/{stream id}    resumes a stream (Last-Event-ID
 *                                       optional: absent = from the first event)
 *   DELETE /v1/streams/{stream id}    cancels its sequence: 200 {"id",
 *                                       "object": "stream", "cancelled"}
 * A POST with a Last-Event-ID header resumes the stream that event belongs
 * to instead of starting a new one (same body required: 409 otherwise).
 * Streams (api/streams.h) belong to the tenant that created them: another
 * tenant's are unknown (404).
 *
 * Errors, every status on these paths (auth's 401/403, the pipeline's
 * 429/503 with Retry-After), have OpenAI's shape {"error": {"message",
 * "type", "param", "code"}}: 400/409/410 invalid_request_error, 401
 * authentication_error (invalid_api_key), 403 permission_error, 404
 * invalid_request_error (model_not_found for an unknown or non-generative
 * model), 429 rate_limit_exceeded (insufficient_quota for a spent daily
 * token budget), 5xx server_error (503: overloaded). Every answer of a
 * completion carries the x-ratelimit-* headers (api/limit_headers.h).
 *
 * API keys (policy/auth.h): /v1/models needs `read`; a completion is an
 * infer call, checked by the pipeline for its model; a stream needs an
 * infer scope and must be the tenant's own.
 *
 * All on the I/O thread that owns the connection.
 */
#ifndef INFERD_API_OPENAI_H
#define INFERD_API_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include "api/openai/call.h"
#include "http/txn.h"
#include "policy/auth.h"
#include "serve/call.h"

/* The path's segments after /v1, percent-decoded (api/http_api.c splits it). */
#define OPENAI_PATH_MAX 3
struct openai_path {
    const char *seg[OPENAI_PATH_MAX];
    size_t len[OPENAI_PATH_MAX];
    int n; /* OPENAI_PATH_MAX + 1: too many */
};

/* One per I/O thread. */
struct openai_api {
    struct openai_front front;
    uint64_t created_s; /* "created" of the models: the server's start */
};

/* start_ms: the server's start (wall clock, ms since the epoch). */
void openai_api_init(struct openai_api *api, struct serve_thread *serve, uint64_t start_ms,
                     uint64_t sse_keepalive_ms);
/* About once a second on the loop thread (api/streams.h). */
void openai_api_tick(struct openai_api *api, uint64_t now_ms);
/* After the loop stopped. */
void openai_api_free(struct openai_api *api);

/* The API-key class of a /v1 request (api/http_api.c's route_class()). */
enum auth_class openai_route_class(const struct openai_path *p);
/* Answers a request to /v1/...: checks its key with auth (NULL: none)
 * itself, so that refusals have OpenAI's shape too. */
void openai_handle(struct openai_api *api, struct auth *auth, struct http_txn *txn,
                   const struct openai_path *p);

#endif
