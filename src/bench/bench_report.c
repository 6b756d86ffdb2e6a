#include "bench/bench_report.h"

#include <math.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/json.h"

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

/* A number with one decimal ("38470.0", "95.5"): fixed notation reads
 * better than the shortest round-trip form ("3.847e+04"). */
static void json_w_fixed1(struct json_writer *w, double v)
{
    char s[64];
    int n = snprintf(s, sizeof s, "%.1f", isfinite(v) ? v : 0.0);
    json_w_raw(w, s, (size_t)n);
}

static void write_config(struct json_writer *jw, const struct bench_options *o,
                         const struct report_info *ri)
{
    json_w_key(jw, "config");
    json_w_obj_begin(jw);
    json_w_key(jw, "url");
    json_w_cstr(jw, o->url);
    json_w_key(jw, "mode");
    json_w_cstr(jw, o->rate > 0 ? "open" : "closed");
    json_w_key(jw, "model");
    o->model ? json_w_cstr(jw, o->model) : json_w_null(jw);
    json_w_key(jw, "version");
    o->version ? json_w_cstr(jw, o->version) : json_w_null(jw);
    json_w_key(jw, "format");
    o->model ? json_w_cstr(jw, o->format == BENCH_FORMAT_BINARY ? "binary" : "json")
             : json_w_null(jw);
    json_w_key(jw, "batch");
    json_w_uint(jw, o->batch);
    json_w_key(jw, "path");
    o->path ? json_w_cstr(jw, o->path) : json_w_null(jw);
    json_w_key(jw, "body_file");
    o->body_file ? json_w_cstr(jw, o->body_file) : json_w_null(jw);
    json_w_key(jw, "method");
    json_w_cstr(jw, ri->method);
    json_w_key(jw, "target");
    json_w_cstr(jw, ri->target);
    json_w_key(jw, "headers");
    json_w_arr_begin(jw);
    for (uint32_t i = 0; i < o->nheaders; i++)
        json_w_cstr(jw, o->headers[i]);
    json_w_arr_end(jw);
    json_w_key(jw, "connections");
    json_w_uint(jw, o->connections);
    json_w_key(jw, "concurrency");
    o->rate > 0 ? json_w_null(jw) : json_w_uint(jw, o->concurrency);
    json_w_key(jw, "rate");
    o->rate > 0 ? json_w_f64(jw, o->rate) : json_w_null(jw);
    json_w_key(jw, "duration_s");
    json_w_f64(jw, o->duration_s);
    json_w_key(jw, "warmup_s");
    json_w_f64(jw, o->warmup_s);
    json_w_key(jw, "threads");
    json_w_uint(jw, o->threads);
    json_w_key(jw, "timeout_ms");
    json_w_uint(jw, o->timeout_ms);
    json_w_key(jw, "request_bytes");
    json_w_uint(jw, ri->request_bytes);
    json_w_key(jw, "body_bytes");
    json_w_uint(jw, ri->body_bytes);
    json_w_key(jw, "openai");
    o->openai ? json_w_cstr(jw, o->openai) : json_w_null(jw);
    if (o->openai) {
        json_w_key(jw, "prompt");
        json_w_cstr(jw, o->prompt);
        json_w_key(jw, "max_tokens");
        json_w_uint(jw, o->max_tokens);
        json_w_key(jw, "temperature");
        json_w_f64(jw, o->temperature);
        json_w_key(jw, "seed");
        o->has_seed ? json_w_uint(jw, o->seed) : json_w_null(jw);
    }
    json_w_obj_end(jw);
}

static const double report_percentiles[] = {50, 90, 99, 99.9};
static const char *const report_json_keys[] = {"p50", "p90", "p99", "p999"};
static const char *const report_text_keys[] = {"p50", "p90", "p99", "p99.9"};

/* "key": {"p50", "p90", "p99", "p999", "max", "mean"} in µs; all 0 when empty. */
static void write_latency(struct json_writer *jw, const char *key, const struct hist *h)
{
    json_w_key(jw, key);
    json_w_obj_begin(jw);
    for (size_t i = 0; i < sizeof report_percentiles / sizeof report_percentiles[0]; i++) {
        json_w_key(jw, report_json_keys[i]);
        json_w_fixed1(jw, us(hist_percentile(h, report_percentiles[i])));
    }
    json_w_key(jw, "max");
    json_w_fixed1(jw, us(hist_max(h)));
    json_w_key(jw, "mean");
    json_w_fixed1(jw, hist_mean(h) / 1000.0);
    json_w_obj_end(jw);
}

static double tokens_per_request(const struct gen_stats *g)
{
    return g->ok ? (double)g->completion_tokens / (double)g->ok : 0.0;
}

/* "generation": what --openai measured (gen_stream.h). */
static void write_generation(struct json_writer *jw, const struct bench_options *o,
                             const struct gen_stats *g)
{
    json_w_key(jw, "generation");
    json_w_obj_begin(jw);
    json_w_key(jw, "requests_ok");
    json_w_uint(jw, g->ok);
    json_w_key(jw, "requests_failed");
    json_w_uint(jw, g->failed);
    json_w_key(jw, "tokens");
    json_w_fixed1(jw, g->window_tokens);
    json_w_key(jw, "tokens_per_s");
    json_w_fixed1(jw, g->window_tokens / o->duration_s);
    json_w_key(jw, "completion_tokens");
    json_w_uint(jw, g->completion_tokens);
    json_w_key(jw, "prompt_tokens");
    json_w_uint(jw, g->prompt_tokens);
    json_w_key(jw, "tokens_per_request");
    json_w_fixed1(jw, tokens_per_request(g));
    json_w_key(jw, "finish");
    json_w_obj_begin(jw);
    for (int k = 0; k < GEN_FINISH_COUNT; k++) {
        json_w_key(jw, gen_finish_names[k]);
        json_w_uint(jw, g->finish[k]);
    }
    json_w_obj_end(jw);
    write_latency(jw, "ttft_us", &g->ttft);
    write_latency(jw, "tpot_us", &g->tpot);
    json_w_obj_end(jw);
}

void bench_report_json(const struct bench_options *o, const struct report_info *ri,
                       const struct bench_stats *st)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    struct json_writer jw;
    json_w_init(&jw, &b);
    uint64_t n = st->latency.count;
    json_w_obj_begin(&jw);
    json_w_key(&jw, "requests");
    json_w_uint(&jw, n);
    json_w_key(&jw, "duration_s");
    json_w_f64(&jw, o->duration_s);
    json_w_key(&jw, "rps");
    json_w_fixed1(&jw, (double)n / o->duration_s);
    write_latency(&jw, "latency_us", &st->latency);
    json_w_key(&jw, "requests_ok");
    json_w_uint(&jw, st->latency_ok.count);
    json_w_key(&jw, "rps_ok");
    json_w_fixed1(&jw, (double)st->latency_ok.count / o->duration_s);
    write_latency(&jw, "latency_us_ok", &st->latency_ok);
    json_w_key(&jw, "requests_refused");
    json_w_uint(&jw, st->latency_refused.count);
    write_latency(&jw, "latency_us_refused", &st->latency_refused);
    json_w_key(&jw, "status");
    json_w_obj_begin(&jw);
    for (int s = 100; s < 600; s++) {
        if (!st->status[s])
            continue;
        char key[12];
        snprintf(key, sizeof key, "%d", s);
        json_w_key(&jw, key);
        json_w_uint(&jw, st->status[s]);
    }
    json_w_obj_end(&jw);
    json_w_key(&jw, "errors");
    json_w_obj_begin(&jw);
    for (int k = 0; k < LOADGEN_ERR_COUNT; k++) {
        json_w_key(&jw, loadgen_err_names[k]);
        json_w_uint(&jw, st->errors[k]);
    }
    json_w_obj_end(&jw);
    json_w_key(&jw, "bytes_sent");
    json_w_uint(&jw, st->bytes_sent);
    json_w_key(&jw, "bytes_received");
    json_w_uint(&jw, st->bytes_received);
    json_w_key(&jw, "reconnects");
    json_w_uint(&jw, st->reconnects);
    if (o->openai)
        write_generation(&jw, o, &st->gen);
    write_config(&jw, o, ri);
    json_w_obj_end(&jw);
    buf_putc(&b, '\n');
    if (!b.err)
        fwrite(b.data, 1, b.len, stdout);
    buf_free(&b);
}

static void print_bytes(const char *label, uint64_t n)
{
    if (n >= 10ull << 20)
        printf("%s %.1f MiB", label, (double)n / (1 << 20));
    else if (n >= 10ull << 10)
        printf("%s %.1f KiB", label, (double)n / (1 << 10));
    else
        printf("%s %llu B", label, (unsigned long long)n);
}

static void print_latency(const char *label, const struct hist *h)
{
    printf("%s", label);
    for (size_t i = 0; i < sizeof report_percentiles / sizeof report_percentiles[0]; i++)
        printf(" %s %.1f ", report_text_keys[i], us(hist_percentile(h, report_percentiles[i])));
    printf(" max %.1f  mean %.1f\n", us(hist_max(h)), hist_mean(h) / 1000.0);
}

void bench_report_text(const struct bench_options *o, const struct report_info *ri,
                       const struct bench_stats *st)
{
    uint64_t n = st->latency.count;
    printf("inferd bench: %s http://%s%s (", ri->method, ri->authority, ri->target);
    if (o->model)
        printf("model %s, %s, batch %u, ", o->model,
               o->format == BENCH_FORMAT_BINARY ? "binary" : "json", o->batch);
    if (o->openai)
        printf("model %s, streamed, max_tokens %u, temperature %g, ", o->openai, o->max_tokens,
               o->temperature);
    printf("%zu-byte request)\n", ri->request_bytes);
    if (o->rate > 0)
        printf("open loop: %g req/s on %u connections", o->rate, o->connections);
    else
        printf("closed loop: %u in flight on %u connections", o->concurrency, o->connections);
    printf(", %u thread%s; %g s measured after %g s warm-up\n\n", o->threads,
           o->threads == 1 ? "" : "s", o->duration_s, o->warmup_s);
    printf("  requests    %llu in %g s = %.1f req/s\n", (unsigned long long)n, o->duration_s,
           (double)n / o->duration_s);
    print_latency("  latency µs ", &st->latency);
    printf("  admitted    %llu (2xx) = %.1f req/s\n", (unsigned long long)st->latency_ok.count,
           (double)st->latency_ok.count / o->duration_s);
    print_latency("    latency µs ", &st->latency_ok);
    printf("  refused     %llu (429, 503)\n", (unsigned long long)st->latency_refused.count);
    print_latency("    latency µs ", &st->latency_refused);
    printf("  status     ");
    bool any = false;
    for (int s = 100; s < 600; s++) {
        if (st->status[s]) {
            printf(" %d: %llu", s, (unsigned long long)st->status[s]);
            any = true;
        }
    }
    printf("%s\n", any ? "" : " (none)");
    printf("  errors     ");
    for (int k = 0; k < LOADGEN_ERR_COUNT; k++)
        printf(" %s %llu%s", loadgen_err_names[k], (unsigned long long)st->errors[k],
               k + 1 < LOADGEN_ERR_COUNT ? "," : "\n");
    printf("  reconnects  %llu\n", (unsigned long long)st->reconnects);
    if (o->openai) {
        const struct gen_stats *g = &st->gen;
        printf("  generation  %llu ok, %llu failed; %.1f tokens/s in the window (%.0f tokens), "
               "%.1f tokens/request\n",
               (unsigned long long)g->ok, (unsigned long long)g->failed,
               g->window_tokens / o->duration_s, g->window_tokens, tokens_per_request(g));
        print_latency("    TTFT µs    ", &g->ttft);
        print_latency("    TPOT µs    ", &g->tpot);
        printf("    finish     ");
        for (int k = 0; k < GEN_FINISH_COUNT; k++)
            printf(" %s %llu%s", gen_finish_names[k], (unsigned long long)g->finish[k],
                   k + 1 < GEN_FINISH_COUNT ? "," : "\n");
    }
    print_bytes("  bytes       sent", st->bytes_sent);
    print_bytes(", received", st->bytes_received);
    printf("\n");
}
