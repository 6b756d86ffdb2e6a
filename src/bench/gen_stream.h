/*
 * gen_stream: what `inferd bench --openai` measures of streamed completions
 * (POST /v1/completions with "stream": true): the request body, and per
 * response the SSE events read as they arrive.
 *
 * Per response (struct gen_stream, one per connection, reused):
 *   gen_stream_begin() when the request is handed to a connection;
 *   gen_stream_feed() with each piece of the decoded 2xx body and the time
 *   it was received; gen_stream_finish() once the response is complete or
 *   failed, which adds the response to a struct gen_stats.
 *
 * Reading the events: each `data:` event is a JSON chunk (or "[DONE]").
 * A chunk whose choices[0].text (completions) or choices[0].delta.content
 * (chat) is non-empty is a text event; the first one's arrival is the time
 * to first token (TTFT). A chunk with "usage" (stream_options.include_usage)
 * gives the exact completion_tokens; without one, text events are counted
 * as tokens. A chunk with "error", a chunk that is not JSON, or a stream
 * that ends without "[DONE]" makes the response failed.
 *
 * Figures (struct gen_stats, one per client thread, merged at the end):
 *   window_tokens  tokens received inside the measured window, from every
 *                  response (those started during the warm-up too), so that
 *                  window_tokens / duration is the steady-state aggregate
 *                  rate however long a stream is: a response's tokens are
 *                  spread over its text events, and those that arrived in
 *                  the window count.
 *   ok, failed     measured responses (started in the window), as above.
 *   ttft           ns from hand-off to the first text event (ok responses).
 *   tpot           time per output token after the first, vLLM's TPOT:
 *                  (end - first text event) / (tokens - 1), ok responses
 *                  with at least 2 tokens.
 *   completion_tokens, prompt_tokens  sums over ok responses (usage).
 * Thread: one per struct.
 */
#ifndef INFERD_BENCH_GEN_STREAM_H
#define INFERD_BENCH_GEN_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "bench/hist.h"
#include "bench/sse_reader.h"

#define GEN_FINISH_REASON_MAX 16

/* The finish reasons counted apart; anything else is "other". */
enum gen_finish { GEN_FINISH_STOP, GEN_FINISH_LENGTH, GEN_FINISH_OTHER, GEN_FINISH_COUNT };
extern const char *const gen_finish_names[GEN_FINISH_COUNT];

struct gen_stats {
    struct hist ttft; /* ns */
    struct hist tpot; /* ns */
    uint64_t ok, failed;
    uint64_t completion_tokens, prompt_tokens;
    uint64_t finish[GEN_FINISH_COUNT];
    double window_tokens;
};

void gen_stats_init(struct gen_stats *st);
void gen_stats_merge(struct gen_stats *dst, const struct gen_stats *src);

struct gen_stream {
    struct sse_reader sse;
    struct arena arena; /* one event's JSON, reset per event */
    uint64_t start_ns, t_measure, t_end;
    uint64_t first_ns, now_ns;
    uint32_t text_events, window_events;
    int64_t usage_completion, usage_prompt; /* -1: no usage chunk */
    bool done, error;
    char finish_reason[GEN_FINISH_REASON_MAX];
};

/* 0 or -ENOMEM. */
int gen_stream_init(struct gen_stream *g);
void gen_stream_free(struct gen_stream *g);
/* A new response: its request was handed over at start_ns; the measured
 * window is [t_measure, t_end). */
void gen_stream_begin(struct gen_stream *g, uint64_t start_ns, uint64_t t_measure, uint64_t t_end);
/* Body bytes of a 2xx response, received at now_ns. */
void gen_stream_feed(struct gen_stream *g, const char *p, size_t n, uint64_t now_ns);
/* The response is over at now_ns: http_status its status, 0 when the
 * connection failed first. measured: it started in the window. */
void gen_stream_finish(struct gen_stream *g, int http_status, bool measured, uint64_t now_ns,
                       struct gen_stats *st);

struct gen_request {
    const char *model;
    const char *prompt;
    uint32_t max_tokens;
    double temperature;
    bool has_seed;
    uint64_t seed;
};

/* The body of POST /v1/completions: model, prompt, max_tokens, temperature,
 * seed (when given), "stream": true, stream_options.include_usage. */
void gen_request_body(struct buf *out, const struct gen_request *r);

#endif
