/*
 * openai_http: errors of the OpenAI-compatible API (api/openai/openai.h) as HTTP
 * answers, in OpenAI's shape {"error": {"message", "type", "param",
 * "code"}} (api/openai/json.h): type by status — 400, 404, 409, 410 and
 * other 4xx invalid_request_error, 401 authentication_error (code
 * invalid_api_key), 403 permission_error, 429 rate_limit_exceeded (code
 * rate_limit_exceeded; a call refused by its daily token budget:
 * insufficient_quota, code insufficient_quota), 5xx server_error (503:
 * code overloaded, 504: timeout).
 *
 * On the I/O thread that owns the txn.
 */
#ifndef INFERD_API_OPENAI_HTTP_H
#define INFERD_API_OPENAI_HTTP_H

#include "api/openai/json.h"
#include "base/error.h"
#include "http/txn.h"
#include "serve/call.h"

/* err in OpenAI's shape; code: the given one, or when NULL the status's. */
void openai_error_from(struct openai_error *e, const struct error *err, const char *code);
/* Answers txn with e (status e->status), with WWW-Authenticate on a 401
 * and the retry advice of a 429 or 503 (api/limit_headers.h;
 * retry_after_s, 0 = 1 s). */
void openai_http_send(struct http_txn *txn, const struct openai_error *e, unsigned retry_after_s);
/* Both: answers txn with err. */
void openai_http_error(struct http_txn *txn, const struct error *err, const char *code);
/* A call's error: as openai_http_error, with the call's x-ratelimit-*
 * headers, its token refusal's type (insufficient_quota when its daily
 * budget is spent) and retry advice (retry-after-ms, x-should-retry). */
void openai_http_call_error(struct http_txn *txn, const struct infer_call *call,
                            const struct error *err, const char *code);

#endif
