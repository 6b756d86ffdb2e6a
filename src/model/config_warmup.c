/*
 * config_warmup: one entry of the model_warmup section of config.pbtxt
 * (ModelWarmup and its inputs); see config_parse.h for what a section
 * parser receives and returns. The warm-up itself runs in warmup.c.
 */
#include "model/config_parse.h"

#include <string.h>

/* The name of a warmup data file: a plain file name inside the model's
 * warmup/ directory, so a config cannot point the server at other files. */
static bool plain_file_name(const char *s)
{
    return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") && strcmp(s, "..");
}

static int parse_warmup_file(struct ctx *c, const struct pbtxt_field *f,
                             struct model_warmup_input *in)
{
    if (config_get_string(c, f, &in->input_data_file))
        return ST_ERROR;
    if (!plain_file_name(in->input_data_file))
        return FAIL_V(c, &f->value, "must be a file name in the model's warmup directory");
    in->source = MODEL_WARMUP_FILE;
    return 0;
}

static int parse_warmup_input(struct ctx *c, const struct pbtxt_field *f,
                              struct model_warmup_input *in)
{
    uint32_t seen = 0, sources = 0;
    bool flag;
    if (config_want_message(c, f))
        return ST_ERROR;
    in->input_data_file = config_empty_string;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "data_type")) {
            rc = config_once(c, e, &seen, 1) || config_get_dtype(c, e, &in->dtype);
        } else if (!strcmp(e->name, "dims")) {
            rc = config_add_dim(c, e, false, in->dims, &in->ndim);
        } else if (!strcmp(e->name, "zero_data") || !strcmp(e->name, "random_data") ||
                   !strcmp(e->name, "input_data_file")) {
            if (sources++)
                rc = FAIL_F(c, e,
                            "only one of zero_data, random_data and input_data_file may be set");
            else if (e->in_list)
                rc = FAIL_F(c, e, "not a repeated field: list syntax is not allowed");
            else if (!strcmp(e->name, "input_data_file"))
                rc = parse_warmup_file(c, e, in);
            else /* the value is not checked: setting the field selects it */
                rc = config_get_bool(c, e, &flag);
            if (!rc && !strcmp(e->name, "zero_data"))
                in->source = MODEL_WARMUP_ZERO;
            else if (!rc && !strcmp(e->name, "random_data"))
                in->source = MODEL_WARMUP_RANDOM;
        } else {
            rc = config_unknown(c, e, "ModelWarmup.Input");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (in->dtype == DT_INVALID)
        return FAIL_V(c, &f->value, "must specify 'data_type'");
    if (!sources)
        return FAIL_V(c, &f->value, "must set one of zero_data, random_data and input_data_file");
    return 0;
}

enum warmup_bits { WU_NAME = 1, WU_BATCH = 2, WU_COUNT = 4 };

int config_parse_warmup(struct ctx *c, const struct pbtxt_field *f, struct model_warmup *w)
{
    uint32_t seen = 0, n;
    uint64_t batch = 0, count = 0;
    const struct pbtxt_field *batch_field = NULL;

    if (config_want_message(c, f) || config_check_entries(c, &f->value, "inputs", &n))
        return ST_ERROR;
    w->name = config_empty_string;
    w->inputs = config_calloc(c, n, sizeof *w->inputs);
    if (!w->inputs)
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "name")) {
            rc = config_once(c, e, &seen, WU_NAME) || config_get_string(c, e, &w->name);
        } else if (!strcmp(e->name, "batch_size")) {
            batch_field = e;
            rc = config_once(c, e, &seen, WU_BATCH) ||
                 config_get_u64(c, e, UINT32_MAX, "a positive batch size", &batch);
        } else if (!strcmp(e->name, "count")) {
            rc = config_once(c, e, &seen, WU_COUNT) ||
                 config_get_u64(c, e, UINT32_MAX, "a non-negative 32-bit integer", &count);
        } else if (!strcmp(e->name, "inputs")) {
            const struct pbtxt_field *key, *value;
            char *name;
            size_t before = c->plen;
            config_path_index(c, w->ninputs);
            rc = config_map_entry(c, e, &key, &value) || config_map_string_key(c, key, &name);
            if (!rc) {
                c->plen = before; /* from here on the key names the entry */
                c->path[before] = '\0';
                config_path_key(c, name);
                struct model_warmup_input *in = NULL;
                for (uint32_t i = 0; i < w->ninputs; i++)
                    if (!strcmp(w->inputs[i].name, name))
                        in = &w->inputs[i]; /* the last entry wins */
                if (!in)
                    in = &w->inputs[w->ninputs++];
                memset(in, 0, sizeof *in);
                in->name = name;
                if (!value)
                    rc = FAIL_V(c, &e->value, "map entry without a value");
                else
                    rc = parse_warmup_input(c, value, in);
            }
        } else {
            rc = config_unknown(c, e, "ModelWarmup");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    uint64_t max = c->cfg->max_batch_size > 0 ? (uint64_t)c->cfg->max_batch_size : 1;
    if (batch < 1 || batch > max) {
        struct mark m = config_path_push(c, "batch_size");
        config_fail_at(c, batch_field ? batch_field->value.line : f->value.line,
                       batch_field ? batch_field->value.col : f->value.col,
                       "must be in [1, %llu] (max_batch_size %d)", (unsigned long long)max,
                       c->cfg->max_batch_size);
        config_path_pop(c, m);
        return ST_ERROR;
    }
    w->batch_size = (uint32_t)batch;
    w->count = (uint32_t)count;
    return 0;
}
