/*
 * limit_headers: the rate limit and the token budget a call came under,
 * as OpenAI's response headers (docs/openai.md, "Rate limits and token
 * budgets"), for the OpenAI routes and REST infer / generate /
 * generate_stream, on every answer (refusals included; a streamed one in
 * its response head).
 *
 *   from call->ratelimit, when set (the request-rate bucket):
 *     x-ratelimit-limit-requests      the bucket's burst
 *     x-ratelimit-remaining-requests  tokens left after this call
 *     x-ratelimit-reset-requests      until the bucket is full again
 *   from call->tokens, when set (the token-budget counter):
 *     x-ratelimit-limit-tokens, -remaining-tokens, -reset-tokens
 *
 * Resets are durations in OpenAI's (Go's) format, to the millisecond:
 * "0s", "250ms", "1s", "1.5s", "6m0s", "23h59m59s".
 *
 * A refusal's retry advice: Retry-After (whole seconds, at least 1) on a
 * 429 or a 503; on a 429 also retry-after-ms, and x-should-retry: false
 * when a token budget refused the call for the rest of its day
 * (SERVE_QUOTA_EXHAUSTED) or for good (SERVE_QUOTA_TOO_LARGE), so that
 * the OpenAI SDKs do not sleep until the next day.
 *
 * On the I/O thread that owns the txn, before its response head.
 */
#ifndef INFERD_API_LIMIT_HEADERS_H
#define INFERD_API_LIMIT_HEADERS_H

#include <stddef.h>
#include <stdint.h>

#include "http/txn.h"
#include "serve/call.h"

/* Room for any duration: "5124095576030h59m59.999s" and its NUL. */
#define LIMIT_DURATION_MAX 32

/* ms as a Go duration into out (LIMIT_DURATION_MAX bytes); its length. */
size_t limit_duration(uint64_t ms, char out[LIMIT_DURATION_MAX]);

/* The x-ratelimit-* headers of rl and tokens (either may be NULL; an
 * unset one adds nothing). */
void limit_headers_add(struct http_txn *txn, const struct serve_ratelimit *rl,
                       const struct serve_tokens *tokens);

/* The retry advice of an answer with status (nothing unless 429 or 503).
 * retry_after_s: the error's (0: 1 s); tokens: the call's budget, NULL
 * when there is no call (its refusal and retry_ms refine the advice). */
void limit_headers_retry(struct http_txn *txn, int status, unsigned retry_after_s,
                         const struct serve_tokens *tokens);

#endif
