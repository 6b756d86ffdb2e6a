/*
 * openai_json: the JSON bodies of the OpenAI-compatible API
 * (POST /v1/completions and POST /v1/chat/completions): the request parser,
 * and the writers of responses, stream chunks and errors in OpenAI's shapes.
 * Protocol only: the routes, the model lookup and the SSE framing belong
 * to the front end.
 *
 * Request (openai_request_parse): one JSON object. The fields read are
 * OpenAI's (as the official SDKs send them); every optional field may be
 * null, which means "not given". Unknown top-level fields are ignored (the
 * SDKs and clients send many: user, metadata, store, ...). Types are
 * checked strictly (a string where a number is expected is a 400), and
 * every value against its range:
 *   model                      string, 1..OPENAI_MAX_MODEL bytes, no NUL (required)
 *   prompt (completions)       a string, or an array of exactly one string (required)
 *   messages (chat)            1..OPENAI_MAX_MESSAGES objects {role, content} (required);
 *                              role system, developer, user or assistant; content a
 *                              string or an array of {"type": "text", "text"} parts
 *   max_tokens                 integer >= 1; chat also max_completion_tokens (if both
 *                              are given they must be equal)
 *   temperature [0, 2], top_p (0, 1], top_k (extension, as vLLM) integer >= -1
 *   seed                       integer in [-2^63, 2^64)
 *   stop                       a string or an array of at most OPENAI_MAX_STOPS strings,
 *                              each 1..OPENAI_MAX_STOP_LEN bytes
 *   stream                     boolean; stream_options {include_usage} only with stream
 * Refused (400, code "unsupported_value"), since inferd generates one plain
 * text completion: n != 1, best_of != 1, echo true, logprobs (true or a
 * number), a non-empty suffix, non-zero presence/frequency_penalty, a non-empty
 * logit_bias, non-empty tools / functions, response_format other than
 * {"type": "text"}, a non-text content part, the roles tool and function.
 * Limits: prompt text (chat: all contents with their separators) <=
 * OPENAI_MAX_PROMPT bytes, OPENAI_MAX_PARTS parts per message; the body's
 * size is the caller's (the server's max body).
 *
 * Errors: OpenAI's shape {"error": {"message", "type", "param", "code"}}.
 * type is "invalid_request_error"; param names the field as OpenAI does
 * ("temperature", "messages.[2].content"), NULL for the body as a whole;
 * code is one of "invalid_json", "invalid_type", "invalid_value",
 * "missing_required_parameter", "unsupported_value", "request_too_large"
 * (the writer writes a NULL param or code as null).
 * The status is 400, or 413 when the request does not fit in the arena.
 *
 * Responses: the writers append to a struct buf (errors sticky in
 * out->err, as base/json.h's writer). Strings are escaped as JSON needs
 * (control characters as \u00XX, invalid UTF-8 bytes as \u00XX), so every
 * body is valid JSON whatever the text.
 *
 * Memory: everything the parsed request points to (model, prompt, stop
 * strings, the error's param) lives in the arena given to the parser and
 * is valid until the arena is reset. Thread: any (no shared state).
 */
#ifndef INFERD_API_OPENAI_JSON_H
#define INFERD_API_OPENAI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/error.h"

enum openai_kind { OPENAI_COMPLETIONS, OPENAI_CHAT };

#define OPENAI_MAX_STOPS 4
#define OPENAI_MAX_STOP_LEN 64 /* bytes; the engine's GEN_MAX_STOP_LEN */
#define OPENAI_MAX_PROMPT (1u << 20)
#define OPENAI_MAX_MESSAGES 256
#define OPENAI_MAX_PARTS 256
#define OPENAI_MAX_MODEL 256

struct openai_request {
    enum openai_kind kind;
    const char *model; /* NUL-terminated, arena */
    /* completions: `prompt`; chat: the messages' contents (a string, or its
     * text parts concatenated) joined with "\n" in order, every role. */
    const char *prompt;
    size_t prompt_len;
    int32_t max_tokens; /* max_tokens or max_completion_tokens; -1 = not given */
    float temperature;  /* [0, 2]; NAN = not given */
    float top_p;        /* (0, 1]; NAN = not given */
    int32_t top_k;      /* -1 = not given; 0 = off (0 or -1 in JSON) */
    bool has_seed;
    uint64_t seed; /* negative JSON values reinterpreted as uint64 */
    const char *stop[OPENAI_MAX_STOPS];
    size_t stop_len[OPENAI_MAX_STOPS];
    uint32_t nstop;
    bool stream;
    bool include_usage; /* stream_options.include_usage (only with stream) */
};

struct openai_error {
    int status;        /* 400, or 413 */
    const char *type;  /* "invalid_request_error" */
    const char *param; /* the field, or NULL */
    const char *code;  /* a short code, or NULL */
    char message[ERROR_MSG_MAX];
};

/* Parses body[0..len) into *out. Returns 0, or ST_ERROR with *err filled (see
 * above). */
int openai_request_parse(struct arena *a, enum openai_kind kind, const char *body, size_t len,
                         struct openai_request *out, struct openai_error *err);

/* {"error": {"message", "type", "param", "code"}}. */
void openai_error_json(struct buf *out, const struct openai_error *e);

struct openai_result {
    const char *id;
    uint64_t created; /* Unix seconds */
    const char *model;
    const char *text;
    size_t text_len;
    const char *finish_reason; /* NULL: null */
    uint32_t prompt_tokens, completion_tokens;
};

/* The non-streamed body: object "text_completion" (choices[0].text) or
 * "chat.completion" (choices[0].message {role "assistant", content}), with
 * choices[0] {index 0, logprobs null, finish_reason} and usage
 * {prompt_tokens, completion_tokens, total_tokens}. */
void openai_completion_json(struct buf *out, enum openai_kind k, const struct openai_result *r);

/* One streamed chunk (the JSON of one SSE data line): object
 * "text_completion" with choices[0].text, or "chat.completion.chunk" with
 * choices[0].delta: the first chunk's delta has role "assistant" and
 * content, later ones content, except a final chunk (finish_reason set,
 * not first) with no text, whose delta is {} as OpenAI's. finish_reason is
 * null when NULL. usage_null adds "usage": null (the content chunks of a
 * stream with include_usage). */
void openai_chunk_json(struct buf *out, enum openai_kind k, const char *id, uint64_t created,
                       const char *model, const char *delta, size_t delta_len,
                       const char *finish_reason, bool first, bool usage_null);

/* The last chunk of a stream with include_usage: "choices": [] and usage. */
void openai_usage_chunk_json(struct buf *out, enum openai_kind k, const char *id, uint64_t created,
                             const char *model, uint32_t prompt_tokens, uint32_t completion_tokens);

#endif
