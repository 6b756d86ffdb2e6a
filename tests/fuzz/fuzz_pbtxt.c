/*
 * Fuzz target for model/pbtxt and model/config. Properties checked on every
 * input:
 *   - pbtxt_parse succeeds or reports "line:col: message" with a position
 *     inside the input; a tree respects the limits (depth, nodes, string
 *     length), names are identifiers, scalars are NUL-terminated;
 *   - model_config_parse agrees with pbtxt_parse on syntax errors and
 *     reports 400 errors with a position, or gives a config whose every
 *     string is NUL-terminated and whose counts match their arrays;
 *   - a parsed config checked against a fixed model either fails with a
 *     message or completes: every model tensor present, dims compatible;
 *     checking again changes nothing; the JSON written is valid JSON.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "model/config.h"
#include "model/pbtxt.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_pbtxt: %s\n", what);
        abort();
    }
}

#define IO(n, t, ...)                                                                              \
    {                                                                                              \
        .name = (char *)(n), .dtype = (t),                                                         \
        .ndim = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), .dims = {                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }

/* The model the corpus configs describe: batchable, mixed types. */
static struct model_io model_in[] = {IO("INPUT0", DT_INT32, -1, 16),
                                     IO("INPUT1", DT_FP32, -1, -1, 4)};
static struct model_io model_out[] = {IO("OUTPUT0", DT_INT32, -1, 16), IO("OUTPUT1", DT_BYTES, -1)};
static const struct model_info model = {2, 2, model_in, model_out};

/* "L:C: ..." with L and C inside the text. */
static void check_position(const char *msg, const uint8_t *data, size_t size)
{
    unsigned line = 0, col = 0;
    check(sscanf(msg, "%u:%u: ", &line, &col) == 2, "error without line:col");
    unsigned lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    check(line >= 1 && line <= lines && col >= 1 && col <= size + 1,
          "error position outside the input");
}

static void check_tree(const struct pbtxt_value *v, uint32_t depth, uint32_t *nodes)
{
    check(depth <= PBTXT_DEFAULT_MAX_DEPTH, "tree deeper than the limit");
    if (v->kind != PBTXT_MESSAGE) {
        check(v->u.text[v->len] == '\0', "scalar not NUL-terminated");
        if (v->kind == PBTXT_STRING)
            check(v->len <= PBTXT_DEFAULT_MAX_STRING, "string longer than the limit");
        else
            check(strlen(v->u.text) == v->len && v->len > 0, "bad scalar text");
        return;
    }
    uint32_t n = 0;
    for (const struct pbtxt_field *f = v->u.fields; f; f = f->next) {
        n++;
        (*nodes)++;
        check(f->name[0] &&
                  strspn(f->name,
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") ==
                      strlen(f->name),
              "field name is not an identifier");
        check(f->line >= 1 && f->col >= 1, "bad field position");
        check_tree(&f->value, depth + (f->value.kind == PBTXT_MESSAGE), nodes);
    }
    check(n == v->len, "message len differs from its fields");
}

static void check_strings(const struct model_config *cfg)
{
    check(cfg->name && cfg->platform && cfg->backend, "NULL string");
    for (uint32_t i = 0; i < cfg->ninputs; i++)
        check(cfg->inputs[i].name && cfg->inputs[i].name[0] &&
                  cfg->inputs[i].ndim <= TENSOR_MAX_DIMS,
              "bad input");
    for (uint32_t i = 0; i < cfg->noutputs; i++)
        check(cfg->outputs[i].name && cfg->outputs[i].label_filename &&
                  cfg->outputs[i].ndim <= TENSOR_MAX_DIMS,
              "bad output");
    for (uint32_t i = 0; i < cfg->nparameters; i++)
        check(cfg->parameters[i].key && cfg->parameters[i].string_value, "bad parameter");
    for (uint32_t i = 0; i < cfg->nignored; i++)
        check(cfg->ignored[i].path && cfg->ignored[i].path[0], "bad ignored path");
    for (uint32_t i = 0; i < cfg->ninstance_groups; i++)
        check(cfg->instance_groups[i].count >= 1, "bad instance count");
    for (uint32_t i = 0; i < cfg->nwarmups; i++)
        check(cfg->warmups[i].batch_size >= 1, "bad warmup batch size");
    const struct model_dynamic_batching *db = &cfg->dynamic_batching;
    for (uint32_t i = 0; i < db->npreferred; i++)
        check(db->preferred_batch_size[i] >= 1 &&
                  db->preferred_batch_size[i] <= cfg->max_batch_size,
              "bad preferred batch size");
}

/* After a successful check: the config covers the model exactly. */
static void check_complete(const struct model_config *cfg)
{
    check(!strcmp(cfg->platform, "onnxruntime_onnx") && !strcmp(cfg->backend, "onnxruntime"),
          "platform not set");
    check(cfg->ninputs == model.ninputs && cfg->noutputs == model.noutputs,
          "tensors not completed");
    check(cfg->ninstance_groups >= 1, "no instance group");
    for (uint32_t i = 0; i < cfg->ninstance_groups; i++)
        check(cfg->instance_groups[i].name[0] &&
                  cfg->instance_groups[i].kind != MODEL_INSTANCE_AUTO,
              "instance group not normalized");
    for (int side = 0; side < 2; side++) {
        const struct model_config_io *ios = side ? cfg->outputs : cfg->inputs;
        uint32_t n = side ? cfg->noutputs : cfg->ninputs;
        for (uint32_t i = 0; i < n; i++) {
            const struct model_io *m = NULL;
            const struct model_io *mios = side ? model.outputs : model.inputs;
            for (uint32_t k = 0; k < n; k++)
                if (!strcmp(mios[k].name, ios[i].name))
                    m = &mios[k];
            check(m != NULL, "config tensor not in the model");
            check(ios[i].dtype == m->dtype && ios[i].has_dims, "dtype or dims not completed");
            uint32_t skip = cfg->max_batch_size > 0;
            const int64_t *d = ios[i].has_reshape ? ios[i].reshape : ios[i].dims;
            uint32_t nd = ios[i].has_reshape ? ios[i].reshape_ndim : ios[i].ndim;
            check(nd + skip == m->ndim, "rank differs from the model");
            for (uint32_t k = 0; k < nd; k++)
                check(m->dims[k + skip] == -1 || m->dims[k + skip] == d[k],
                      "dim differs from the model");
        }
    }
}

/* The config's JSON; checks that it parses. Caller frees b. */
static void write_json(const struct model_config *cfg, struct buf *b)
{
    struct json_writer w;
    buf_init(b, 16u << 20);
    json_w_init(&w, b);
    model_config_write_json(cfg, &w);
    check(b->err == 0 && w.depth == 0, "JSON writer failed");
    struct arena a;
    arena_init(&a, 4096, 64u << 20);
    struct json_value *v;
    const char *msg;
    size_t off;
    check(json_parse(&a, b->data, b->len, NULL, &v, &msg, &off) == ST_OK, "config JSON does not parse");
    check(v->type == JSON_OBJECT, "config JSON is not an object");
    arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct error perr, cerr;
    struct arena tree;
    struct pbtxt_value *root = NULL;

    arena_init(&tree, 16384, 32u << 20);
    enum status prc = pbtxt_parse(&tree, text, size, NULL, &root, &perr);
    if (prc == ST_OK) {
        uint32_t nodes = 0;
        check_tree(root, 0, &nodes);
        check(nodes <= PBTXT_DEFAULT_MAX_NODES, "more nodes than the limit");
    } else {
        check(perr.status == 400 || perr.status == 500, "bad pbtxt error status");
        if (perr.status == 400)
            check_position(perr.msg, data, size);
    }
    arena_free(&tree);

    struct model_config cfg;
    int crc = model_config_parse(text, size, &cfg, &cerr);
    if (crc != 0) {
        check(cerr.status == 400 || cerr.status == 500, "bad config error status");
        check(cerr.msg[0] != '\0', "config error without a message");
        if (prc != ST_OK && perr.status == 400 && size <= MODEL_CONFIG_MAX_TEXT)
            check(!strcmp(perr.msg, cerr.msg), "config and pbtxt disagree on a syntax error");
        if (cerr.status == 400 && size <= MODEL_CONFIG_MAX_TEXT &&
            strcmp(cerr.msg, "the model configuration is too large"))
            check_position(cerr.msg, data, size);
        check(cfg.ninputs == 0 && cfg.name && !cfg.name[0], "failed parse left data behind");
        model_config_free(&cfg);
        return 0;
    }
    check(prc == ST_OK, "config parsed what pbtxt rejected");
    check_strings(&cfg);

    struct buf before, after;
    write_json(&cfg, &before); /* unchecked configs are written too */
    buf_free(&before);

    if (model_config_check(&cfg, "fuzz", &model, &cerr) == 0) {
        check_strings(&cfg);
        check_complete(&cfg);
        write_json(&cfg, &before);
        check(model_config_check(&cfg, "fuzz", &model, &cerr) == 0, "second check failed");
        write_json(&cfg, &after);
        check(before.len == after.len && !memcmp(before.data, after.data, before.len),
              "check is not idempotent");
        buf_free(&before);
        buf_free(&after);
    } else {
        check(cerr.status == 400 || cerr.status == 500, "bad check error status");
        check(cerr.msg[0] != '\0', "check error without a message");
    }
    model_config_free(&cfg);
    return 0;
}
