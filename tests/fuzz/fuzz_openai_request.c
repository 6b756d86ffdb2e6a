/*
 * Fuzz target: the OpenAI request parser (api/openai/json.c), completions
 * or chat. An accepted request must keep every documented bound (the
 * parser's contract); its text is then written through every response
 * writer (as completion text, chunk delta and model name), and a refusal
 * through the error writer, and each body must parse back as one JSON
 * object.
 *
 * Input: byte 0 bit 0 = chat (else completions); then the body.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "api/openai/json.h"
#include "base/json.h"

static void check_json(struct buf *b)
{
    if (b->err)
        __builtin_trap();
    struct arena a;
    arena_init(&a, 4096, 64u << 20);
    struct json_value *root;
    if (json_parse(&a, b->data, b->len, NULL, &root, NULL, NULL) != ST_OK ||
        root->type != JSON_OBJECT)
        __builtin_trap();
    arena_free(&a);
    buf_reset(b);
}

static void check_request(const struct openai_request *r)
{
    size_t model_len = strlen(r->model);
    if (model_len == 0 || model_len > OPENAI_MAX_MODEL || r->prompt_len > OPENAI_MAX_PROMPT ||
        (r->prompt_len > 0 && !r->prompt))
        __builtin_trap();
    if (r->max_tokens != -1 && r->max_tokens < 1)
        __builtin_trap();
    if (!isnan(r->temperature) && !(r->temperature >= 0 && r->temperature <= 2))
        __builtin_trap();
    if (!isnan(r->top_p) && !(r->top_p > 0 && r->top_p <= 1))
        __builtin_trap();
    if (r->top_k < -1 || r->nstop > OPENAI_MAX_STOPS || (r->include_usage && !r->stream))
        __builtin_trap();
    for (uint32_t i = 0; i < r->nstop; i++)
        if (r->stop_len[i] == 0 || r->stop_len[i] > OPENAI_MAX_STOP_LEN)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum openai_kind kind = data[0] & 1 ? OPENAI_CHAT : OPENAI_COMPLETIONS;
    struct arena a;
    arena_init(&a, 4096, 16u << 20);
    struct openai_request r;
    struct openai_error err;
    struct buf out;
    buf_init(&out, 8u << 20);
    if (openai_request_parse(&a, kind, (const char *)data + 1, size - 1, &r, &err) == 0) {
        if (r.kind != kind)
            __builtin_trap();
        check_request(&r);
        struct openai_result res = {.id = "cmpl-1",
                                    .created = 1,
                                    .model = r.model,
                                    .text = r.prompt,
                                    .text_len = r.prompt_len,
                                    .finish_reason = r.stream ? "stop" : NULL,
                                    .prompt_tokens = (uint32_t)r.prompt_len,
                                    .completion_tokens = r.nstop};
        openai_completion_json(&out, kind, &res);
        check_json(&out);
        openai_chunk_json(&out, kind, "cmpl-1", 1, r.model, r.prompt, r.prompt_len,
                          res.finish_reason, r.has_seed, r.include_usage);
        check_json(&out);
        for (uint32_t i = 0; i < r.nstop; i++) {
            openai_chunk_json(&out, kind, "cmpl-1", 1, r.model, r.stop[i], r.stop_len[i], NULL,
                              false, false);
            check_json(&out);
        }
        openai_usage_chunk_json(&out, kind, "cmpl-1", 1, r.model, 1, 2);
        check_json(&out);
    } else {
        if ((err.status != 400 && err.status != 413) || !err.type || !err.message[0])
            __builtin_trap();
        openai_error_json(&out, &err);
        check_json(&out);
    }
    buf_free(&out);
    arena_free(&a);
    return 0;
}
