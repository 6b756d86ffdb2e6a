/*
 * openai_call: the front end of the serving pipeline (serve/call.h) for
 * POST /v1/completions and /v1/chat/completions (api/openai/openai.h).
 *
 * The body is parsed (api/openai/json.h) before the call starts, since the
 * model's name is in it; the pipeline then resolves the model, checks the
 * key, and the decoder builds the text-interface inputs of a generative
 * model (text_input, max_tokens, temperature, top_k, top_p, random_seed,
 * stop_words, stream) and asks for its four outputs (api/gen_outputs.h). A
 * model that is not generative is unknown here (404 model_not_found).
 *
 * Not streamed: the model's one response becomes one JSON body
 * (openai_completion_json). Streamed: the decoder creates a resumable
 * stream (api/streams.h; 503 when too many are held); at the first
 * response the POST's connection becomes its first subscriber and the
 * events follow: one chunk per non-empty text delta, a last chunk with the
 * finish reason, the usage chunk with stream_options.include_usage, then
 * `data: [DONE]`. An error before the first response is an ordinary
 * answer (OpenAI's error shape); after it, one `data: {"error": ...}`
 * event ends the stream (no [DONE]). Completion ids are
 * "cmpl-<stream id>" / "chatcmpl-<stream id>" (a fresh random id when not
 * streamed).
 *
 * The access log line of the POST (and of every response that resumes the
 * stream) carries prompt_tokens, completion_tokens and finish_reason.
 *
 * On the I/O thread that owns the connection.
 */
#ifndef INFERD_API_OPENAI_CALL_H
#define INFERD_API_OPENAI_CALL_H

#include "api/openai/json.h"
#include "api/streams.h"
#include "base/buf.h"
#include "http/txn.h"
#include "serve/call.h"

/* What the front end uses of its I/O thread (api/openai/openai.h's). */
struct openai_front {
    struct serve_thread *serve;
    struct stream_thread streams; /* the thread's stream subscribers */
    struct buf scratch;           /* one event's JSON */
};

/* Route numbers of a stream (streams.h's kind): a re-POST must match. */
#define OPENAI_ROUTE_KIND(k) ((int)(k))

/* Starts the call of txn's request; the answer comes through txn. */
void openai_call_start(struct openai_front *front, struct http_txn *txn, enum openai_kind kind);

#endif
