/*
 * config_json: the JSON forms of a model configuration (see config.h,
 * "JSON"), both in the protobuf JSON mapping:
 *
 * - model_config_write_json: the effective configuration as GET
 *   /v2/models/{m}/config returns it.
 * - model_config_text_from_json: what Triton's load API takes in
 *   parameters.config, turned into protobuf text format, so that one
 *   parser and one checker serve both. Objects are messages, arrays are
 *   repeated fields, enum values are strings (the config parser accepts
 *   enum names quoted), and 64-bit integers may be written as decimal
 *   strings.
 */
#include "base/status.h"
#include "model/config.h"

#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/mem.h"

static bool is_integer_text(const char *s, size_t n)
{
    size_t i = (n > 0 && s[0] == '-') ? 1 : 0;
    if (i == n || n - i > 20)
        return false;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static void put_string(struct buf *b, const char *s, size_t n)
{
    buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            buf_printf(b, "\\%03o", c);
        else
            buf_putc(b, (char)c);
    }
    buf_putc(b, '"');
}

/* Fields whose values are strings even when they look like numbers; any
 * other string of digits is a 64-bit integer in the protobuf JSON mapping
 * (e.g. "dims": ["16"]). */
static bool string_field(const char *key)
{
    static const char *const names[] = {"name", "key", "string_value", "platform", "backend",
                                        "label_filename", "input_data_file",
                                        "default_model_filename"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(key, names[i]) == 0)
            return true;
    return false;
}

static void put_scalar(struct buf *b, const char *key, const struct json_value *v)
{
    switch (v->type) {
    case JSON_TRUE: buf_puts(b, "true"); break;
    case JSON_FALSE: buf_puts(b, "false"); break;
    case JSON_NUMBER: buf_append(b, v->u.num, v->len); break;
    case JSON_STRING:
        if (!string_field(key) && is_integer_text(v->u.str, v->len))
            buf_append(b, v->u.str, v->len);
        else
            put_string(b, v->u.str, v->len);
        break;
    default: break;
    }
}

static int put_message(struct buf *b, const struct json_value *obj, int depth, struct error *err);

static int put_field(struct buf *b, const char *key, const struct json_value *v, int depth,
                     struct error *err)
{
    switch (v->type) {
    case JSON_NULL:
        return 0; /* protobuf JSON: null = field not set */
    case JSON_OBJECT:
        buf_printf(b, "%s { ", key);
        if (put_message(b, v, depth + 1, err) != 0)
            return ST_ERROR;
        buf_puts(b, "} ");
        return 0;
    case JSON_ARRAY:
        for (uint32_t i = 0; i < v->len; i++) {
            const struct json_value *item = &v->u.items[i];
            if (item->type == JSON_ARRAY)
                return error_set(err, 400, "config: '%s' holds nested arrays", key);
            if (item->type == JSON_OBJECT) {
                if (put_field(b, key, item, depth, err) != 0)
                    return ST_ERROR;
                continue;
            }
            buf_printf(b, "%s: ", key);
            put_scalar(b, key, item);
            buf_putc(b, ' ');
        }
        return 0;
    default:
        buf_printf(b, "%s: ", key);
        put_scalar(b, key, v);
        buf_putc(b, ' ');
        return 0;
    }
}

static int put_message(struct buf *b, const struct json_value *obj, int depth, struct error *err)
{
    if (depth > 32)
        return error_set(err, 400, "config: nested too deeply");
    for (uint32_t i = 0; i < obj->len; i++) {
        const struct json_member *m = &obj->u.members[i];
        if (strlen(m->key) != m->key_len || !m->key_len)
            return error_set(err, 400, "config: invalid field name");
        for (const char *k = m->key; *k; k++)
            if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
                  (*k >= '0' && *k <= '9') || *k == '_'))
                return error_set(err, 400, "config: invalid field name '%s'", m->key);
        /* Maps (parameters, warm-up inputs) are objects keyed by name in
         * JSON and repeated {key, value} entries in text format. */
        bool map = (strcmp(m->key, "parameters") == 0 || strcmp(m->key, "inputs") == 0) &&
                   m->value.type == JSON_OBJECT;
        if (!map) {
            if (put_field(b, m->key, &m->value, depth, err) != 0)
                return ST_ERROR;
            continue;
        }
        for (uint32_t j = 0; j < m->value.len; j++) {
            const struct json_member *e = &m->value.u.members[j];
            buf_printf(b, "%s { key: ", m->key);
            put_string(b, e->key, e->key_len);
            buf_puts(b, " ");
            if (put_field(b, "value", &e->value, depth + 1, err) != 0)
                return ST_ERROR;
            buf_puts(b, "} ");
        }
    }
    return 0;
}

int model_config_text_from_json(const char *json, size_t len, char **text, struct error *err)
{
    struct arena a;
    arena_init(&a, 4096, (size_t)MODEL_CONFIG_MAX_TEXT * 16);
    struct buf b;
    buf_init(&b, MODEL_CONFIG_MAX_TEXT);
    struct json_value *root;
    const char *msg;
    size_t off;
    int rc = ST_ERROR;
    *text = NULL;
    if (json_parse(&a, json, len, NULL, &root, &msg, &off) != 0) {
        error_set(err, 400, "config: malformed JSON at byte %zu: %s", off, msg);
        goto out;
    }
    if (root->type != JSON_OBJECT) {
        error_set(err, 400, "config: must be a JSON object");
        goto out;
    }
    if (put_message(&b, root, 0, err) != 0)
        goto out;
    buf_putc(&b, '\0');
    if (b.err) {
        error_set(err, 400, "config: larger than %u bytes", MODEL_CONFIG_MAX_TEXT);
        goto out;
    }
    *text = b.data;
    b.data = NULL;
    rc = 0;
out:
    buf_free(&b);
    arena_free(&a);
    return rc;
}

/* ---- the effective configuration as JSON ---- */

static void write_dims(struct json_writer *w, const char *key, const int64_t *dims, uint32_t ndim)
{
    json_w_key(w, key);
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < ndim; i++)
        json_w_int(w, dims[i]);
    json_w_arr_end(w);
}

static void write_io(struct json_writer *w, const struct model_config_io *io, bool input)
{
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, io->name);
    json_w_key(w, "data_type");
    json_w_cstr(w, dtype_config_name(io->dtype));
    if (input) {
        json_w_key(w, "format");
        json_w_cstr(w, model_io_format_name(io->format));
    }
    write_dims(w, "dims", io->dims, io->ndim);
    if (io->has_reshape) {
        json_w_key(w, "reshape");
        json_w_obj_begin(w);
        write_dims(w, "shape", io->reshape, io->reshape_ndim);
        json_w_obj_end(w);
    }
    if (!input) {
        json_w_key(w, "label_filename");
        json_w_cstr(w, io->label_filename);
    }
    json_w_key(w, "is_shape_tensor");
    json_w_bool(w, false);
    if (input) {
        json_w_key(w, "allow_ragged_batch");
        json_w_bool(w, false);
        json_w_key(w, "optional");
        json_w_bool(w, io->optional);
    }
    json_w_key(w, "is_non_linear_format_io");
    json_w_bool(w, false);
    json_w_obj_end(w);
}

static void write_queue_policy(struct json_writer *w, const struct model_queue_policy *qp)
{
    json_w_obj_begin(w);
    json_w_key(w, "timeout_action");
    json_w_cstr(w, model_timeout_action_name(qp->timeout_action));
    json_w_key(w, "default_timeout_microseconds");
    json_w_uint(w, qp->default_timeout_us);
    json_w_key(w, "allow_timeout_override");
    json_w_bool(w, qp->allow_timeout_override);
    json_w_key(w, "max_queue_size");
    json_w_uint(w, qp->max_queue_size);
    json_w_obj_end(w);
}

static void write_seq_control(struct json_writer *w, const struct model_seq_control *ctl)
{
    bool corrid = ctl->kind == MODEL_SEQ_CORRID;
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, ctl->input);
    json_w_key(w, "control");
    json_w_arr_begin(w);
    json_w_obj_begin(w);
    json_w_key(w, "kind");
    json_w_cstr(w, model_seq_control_name(ctl->kind));
    json_w_key(w, "int32_false_true");
    json_w_arr_begin(w);
    for (int i = 0; i < 2 && !corrid && ctl->dtype == DT_INT32; i++)
        json_w_int(w, ctl->int32_false_true[i]);
    json_w_arr_end(w);
    json_w_key(w, "fp32_false_true");
    json_w_arr_begin(w);
    for (int i = 0; i < 2 && !corrid && ctl->dtype == DT_FP32; i++)
        json_w_f32(w, ctl->fp32_false_true[i]);
    json_w_arr_end(w);
    json_w_key(w, "bool_false_true");
    json_w_arr_begin(w);
    for (int i = 0; i < 2 && !corrid && ctl->dtype == DT_BOOL; i++)
        json_w_bool(w, ctl->bool_false_true[i]);
    json_w_arr_end(w);
    json_w_key(w, "data_type");
    json_w_cstr(w, corrid ? dtype_config_name(ctl->dtype) : "TYPE_INVALID");
    json_w_obj_end(w);
    json_w_arr_end(w);
    json_w_obj_end(w);
}

static void write_seq_state(struct json_writer *w, const struct model_seq_state *st)
{
    json_w_obj_begin(w);
    json_w_key(w, "input_name");
    json_w_cstr(w, st->input_name);
    json_w_key(w, "output_name");
    json_w_cstr(w, st->output_name);
    json_w_key(w, "data_type");
    json_w_cstr(w, dtype_config_name(st->dtype));
    write_dims(w, "dims", st->dims, st->ndim);
    json_w_key(w, "initial_state");
    json_w_arr_begin(w);
    json_w_obj_begin(w);
    json_w_key(w, "data_type");
    json_w_cstr(w, dtype_config_name(st->dtype));
    write_dims(w, "dims", st->dims, st->ndim);
    json_w_key(w, "zero_data");
    json_w_bool(w, true);
    json_w_key(w, "name");
    json_w_cstr(w, "");
    json_w_obj_end(w);
    json_w_arr_end(w);
    json_w_key(w, "use_same_buffer_for_input_output");
    json_w_bool(w, false);
    json_w_key(w, "use_growable_memory");
    json_w_bool(w, false);
    json_w_obj_end(w);
}

static void write_sequence_batching(struct json_writer *w,
                                    const struct model_sequence_batching *sb)
{
    json_w_key(w, "sequence_batching");
    json_w_obj_begin(w);
    json_w_key(w, "max_sequence_idle_microseconds");
    json_w_uint(w, sb->max_sequence_idle_us);
    json_w_key(w, "control_input");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < sb->ncontrols; i++)
        write_seq_control(w, &sb->controls[i]);
    json_w_arr_end(w);
    json_w_key(w, "state");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < sb->nstates; i++)
        write_seq_state(w, &sb->states[i]);
    json_w_arr_end(w);
    json_w_key(w, "iterative_sequence");
    json_w_bool(w, false);
    json_w_key(w, sb->oldest ? "oldest" : "direct");
    json_w_obj_begin(w);
    if (sb->oldest) {
        json_w_key(w, "max_candidate_sequences");
        json_w_uint(w, sb->max_candidate_sequences);
        json_w_key(w, "preferred_batch_size");
        json_w_arr_begin(w);
        for (uint32_t i = 0; i < sb->npreferred; i++)
            json_w_int(w, sb->preferred_batch_size[i]);
        json_w_arr_end(w);
    }
    json_w_key(w, "max_queue_delay_microseconds");
    json_w_uint(w, sb->max_queue_delay_us);
    json_w_obj_end(w);
    json_w_obj_end(w);
}

static void write_map(struct json_writer *w, const char *key, const struct model_map_entry *map,
                      uint32_t n)
{
    json_w_key(w, key);
    json_w_obj_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        json_w_key(w, map[i].key);
        json_w_cstr(w, map[i].value);
    }
    json_w_obj_end(w);
}

static void write_ensemble(struct json_writer *w, const struct model_ensemble *en)
{
    json_w_key(w, "ensemble_scheduling");
    json_w_obj_begin(w);
    json_w_key(w, "step");
    json_w_arr_begin(w);
    for (uint32_t s = 0; s < en->nsteps; s++) {
        const struct model_ensemble_step *st = &en->steps[s];
        json_w_obj_begin(w);
        json_w_key(w, "model_name");
        json_w_cstr(w, st->model_name);
        json_w_key(w, "model_version");
        json_w_int(w, st->model_version);
        write_map(w, "input_map", st->input_map, st->ninputs);
        write_map(w, "output_map", st->output_map, st->noutputs);
        json_w_key(w, "model_namespace");
        json_w_cstr(w, "");
        json_w_obj_end(w);
    }
    json_w_arr_end(w);
    json_w_obj_end(w);
}

static void write_dynamic_batching(struct json_writer *w, const struct model_dynamic_batching *db)
{
    char key[24];
    json_w_key(w, "dynamic_batching");
    json_w_obj_begin(w);
    json_w_key(w, "preferred_batch_size");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < db->npreferred; i++)
        json_w_int(w, db->preferred_batch_size[i]);
    json_w_arr_end(w);
    json_w_key(w, "max_queue_delay_microseconds");
    json_w_uint(w, db->max_queue_delay_us);
    json_w_key(w, "preserve_ordering");
    json_w_bool(w, db->preserve_ordering);
    json_w_key(w, "priority_levels");
    json_w_uint(w, db->priority_levels);
    json_w_key(w, "default_priority_level");
    json_w_uint(w, db->default_priority_level);
    json_w_key(w, "default_queue_policy");
    write_queue_policy(w, &db->default_queue_policy);
    /* Map keys are strings in JSON, as protobuf writes them. */
    json_w_key(w, "priority_queue_policy");
    json_w_obj_begin(w);
    for (uint32_t i = 0; i < db->npriority_policies; i++) {
        snprintf(key, sizeof key, "%llu", (unsigned long long)db->priority_queue_policy[i].level);
        json_w_key(w, key);
        write_queue_policy(w, &db->priority_queue_policy[i].policy);
    }
    json_w_obj_end(w);
    json_w_obj_end(w);
}

static void write_version_policy(struct json_writer *w, const struct model_version_policy *vp)
{
    json_w_key(w, "version_policy");
    json_w_obj_begin(w);
    switch (vp->kind) {
    case MODEL_VERSIONS_LATEST:
        json_w_key(w, "latest");
        json_w_obj_begin(w);
        json_w_key(w, "num_versions");
        json_w_uint(w, vp->num_versions);
        json_w_obj_end(w);
        break;
    case MODEL_VERSIONS_ALL:
        json_w_key(w, "all");
        json_w_obj_begin(w);
        json_w_obj_end(w);
        break;
    case MODEL_VERSIONS_SPECIFIC:
        json_w_key(w, "specific");
        json_w_obj_begin(w);
        write_dims(w, "versions", vp->versions, vp->nversions);
        json_w_obj_end(w);
        break;
    }
    json_w_obj_end(w);
}

static void write_instance_group(struct json_writer *w, const struct model_instance_group *g)
{
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, g->name);
    json_w_key(w, "kind");
    json_w_cstr(w, g->kind == MODEL_INSTANCE_MODEL ? "KIND_MODEL"
                   : g->kind == MODEL_INSTANCE_CPU ? "KIND_CPU"
                                                   : "KIND_AUTO");
    json_w_key(w, "count");
    json_w_int(w, g->count);
    json_w_key(w, "gpus");
    json_w_arr_begin(w);
    json_w_arr_end(w);
    json_w_key(w, "secondary_devices");
    json_w_arr_begin(w);
    json_w_arr_end(w);
    json_w_key(w, "profile");
    json_w_arr_begin(w);
    json_w_arr_end(w);
    json_w_key(w, "passive");
    json_w_bool(w, false);
    json_w_key(w, "host_policy");
    json_w_cstr(w, "");
    json_w_obj_end(w);
}

static void write_warmup(struct json_writer *w, const struct model_warmup *wu)
{
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, wu->name);
    json_w_key(w, "batch_size");
    json_w_uint(w, wu->batch_size);
    json_w_key(w, "inputs");
    json_w_obj_begin(w);
    for (uint32_t i = 0; i < wu->ninputs; i++) {
        const struct model_warmup_input *in = &wu->inputs[i];
        json_w_key(w, in->name);
        json_w_obj_begin(w);
        json_w_key(w, "data_type");
        json_w_cstr(w, dtype_config_name(in->dtype));
        write_dims(w, "dims", in->dims, in->ndim);
        switch (in->source) {
        case MODEL_WARMUP_ZERO:
            json_w_key(w, "zero_data");
            json_w_bool(w, true);
            break;
        case MODEL_WARMUP_RANDOM:
            json_w_key(w, "random_data");
            json_w_bool(w, true);
            break;
        case MODEL_WARMUP_FILE:
            json_w_key(w, "input_data_file");
            json_w_cstr(w, in->input_data_file);
            break;
        }
        json_w_obj_end(w);
    }
    json_w_obj_end(w);
    json_w_key(w, "count");
    json_w_uint(w, wu->count);
    json_w_obj_end(w);
}

void model_config_write_json(const struct model_config *cfg, struct json_writer *w)
{
    json_w_obj_begin(w);
    json_w_key(w, "name");
    json_w_cstr(w, cfg->name);
    json_w_key(w, "platform");
    json_w_cstr(w, cfg->platform);
    json_w_key(w, "backend");
    json_w_cstr(w, cfg->backend);
    json_w_key(w, "runtime");
    json_w_cstr(w, "");
    write_version_policy(w, &cfg->version_policy);
    json_w_key(w, "max_batch_size");
    json_w_int(w, cfg->max_batch_size);
    json_w_key(w, "input");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < cfg->ninputs; i++)
        write_io(w, &cfg->inputs[i], true);
    json_w_arr_end(w);
    json_w_key(w, "output");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < cfg->noutputs; i++)
        write_io(w, &cfg->outputs[i], false);
    json_w_arr_end(w);
    json_w_key(w, "batch_input");
    json_w_arr_begin(w);
    json_w_arr_end(w);
    json_w_key(w, "batch_output");
    json_w_arr_begin(w);
    json_w_arr_end(w);
    if (cfg->dynamic_batching.enabled)
        write_dynamic_batching(w, &cfg->dynamic_batching);
    if (cfg->sequence_batching.enabled)
        write_sequence_batching(w, &cfg->sequence_batching);
    if (cfg->ensemble.enabled)
        write_ensemble(w, &cfg->ensemble);
    json_w_key(w, "model_transaction_policy");
    json_w_obj_begin(w);
    json_w_key(w, "decoupled");
    json_w_bool(w, cfg->decoupled);
    json_w_obj_end(w);
    json_w_key(w, "instance_group");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < cfg->ninstance_groups; i++)
        write_instance_group(w, &cfg->instance_groups[i]);
    json_w_arr_end(w);
    json_w_key(w, "default_model_filename");
    json_w_cstr(w, "model.onnx");
    json_w_key(w, "cc_model_filenames");
    json_w_obj_begin(w);
    json_w_obj_end(w);
    json_w_key(w, "metric_tags");
    json_w_obj_begin(w);
    json_w_obj_end(w);
    json_w_key(w, "parameters");
    json_w_obj_begin(w);
    for (uint32_t i = 0; i < cfg->nparameters; i++) {
        json_w_key(w, cfg->parameters[i].key);
        json_w_obj_begin(w);
        json_w_key(w, "string_value");
        json_w_cstr(w, cfg->parameters[i].string_value);
        json_w_obj_end(w);
    }
    json_w_obj_end(w);
    json_w_key(w, "model_warmup");
    json_w_arr_begin(w);
    for (uint32_t i = 0; i < cfg->nwarmups; i++)
        write_warmup(w, &cfg->warmups[i]);
    json_w_arr_end(w);
    json_w_obj_end(w);
}
