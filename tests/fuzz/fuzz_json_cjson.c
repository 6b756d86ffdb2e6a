/*
 * Differential fuzz target: base/json against cJSON (Debian libcjson) as an
 * oracle. Both parse every input; they must agree on accept/reject and, when
 * both accept, on the values, except for these documented differences (see
 * docs/limits.md, "JSON"):
 *
 *   D1 numbers   cJSON takes any run of [0-9+-.eE] that strtod accepts
 *                ("01", "+1", "1.", ".5", "-.5e3"); we follow RFC 8259.
 *   D2 strings   cJSON checks neither UTF-8 nor raw control characters;
 *                we reject both. cJSON's strings are C strings, so one
 *                that holds "\u0000" is cut there (values compared only
 *                up to the first NUL).
 *   D3 depth     cJSON nests up to CJSON_NESTING_LIMIT (1000), we up to
 *                max_depth (64 by default; the fuzz target sets 1000 so
 *                the limits coincide).
 *   D4 numbers   out of double range: cJSON stores ±inf (strtod), we keep
 *                the text and report -ERANGE on conversion.
 *   D5 escapes   cJSON reads a \u escape's digits leniently (a non-hex
 *                digit counts as 0, so "\u00zz" is accepted) and takes
 *                some lone surrogates; we reject both ("invalid escape"
 *                at a \u, "lone surrogate in \u escape").
 *   D6 space     cJSON skips every byte up to 0x20 as whitespace; RFC 8259
 *                allows only space, tab, LF and CR (our error then points at
 *                that control byte, whatever it says).
 *
 * So: when we accept, cJSON must accept and yield the same tree; when we
 * reject and cJSON accepts, our error message must be one of the documented
 * reasons above. A violated property aborts.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/json.h"

#define ARENA_MAX (8u << 20)
#define DEPTH_LIMIT CJSON_NESTING_LIMIT

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_json_cjson: %s\n", what);
        abort();
    }
}

/* Whether `v` (ours) and `c` (cJSON) hold the same value. */
static bool same(const struct json_value *v, const cJSON *c)
{
    double d;
    switch (v->type) {
    case JSON_NULL:
        return cJSON_IsNull(c);
    case JSON_TRUE:
        return cJSON_IsTrue(c);
    case JSON_FALSE:
        return cJSON_IsFalse(c);
    case JSON_NUMBER:
        if (!cJSON_IsNumber(c))
            return false;
        if (json_num_f64(v, &d) == -ERANGE) /* D4 */
            return isinf(c->valuedouble) || c->valuedouble == 0.0;
        return json_num_f64(v, &d) == 0 && memcmp(&d, &c->valuedouble, sizeof d) == 0;
    case JSON_STRING:
        /* D2: cJSON's copy ends at the first NUL. */
        return cJSON_IsString(c) && strcmp(v->u.str, c->valuestring) == 0;
    case JSON_RAW:
        return false; /* not produced without raw_array_key */
    case JSON_ARRAY: {
        if (!cJSON_IsArray(c))
            return false;
        const cJSON *item = c->child;
        for (uint32_t i = 0; i < v->len; i++, item = item->next)
            if (!item || !same(&v->u.items[i], item))
                return false;
        return item == NULL;
    }
    case JSON_OBJECT: {
        if (!cJSON_IsObject(c))
            return false;
        const cJSON *item = c->child;
        for (uint32_t i = 0; i < v->len; i++, item = item->next) {
            const struct json_member *m = &v->u.members[i];
            if (!item || strcmp(m->key, item->string) != 0 || !same(&m->value, item))
                return false;
        }
        return item == NULL;
    }
    }
    return false;
}

/* Only whitespace after cJSON's parse end? (cJSON stops after one value.) */
static bool only_space(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return false;
    return true;
}

static bool documented_difference(const char *msg, const char *text, size_t size, size_t off)
{
    if (strcmp(msg, "invalid escape") == 0) /* D5, only for \u */
        return off + 1 < size && text[off] == '\\' && text[off + 1] == 'u';
    if (off < size && (unsigned char)text[off] < 0x20) /* D6, whatever we expected there */
        return true;
    static const char *const allowed[] = {
        "invalid number",                /* D1 */
        "number too long",               /* D1: cJSON has no length cap */
        "invalid UTF-8 in string",       /* D2 */
        "control character in string",   /* D2 */
        "lone surrogate in \\u escape",  /* D5 */
        "nesting too deep",              /* D3 (limits differ by one level) */
        "invalid literal",               /* D1: "-" then a letter, e.g. "-I" */
    };
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (strcmp(msg, allowed[i]) == 0)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct arena arena;
    struct json_value *ours = NULL;
    const char *msg = NULL, *cend = NULL;
    size_t off = 0;
    struct json_limits limits = {.max_depth = DEPTH_LIMIT};

    /* cJSON reads C strings inside its length-bounded parse, so give it a
     * NUL-terminated copy. */
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';

    arena_init(&arena, 4096, ARENA_MAX);
    enum status rc = json_parse(&arena, text, size, &limits, &ours, &msg, &off);
    cJSON *theirs = cJSON_ParseWithLengthOpts(copy, size, &cend, 0);
    bool cjson_ok = theirs && only_space(cend, copy + size);

    if (rc == ST_OK) {
        check(cjson_ok, "we accept what cJSON rejects");
        check(same(ours, theirs), "trees differ");
    } else if (cjson_ok) {
        if (strcmp(msg, "out of memory") != 0 && !documented_difference(msg, text, size, off)) {
            fprintf(stderr, "ours: %s at %zu\n", msg, off);
            check(false, "cJSON accepts what we reject, for an undocumented reason");
        }
    }
    cJSON_Delete(theirs);
    arena_free(&arena);
    free(copy);
    return 0;
}
