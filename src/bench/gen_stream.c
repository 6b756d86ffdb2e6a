#include "bench/gen_stream.h"

#include <string.h>

#include "base/json.h"

#define EVENT_ARENA_CHUNK (16 * 1024)
#define EVENT_ARENA_MAX (1u << 20)

const char *const gen_finish_names[GEN_FINISH_COUNT] = {"stop", "length", "other"};

void gen_stats_init(struct gen_stats *st)
{
    memset(st, 0, sizeof *st);
    hist_init(&st->ttft);
    hist_init(&st->tpot);
}

void gen_stats_merge(struct gen_stats *dst, const struct gen_stats *src)
{
    hist_merge(&dst->ttft, &src->ttft);
    hist_merge(&dst->tpot, &src->tpot);
    dst->ok += src->ok;
    dst->failed += src->failed;
    dst->completion_tokens += src->completion_tokens;
    dst->prompt_tokens += src->prompt_tokens;
    for (int k = 0; k < GEN_FINISH_COUNT; k++)
        dst->finish[k] += src->finish[k];
    dst->window_tokens += src->window_tokens;
}

int gen_stream_init(struct gen_stream *g)
{
    memset(g, 0, sizeof *g);
    arena_init(&g->arena, EVENT_ARENA_CHUNK, EVENT_ARENA_MAX);
    return sse_reader_init(&g->sse);
}

void gen_stream_free(struct gen_stream *g)
{
    sse_reader_free(&g->sse);
    arena_free(&g->arena);
}

void gen_stream_begin(struct gen_stream *g, uint64_t start_ns, uint64_t t_measure, uint64_t t_end)
{
    sse_reader_reset(&g->sse);
    g->start_ns = start_ns;
    g->t_measure = t_measure;
    g->t_end = t_end;
    g->first_ns = 0;
    g->now_ns = 0;
    g->text_events = g->window_events = 0;
    g->usage_completion = g->usage_prompt = -1;
    g->done = g->error = false;
    g->finish_reason[0] = '\0';
}

static bool non_empty_string(const struct json_value *v)
{
    return v && v->type == JSON_STRING && v->len > 0;
}

static void read_usage(struct gen_stream *g, const struct json_value *usage)
{
    int64_t n;
    if (json_num_i64(json_get(usage, "completion_tokens"), &n) == 0 && n >= 0)
        g->usage_completion = n;
    if (json_num_i64(json_get(usage, "prompt_tokens"), &n) == 0 && n >= 0)
        g->usage_prompt = n;
}

static void read_choice(struct gen_stream *g, const struct json_value *choice)
{
    const struct json_value *delta = json_get(choice, "delta");
    const struct json_value *text = delta ? json_get(delta, "content") : json_get(choice, "text");
    if (non_empty_string(text)) {
        if (g->text_events++ == 0)
            g->first_ns = g->now_ns;
        if (g->now_ns >= g->t_measure && g->now_ns < g->t_end)
            g->window_events++;
    }
    const struct json_value *fr = json_get(choice, "finish_reason");
    if (fr && fr->type == JSON_STRING) {
        size_t n = fr->len < GEN_FINISH_REASON_MAX - 1 ? fr->len : GEN_FINISH_REASON_MAX - 1;
        memcpy(g->finish_reason, fr->u.str, n);
        g->finish_reason[n] = '\0';
    }
}

static int on_event(void *arg, const struct sse_event *ev)
{
    struct gen_stream *g = arg;
    if (g->done) { /* nothing may follow [DONE] */
        g->error = true;
        return 1;
    }
    if (ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0) {
        g->done = true;
        return 0;
    }
    arena_reset(&g->arena);
    struct json_value *doc;
    const char *perr;
    size_t poff;
    if (json_parse(&g->arena, ev->data, ev->data_len, NULL, &doc, &perr, &poff) != 0 ||
        doc->type != JSON_OBJECT || json_get(doc, "error")) {
        g->error = true;
        return 1;
    }
    const struct json_value *choices = json_get(doc, "choices");
    if (choices && choices->type == JSON_ARRAY && choices->len > 0)
        read_choice(g, &choices->u.items[0]);
    const struct json_value *usage = json_get(doc, "usage");
    if (usage && usage->type == JSON_OBJECT)
        read_usage(g, usage);
    return 0;
}

void gen_stream_feed(struct gen_stream *g, const char *p, size_t n, uint64_t now_ns)
{
    if (g->error)
        return;
    g->now_ns = now_ns;
    if (sse_reader_feed(&g->sse, p, n, on_event, g) != 0)
        g->error = true;
}

static enum gen_finish finish_kind(const char *reason)
{
    if (strcmp(reason, "stop") == 0)
        return GEN_FINISH_STOP;
    if (strcmp(reason, "length") == 0)
        return GEN_FINISH_LENGTH;
    return GEN_FINISH_OTHER;
}

void gen_stream_finish(struct gen_stream *g, int http_status, bool measured, uint64_t now_ns,
                       struct gen_stats *st)
{
    uint64_t tokens = g->usage_completion >= 0 ? (uint64_t)g->usage_completion : g->text_events;
    if (g->text_events)
        st->window_tokens += (double)tokens * g->window_events / g->text_events;
    if (!measured)
        return;
    bool ok = http_status >= 200 && http_status < 300 && g->done && !g->error;
    if (!ok) {
        st->failed++;
        return;
    }
    st->ok++;
    st->completion_tokens += tokens;
    if (g->usage_prompt > 0)
        st->prompt_tokens += (uint64_t)g->usage_prompt;
    st->finish[finish_kind(g->finish_reason)]++;
    if (g->text_events) {
        hist_record(&st->ttft, g->first_ns - g->start_ns);
        if (tokens >= 2)
            hist_record(&st->tpot, (now_ns - g->first_ns) / (tokens - 1));
    }
}

void gen_request_body(struct buf *out, const struct gen_request *r)
{
    struct json_writer w;
    json_w_init(&w, out);
    json_w_obj_begin(&w);
    json_w_key(&w, "model");
    json_w_cstr(&w, r->model);
    json_w_key(&w, "prompt");
    json_w_cstr(&w, r->prompt);
    json_w_key(&w, "max_tokens");
    json_w_uint(&w, r->max_tokens);
    json_w_key(&w, "temperature");
    json_w_f64(&w, r->temperature);
    if (r->has_seed) {
        json_w_key(&w, "seed");
        json_w_uint(&w, r->seed);
    }
    json_w_key(&w, "stream");
    json_w_bool(&w, true);
    json_w_key(&w, "stream_options");
    json_w_obj_begin(&w);
    json_w_key(&w, "include_usage");
    json_w_bool(&w, true);
    json_w_obj_end(&w);
    json_w_obj_end(&w);
}
