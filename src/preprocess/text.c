/*
 * text.c: the "text" modality (modality.h; docs/preprocessing.md): one
 * UTF-8 text in, its token ids (and an attention mask) out.
 *
 * preprocess.json's "text" object:
 *   "tokenizer":      "bpe" (the only one: the byte-level BPE of
 *                     tokenizer.h, the format of docs/generative.md)
 *   "vocab":          file name in the model directory, "tokenizer.json"
 *   "max_bytes":      text size limit, 1..16 MiB, default 65536 (over: 413)
 *   "max_length":     tokens kept, 1..16384, default 64; a longer text is
 *                     cut to its first max_length tokens
 *   "lowercase":      ASCII A-Z to a-z before tokenizing, default false
 *   "attention_mask": optional graph input fed with 1 per token
 *   "datatype":       "INT64" (default) or "INT32", for ids and mask
 *
 * run(): the text must be non-empty (else 400), at most max_bytes (else
 * 413) and well-formed UTF-8 (Unicode table 3-7: no overlong forms, no
 * surrogates, nothing above U+10FFFF; else 400 naming the byte offset).
 * Output: ids [L] and, when configured, the mask [L] (all ones), L the
 * token count after truncation (1..max_length). One timing, "tokenize"
 * (validation, lowercasing and encoding).
 *
 * Padding (the stage's, and the scheduler's padding budget) adds id 0 with
 * mask 0: a model fed by this modality must ignore masked positions.
 */
#include "base/status.h"
#include "preprocess/modality.h"

#include <stdbool.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/path.h"
#include "preprocess/tokenizer.h"

#define TEXT_MAX_BYTES_DEFAULT 65536
#define TEXT_MAX_BYTES_LIMIT (16 << 20)
#define TEXT_MAX_LENGTH_DEFAULT 64
#define TEXT_MAX_LENGTH_LIMIT 16384
#define TEXT_NAME_MAX 256 /* bytes of a file or input name */

struct text_cfg {
    struct tokenizer *tok;
    size_t max_bytes;
    uint32_t max_length;
    bool lowercase;
    enum dtype dtype;
    char *mask_name; /* NULL: no attention mask */
};

static const char *const text_content_types[] = {"text/plain", NULL};

static void text_free(void *p)
{
    struct text_cfg *cfg = p;
    if (!cfg)
        return;
    tokenizer_free(cfg->tok);
    mem_free(cfg->mask_name);
    mem_free(cfg);
}

/* A string member that is a non-empty name of at most TEXT_NAME_MAX bytes
 * without NUL; *out stays as it is when the key is absent. */
static int get_name(const struct json_value *obj, const char *key, const char **out,
                    struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    if (v->type != JSON_STRING || v->len == 0 || v->len > TEXT_NAME_MAX ||
        memchr(v->u.str, '\0', v->len))
        return error_set(err, 400, "text.%s must be a non-empty string of at most %d bytes", key,
                         TEXT_NAME_MAX);
    *out = v->u.str;
    return 0;
}

static int get_int(const struct json_value *obj, const char *key, int64_t lo, int64_t hi,
                   int64_t *out, struct error *err)
{
    const struct json_value *v = json_get(obj, key);
    if (!v)
        return 0;
    int64_t x;
    if (json_num_i64(v, &x) != 0 || x < lo || x > hi)
        return error_set(err, 400, "text.%s must be an integer from %lld to %lld", key,
                         (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

static int check_keys(const struct json_value *obj, struct error *err)
{
    static const char *const known[] = {"tokenizer", "vocab",          "max_bytes", "max_length",
                                        "lowercase", "attention_mask", "datatype"};
    for (uint32_t i = 0; i < obj->len; i++) {
        const char *key = obj->u.members[i].key;
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok = ok || !strcmp(key, known[k]);
        if (!ok)
            return error_set(err, 400,
                             "text: unknown key '%s' (known: tokenizer, vocab, max_bytes, "
                             "max_length, lowercase, attention_mask, datatype)",
                             key);
    }
    return 0;
}

static int text_parse(const struct json_value *obj, const char *model_dir, void **out,
                      struct error *err)
{
    if (!obj || obj->type != JSON_OBJECT)
        return error_set(err, 400, "text must be an object");
    if (check_keys(obj, err) != 0)
        return ST_ERROR;

    const char *kind = "bpe", *vocab = "tokenizer.json", *mask = NULL, *dtype = "INT64";
    int64_t max_bytes = TEXT_MAX_BYTES_DEFAULT, max_length = TEXT_MAX_LENGTH_DEFAULT;
    bool lowercase = false;
    if (get_name(obj, "tokenizer", &kind, err) != 0 || get_name(obj, "vocab", &vocab, err) != 0 ||
        get_name(obj, "attention_mask", &mask, err) != 0 ||
        get_name(obj, "datatype", &dtype, err) != 0 ||
        get_int(obj, "max_bytes", 1, TEXT_MAX_BYTES_LIMIT, &max_bytes, err) != 0 ||
        get_int(obj, "max_length", 1, TEXT_MAX_LENGTH_LIMIT, &max_length, err) != 0)
        return ST_ERROR;
    if (strcmp(kind, "bpe"))
        return error_set(err, 400, "text.tokenizer must be \"bpe\"");
    if (strchr(vocab, '/') || !strcmp(vocab, ".") || !strcmp(vocab, ".."))
        return error_set(err, 400, "text.vocab must be a file name in the model directory");
    enum dtype dt =
        strcmp(dtype, "INT64") ? strcmp(dtype, "INT32") ? DT_INVALID : DT_INT32 : DT_INT64;
    if (dt == DT_INVALID)
        return error_set(err, 400, "text.datatype must be \"INT64\" or \"INT32\"");
    const struct json_value *lc = json_get(obj, "lowercase");
    if (lc) {
        if (lc->type != JSON_TRUE && lc->type != JSON_FALSE)
            return error_set(err, 400, "text.lowercase must be true or false");
        lowercase = lc->type == JSON_TRUE;
    }

    char path[4096];
    if (!path_fmt(path, sizeof path, "%s/%s", model_dir, vocab))
        return error_set(err, 400, "text.vocab: path too long");
    struct text_cfg *cfg = mem_calloc(1, sizeof *cfg);
    if (!cfg)
        return error_set(err, 500, "out of memory");
    cfg->max_bytes = (size_t)max_bytes;
    cfg->max_length = (uint32_t)max_length;
    cfg->lowercase = lowercase;
    cfg->dtype = dt;
    if (mask && !(cfg->mask_name = mem_strdup(mask))) {
        text_free(cfg);
        return error_set(err, 500, "out of memory");
    }
    if (tokenizer_load(path, &cfg->tok, err) != 0) {
        text_free(cfg);
        return ST_ERROR;
    }
    *out = cfg;
    return 0;
}

static uint32_t text_outputs(const void *p, struct prep_output *out)
{
    const struct text_cfg *cfg = p;
    out[0] = (struct prep_output){.name = NULL, .dtype = cfg->dtype, .ndim = 1, .dims = {-1}};
    if (!cfg->mask_name)
        return 1;
    out[1] =
        (struct prep_output){.name = cfg->mask_name, .dtype = cfg->dtype, .ndim = 1, .dims = {-1}};
    return 2;
}

/* Offset of the first byte that does not start a well-formed UTF-8
 * sequence, or len when all are. */
static size_t utf8_invalid_at(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = json_utf8_seq_len(s + i, len - i);
        if (n == 0)
            return i;
        i += n;
    }
    return len;
}

/* A tensor [n] of cfg's datatype from prep_mem, values[i] or 1 when values
 * is NULL (the mask). */
static int fill(const struct text_cfg *cfg, const char *name, const int32_t *values, uint32_t n,
                struct prep_mem *mem, struct tensor *t, struct error *err)
{
    size_t size = cfg->dtype == DT_INT64 ? sizeof(int64_t) : sizeof(int32_t);
    void *data = prep_mem_alloc(mem, (size_t)n * size);
    if (!data)
        return error_set(err, 500, "out of memory for the tokens");
    for (uint32_t i = 0; i < n; i++) {
        int32_t v = values ? values[i] : 1;
        if (cfg->dtype == DT_INT64)
            ((int64_t *)data)[i] = v;
        else
            ((int32_t *)data)[i] = v;
    }
    struct prep_output o = {.name = name, .dtype = cfg->dtype, .ndim = 1, .dims = {n}};
    prep_tensor_set(t, &o, data, (size_t)n * size);
    return 0;
}

static int text_run(const void *p, const uint8_t *data, size_t len, struct prep_mem *mem,
                    struct tensor *out, struct prep_timings *tm, struct error *err)
{
    const struct text_cfg *cfg = p;
    if (len > cfg->max_bytes)
        return error_set(err, 413, "text of %zu bytes is over the limit of %zu (text.max_bytes)",
                         len, cfg->max_bytes);
    if (len == 0)
        return error_set(err, 400, "empty text");
    uint64_t t0 = clock_now_ns();
    size_t bad = utf8_invalid_at(data, len);
    if (bad < len)
        return error_set(err, 400, "text is not valid UTF-8 (at byte %zu)", bad);

    char *lower = NULL;
    const char *text = (const char *)data;
    int32_t *ids = mem_alloc((size_t)cfg->max_length * sizeof *ids);
    if (cfg->lowercase && ids) {
        lower = mem_alloc(len);
        if (lower) {
            for (size_t i = 0; i < len; i++)
                lower[i] =
                    (char)(data[i] >= 'A' && data[i] <= 'Z' ? data[i] + ('a' - 'A') : data[i]);
            text = lower;
        }
    }
    int64_t total = -1;
    if (ids && (!cfg->lowercase || lower))
        total = tokenizer_encode(cfg->tok, text, len, ids, cfg->max_length);
    mem_free(lower);
    int rc = 0;
    if (total < 1) {
        rc = error_set(err, 500, "out of memory while tokenizing");
    } else {
        uint32_t n = total < cfg->max_length ? (uint32_t)total : cfg->max_length;
        rc = fill(cfg, NULL, ids, n, mem, &out[0], err);
        if (rc == 0 && cfg->mask_name)
            rc = fill(cfg, cfg->mask_name, NULL, n, mem, &out[1], err);
    }
    mem_free(ids);
    prep_timing_add(tm, "tokenize", clock_now_ns() - t0);
    return rc;
}

const struct prep_modality prep_text = {
    .key = "text",
    .content_types = text_content_types,
    .parse = text_parse,
    .free = text_free,
    .outputs = text_outputs,
    .run = text_run,
};
