#include "api/openai/json.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "gen/gen_text.h"

_Static_assert(OPENAI_MAX_STOPS <= GEN_MAX_STOPS && OPENAI_MAX_STOP_LEN == GEN_MAX_STOP_LEN,
               "every stop sequence the API accepts is one the engine takes");

#define TYPE_INVALID "invalid_request_error"

/* ---- errors -------------------------------------------------------------- */

static int fail(struct openai_error *err, int status, const char *param, const char *code,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(struct openai_error *err, int status, const char *param, const char *code,
                const char *fmt, ...)
{
    err->status = status;
    err->type = TYPE_INVALID;
    err->param = param;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return ST_ERROR;
}

/* "messages.[3].content" and such, in the arena; `fallback` when it is full. */
static const char *param_fmt(struct arena *a, const char *fallback, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static const char *param_fmt(struct arena *a, const char *fallback, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return fallback;
    const char *s = arena_strndup(a, tmp, (size_t)n);
    return s ? s : fallback;
}

static int fail_type(struct openai_error *err, const char *param, const char *want,
                     const struct json_value *v)
{
    return fail(err, 400, param, "invalid_type", "'%s' must be %s, not %s", param, want,
                json_type_name(v));
}

static int fail_unsupported(struct openai_error *err, const char *param, const char *what)
{
    return fail(err, 400, param, "unsupported_value", "'%s': %s is not supported", param, what);
}

/* ---- scalar fields ------------------------------------------------------- */

/* The member `key` of the request, or NULL when it is absent or null. */
static const struct json_value *field(const struct json_value *root, const char *key)
{
    const struct json_value *v = json_get(root, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* An integer field in [lo, hi]. */
static int get_int(const struct json_value *v, const char *name, int64_t lo, int64_t hi,
                   int64_t *out, struct openai_error *err)
{
    if (v->type != JSON_NUMBER)
        return fail_type(err, name, "an integer", v);
    int64_t x;
    int rc = json_num_i64(v, &x);
    if (rc == -EINVAL)
        return fail(err, 400, name, "invalid_type", "'%s' must be an integer, not %s", name,
                    v->u.num);
    if (rc != 0 || x < lo || x > hi)
        return fail(err, 400, name, "invalid_value",
                    "'%s' must be between %" PRId64 " and %" PRId64 ", not %s", name, lo, hi,
                    v->u.num);
    *out = x;
    return 0;
}

/* A number field in [lo, hi], or (lo, hi] when lo_open. */
static int get_float(const struct json_value *v, const char *name, double lo, bool lo_open,
                     double hi, double *out, struct openai_error *err)
{
    if (v->type != JSON_NUMBER)
        return fail_type(err, name, "a number", v);
    double x;
    int rc = json_num_f64(v, &x);
    if (rc == 0 && (lo_open ? x > lo : x >= lo) && x <= hi) {
        *out = x;
        return 0;
    }
    if (lo_open)
        return fail(err, 400, name, "invalid_value",
                    "'%s' must be greater than %g and at most %g, not %s", name, lo, hi, v->u.num);
    return fail(err, 400, name, "invalid_value", "'%s' must be between %g and %g, not %s", name, lo,
                hi, v->u.num);
}

static int get_bool(const struct json_value *v, const char *name, bool *out,
                    struct openai_error *err)
{
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return fail_type(err, name, "a boolean", v);
    *out = v->type == JSON_TRUE;
    return 0;
}

/* ---- the prompt ---------------------------------------------------------- */

static int parse_prompt(const struct json_value *root, struct openai_request *out,
                        struct openai_error *err)
{
    const struct json_value *v = field(root, "prompt");
    if (!v)
        return fail(err, 400, "prompt", "missing_required_parameter", "'prompt' is required");
    if (v->type == JSON_ARRAY) {
        if (v->len == 0)
            return fail(err, 400, "prompt", "invalid_value", "'prompt' must not be empty");
        if (v->u.items[0].type == JSON_NUMBER || v->u.items[0].type == JSON_ARRAY)
            return fail_unsupported(err, "prompt", "a prompt of token ids");
        if (v->len != 1)
            return fail_unsupported(err, "prompt", "more than one prompt");
        v = &v->u.items[0];
        if (v->type != JSON_STRING)
            return fail_type(err, "prompt", "a string or an array of one string", v);
    } else if (v->type != JSON_STRING) {
        return fail_type(err, "prompt", "a string or an array of one string", v);
    }
    if (v->len > OPENAI_MAX_PROMPT)
        return fail(err, 400, "prompt", "invalid_value",
                    "'prompt' is %" PRIu32 " bytes long, at most %u are allowed", v->len,
                    OPENAI_MAX_PROMPT);
    out->prompt = v->u.str;
    out->prompt_len = v->len;
    return 0;
}

/* v is the string lit (the whole of it: decoded strings may hold NULs). */
static bool str_is(const struct json_value *v, const char *lit)
{
    return v->type == JSON_STRING && v->len == strlen(lit) && memcmp(v->u.str, lit, v->len) == 0;
}

static int check_role(struct arena *a, const struct json_value *msg, uint32_t i,
                      struct openai_error *err)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant"};
    const struct json_value *role = field(msg, "role");
    const char *param = param_fmt(a, "messages", "messages.[%" PRIu32 "].role", i);
    if (!role)
        return fail(err, 400, param, "missing_required_parameter", "'%s' is required", param);
    if (role->type != JSON_STRING)
        return fail_type(err, param, "a string", role);
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++)
        if (str_is(role, roles[r]))
            return 0;
    if (str_is(role, "tool") || str_is(role, "function"))
        return fail(err, 400, param, "unsupported_value",
                    "'%s': role '%s' is not supported (tools and functions are not)", param,
                    role->u.str);
    return fail(err, 400, param, "invalid_value",
                "'%s' must be 'system', 'developer', 'user' or 'assistant'", param);
}

/* Checks message i's content and adds the length of its text to *len. */
static int check_content(struct arena *a, const struct json_value *msg, uint32_t i, size_t *len,
                         struct openai_error *err)
{
    const struct json_value *content = field(msg, "content");
    const char *param = param_fmt(a, "messages", "messages.[%" PRIu32 "].content", i);
    if (!content)
        return fail(err, 400, param, "missing_required_parameter", "'%s' is required", param);
    if (content->type == JSON_STRING) {
        *len += content->len;
        return 0;
    }
    if (content->type != JSON_ARRAY)
        return fail_type(err, param, "a string or an array of text parts", content);
    if (content->len > OPENAI_MAX_PARTS)
        return fail(err, 400, param, "invalid_value",
                    "'%s' has %" PRIu32 " parts, at most %u are allowed", param, content->len,
                    OPENAI_MAX_PARTS);
    for (uint32_t k = 0; k < content->len; k++) {
        const struct json_value *part = &content->u.items[k];
        param = param_fmt(a, "messages", "messages.[%" PRIu32 "].content.[%" PRIu32 "]", i, k);
        if (part->type != JSON_OBJECT)
            return fail_type(err, param, "an object", part);
        const struct json_value *type = field(part, "type");
        if (!type || !str_is(type, "text"))
            return fail(err, 400, param, "unsupported_value",
                        "'%s': only parts of type 'text' are supported", param);
        const struct json_value *text = field(part, "text");
        param = param_fmt(a, "messages", "messages.[%" PRIu32 "].content.[%" PRIu32 "].text", i, k);
        if (!text)
            return fail(err, 400, param, "missing_required_parameter", "'%s' is required", param);
        if (text->type != JSON_STRING)
            return fail_type(err, param, "a string", text);
        *len += text->len;
    }
    return 0;
}

/* Copies the text of a content that check_content() accepted to dst;
 * returns its length. */
static size_t copy_content(const struct json_value *msg, char *dst)
{
    const struct json_value *content = field(msg, "content");
    if (content->type == JSON_STRING) {
        memcpy(dst, content->u.str, content->len);
        return content->len;
    }
    size_t n = 0;
    for (uint32_t k = 0; k < content->len; k++) {
        const struct json_value *text = field(&content->u.items[k], "text");
        memcpy(dst + n, text->u.str, text->len);
        n += text->len;
    }
    return n;
}

static int parse_messages(struct arena *a, const struct json_value *root,
                          struct openai_request *out, struct openai_error *err)
{
    const struct json_value *v = field(root, "messages");
    if (!v)
        return fail(err, 400, "messages", "missing_required_parameter", "'messages' is required");
    if (v->type != JSON_ARRAY)
        return fail_type(err, "messages", "an array", v);
    if (v->len == 0)
        return fail(err, 400, "messages", "invalid_value", "'messages' must not be empty");
    if (v->len > OPENAI_MAX_MESSAGES)
        return fail(err, 400, "messages", "invalid_value",
                    "'messages' has %" PRIu32 " messages, at most %u are allowed", v->len,
                    OPENAI_MAX_MESSAGES);
    size_t total = 0;
    for (uint32_t i = 0; i < v->len; i++) {
        const struct json_value *msg = &v->u.items[i];
        if (msg->type != JSON_OBJECT)
            return fail_type(err, param_fmt(a, "messages", "messages.[%" PRIu32 "]", i),
                             "an object", msg);
        if (check_role(a, msg, i, err) != 0 || check_content(a, msg, i, &total, err) != 0)
            return ST_ERROR;
        total += i > 0; /* the "\n" before it */
        if (total > OPENAI_MAX_PROMPT)
            return fail(err, 400, "messages", "invalid_value",
                        "the text of 'messages' is over %u bytes long", OPENAI_MAX_PROMPT);
    }
    char *text = arena_alloc(a, total + 1);
    if (!text)
        return fail(err, 413, NULL, "request_too_large", "request too large to decode");
    size_t len = 0;
    for (uint32_t i = 0; i < v->len; i++) {
        if (i > 0)
            text[len++] = '\n';
        len += copy_content(&v->u.items[i], text + len);
    }
    text[len] = '\0';
    out->prompt = text;
    out->prompt_len = len;
    return 0;
}

/* ---- sampling and output fields ------------------------------------------ */

static int parse_max_tokens(const struct json_value *root, enum openai_kind kind,
                            struct openai_request *out, struct openai_error *err)
{
    int64_t x = -1, y = -1;
    const struct json_value *v = field(root, "max_tokens");
    if (v && get_int(v, "max_tokens", 1, INT32_MAX, &x, err) != 0)
        return ST_ERROR;
    const struct json_value *w = kind == OPENAI_CHAT ? field(root, "max_completion_tokens") : NULL;
    if (w && get_int(w, "max_completion_tokens", 1, INT32_MAX, &y, err) != 0)
        return ST_ERROR;
    if (v && w && x != y)
        return fail(err, 400, "max_tokens", "invalid_value",
                    "'max_tokens' and 'max_completion_tokens' differ; give one of them");
    out->max_tokens = (int32_t)(w ? y : x);
    return 0;
}

static int parse_sampling(const struct json_value *root, struct openai_request *out,
                          struct openai_error *err)
{
    const struct json_value *v;
    double d;
    int64_t x;
    if ((v = field(root, "temperature"))) {
        if (get_float(v, "temperature", 0, false, 2, &d, err) != 0)
            return ST_ERROR;
        out->temperature = (float)d;
    }
    if ((v = field(root, "top_p"))) {
        if (get_float(v, "top_p", 0, true, 1, &d, err) != 0)
            return ST_ERROR;
        /* a positive value below float's range keeps its meaning: the top token */
        out->top_p = (float)d > 0 ? (float)d : FLT_MIN;
    }
    if ((v = field(root, "top_k"))) {
        if (get_int(v, "top_k", -1, INT32_MAX, &x, err) != 0)
            return ST_ERROR;
        out->top_k = x < 0 ? 0 : (int32_t)x;
    }
    if ((v = field(root, "seed"))) {
        if (v->type != JSON_NUMBER)
            return fail_type(err, "seed", "an integer", v);
        int64_t s;
        int rc = json_num_i64(v, &s);
        if (rc == 0) {
            out->seed = (uint64_t)s;
        } else if (rc == -ERANGE && json_num_u64(v, &out->seed) == 0) {
            rc = 0;
        } else if (rc == -EINVAL) {
            return fail(err, 400, "seed", "invalid_type", "'seed' must be an integer, not %s",
                        v->u.num);
        }
        if (rc != 0)
            return fail(err, 400, "seed", "invalid_value",
                        "'seed' must be between %" PRId64 " and %" PRIu64 ", not %s", INT64_MIN,
                        UINT64_MAX, v->u.num);
        out->has_seed = true;
    }
    return 0;
}

static int parse_stop(const struct json_value *root, struct openai_request *out,
                      struct openai_error *err)
{
    const struct json_value *v = field(root, "stop");
    if (!v)
        return 0;
    const struct json_value *items = v;
    uint32_t n = 1;
    if (v->type == JSON_ARRAY) {
        if (v->len > OPENAI_MAX_STOPS)
            return fail(err, 400, "stop", "invalid_value",
                        "'stop' has %" PRIu32 " sequences, at most %d are allowed", v->len,
                        OPENAI_MAX_STOPS);
        items = v->u.items;
        n = v->len;
    } else if (v->type != JSON_STRING) {
        return fail_type(err, "stop", "a string or an array of strings", v);
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct json_value *s = &items[i];
        if (s->type != JSON_STRING)
            return fail_type(err, "stop", "a string or an array of strings", s);
        if (s->len == 0 || s->len > OPENAI_MAX_STOP_LEN)
            return fail(err, 400, "stop", "invalid_value",
                        "'stop' sequences must be 1 to %d bytes long, not %" PRIu32,
                        OPENAI_MAX_STOP_LEN, s->len);
        out->stop[i] = s->u.str;
        out->stop_len[i] = s->len;
    }
    out->nstop = n;
    return 0;
}

static int parse_stream(const struct json_value *root, struct openai_request *out,
                        struct openai_error *err)
{
    const struct json_value *v = field(root, "stream");
    if (v && get_bool(v, "stream", &out->stream, err) != 0)
        return ST_ERROR;
    const struct json_value *opts = field(root, "stream_options");
    if (!opts)
        return 0;
    if (opts->type != JSON_OBJECT)
        return fail_type(err, "stream_options", "an object", opts);
    if (!out->stream)
        return fail(err, 400, "stream_options", "invalid_value",
                    "'stream_options' is only allowed when 'stream' is true");
    const struct json_value *usage = field(opts, "include_usage");
    if (usage && get_bool(usage, "stream_options.include_usage", &out->include_usage, err) != 0)
        return ST_ERROR;
    return 0;
}

/* ---- what inferd does not do --------------------------------------------- */

/* An integer field that must be 1 when given (n, best_of). */
static int check_one(const struct json_value *root, const char *name, struct openai_error *err)
{
    const struct json_value *v = field(root, name);
    int64_t x = 1;
    if (v && get_int(v, name, INT64_MIN, INT64_MAX, &x, err) != 0)
        return ST_ERROR;
    if (x != 1)
        return fail(err, 400, name, "unsupported_value",
                    "'%s' must be 1: one completion per request is supported", name);
    return 0;
}

static int check_penalty(const struct json_value *root, const char *name, struct openai_error *err)
{
    const struct json_value *v = field(root, name);
    double d = 0;
    if (v && get_float(v, name, -2, false, 2, &d, err) != 0)
        return ST_ERROR;
    if (d != 0)
        return fail_unsupported(err, name, "a non-zero penalty");
    return 0;
}

/* A field that may be given empty (an array or object of `want` type). */
static int check_empty(const struct json_value *root, const char *name, enum json_type want,
                       const char *what, struct openai_error *err)
{
    const struct json_value *v = field(root, name);
    if (!v)
        return 0;
    if (v->type != want)
        return fail_type(err, name, want == JSON_ARRAY ? "an array" : "an object", v);
    if (v->len != 0)
        return fail_unsupported(err, name, what);
    return 0;
}

static int check_completions_only(const struct json_value *root, struct openai_error *err)
{
    const struct json_value *v;
    bool echo = false;
    if (check_one(root, "best_of", err) != 0)
        return ST_ERROR;
    if ((v = field(root, "echo")) && get_bool(v, "echo", &echo, err) != 0)
        return ST_ERROR;
    if (echo)
        return fail_unsupported(err, "echo", "echoing the prompt");
    if ((v = field(root, "logprobs"))) {
        if (v->type != JSON_NUMBER)
            return fail_type(err, "logprobs", "an integer", v);
        return fail_unsupported(err, "logprobs", "returning log probabilities");
    }
    if ((v = field(root, "suffix"))) {
        if (v->type != JSON_STRING)
            return fail_type(err, "suffix", "a string", v);
        if (v->len != 0)
            return fail_unsupported(err, "suffix", "a suffix (insertion)");
    }
    return 0;
}

static int check_chat_only(const struct json_value *root, struct openai_error *err)
{
    const struct json_value *v;
    bool logprobs = false;
    if ((v = field(root, "logprobs")) && get_bool(v, "logprobs", &logprobs, err) != 0)
        return ST_ERROR;
    if (logprobs)
        return fail_unsupported(err, "logprobs", "returning log probabilities");
    if (check_empty(root, "tools", JSON_ARRAY, "calling tools", err) != 0 ||
        check_empty(root, "functions", JSON_ARRAY, "calling functions", err) != 0)
        return ST_ERROR;
    if ((v = field(root, "response_format"))) {
        if (v->type != JSON_OBJECT)
            return fail_type(err, "response_format", "an object", v);
        const struct json_value *type = field(v, "type");
        if (!type || !str_is(type, "text"))
            return fail(err, 400, "response_format", "unsupported_value",
                        "'response_format': only {\"type\": \"text\"} is supported");
    }
    return 0;
}

static int check_unsupported(const struct json_value *root, enum openai_kind kind,
                             struct openai_error *err)
{
    if (check_one(root, "n", err) != 0 || check_penalty(root, "presence_penalty", err) != 0 ||
        check_penalty(root, "frequency_penalty", err) != 0 ||
        check_empty(root, "logit_bias", JSON_OBJECT, "a logit bias", err) != 0)
        return ST_ERROR;
    return kind == OPENAI_CHAT ? check_chat_only(root, err) : check_completions_only(root, err);
}

/* ---- the request --------------------------------------------------------- */

static int parse_model(const struct json_value *root, struct openai_request *out,
                       struct openai_error *err)
{
    const struct json_value *v = field(root, "model");
    if (!v)
        return fail(err, 400, "model", "missing_required_parameter", "'model' is required");
    if (v->type != JSON_STRING)
        return fail_type(err, "model", "a string", v);
    if (v->len == 0 || v->len > OPENAI_MAX_MODEL || memchr(v->u.str, '\0', v->len))
        return fail(err, 400, "model", "invalid_value",
                    "'model' must be a model name of 1 to %d bytes", OPENAI_MAX_MODEL);
    out->model = v->u.str;
    return 0;
}

int openai_request_parse(struct arena *a, enum openai_kind kind, const char *body, size_t len,
                         struct openai_request *out, struct openai_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->temperature = NAN;
    out->top_p = NAN;
    out->top_k = -1;

    struct json_value *root;
    const char *msg;
    size_t off;
    if (json_parse(a, body, len, NULL, &root, &msg, &off) != ST_OK) {
        if (strcmp(msg, "out of memory") == 0)
            return fail(err, 413, NULL, "request_too_large", "request too large to decode");
        return fail(err, 400, NULL, "invalid_json", "could not parse the JSON body: %s at byte %zu",
                    msg, off);
    }
    if (root->type != JSON_OBJECT)
        return fail(err, 400, NULL, "invalid_type",
                    "the request body must be a JSON object, not %s", json_type_name(root));
    if (parse_model(root, out, err) != 0)
        return ST_ERROR;
    int rc = kind == OPENAI_CHAT ? parse_messages(a, root, out, err) : parse_prompt(root, out, err);
    if (rc == 0)
        rc = parse_max_tokens(root, kind, out, err);
    if (rc == 0)
        rc = parse_sampling(root, out, err);
    if (rc == 0)
        rc = parse_stop(root, out, err);
    if (rc == 0)
        rc = parse_stream(root, out, err);
    if (rc == 0)
        rc = check_unsupported(root, kind, err);
    return rc;
}

/* ---- responses ----------------------------------------------------------- */

void openai_error_json(struct buf *out, const struct openai_error *e)
{
    struct json_writer w;
    json_w_init(&w, out);
    json_w_obj_begin(&w);
    json_w_key(&w, "error");
    json_w_obj_begin(&w);
    json_w_key(&w, "message");
    json_w_cstr(&w, e->message);
    json_w_key(&w, "type");
    json_w_cstr(&w, e->type ? e->type : TYPE_INVALID);
    json_w_key(&w, "param");
    if (e->param)
        json_w_cstr(&w, e->param);
    else
        json_w_null(&w);
    json_w_key(&w, "code");
    if (e->code)
        json_w_cstr(&w, e->code);
    else
        json_w_null(&w);
    json_w_obj_end(&w);
    json_w_obj_end(&w);
}

/* Starts a body on out: "id", "object", "created", "model", then opens the
 * "choices" array. */
static void begin_body(struct json_writer *w, struct buf *out, const char *id, const char *object,
                       uint64_t created, const char *model)
{
    json_w_init(w, out);
    json_w_obj_begin(w);
    json_w_key(w, "id");
    json_w_cstr(w, id);
    json_w_key(w, "object");
    json_w_cstr(w, object);
    json_w_key(w, "created");
    json_w_uint(w, created);
    json_w_key(w, "model");
    json_w_cstr(w, model);
    json_w_key(w, "choices");
    json_w_arr_begin(w);
}

static const char *chunk_object(enum openai_kind k)
{
    return k == OPENAI_CHAT ? "chat.completion.chunk" : "text_completion";
}

/* The one choice: opens it with its "index". */
static void begin_choice(struct json_writer *w)
{
    json_w_obj_begin(w);
    json_w_key(w, "index");
    json_w_uint(w, 0);
}

/* Closes the choice with "logprobs" and "finish_reason", then "choices". */
static void end_choice(struct json_writer *w, const char *finish_reason)
{
    json_w_key(w, "logprobs");
    json_w_null(w);
    json_w_key(w, "finish_reason");
    if (finish_reason)
        json_w_cstr(w, finish_reason);
    else
        json_w_null(w);
    json_w_obj_end(w);
    json_w_arr_end(w);
}

static void write_usage(struct json_writer *w, uint32_t prompt_tokens, uint32_t completion_tokens)
{
    json_w_key(w, "usage");
    json_w_obj_begin(w);
    json_w_key(w, "prompt_tokens");
    json_w_uint(w, prompt_tokens);
    json_w_key(w, "completion_tokens");
    json_w_uint(w, completion_tokens);
    json_w_key(w, "total_tokens");
    json_w_uint(w, (uint64_t)prompt_tokens + completion_tokens);
    json_w_obj_end(w);
}

void openai_completion_json(struct buf *out, enum openai_kind k, const struct openai_result *r)
{
    struct json_writer w;
    begin_body(&w, out, r->id, k == OPENAI_CHAT ? "chat.completion" : "text_completion", r->created,
               r->model);
    begin_choice(&w);
    if (k == OPENAI_CHAT) {
        json_w_key(&w, "message");
        json_w_obj_begin(&w);
        json_w_key(&w, "role");
        json_w_cstr(&w, "assistant");
        json_w_key(&w, "content");
        json_w_str(&w, r->text, r->text_len);
        json_w_obj_end(&w);
    } else {
        json_w_key(&w, "text");
        json_w_str(&w, r->text, r->text_len);
    }
    end_choice(&w, r->finish_reason);
    write_usage(&w, r->prompt_tokens, r->completion_tokens);
    json_w_obj_end(&w);
}

void openai_chunk_json(struct buf *out, enum openai_kind k, const char *id, uint64_t created,
                       const char *model, const char *delta, size_t delta_len,
                       const char *finish_reason, bool first, bool usage_null)
{
    struct json_writer w;
    begin_body(&w, out, id, chunk_object(k), created, model);
    begin_choice(&w);
    if (k == OPENAI_CHAT) {
        json_w_key(&w, "delta");
        json_w_obj_begin(&w);
        if (first) {
            json_w_key(&w, "role");
            json_w_cstr(&w, "assistant");
        }
        if (first || delta_len > 0 || !finish_reason) {
            json_w_key(&w, "content");
            json_w_str(&w, delta, delta_len);
        }
        json_w_obj_end(&w);
    } else {
        json_w_key(&w, "text");
        json_w_str(&w, delta, delta_len);
    }
    end_choice(&w, finish_reason);
    if (usage_null) {
        json_w_key(&w, "usage");
        json_w_null(&w);
    }
    json_w_obj_end(&w);
}

void openai_usage_chunk_json(struct buf *out, enum openai_kind k, const char *id, uint64_t created,
                             const char *model, uint32_t prompt_tokens, uint32_t completion_tokens)
{
    struct json_writer w;
    begin_body(&w, out, id, chunk_object(k), created, model);
    json_w_arr_end(&w);
    write_usage(&w, prompt_tokens, completion_tokens);
    json_w_obj_end(&w);
}
