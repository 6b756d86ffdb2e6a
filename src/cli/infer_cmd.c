#include "cli/infer_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/arena.h"
#include "base/json.h"
#include "base/status.h"
#include "cli/client.h"
#include "cli/grpc_client.h"
#include "cli/npy.h"
#include "cli/tensors.h"

#define PROG "inferd infer"
#define DEFAULT_GRPC_PORT 8001
#define PRINT_LIMIT 100
#define MAX_FILE_BYTES ((size_t)256 << 20)

static const char infer_usage_text[] =
    "usage: inferd infer MODEL [--input NAME=VALUE ...] [--json FILE] [options]\n"
    "\n"
    "Sends one inference request to MODEL and prints (or saves) its outputs.\n"
    "\n"
    "inputs:\n"
    "  --input NAME=FILE.npy  a NumPy array (dtype, shape and C order from its header;\n"
    "                         bool, (u)int8..64, float16/32/64, S and U strings)\n"
    "  --input NAME=@FILE     the file's bytes as one BYTES element, shape [1] (e.g. a\n"
    "                         picture for a model with a preprocess.json)\n"
    "  --input NAME=JSON      nested arrays or a scalar of the input's datatype (from the\n"
    "                         model's metadata, over REST), or an object\n"
    "                         {\"datatype\": \"FP32\", \"shape\": [1, 4], \"data\": [...]}\n"
    "  --json FILE            a KServe v2 request body (inputs, outputs, id, parameters);\n"
    "                         --input adds or replaces inputs\n"
    "\n"
    "request:\n"
    "  --version V            this version of the model (default: the server's choice)\n"
    "  --output NAME          only this output (repeatable; default: all)\n"
    "  --binary               REST: the binary tensor extension for inputs and outputs\n"
    "                         (chosen anyway for FP16/BF16 and non-UTF-8 bytes)\n"
    "  --grpc                 KServe v2 gRPC instead of REST\n"
    "  --grpc-port N          the gRPC port on the --url host (default: $INFERD_GRPC_PORT,\n"
    "                         else 8001)\n"
    "\n"
    "outputs:\n"
    "  (default)              a table: per output its name, datatype and shape, then\n"
    "                         the values, a row of the last dimension per line (at most\n"
    "                         100 values each)\n"
    "  --json-output          one KServe v2 JSON response (all values)\n"
    "  --save DIR             also write DIR/OUTPUT.npy per output (created if missing)\n"
    "\n"
    "common:\n"
    "%s"
    "  -h, --help             this text\n"
    "\n"
    "Environment: INFERD_URL (the default --url); INFERD_GRPC_PORT (the default\n"
    "--grpc-port); INFERD_API_KEY, when set, is sent as `Authorization: Bearer` (REST)\n"
    "or `authorization` metadata (gRPC).\n"
    "\n"
    "Exit status: 0 success; 1 the server refused the request (its message on stderr,\n"
    "e.g. 401 without a valid API key, 404 unknown model, 400 bad input); 2 usage\n"
    "error or an unreadable input file; 3 cannot connect, TLS failure or timeout.\n";

enum {
    OPT_VERSION = 256,
    OPT_INPUT,
    OPT_JSON,
    OPT_OUTPUT,
    OPT_SAVE,
    OPT_GRPC,
    OPT_GRPC_PORT,
    OPT_BINARY,
    OPT_JSON_OUTPUT
};

static const struct option options_table[] = {
    {"version", required_argument, NULL, OPT_VERSION},
    {"input", required_argument, NULL, OPT_INPUT},
    {"json", required_argument, NULL, OPT_JSON},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"save", required_argument, NULL, OPT_SAVE},
    {"grpc", no_argument, NULL, OPT_GRPC},
    {"grpc-port", required_argument, NULL, OPT_GRPC_PORT},
    {"binary", no_argument, NULL, OPT_BINARY},
    {"json-output", no_argument, NULL, OPT_JSON_OUTPUT},
    CLI_COMMON_OPTIONS,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct infer_opts {
    struct cli_target t;
    const char *model, *version, *json_file, *save_dir;
    const char *input_args[CLI_MAX_TENSORS];
    int ninput_args;
    const char *outputs[CLI_MAX_TENSORS];
    int noutputs;
    bool grpc, binary, json_output;
    int grpc_port;
};

struct infer_state {
    struct arena arena;          /* parsed JSON: request file, metadata, response */
    struct json_value *metadata; /* NULL until fetched */
    struct cli_tensor inputs[CLI_MAX_TENSORS];
    int ninputs;
    const char *id;
    struct json_value *parameters; /* of the --json file */
    struct cli_infer_result res;
};

static int read_file(const char *path, struct buf *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cli_fail(CLI_EXIT_USAGE, PROG, "%s: %s", path, strerror(errno));
    char chunk[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (buf_append(b, chunk, n) != 0) {
            rc = cli_fail(CLI_EXIT_USAGE, PROG, "%s: larger than %zu MiB", path,
                          MAX_FILE_BYTES >> 20);
            break;
        }
    if (rc == 0 && ferror(f))
        rc = cli_fail(CLI_EXIT_USAGE, PROG, "%s: %s", path, strerror(errno));
    fclose(f);
    return rc;
}

/* ---- inputs ------------------------------------------------------------------ */

/* The input named name (added empty when new; a second --input of a name
 * replaces the first). NULL when there are too many. */
static struct cli_tensor *input_slot(struct infer_state *s, const char *name, size_t n)
{
    for (int i = 0; i < s->ninputs; i++)
        if (strlen(s->inputs[i].name) == n && memcmp(s->inputs[i].name, name, n) == 0) {
            cli_tensor_free(&s->inputs[i]);
            cli_tensor_init(&s->inputs[i]);
            memcpy(s->inputs[i].name, name, n);
            return &s->inputs[i];
        }
    if (s->ninputs == CLI_MAX_TENSORS)
        return NULL;
    struct cli_tensor *t = &s->inputs[s->ninputs++];
    cli_tensor_init(t);
    memcpy(t->name, name, n);
    return t;
}

/* shape: a JSON array of non-negative integers. */
static int read_shape(const struct json_value *v, struct cli_tensor *t, struct error *err)
{
    if (!v || v->type != JSON_ARRAY || v->len > CLI_MAX_DIMS)
        return error_set(err, 400, "%s: shape must be an array of at most %d dims", t->name,
                         CLI_MAX_DIMS);
    t->ndim = (int)v->len;
    for (uint32_t i = 0; i < v->len; i++)
        if (json_num_i64(&v->u.items[i], &t->shape[i]) != 0 || t->shape[i] < 0)
            return error_set(err, 400, "%s: shape must hold non-negative integers", t->name);
    return 0;
}

/* An input object {"name"?, "datatype", "shape", "data"} into t. */
static int tensor_of_object(const struct json_value *o, struct cli_tensor *t, struct error *err)
{
    const struct json_value *dt = json_get(o, "datatype"), *data = json_get(o, "data");
    if (!dt || dt->type != JSON_STRING ||
        (t->dtype = dtype_from_name(dt->u.str, dt->len)) == DT_INVALID)
        return error_set(err, 400, "%s: a known \"datatype\" is needed", t->name);
    if (!data)
        return error_set(err, 400, "%s: \"data\" is needed", t->name);
    if (read_shape(json_get(o, "shape"), t, err) != 0)
        return ST_ERROR;
    return cli_tensor_from_json(t, data, false, err);
}

/* The metadata of the model (GET /v2/models/M[/versions/V]), once. quiet:
 * failures are not reported (the caller does without). */
static int fetch_metadata(const struct infer_opts *o, struct infer_state *s, bool quiet)
{
    if (s->metadata)
        return 0;
    if (o->grpc) {
        /* The protocol of the call: the REST port may not be reachable. */
        struct buf json;
        buf_init(&json, (size_t)1 << 20);
        int rc = cli_grpc_metadata(&o->t, o->grpc_port, o->model, o->version, &json,
                                   quiet ? NULL : PROG);
        if (rc == 0 && json_parse(&s->arena, json.data, json.len, NULL, &s->metadata, NULL,
                                  NULL) != ST_OK) {
            s->metadata = NULL;
            rc = CLI_EXIT_FAILED;
        }
        buf_free(&json);
        return rc;
    }
    struct buf path;
    buf_init(&path, 4096);
    buf_puts(&path, "/v2/models/");
    cli_put_segment(&path, o->model);
    if (o->version) {
        buf_puts(&path, "/versions/");
        cli_put_segment(&path, o->version);
    }
    buf_putc(&path, '\0');
    struct cli_response r;
    cli_response_init(&r);
    char msg[512];
    int rc =
        cli_http(&o->t, "GET", path.data, NULL, NULL, NULL, 0, &r, NULL, NULL, msg, sizeof msg);
    if (rc == CLI_EXIT_CONNECT && !quiet)
        fprintf(stderr, PROG ": %s\n", msg);
    if (rc == 0 && r.status != 200) {
        if (!quiet)
            cli_print_http_error(PROG, &r);
        rc = CLI_EXIT_FAILED;
    }
    if (rc == 0 &&
        json_parse(&s->arena, r.body.data, r.body.len, NULL, &s->metadata, NULL, NULL) != ST_OK) {
        if (!quiet)
            fprintf(stderr, PROG ": the model's metadata is not JSON\n");
        s->metadata = NULL;
        rc = CLI_EXIT_FAILED;
    }
    cli_response_free(&r);
    buf_free(&path);
    return rc;
}

/* The metadata's entry of input name, or NULL. */
static const struct json_value *input_meta(const struct infer_state *s, const char *name)
{
    const struct json_value *ins = json_get(s->metadata, "inputs");
    for (uint32_t i = 0; ins && ins->type == JSON_ARRAY && i < ins->len; i++) {
        const struct json_value *nm = json_get(&ins->u.items[i], "name");
        if (nm && nm->type == JSON_STRING && strcmp(nm->u.str, name) == 0)
            return &ins->u.items[i];
    }
    return NULL;
}

/* Leading dims of 1 up to the rank the metadata gives the input (the
 * batch dimension a literal or a single file leaves out). */
static void pad_rank(struct cli_tensor *t, const struct json_value *meta)
{
    const struct json_value *shape = json_get(meta, "shape");
    if (shape && shape->type == JSON_ARRAY && (int)shape->len > t->ndim &&
        (int)shape->len <= CLI_MAX_DIMS) {
        int add = (int)shape->len - t->ndim;
        memmove(t->shape + add, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
        for (int i = 0; i < add; i++)
            t->shape[i] = 1;
        t->ndim = (int)shape->len;
    }
}

/* A JSON literal for input t: the datatype (and the leading dims the
 * nesting leaves out, as 1) from the metadata. */
static int tensor_of_literal(const struct infer_opts *o, struct infer_state *s, const char *text,
                             struct cli_tensor *t)
{
    struct json_value *v;
    const char *jerr;
    if (json_parse(&s->arena, text, strlen(text), NULL, &v, &jerr, NULL) != ST_OK)
        return cli_fail(CLI_EXIT_USAGE, PROG, "--input %s: not a file (.npy, @FILE) nor JSON (%s)",
                        t->name, jerr);
    struct error err;
    error_clear(&err);
    if (v->type == JSON_OBJECT)
        return tensor_of_object(v, t, &err) ? cli_fail(CLI_EXIT_USAGE, PROG, "--input %s", err.msg)
                                            : 0;
    int rc = fetch_metadata(o, s, false);
    if (rc)
        return rc;
    const struct json_value *meta = input_meta(s, t->name);
    if (!meta)
        return cli_fail(CLI_EXIT_USAGE, PROG, "--input %s: model '%s' has no such input", t->name,
                        o->model);
    const struct json_value *dt = json_get(meta, "datatype");
    if (!dt || dt->type != JSON_STRING ||
        (t->dtype = dtype_from_name(dt->u.str, dt->len)) == DT_INVALID)
        return cli_fail(CLI_EXIT_USAGE, PROG, "--input %s: the metadata gives no known datatype",
                        t->name);
    if (cli_tensor_from_json(t, v, true, &err) != 0)
        return cli_fail(CLI_EXIT_USAGE, PROG, "--input %s", err.msg);
    pad_rank(t, meta);
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int add_input_arg(const struct infer_opts *o, struct infer_state *s, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof s->inputs[0].name)
        return cli_usage_error(PROG, "--input: expected NAME=VALUE, got '%s'", arg);
    struct cli_tensor *t = input_slot(s, arg, (size_t)(eq - arg));
    if (!t)
        return cli_usage_error(PROG, "more than %d inputs", CLI_MAX_TENSORS);
    const char *value = eq + 1;
    if (value[0] == '@') {
        struct buf file;
        buf_init(&file, MAX_FILE_BYTES);
        int rc = read_file(value + 1, &file);
        if (rc == 0) {
            uint8_t len4[4] = {(uint8_t)file.len, (uint8_t)(file.len >> 8),
                               (uint8_t)(file.len >> 16), (uint8_t)(file.len >> 24)};
            t->dtype = DT_BYTES;
            t->ndim = 1;
            t->shape[0] = 1;
            buf_append(&t->raw, len4, 4);
            buf_append(&t->raw, file.data, file.len);
            if (t->raw.err)
                rc = cli_fail(CLI_EXIT_USAGE, PROG, "%s: too large", value + 1);
        }
        buf_free(&file);
        /* [1], or [1, 1] etc. when the metadata says so (unknown over a
         * server without REST: then [1]) */
        if (rc == 0 && fetch_metadata(o, s, true) == 0)
            pad_rank(t, input_meta(s, t->name));
        return rc;
    }
    if (ends_with(value, ".npy")) {
        struct buf file;
        buf_init(&file, MAX_FILE_BYTES);
        int rc = read_file(value, &file);
        struct npy_array a;
        struct error err;
        error_clear(&err);
        if (rc == 0 &&
            (npy_parse(file.data, file.len, &a, &err) != 0 || npy_data(&a, &t->raw, &err) != 0))
            rc = cli_fail(CLI_EXIT_USAGE, PROG, "%s: %s", value, err.msg);
        if (rc == 0) {
            t->dtype = a.dtype;
            t->ndim = a.ndim;
            memcpy(t->shape, a.shape, sizeof a.shape);
        }
        buf_free(&file);
        return rc;
    }
    return tensor_of_literal(o, s, value, t);
}

/* --json FILE: its inputs, outputs (added to o's), id and parameters. */
static int read_request_file(struct infer_opts *o, struct infer_state *s)
{
    struct buf file;
    buf_init(&file, MAX_FILE_BYTES);
    int rc = read_file(o->json_file, &file);
    struct json_value *root = NULL;
    const char *jerr;
    size_t off = 0;
    if (rc == 0 && json_parse(&s->arena, file.data ? file.data : "", file.len, NULL, &root, &jerr,
                              &off) != ST_OK)
        rc = cli_fail(CLI_EXIT_USAGE, PROG, "%s: not JSON (%s at byte %zu)", o->json_file, jerr,
                      off);
    buf_free(&file);
    if (rc)
        return rc;
    const struct json_value *ins = json_get(root, "inputs");
    if (!ins || ins->type != JSON_ARRAY)
        return cli_fail(CLI_EXIT_USAGE, PROG, "%s: a KServe v2 request has an \"inputs\" array",
                        o->json_file);
    struct error err;
    error_clear(&err);
    for (uint32_t i = 0; i < ins->len; i++) {
        const struct json_value *nm = json_get(&ins->u.items[i], "name");
        if (!nm || nm->type != JSON_STRING || nm->len == 0 || nm->len >= 256)
            return cli_fail(CLI_EXIT_USAGE, PROG, "%s: input %u has no name", o->json_file, i);
        struct cli_tensor *t = input_slot(s, nm->u.str, nm->len);
        if (!t)
            return cli_fail(CLI_EXIT_USAGE, PROG, "%s: more than %d inputs", o->json_file,
                            CLI_MAX_TENSORS);
        if (tensor_of_object(&ins->u.items[i], t, &err) != 0)
            return cli_fail(CLI_EXIT_USAGE, PROG, "%s: %s", o->json_file, err.msg);
    }
    const struct json_value *outs = json_get(root, "outputs");
    for (uint32_t i = 0; outs && outs->type == JSON_ARRAY && i < outs->len; i++) {
        const struct json_value *nm = json_get(&outs->u.items[i], "name");
        if (!nm || nm->type != JSON_STRING)
            return cli_fail(CLI_EXIT_USAGE, PROG, "%s: output %u has no name", o->json_file, i);
        if (o->noutputs == CLI_MAX_TENSORS)
            return cli_fail(CLI_EXIT_USAGE, PROG, "%s: more than %d outputs", o->json_file,
                            CLI_MAX_TENSORS);
        o->outputs[o->noutputs++] = nm->u.str;
    }
    const struct json_value *id = json_get(root, "id");
    if (id && id->type == JSON_STRING)
        s->id = id->u.str;
    struct json_value *params = (struct json_value *)json_get(root, "parameters");
    if (params && params->type == JSON_OBJECT)
        s->parameters = params;
    return 0;
}

/* ---- REST ------------------------------------------------------------------- */

static void write_shape(struct json_writer *w, const struct cli_tensor *t)
{
    json_w_key(w, "shape");
    json_w_arr_begin(w);
    for (int i = 0; i < t->ndim; i++)
        json_w_int(w, t->shape[i]);
    json_w_arr_end(w);
}

/* The request body (JSON, or a JSON header and the binary data, asking for
 * binary outputs too: bytes that are not UTF-8 come back unchanged); *hlen
 * is the header's length when binary. */
static void rest_body(const struct infer_opts *o, const struct infer_state *s, bool binary,
                      struct buf *b, size_t *hlen)
{
    struct json_writer w;
    json_w_init(&w, b);
    json_w_obj_begin(&w);
    if (s->id) {
        json_w_key(&w, "id");
        json_w_cstr(&w, s->id);
    }
    if (s->parameters || binary) {
        json_w_key(&w, "parameters");
        json_w_obj_begin(&w);
        for (uint32_t i = 0; s->parameters && i < s->parameters->len; i++) {
            const struct json_member *m = &s->parameters->u.members[i];
            if (binary && strcmp(m->key, "binary_data_output") == 0)
                continue;
            json_w_keyn(&w, m->key, m->key_len);
            switch (m->value.type) { /* parameters are scalars in KServe v2 */
            case JSON_STRING:
                json_w_str(&w, m->value.u.str, m->value.len);
                break;
            case JSON_NUMBER:
                json_w_raw(&w, m->value.u.num, m->value.len);
                break;
            case JSON_TRUE:
            case JSON_FALSE:
                json_w_bool(&w, m->value.type == JSON_TRUE);
                break;
            default:
                json_w_null(&w);
                break;
            }
        }
        if (binary) {
            json_w_key(&w, "binary_data_output");
            json_w_bool(&w, true);
        }
        json_w_obj_end(&w);
    }
    json_w_key(&w, "inputs");
    json_w_arr_begin(&w);
    for (int i = 0; i < s->ninputs; i++) {
        const struct cli_tensor *t = &s->inputs[i];
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_cstr(&w, t->name);
        json_w_key(&w, "datatype");
        json_w_cstr(&w, dtype_name(t->dtype));
        write_shape(&w, t);
        if (binary) {
            json_w_key(&w, "parameters");
            json_w_obj_begin(&w);
            json_w_key(&w, "binary_data_size");
            json_w_uint(&w, t->raw.len);
            json_w_obj_end(&w);
        } else {
            json_w_key(&w, "data");
            cli_tensor_write_json(t, &w);
        }
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    if (o->noutputs) {
        json_w_key(&w, "outputs");
        json_w_arr_begin(&w);
        for (int i = 0; i < o->noutputs; i++) {
            json_w_obj_begin(&w);
            json_w_key(&w, "name");
            json_w_cstr(&w, o->outputs[i]);
            json_w_obj_end(&w);
        }
        json_w_arr_end(&w);
    }
    json_w_obj_end(&w);
    *hlen = b->len;
    if (binary)
        for (int i = 0; i < s->ninputs; i++)
            buf_append(b, s->inputs[i].raw.data, s->inputs[i].raw.len);
}

static void copy_str(char *dst, size_t size, const struct json_value *v)
{
    if (v && v->type == JSON_STRING)
        snprintf(dst, size, "%s", v->u.str);
}

/* The outputs of a REST response (JSON, or a JSON header + binary data). */
static int rest_outputs(struct infer_state *s, const struct cli_response *r)
{
    size_t hlen = r->json_header_len >= 0 ? (size_t)r->json_header_len : r->body.len;
    if (hlen > r->body.len)
        return cli_fail(CLI_EXIT_USAGE, PROG,
                        "the response's Inference-Header-Content-Length exceeds its body");
    struct json_value *root;
    if (json_parse(&s->arena, r->body.data, hlen, NULL, &root, NULL, NULL) != ST_OK)
        return fprintf(stderr, PROG ": the response is not JSON\n"), CLI_EXIT_FAILED;
    struct cli_infer_result *res = &s->res;
    copy_str(res->model_name, sizeof res->model_name, json_get(root, "model_name"));
    copy_str(res->model_version, sizeof res->model_version, json_get(root, "model_version"));
    copy_str(res->id, sizeof res->id, json_get(root, "id"));
    const struct json_value *outs = json_get(root, "outputs");
    if (!outs || outs->type != JSON_ARRAY || outs->len > CLI_MAX_TENSORS)
        return fprintf(stderr, PROG ": the response has no outputs array\n"), CLI_EXIT_FAILED;
    size_t at = hlen;
    struct error err;
    error_clear(&err);
    for (uint32_t i = 0; i < outs->len; i++) {
        const struct json_value *o = &outs->u.items[i];
        struct cli_tensor *t = &res->outputs[res->noutputs++];
        cli_tensor_init(t);
        copy_str(t->name, sizeof t->name, json_get(o, "name"));
        const struct json_value *size = json_get(json_get(o, "parameters"), "binary_data_size");
        int64_t n;
        int rc;
        if (size) {
            const struct json_value *dt = json_get(o, "datatype");
            rc = dt && dt->type == JSON_STRING &&
                         (t->dtype = dtype_from_name(dt->u.str, dt->len)) != DT_INVALID
                     ? read_shape(json_get(o, "shape"), t, &err)
                     : error_set(&err, 400, "%s: no datatype", t->name);
            if (rc == 0 && (json_num_i64(size, &n) != 0 || n < 0 || (uint64_t)n > r->body.len - at))
                rc = error_set(&err, 400, "%s: binary_data_size beyond the body", t->name);
            if (rc == 0) {
                buf_append(&t->raw, r->body.data + at, (size_t)n);
                at += (size_t)n;
                rc = cli_tensor_check(t, &err);
            }
        } else {
            rc = tensor_of_object(o, t, &err);
        }
        if (rc != 0) {
            fprintf(stderr, PROG ": the response's output %s\n", err.msg);
            return CLI_EXIT_FAILED;
        }
    }
    return 0;
}

static int rest_infer(const struct infer_opts *o, struct infer_state *s)
{
    bool binary = o->binary;
    for (int i = 0; i < s->ninputs; i++)
        if (!cli_tensor_json_safe(&s->inputs[i]))
            binary = true;
    struct buf body, path, extra;
    buf_init(&body, CLI_MAX_BODY);
    buf_init(&path, 4096);
    buf_init(&extra, 256);
    size_t hlen = 0;
    rest_body(o, s, binary, &body, &hlen);
    buf_puts(&path, "/v2/models/");
    cli_put_segment(&path, o->model);
    if (o->version) {
        buf_puts(&path, "/versions/");
        cli_put_segment(&path, o->version);
    }
    buf_puts(&path, "/infer");
    buf_putc(&path, '\0');
    if (binary)
        buf_printf(&extra, "Inference-Header-Content-Length: %zu\r\n", hlen);
    buf_putc(&extra, '\0');
    int rc;
    if (body.err || path.err) {
        rc = cli_fail(CLI_EXIT_USAGE, PROG, "the request is too large");
    } else {
        struct cli_response r;
        cli_response_init(&r);
        char msg[512];
        rc = cli_http(
            &o->t, "POST", path.data, binary ? "application/octet-stream" : "application/json",
            binary ? extra.data : NULL, body.data, body.len, &r, NULL, NULL, msg, sizeof msg);
        if (rc)
            fprintf(stderr, PROG ": %s\n", msg);
        else if (r.status != 200)
            cli_print_http_error(PROG, &r), rc = CLI_EXIT_FAILED;
        else
            rc = rest_outputs(s, &r);
        cli_response_free(&r);
    }
    buf_free(&body);
    buf_free(&path);
    buf_free(&extra);
    return rc;
}

/* ---- outputs ---------------------------------------------------------------- */

static void print_json(const struct cli_infer_result *res)
{
    struct buf b;
    buf_init(&b, (size_t)1 << 31);
    struct json_writer w;
    json_w_init(&w, &b);
    json_w_obj_begin(&w);
    json_w_key(&w, "model_name");
    json_w_cstr(&w, res->model_name);
    json_w_key(&w, "model_version");
    json_w_cstr(&w, res->model_version);
    if (res->id[0]) {
        json_w_key(&w, "id");
        json_w_cstr(&w, res->id);
    }
    json_w_key(&w, "outputs");
    json_w_arr_begin(&w);
    for (int i = 0; i < res->noutputs; i++) {
        const struct cli_tensor *t = &res->outputs[i];
        json_w_obj_begin(&w);
        json_w_key(&w, "name");
        json_w_cstr(&w, t->name);
        json_w_key(&w, "datatype");
        json_w_cstr(&w, dtype_name(t->dtype));
        write_shape(&w, t);
        json_w_key(&w, "data");
        cli_tensor_write_json(t, &w);
        json_w_obj_end(&w);
    }
    json_w_arr_end(&w);
    json_w_obj_end(&w);
    fwrite(b.data, 1, b.len, stdout);
    fputc('\n', stdout);
    buf_free(&b);
}

/* DIR/NAME.npy per output; names with '/' get '_' instead. */
static int save_outputs(const char *dir, const struct cli_infer_result *res)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cli_fail(CLI_EXIT_USAGE, PROG, "--save %s: %s", dir, strerror(errno));
    for (int i = 0; i < res->noutputs; i++) {
        const struct cli_tensor *t = &res->outputs[i];
        char name[256], path[4096];
        snprintf(name, sizeof name, "%s", t->name);
        for (char *p = name; *p; p++)
            if (*p == '/' || (p == name && *p == '.'))
                *p = '_';
        if (snprintf(path, sizeof path, "%s/%s.npy", dir, name) >= (int)sizeof path)
            return cli_fail(CLI_EXIT_USAGE, PROG, "--save: path too long");
        struct buf b;
        buf_init(&b, CLI_MAX_TENSOR + 65536);
        struct error err;
        error_clear(&err);
        int rc = npy_write(t->dtype, t->ndim, t->shape, t->raw.data, t->raw.len, &b, &err);
        if (rc != 0) {
            rc = cli_fail(CLI_EXIT_USAGE, PROG, "--save %s: %s", path, err.msg);
        } else {
            FILE *f = fopen(path, "wb");
            bool ok = f && fwrite(b.data, 1, b.len, f) == b.len;
            if (f && fclose(f) != 0)
                ok = false;
            if (!ok)
                rc = cli_fail(CLI_EXIT_USAGE, PROG, "--save %s: %s", path, strerror(errno));
        }
        buf_free(&b);
        if (rc)
            return rc;
    }
    return 0;
}

static void print_table(const struct cli_infer_result *res)
{
    printf("model %s version %s", res->model_name, res->model_version);
    if (res->id[0])
        printf(" id %s", res->id);
    putchar('\n');
    for (int i = 0; i < res->noutputs; i++)
        cli_tensor_print(&res->outputs[i], stdout, PRINT_LIMIT);
}

/* ---- main --------------------------------------------------------------------- */

/* A TCP port, 1 to 65535: 0 and *out, or ST_ERROR. */
static int parse_port(const char *text, int *out)
{
    char *end;
    long p = strtol(text, &end, 10);
    if (!*text || *end || p < 1 || p > 65535)
        return ST_ERROR;
    *out = (int)p;
    return ST_OK;
}

static int parse_args(int argc, char **argv, struct infer_opts *o)
{
    int rc = cli_target_init(&o->t, PROG);
    if (rc)
        return rc;
    o->grpc_port = DEFAULT_GRPC_PORT;
    const char *env_port = getenv("INFERD_GRPC_PORT");
    if (env_port && parse_port(env_port, &o->grpc_port) != 0)
        return cli_usage_error(PROG, "INFERD_GRPC_PORT: a port from 1 to 65535, got '%s'",
                               env_port);
    optind = 1;
    opterr = 0;
    int c, idx;
    while ((c = getopt_long(argc, argv, ":h", options_table, &idx)) != -1) {
        int common = cli_target_option(&o->t, c, optarg, PROG);
        if (common < 0)
            return -common;
        if (common)
            continue;
        switch (c) {
        case 'h':
            printf(infer_usage_text, cli_common_help);
            return ST_ERROR;
        case OPT_VERSION:
            o->version = optarg;
            break;
        case OPT_INPUT:
            if (o->ninput_args == CLI_MAX_TENSORS)
                return cli_usage_error(PROG, "more than %d --input", CLI_MAX_TENSORS);
            o->input_args[o->ninput_args++] = optarg;
            break;
        case OPT_JSON:
            o->json_file = optarg;
            break;
        case OPT_OUTPUT:
            if (o->noutputs == CLI_MAX_TENSORS)
                return cli_usage_error(PROG, "more than %d --output", CLI_MAX_TENSORS);
            o->outputs[o->noutputs++] = optarg;
            break;
        case OPT_SAVE:
            o->save_dir = optarg;
            break;
        case OPT_GRPC:
            o->grpc = true;
            break;
        case OPT_GRPC_PORT:
            if (parse_port(optarg, &o->grpc_port) != 0)
                return cli_usage_error(PROG, "--grpc-port: a port from 1 to 65535, got '%s'",
                                       optarg);
            break;
        case OPT_BINARY:
            o->binary = true;
            break;
        case OPT_JSON_OUTPUT:
            o->json_output = true;
            break;
        case ':':
            return cli_usage_error(PROG, "%s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(PROG, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error(PROG, "which model?");
    o->model = argv[optind++];
    if (optind < argc)
        return cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (!*o->model)
        return cli_usage_error(PROG, "the model name is empty");
    if (o->ninput_args == 0 && !o->json_file)
        return cli_usage_error(PROG, "no inputs: give --input NAME=VALUE or --json FILE");
    if (o->grpc && o->binary)
        return cli_usage_error(PROG, "--binary is for REST (gRPC always sends raw tensors)");
    return cli_target_finish(&o->t, PROG);
}

int infer_main(int argc, char **argv)
{
    struct infer_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(argc, argv, &o);
    if (rc == -1)
        return 0;
    if (rc)
        return rc;
    struct infer_state *s = calloc(1, sizeof *s);
    if (!s) {
        fputs(PROG ": out of memory\n", stderr);
        return CLI_EXIT_FAILED;
    }
    arena_init(&s->arena, 64 * 1024, (size_t)1 << 31);
    if (o.json_file)
        rc = read_request_file(&o, s);
    for (int i = 0; rc == 0 && i < o.ninput_args; i++)
        rc = add_input_arg(&o, s, o.input_args[i]);
    if (rc == 0) {
        if (o.grpc) {
            struct cli_infer_request rq = {.model = o.model,
                                           .version = o.version,
                                           .id = s->id,
                                           .inputs = s->inputs,
                                           .ninputs = s->ninputs,
                                           .outputs = o.outputs,
                                           .noutputs = o.noutputs};
            rc = cli_grpc_infer(&o.t, o.grpc_port, &rq, &s->res, PROG);
        } else {
            rc = rest_infer(&o, s);
        }
    }
    if (rc == 0 && o.save_dir)
        rc = save_outputs(o.save_dir, &s->res);
    if (rc == 0) {
        if (o.json_output)
            print_json(&s->res);
        else
            print_table(&s->res);
        if (fflush(stdout) != 0)
            rc = CLI_EXIT_FAILED;
    }
    for (int i = 0; i < s->ninputs; i++)
        cli_tensor_free(&s->inputs[i]);
    cli_infer_result_free(&s->res);
    arena_free(&s->arena);
    free(s);
    return rc;
}
