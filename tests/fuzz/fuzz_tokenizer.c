/*
 * Fuzz target for preprocess/tokenizer. Every input is used three ways:
 *   1. as tokenizer.json text: tokenizer_parse accepts it, or fails with a
 *      400 (500 only for memory) and a message naming tokenizer.json; an
 *      accepted tokenizer has eos = vocab - 1 without bytes, and the input
 *      itself encodes and decodes back;
 *   2. as text for the shipped model's tokenizer (models/kjv/1/tokenizer.json,
 *      found through INFERD_SOURCE_DIR, a compile definition):
 *      decode(encode(x)) == x; the ids equal a naive implementation of the
 *      rule (lowest-ranked adjacent pair, its occurrences replaced left to
 *      right, repeat; over a dense rank table read from the file here); an
 *      encode with room for fewer ids writes their prefix and the same total;
 *   3. the same with a built-in tokenizer whose 120 merges over "abc \n"
 *      apply often and nest deeply.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "preprocess/tokenizer.h"

#ifndef INFERD_SOURCE_DIR
#define INFERD_SOURCE_DIR "."
#endif

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", what);
        abort();
    }
}

/* A tokenizer and the naive rule's view of it. */
struct model {
    struct tokenizer *t;
    uint32_t vocab;
    int32_t *rank; /* rank[a * vocab + b], -1: not a merge */
};

/* Fills m->rank from tokenizer.json text (already accepted by the parser). */
static void read_ranks(struct model *m, const char *json, size_t len)
{
    struct arena a;
    arena_init(&a, 1 << 16, 64u << 20);
    struct json_value *root;
    const char *msg;
    size_t off;
    check(json_parse(&a, json, len, NULL, &root, &msg, &off) == ST_OK, "model JSON");
    const struct json_value *merges = json_get(root, "merges");
    m->vocab = tokenizer_vocab_size(m->t);
    m->rank = malloc((size_t)m->vocab * m->vocab * sizeof *m->rank);
    check(m->rank != NULL, "out of memory");
    memset(m->rank, 0xff, (size_t)m->vocab * m->vocab * sizeof *m->rank);
    for (uint32_t k = 0; k < merges->len; k++) {
        int64_t x = 0, y = 0;
        check(json_num_i64(&merges->u.items[k].u.items[0], &x) == 0 &&
                  json_num_i64(&merges->u.items[k].u.items[1], &y) == 0,
              "merge ids");
        m->rank[x * m->vocab + y] = (int32_t)k;
    }
    arena_free(&a);
}

static void model_from_text(struct model *m, const char *json, size_t len)
{
    struct error err;
    if (tokenizer_parse(json, len, &m->t, &err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    read_ranks(m, json, len);
}

static void load_shipped(struct model *m)
{
    static const char path[] = INFERD_SOURCE_DIR "/models/kjv/1/tokenizer.json";
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_tokenizer: cannot open %s\n", path);
        abort();
    }
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    model_from_text(m, text, n);
}

/* 120 merges of ids over "abc \n" and earlier merges (a fixed LCG). */
static void make_builtin(struct model *m)
{
    static const char alphabet[] = "abc \n";
    int32_t pairs[120][2];
    uint32_t x = 12345;
    struct buf b;
    buf_init(&b, 1 << 20);
    buf_printf(&b,
               "{\"type\": \"byte-bpe\", \"vocab_size\": %u, \"eos_token_id\": %u, \"merges\": [",
               256 + 120 + 1, 256 + 120);
    for (uint32_t k = 0; k < 120; k++) {
        bool dup;
        do {
            for (int s = 0; s < 2; s++) {
                x = x * 1103515245u + 12345u;
                uint32_t pick = (x >> 16) % (5 + k);
                pairs[k][s] = pick < 5 ? (unsigned char)alphabet[pick] : (int32_t)(256 + pick - 5);
            }
            dup = false;
            for (uint32_t j = 0; j < k; j++)
                dup |= pairs[j][0] == pairs[k][0] && pairs[j][1] == pairs[k][1];
        } while (dup);
        buf_printf(&b, "%s[%d, %d]", k ? ", " : "", pairs[k][0], pairs[k][1]);
    }
    buf_puts(&b, "]}");
    check(b.err == 0, "builtin JSON");
    model_from_text(m, b.data, b.len);
    buf_free(&b);
}

/* The rule, naively. Returns the number of ids written to out. */
static size_t ref_encode(const struct model *m, const unsigned char *s, size_t len, int32_t *out,
                         int32_t *work)
{
    size_t count = 0;
    for (size_t start = 0; start < len;) {
        size_t end = start + 1;
        while (end < len && s[end] != ' ' && s[end] != '\n')
            end++;
        size_t n = end - start;
        for (size_t i = 0; i < n; i++)
            work[i] = s[start + i];
        for (;;) {
            int32_t best = -1;
            for (size_t i = 0; i + 1 < n; i++) {
                int32_t r = m->rank[work[i] * m->vocab + work[i + 1]];
                if (r >= 0 && (best < 0 || r < best))
                    best = r;
            }
            if (best < 0)
                break;
            size_t w = 0;
            for (size_t i = 0; i < n;) {
                if (i + 1 < n && m->rank[work[i] * m->vocab + work[i + 1]] == best) {
                    work[w++] = 256 + best;
                    i += 2;
                } else {
                    work[w++] = work[i++];
                }
            }
            n = w;
        }
        memcpy(out + count, work, n * sizeof *work);
        count += n;
        start = end;
    }
    return count;
}

static void check_decodes(const struct tokenizer *t, const int32_t *ids, size_t n,
                          const uint8_t *text, size_t len)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        const char *tb = tokenizer_token(t, ids[i], &tl);
        check(tb != NULL && tl > 0, "an id without bytes");
        check(at + tl <= len && memcmp(tb, text + at, tl) == 0, "decode differs from the text");
        at += tl;
    }
    check(at == len, "decode is shorter than the text");
}

static void check_model(const struct model *m, const uint8_t *data, size_t size)
{
    int32_t *ids = malloc((size + 1) * sizeof *ids);
    int32_t *want = malloc((size + 1) * sizeof *want);
    int32_t *work = malloc((size + 1) * sizeof *work);
    check(ids && want && work, "out of memory");
    int64_t n = tokenizer_encode(m->t, (const char *)data, size, ids, size);
    check(n >= 0 && (size_t)n <= size && (n > 0) == (size > 0), "bad token count");
    check_decodes(m->t, ids, (size_t)n, data, size);
    size_t wn = ref_encode(m, data, size, want, work);
    check(wn == (size_t)n && memcmp(ids, want, wn * sizeof *ids) == 0,
          "encoding differs from the naive rule");
    if (n > 1) {
        size_t room = (size_t)n / 2;
        memset(work, 0xff, (size + 1) * sizeof *work);
        check(tokenizer_encode(m->t, (const char *)data, size, work, room) == n,
              "truncated encode changed the total");
        check(memcmp(work, want, room * sizeof *work) == 0 && work[room] == -1,
              "truncated encode wrote a different prefix or past its room");
    }
    free(ids);
    free(want);
    free(work);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct model shipped, builtin;
    if (!shipped.t) {
        load_shipped(&shipped);
        make_builtin(&builtin);
    }

    struct tokenizer *t = NULL;
    struct error err;
    if (tokenizer_parse((const char *)data, size, &t, &err) == 0) {
        uint32_t v = tokenizer_vocab_size(t);
        check(v > 256 && v <= TOKENIZER_MAX_VOCAB && tokenizer_eos(t) == (int32_t)v - 1,
              "bad vocabulary");
        size_t len;
        check(tokenizer_token(t, (int32_t)v - 1, &len) == NULL && len == 0, "eos has bytes");
        int32_t *ids = malloc((size + 1) * sizeof *ids);
        check(ids != NULL, "out of memory");
        int64_t n = tokenizer_encode(t, (const char *)data, size, ids, size);
        check(n >= 0 && (size_t)n <= size, "bad token count");
        check_decodes(t, ids, (size_t)n, data, size);
        free(ids);
        tokenizer_free(t);
    } else {
        check(t == NULL, "a failed parse returned a tokenizer");
        check(err.status == 400 || err.status == 500, "bad error status");
        check(strstr(err.msg, "tokenizer.json") != NULL, "error does not name the file");
    }

    check_model(&shipped, data, size);
    check_model(&builtin, data, size);
    return 0;
}
