/*
 * Fuzz target for preprocess/text.c, the "text" modality. Every input is a
 * raw text run through two configurations over the shipped language
 * identifier's tokenizer (models/langid/, found through INFERD_SOURCE_DIR):
 *   1. the "text" object of models/langid/preprocess.json as shipped
 *      (lowercase, INT64, attention mask, max_length 32, max_bytes 4096);
 *   2. one built here: INT32, no lowercasing, max_length 5, max_bytes 64.
 * Checked against what is computed here independently:
 *   - the status: 413 over max_bytes, else 400 for an empty text or one that
 *     is not UTF-8 (a decoder written here from the definition: lead byte,
 *     continuation bytes, no overlong form, no surrogate, at most
 *     U+10FFFF), else success;
 *   - on success: ids = the first max_length ids of tokenizer_encode over
 *     the text ASCII-lowercased here (when configured), shape [L] with L =
 *     min(tokens, max_length), the mask all ones, the ids decoding to a
 *     prefix of that text (all of it when not truncated), one "tokenize"
 *     timing.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/file.h"
#include "base/json.h"
#include "preprocess/modality.h"
#include "preprocess/tokenizer.h"

#ifndef INFERD_SOURCE_DIR
#define INFERD_SOURCE_DIR "."
#endif
#define MODEL_DIR INFERD_SOURCE_DIR "/models/langid"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_prep_text: %s\n", what);
        abort();
    }
}

struct setup {
    void *cfg;
    bool lowercase;
    size_t max_bytes;
    int64_t max_length;
    enum dtype dtype;
    bool mask;
};

static struct setup setups[2];
static struct tokenizer *tok;

static void *parse_cfg(const struct json_value *obj)
{
    void *cfg = NULL;
    struct error err;
    if (prep_text.parse(obj, MODEL_DIR, &cfg, &err) != 0) {
        fprintf(stderr, "fuzz_prep_text: %s\n", err.msg);
        abort();
    }
    return cfg;
}

static void init(void)
{
    struct arena a;
    arena_init(&a, 1 << 12, 1 << 20);
    char *text;
    size_t len;
    check(file_read(MODEL_DIR "/preprocess.json", 1 << 16, &text, &len) == 0,
          "cannot read models/langid/preprocess.json");
    struct json_value *root;
    const char *msg;
    size_t off;
    check(json_parse(&a, text, len, NULL, &root, &msg, &off) == ST_OK, "preprocess.json");
    const struct json_value *inputs = json_get(root, "inputs");
    check(inputs && inputs->type == JSON_ARRAY && inputs->len == 1, "preprocess.json inputs");
    setups[0] = (struct setup){.cfg = parse_cfg(json_get(&inputs->u.items[0], "text")),
                               .lowercase = true,
                               .max_bytes = 4096,
                               .max_length = 32,
                               .dtype = DT_INT64,
                               .mask = true};
    static const char own[] = "{\"datatype\": \"INT32\", \"max_length\": 5, \"max_bytes\": 64}";
    check(json_parse(&a, own, sizeof own - 1, NULL, &root, &msg, &off) == ST_OK, "own JSON");
    setups[1] = (struct setup){.cfg = parse_cfg(root),
                               .lowercase = false,
                               .max_bytes = 64,
                               .max_length = 5,
                               .dtype = DT_INT32,
                               .mask = false};
    free(text);
    arena_free(&a);
    struct error err;
    check(tokenizer_load(MODEL_DIR "/tokenizer.json", &tok, &err) == 0, "tokenizer.json");
}

/* UTF-8 by its definition (RFC 3629). */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i], len, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0)
            len = 2, min = 0x80, c &= 0x1F;
        else if ((c & 0xF0) == 0xE0)
            len = 3, min = 0x800, c &= 0x0F;
        else if ((c & 0xF8) == 0xF0)
            len = 4, min = 0x10000, c &= 0x07;
        else
            return false;
        if (i + len > n)
            return false;
        for (uint32_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            c = c << 6 | (s[i + k] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static int64_t id_at(const struct tensor *t, int64_t i)
{
    return t->dtype == DT_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static void one(const struct setup *s, const uint8_t *data, size_t size)
{
    struct prep_mem mem;
    prep_mem_init(&mem, 1 << 20);
    struct tensor out[PREP_MAX_OUTPUTS];
    struct prep_timings tm = {.n = 0};
    struct error err;
    int rc = prep_text.run(s->cfg, data, size, &mem, out, &tm, &err);
    int want = size > s->max_bytes ? 413 : size == 0 || !valid_utf8(data, size) ? 400 : 0;
    check((rc == 0 ? 0 : err.status) == want, "status");
    if (rc != 0) {
        prep_mem_release(&mem);
        return;
    }
    check(tm.n == 1 && !strcmp(tm.t[0].stage, "tokenize"), "timing");

    char *text = malloc(size);
    int32_t *ids = malloc(size * sizeof *ids);
    check(text && ids, "out of memory");
    for (size_t i = 0; i < size; i++)
        text[i] =
            (char)(s->lowercase && data[i] >= 'A' && data[i] <= 'Z' ? data[i] | 0x20 : data[i]);
    int64_t total = tokenizer_encode(tok, text, size, ids, size);
    check(total >= 1 && total <= (int64_t)size, "encode");
    int64_t n = total < s->max_length ? total : s->max_length;
    check(out[0].dtype == s->dtype && out[0].ndim == 1 && out[0].shape[0] == n, "ids shape");
    size_t el = s->dtype == DT_INT64 ? 8 : 4, at = 0;
    check(out[0].nbytes == (size_t)n * el, "ids bytes");
    for (int64_t i = 0; i < n; i++) {
        check(id_at(&out[0], i) == ids[i], "ids differ");
        size_t len;
        const char *b = tokenizer_token(tok, ids[i], &len);
        check(b && at + len <= size && !memcmp(text + at, b, len), "ids do not decode to the text");
        at += len;
    }
    check(n < total || at == size, "untruncated ids do not decode to the whole text");
    if (s->mask) {
        check(out[1].name && !strcmp(out[1].name, "attention_mask"), "mask name");
        check(out[1].dtype == s->dtype && out[1].ndim == 1 && out[1].shape[0] == n, "mask shape");
        for (int64_t i = 0; i < n; i++)
            check(id_at(&out[1], i) == 1, "mask not 1");
    }
    free(text);
    free(ids);
    prep_mem_release(&mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok)
        init();
    for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++)
        one(&setups[i], data, size);
    return 0;
}
