#include "api/rest/infer_json_scan.h"

#include <string.h>

#include "api/tensor_json.h"
#include "base/json.h"
#include "base/status.h"

struct scan {
    const char *p, *end;
};

struct key {
    const char *name;
    uint32_t len;
};
#define KEY(s) {s, sizeof s - 1}

enum { TOP_ID, TOP_INPUTS, TOP_OUTPUTS };
static const struct key top_keys[] = {KEY("id"), KEY("inputs"), KEY("outputs")};
enum { IN_NAME, IN_DATATYPE, IN_SHAPE, IN_DATA };
static const struct key input_keys[] = {KEY("name"), KEY("datatype"), KEY("shape"), KEY("data")};
#define INPUT_COMPLETE 0xf
static const struct key output_keys[] = {KEY("name")};

static void ws_run(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

/* Most requests have no whitespace: the test is inlined, the loop not. */
static inline void ws(struct scan *s)
{
    if (s->p < s->end && (unsigned char)*s->p <= ' ')
        ws_run(s);
}

/* Skips whitespace, then c when it comes next. */
static inline bool eat(struct scan *s, char c)
{
    ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return true;
    }
    return false;
}

/* A string whose bytes are all plain (json_plain_run): no escape, nothing
 * below 0x20 or above 0x7F. */
static bool plain_string(struct scan *s, struct infer_json_span *out)
{
    if (!eat(s, '"'))
        return false;
    size_t n = json_plain_run(s->p, (size_t)(s->end - s->p));
    if (n == (size_t)(s->end - s->p) || s->p[n] != '"' || n > UINT32_MAX)
        return false;
    out->p = s->p;
    out->n = (uint32_t)n;
    s->p += n + 1;
    return true;
}

/* A member's key and colon: its index in keys, or NOT_FOUND (another key,
 * or no key). */
static int key(struct scan *s, const struct key *keys, int nkeys)
{
    struct infer_json_span k;
    if (!plain_string(s, &k) || !eat(s, ':'))
        return NOT_FOUND;
    for (int i = 0; i < nkeys; i++)
        if (keys[i].len == k.n && keys[i].name[0] == k.p[0] && memcmp(keys[i].name, k.p, k.n) == 0)
            return i;
    return NOT_FOUND;
}

typedef bool (*member_fn)(struct scan *s, int key, void *ctx);

/* An object whose members are keys of `keys`, each at most once, the
 * values read by value(): true with the set of keys given in *seen (bit i:
 * keys[i]). */
static bool object(struct scan *s, const struct key *keys, int nkeys, member_fn value, void *ctx,
                   unsigned *seen)
{
    *seen = 0;
    if (!eat(s, '{'))
        return false;
    if (eat(s, '}'))
        return true;
    do {
        int k = key(s, keys, nkeys);
        if (k == NOT_FOUND || (*seen >> k & 1) || !value(s, k, ctx))
            return false;
        *seen |= 1u << k;
    } while (eat(s, ','));
    return eat(s, '}');
}

/* A dimension: 0, or 1 to 18 digits without a leading zero, not followed
 * by what would make it another number. */
static bool dim(struct scan *s, int64_t *out)
{
    ws(s);
    const char *q = s->p;
    int64_t v = 0;
    int digits = 0;
    while (q < s->end && *q >= '0' && *q <= '9') {
        if (++digits > 18)
            return false;
        v = v * 10 + (*q++ - '0');
    }
    if (digits == 0 || (digits > 1 && *s->p == '0'))
        return false;
    if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E'))
        return false;
    s->p = q;
    *out = v;
    return true;
}

static bool shape(struct scan *s, struct infer_json_scan_input *in)
{
    in->ndim = 0;
    if (!eat(s, '['))
        return false;
    if (eat(s, ']'))
        return true;
    do {
        if (in->ndim == TENSOR_MAX_DIMS || !dim(s, &in->shape[in->ndim]))
            return false;
        in->ndim++;
    } while (eat(s, ','));
    return eat(s, ']');
}

/* Delimits a `data` array: brackets paired, strings plain, no objects. */
static bool data(struct scan *s, struct infer_json_span *out)
{
    ws(s);
    const char *start = s->p, *p = start, *end = s->end;
    uint32_t depth = 0;
    if (p == end || *p != '[')
        return false;
    for (;;) {
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (json_raw_special8(w))
                break;
            p += 8;
        }
        if (p == end)
            return false;
        if (*p == '"') {
            size_t n = json_plain_run(p + 1, (size_t)(end - p - 1));
            if (n == (size_t)(end - p - 1) || p[1 + n] != '"')
                return false;
            p += n + 2;
            continue;
        }
        if (*p == '{' || *p == '}')
            return false;
        if (*p == '[' && ++depth > TENSOR_JSON_MAX_DEPTH)
            return false;
        if (*p++ == ']' && --depth == 0)
            break;
    }
    if ((size_t)(p - start) > UINT32_MAX)
        return false;
    out->p = start;
    out->n = (uint32_t)(p - start);
    s->p = p;
    return true;
}

static bool input_member(struct scan *s, int k, void *ctx)
{
    struct infer_json_scan_input *in = ctx;
    switch (k) {
    case IN_NAME:
        return plain_string(s, &in->name);
    case IN_DATATYPE:
        return plain_string(s, &in->datatype);
    case IN_SHAPE:
        return shape(s, in);
    default:
        return data(s, &in->data);
    }
}

static bool output_member(struct scan *s, int k, void *ctx)
{
    (void)k; /* only "name" */
    return plain_string(s, ctx);
}

static bool inputs(struct scan *s, struct infer_json_doc *doc)
{
    if (!eat(s, '['))
        return false;
    if (eat(s, ']'))
        return true; /* a model without inputs */
    do {
        if (doc->ninputs == INFER_JSON_SCAN_MAX)
            return false;
        struct infer_json_scan_input *in = &doc->inputs[doc->ninputs++];
        unsigned seen;
        if (!object(s, input_keys, 4, input_member, in, &seen) || seen != INPUT_COMPLETE)
            return false;
    } while (eat(s, ','));
    return eat(s, ']');
}

static bool outputs(struct scan *s, struct infer_json_doc *doc)
{
    if (!eat(s, '['))
        return false;
    do { /* at least one: an empty list is an error */
        unsigned seen;
        if (doc->noutputs == INFER_JSON_SCAN_MAX ||
            !object(s, output_keys, 1, output_member, &doc->outputs[doc->noutputs++], &seen) ||
            seen != 1)
            return false;
    } while (eat(s, ','));
    doc->has_outputs = true;
    return eat(s, ']');
}

static bool top_member(struct scan *s, int k, void *ctx)
{
    struct infer_json_doc *doc = ctx;
    switch (k) {
    case TOP_ID:
        doc->has_id = true;
        return plain_string(s, &doc->id);
    case TOP_INPUTS:
        return inputs(s, doc);
    default:
        return outputs(s, doc);
    }
}

bool infer_json_scan(const char *text, size_t len, struct infer_json_doc *doc)
{
    struct scan s = {text, text + len};
    doc->has_id = doc->has_outputs = false;
    doc->ninputs = doc->noutputs = 0;
    unsigned seen;
    if (!object(&s, top_keys, 3, top_member, doc, &seen) || !(seen >> TOP_INPUTS & 1))
        return false;
    ws(&s);
    return s.p == s.end;
}
