#include "api/rest/infer_json_scan.h"

#include <string.h>

#include "api/tensor_json.h"
#include "base/json.h"

/*
 * Each reader takes the position p (end: the end of the text) and returns
 * the position after what it read, or NULL to decline. Most requests have
 * no whitespace at all: the expected byte is tested first, inline, and the
 * whitespace loop runs only when it is not there.
 */

static const char *ws_run(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static inline const char *ws(const char *p, const char *end)
{
    return p < end && (unsigned char)*p <= ' ' ? ws_run(p, end) : p;
}

/* Whitespace, then c: the position after c, or NULL. */
static inline const char *eat(const char *p, const char *end, char c)
{
    if (p < end && *p == c)
        return p + 1;
    p = ws_run(p, end);
    return p < end && *p == c ? p + 1 : NULL;
}

/* After whitespace, c or nothing: the position after c (*got true), or p. */
static inline const char *maybe(const char *p, const char *end, char c, bool *got)
{
    if (p < end && *p == c) {
        *got = true;
        return p + 1;
    }
    p = ws_run(p, end);
    *got = p < end && *p == c;
    return *got ? p + 1 : p;
}

/* A string whose bytes are all plain (json_plain_run): no escape, nothing
 * below 0x20 or above 0x7F. */
static inline const char *plain_string(const char *p, const char *end, struct infer_json_span *out)
{
    if (!(p = eat(p, end, '"')))
        return NULL;
    size_t n = json_plain_run(p, (size_t)(end - p));
    if (n == (size_t)(end - p) || p[n] != '"' || n > UINT32_MAX)
        return NULL;
    out->p = p;
    out->n = (uint32_t)n;
    return p + n + 1;
}

/* A member's key and its colon; *key gets the key. */
static inline const char *member(const char *p, const char *end, struct infer_json_span *key)
{
    p = plain_string(p, end, key);
    return p ? eat(p, end, ':') : NULL;
}

static inline bool is(const struct infer_json_span *key, const char *word, uint32_t len)
{
    return key->n == len && memcmp(key->p, word, len) == 0;
}
#define IS(key, lit) is((key), lit, sizeof lit - 1)

/* A dimension or a size: 0, or 1 to 18 digits without a leading zero, not
 * followed by what would make it another number. */
static const char *count(const char *p, const char *end, int64_t *out)
{
    p = ws(p, end);
    const char *q = p;
    int64_t v = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        if (q - p == 18)
            return NULL;
        v = v * 10 + (*q++ - '0');
    }
    if (q == p || (q - p > 1 && *p == '0') || (q < end && (*q == '.' || *q == 'e' || *q == 'E')))
        return NULL;
    *out = v;
    return q;
}

/* true or false. */
static const char *boolean(const char *p, const char *end, bool *out)
{
    p = ws(p, end);
    if (end - p >= 4 && memcmp(p, "true", 4) == 0) {
        *out = true;
        return p + 4;
    }
    if (end - p >= 5 && memcmp(p, "false", 5) == 0) {
        *out = false;
        return p + 5;
    }
    return NULL;
}

/* {"<word>": value}, that one member only: the position of the value. */
static const char *one_parameter(const char *p, const char *end, const char *word, uint32_t len)
{
    struct infer_json_span key;
    if (!(p = eat(p, end, '{')) || !(p = member(p, end, &key)) || !is(&key, word, len))
        return NULL;
    return p;
}
#define ONE_PARAMETER(p, end, lit) one_parameter((p), (end), lit, sizeof lit - 1)

static const char *shape(const char *p, const char *end, struct infer_json_scan_input *in)
{
    bool got;
    in->ndim = 0;
    if (!(p = eat(p, end, '[')) || !(p = maybe(p, end, ']', &got)) || got)
        return p;
    do {
        if (in->ndim == TENSOR_MAX_DIMS || !(p = count(p, end, &in->shape[in->ndim])))
            return NULL;
        in->ndim++;
    } while ((p = maybe(p, end, ',', &got)) && got);
    return eat(p, end, ']');
}

/* Delimits a `data` array: brackets paired, strings plain, no objects. */
static const char *data(const char *p, const char *end, struct infer_json_span *out)
{
    p = ws(p, end);
    const char *start = p;
    uint32_t depth = 0;
    if (p == end || *p != '[')
        return NULL;
    for (;;) {
        p = json_raw_skip8(p, end);
        if (p == end)
            return NULL;
        if (*p == '"') {
            size_t n = json_plain_run(p + 1, (size_t)(end - p - 1));
            if (n == (size_t)(end - p - 1) || p[1 + n] != '"')
                return NULL;
            p += n + 2;
            continue;
        }
        if (*p == '{' || *p == '}')
            return NULL;
        if (*p == '[' && ++depth > TENSOR_JSON_MAX_DEPTH)
            return NULL;
        if (*p++ == ']' && --depth == 0)
            break;
    }
    if ((size_t)(p - start) > UINT32_MAX)
        return NULL;
    out->p = start;
    out->n = (uint32_t)(p - start);
    return p;
}

/* {"name", "datatype", "shape", and "data" or "parameters":
 * {"binary_data_size"}}: each once. */
static const char *input(const char *p, const char *end, struct infer_json_scan_input *in)
{
    enum { NAME = 1, DATATYPE = 2, SHAPE = 4, DATA = 8, BINARY = 16 };
    unsigned seen = 0, bit;
    bool got;
    int64_t size = 0;
    if (!(p = eat(p, end, '{')))
        return NULL;
    in->data.p = NULL;
    do {
        struct infer_json_span key;
        if (!(p = member(p, end, &key)))
            return NULL;
        if (IS(&key, "name")) {
            bit = NAME;
            p = plain_string(p, end, &in->name);
        } else if (IS(&key, "datatype")) {
            bit = DATATYPE;
            p = plain_string(p, end, &in->datatype);
        } else if (IS(&key, "shape")) {
            bit = SHAPE;
            p = shape(p, end, in);
        } else if (IS(&key, "data")) {
            bit = DATA;
            p = data(p, end, &in->data);
        } else if (IS(&key, "parameters")) {
            bit = BINARY;
            if ((p = ONE_PARAMETER(p, end, "binary_data_size")) && (p = count(p, end, &size)))
                p = eat(p, end, '}');
            in->binary_size = (uint64_t)size;
        } else {
            return NULL;
        }
        if (!p || (seen & bit))
            return NULL;
        seen |= bit;
    } while ((p = maybe(p, end, ',', &got)) && got);
    if (seen != (NAME | DATATYPE | SHAPE | DATA) && seen != (NAME | DATATYPE | SHAPE | BINARY))
        return NULL;
    return eat(p, end, '}');
}

static const char *inputs(const char *p, const char *end, struct infer_json_doc *doc)
{
    bool got;
    if (!(p = eat(p, end, '[')) || !(p = maybe(p, end, ']', &got)) || got)
        return p; /* [] is a model without inputs */
    do {
        if (doc->ninputs == INFER_JSON_SCAN_MAX ||
            !(p = input(p, end, &doc->inputs[doc->ninputs++])))
            return NULL;
    } while ((p = maybe(p, end, ',', &got)) && got);
    return eat(p, end, ']');
}

/* {"name": ..., "parameters": {"binary_data": bool}?}, members in any order. */
static const char *output(const char *p, const char *end, struct infer_json_scan_output *out)
{
    bool named = false, got;
    out->binary_given = false;
    if (!(p = eat(p, end, '{')))
        return NULL;
    do {
        struct infer_json_span key;
        if (!(p = member(p, end, &key)))
            return NULL;
        if (IS(&key, "name") && !named) {
            named = true;
            p = plain_string(p, end, &out->name);
        } else if (IS(&key, "parameters") && !out->binary_given) {
            out->binary_given = true;
            if ((p = ONE_PARAMETER(p, end, "binary_data")) && (p = boolean(p, end, &out->binary)))
                p = eat(p, end, '}');
        } else {
            return NULL;
        }
        if (!p)
            return NULL;
    } while ((p = maybe(p, end, ',', &got)) && got);
    return named ? eat(p, end, '}') : NULL;
}

/* [output, ...]: at least one (an empty list is an error). */
static const char *outputs(const char *p, const char *end, struct infer_json_doc *doc)
{
    bool got;
    if (!(p = eat(p, end, '[')))
        return NULL;
    do {
        if (doc->noutputs == INFER_JSON_SCAN_MAX ||
            !(p = output(p, end, &doc->outputs[doc->noutputs++])))
            return NULL;
    } while ((p = maybe(p, end, ',', &got)) && got);
    return eat(p, end, ']');
}

bool infer_json_scan(const char *text, size_t len, struct infer_json_doc *doc)
{
    const char *p = text, *end = text + len;
    bool has_inputs = false, has_parameters = false, got;
    doc->has_id = doc->has_outputs = doc->binary_output = false;
    doc->ninputs = doc->noutputs = 0;
    if (!(p = eat(p, end, '{')))
        return false;
    do {
        struct infer_json_span key;
        bool *given;
        if (!(p = member(p, end, &key)))
            return false;
        if (IS(&key, "inputs")) {
            given = &has_inputs;
            p = *given ? NULL : inputs(p, end, doc);
        } else if (IS(&key, "id")) {
            given = &doc->has_id;
            p = *given ? NULL : plain_string(p, end, &doc->id);
        } else if (IS(&key, "outputs")) {
            given = &doc->has_outputs;
            p = *given ? NULL : outputs(p, end, doc);
        } else if (IS(&key, "parameters")) {
            given = &has_parameters;
            if (!*given && (p = ONE_PARAMETER(p, end, "binary_data_output")) &&
                (p = boolean(p, end, &doc->binary_output)))
                p = eat(p, end, '}');
            else
                p = NULL;
        } else {
            return false;
        }
        if (!p)
            return false;
        *given = true;
    } while ((p = maybe(p, end, ',', &got)) && got);
    return has_inputs && (p = eat(p, end, '}')) && ws(p, end) == end;
}
