/*
 * config_check: a parsed configuration checked against the model's own
 * inputs and outputs and completed in place (model_config_check), or
 * derived from them alone (model_config_from_onnx); see config.h,
 * "Checking and completing".
 */
#include "base/status.h"
#include "model/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"

static char empty_string[] = "";
static char onnx_platform[] = "onnxruntime_onnx";
static char onnx_backend[] = "onnxruntime";

/* The config being completed and where its errors go. */
struct ctx {
    struct model_config *cfg;
    struct error *err;
};

static void *cfg_calloc(struct ctx *c, size_t count, size_t size)
{
    return model_config_alloc(c->cfg, count, size, c->err);
}

static char *cfg_strdup(struct ctx *c, const char *s, size_t n)
{
    return model_config_strndup(c->cfg, s, n, c->err);
}

/* Whether a configured tensor gives dims (which say whether it has a batch
 * dimension). */
static bool any_dims(const struct model_config_io *ios, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ios[i].has_dims)
            return true;
    return false;
}

static bool onnx_batchable(const struct model_info *onnx)
{
    /* A request's batch size is read from its inputs. */
    if (onnx->ninputs == 0)
        return false;
    for (uint32_t i = 0; i < onnx->ninputs; i++)
        if (onnx->inputs[i].ndim == 0 || onnx->inputs[i].dims[0] != -1)
            return false;
    for (uint32_t i = 0; i < onnx->noutputs; i++)
        if (onnx->outputs[i].ndim == 0 || onnx->outputs[i].dims[0] != -1)
            return false;
    return true;
}

static int find_io(const struct model_io *ios, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(ios[i].name, name))
            return (int)i;
    return NOT_FOUND;
}

/* The ONNX shape as the config sees it (batch dimension removed). */
static void model_view(const struct model_io *mio, int32_t max_batch, const int64_t **dims,
                       uint32_t *ndim)
{
    uint32_t skip = max_batch > 0 ? 1 : 0;
    *dims = mio->dims + skip;
    *ndim = mio->ndim - skip;
}

/* Whether config dims c fit model dims m (-1 in m takes any size). */
static bool dims_fit(const int64_t *c, uint32_t cn, const int64_t *m, uint32_t mn)
{
    if (cn != mn)
        return false;
    for (uint32_t i = 0; i < cn; i++)
        if (m[i] != -1 && c[i] != m[i])
            return false;
    return true;
}

/* The error for config dims (or reshape) cdims that do not fit the model's
 * shape. With max_batch_size > 0 the model sees them behind the batch
 * dimension, so that is the shape shown beside the model's; the two usual
 * mistakes, the batch dimension written into dims or left out of them, are
 * named with their fix. */
static int shape_mismatch(const struct model_config *cfg, const struct model_config_io *io,
                          const struct model_io *mio, const char *what, struct error *err)
{
    const char *field = io->has_reshape ? "reshape" : "dims";
    const int64_t *cdims = io->has_reshape ? io->reshape : io->dims;
    uint32_t cndim = io->has_reshape ? io->reshape_ndim : io->ndim;
    char conf[128], model[128];
    shape_format(cdims, cndim, conf, sizeof conf);
    shape_format(mio->dims, mio->ndim, model, sizeof model);
    if (cfg->max_batch_size <= 0) {
        if (mio->ndim > 0 && mio->dims[0] == -1 &&
            dims_fit(cdims, cndim, mio->dims + 1, mio->ndim - 1))
            return error_set(err, 400,
                             "%s '%s': config %s %s do not match the model's shape %s: with "
                             "max_batch_size 0, %s include the model's first (batch) dimension "
                             "(%s: %s), or set max_batch_size > 0 to batch requests",
                             what, io->name, field, conf, model, field, field, model);
        return error_set(err, 400, "%s '%s': config %s %s do not match the model's shape %s", what,
                         io->name, field, conf, model);
    }
    int64_t batched[TENSOR_MAX_DIMS];
    batched[0] = -1;
    memcpy(batched + 1, cdims, sizeof *cdims * cndim);
    char with_batch[128];
    shape_format(batched, cndim + 1, with_batch, sizeof with_batch);
    if (cndim > 0 && dims_fit(cdims, cndim, mio->dims, mio->ndim)) {
        /* What to write instead; a model tensor of shape [-1] is a scalar
         * per batch row, which config.pbtxt spells as an empty reshape. */
        char rest[128], fix[160];
        shape_format(cdims + 1, cndim - 1, rest, sizeof rest);
        if (cndim > 1)
            snprintf(fix, sizeof fix, "%s: %s", field, rest);
        else
            snprintf(fix, sizeof fix, "%sreshape: { shape: [ ] }",
                     io->has_reshape ? "" : "dims: [1] with ");
        return error_set(err, 400,
                         "%s '%s': config %s %s plus the batch dimension make %s, the model's "
                         "shape is %s: leave the batch dimension out of %s when max_batch_size "
                         "> 0 (%s)",
                         what, io->name, field, conf, with_batch, model, field, fix);
    }
    return error_set(err, 400,
                     "%s '%s': config %s %s plus the batch dimension make %s, which does not "
                     "match the model's shape %s",
                     what, io->name, field, conf, with_batch, model);
}

static int check_io(struct model_config *cfg, struct model_config_io *io,
                    const struct model_io *mio, bool input, struct error *err)
{
    const char *what = input ? "input" : "output";
    const int64_t *mdims;
    uint32_t mndim;

    model_view(mio, cfg->max_batch_size, &mdims, &mndim);
    if (io->dtype == DT_INVALID)
        io->dtype = mio->dtype;
    else if (io->dtype != mio->dtype)
        return error_set(err, 400, "%s '%s': config data_type %s does not match the model's %s",
                         what, io->name, dtype_config_name(io->dtype),
                         dtype_config_name(mio->dtype));
    if (!io->has_dims) {
        io->has_dims = true;
        io->ndim = mndim;
        memcpy(io->dims, mdims, sizeof *mdims * mndim);
    }
    if (cfg->max_batch_size > 0 &&
        (io->ndim >= TENSOR_MAX_DIMS || (io->has_reshape && io->reshape_ndim >= TENSOR_MAX_DIMS)))
        return error_set(err, 400, "%s '%s': %s with the batch dimension exceed %d dimensions",
                         what, io->name, io->ndim >= TENSOR_MAX_DIMS ? "dims" : "reshape",
                         TENSOR_MAX_DIMS);
    /* What the model itself receives: reshape when present, else dims. */
    if (io->has_reshape ? !dims_fit(io->reshape, io->reshape_ndim, mdims, mndim)
                        : !dims_fit(io->dims, io->ndim, mdims, mndim))
        return shape_mismatch(cfg, io, mio, what, err);
    return 0;
}

static int config_index(const struct model_config *cfg, bool input, const char *name)
{
    return input ? model_config_input_index(cfg, name) : model_config_output_index(cfg, name);
}

bool model_config_sequence_input(const struct model_config *cfg, const char *name)
{
    const struct model_sequence_batching *sb = &cfg->sequence_batching;
    for (uint32_t i = 0; sb->enabled && i < sb->ncontrols; i++)
        if (!strcmp(sb->controls[i].input, name))
            return true;
    for (uint32_t i = 0; sb->enabled && i < sb->nstates; i++)
        if (!strcmp(sb->states[i].input_name, name))
            return true;
    return false;
}

bool model_config_sequence_output(const struct model_config *cfg, const char *name)
{
    const struct model_sequence_batching *sb = &cfg->sequence_batching;
    for (uint32_t i = 0; sb->enabled && i < sb->nstates; i++)
        if (!strcmp(sb->states[i].output_name, name))
            return true;
    return false;
}

static bool sequence_tensor(const struct model_config *cfg, bool input, const char *name)
{
    return input ? model_config_sequence_input(cfg, name) : model_config_sequence_output(cfg, name);
}

/* The model tensor `name` for a sequence_batching field: it must exist
 * with `dtype` (DT_INVALID: any) and not be a config input or output. */
static int check_sequence_tensor(const struct model_config *cfg, const struct model_info *onnx,
                                 bool input, const char *name, enum dtype dtype,
                                 const char *field, struct error *err)
{
    const struct model_io *mios = input ? onnx->inputs : onnx->outputs;
    uint32_t mn = input ? onnx->ninputs : onnx->noutputs;
    const char *what = input ? "input" : "output";
    char names[160];
    int k = find_io(mios, mn, name);
    if (k < 0) {
        model_io_list(mios, mn, names, sizeof names);
        return error_set(err, 400, "sequence_batching: %s '%s': the model has no %s of that "
                                   "name (its %ss: %s)",
                         field, name, what, what, names);
    }
    if (config_index(cfg, input, name) >= 0)
        return error_set(err, 400,
                         "sequence_batching: %s '%s' is fed by the server; it cannot also be a "
                         "model %s in the config",
                         field, name, what);
    if (dtype != DT_INVALID && mios[k].dtype != dtype)
        return error_set(err, 400,
                         "sequence_batching: %s '%s' is %s in the model, the config says %s",
                         field, name, dtype_config_name(mios[k].dtype), dtype_config_name(dtype));
    return 0;
}

static int check_sequence_batching(const struct model_config *cfg, const struct model_info *onnx,
                                   struct error *err)
{
    const struct model_sequence_batching *sb = &cfg->sequence_batching;
    if (!sb->enabled)
        return 0;
    if (model_config_plugin_backend(cfg))
        return error_set(err, 400, "sequence_batching: not supported with backend '%s' (inferd "
                                   "runs stateful ONNX models, with implicit state)",
                         cfg->backend);
    if (cfg->decoupled)
        return error_set(err, 400,
                         "sequence_batching: not supported for decoupled models");
    for (uint32_t i = 0; i < sb->ncontrols; i++)
        if (check_sequence_tensor(cfg, onnx, true, sb->controls[i].input, sb->controls[i].dtype,
                                  "control input", err))
            return ST_ERROR;
    for (uint32_t i = 0; i < sb->nstates; i++) {
        const struct model_seq_state *st = &sb->states[i];
        if (check_sequence_tensor(cfg, onnx, true, st->input_name, st->dtype, "state input",
                                  err) ||
            check_sequence_tensor(cfg, onnx, false, st->output_name, st->dtype, "state output",
                                  err))
            return ST_ERROR;
    }
    return 0;
}

static int check_ios(struct ctx *c, bool input, const struct model_info *onnx)
{
    struct model_config *cfg = c->cfg;
    struct model_config_io **ios = input ? &cfg->inputs : &cfg->outputs;
    uint32_t *n = input ? &cfg->ninputs : &cfg->noutputs;
    const struct model_io *mios = input ? onnx->inputs : onnx->outputs;
    uint32_t mn = input ? onnx->ninputs : onnx->noutputs;
    const char *what = input ? "input" : "output";
    char names[160];

    for (uint32_t i = 0; i < *n; i++) {
        struct model_config_io *io = &(*ios)[i];
        int k = find_io(mios, mn, io->name);
        if (k < 0) {
            model_io_list(mios, mn, names, sizeof names);
            return error_set(c->err, 400, "%s '%s': the model has no %s of that name (its %ss: %s)",
                             what, io->name, what, what, names);
        }
        if (check_io(cfg, io, &mios[k], input, c->err))
            return ST_ERROR;
    }

    /* Autocomplete: the model's tensors the config does not mention, but
     * for sequence_batching's control and state tensors (the server's). */
    uint32_t missing = 0;
    for (uint32_t k = 0; k < mn; k++)
        missing += config_index(cfg, input, mios[k].name) < 0 &&
                   !sequence_tensor(cfg, input, mios[k].name);
    if (missing == 0)
        return 0;
    for (uint32_t k = 0; k < mn && model_config_plugin_backend(cfg); k++)
        if (config_index(cfg, input, mios[k].name) < 0)
            return error_set(c->err, 400,
                             "%s '%s': backend '%s' reports it, but config.pbtxt does not list it",
                             what, mios[k].name, cfg->backend);
    struct model_config_io *all = cfg_calloc(c, *n + missing, sizeof *all);
    if (!all)
        return ST_ERROR;
    if (*n)
        memcpy(all, *ios, sizeof *all * *n);
    uint32_t count = *n;
    for (uint32_t k = 0; k < mn; k++) {
        if (config_index(cfg, input, mios[k].name) >= 0 || sequence_tensor(cfg, input, mios[k].name))
            continue;
        struct model_config_io *io = &all[count++];
        io->name = cfg_strdup(c, mios[k].name, strlen(mios[k].name));
        if (!io->name)
            return ST_ERROR;
        io->dtype = DT_INVALID;
        io->label_filename = empty_string;
        io->autocompleted = true;
        if (check_io(cfg, io, &mios[k], input, c->err))
            return ST_ERROR;
    }
    *ios = all;
    *n = count;
    return 0;
}

static int check_warmups(struct ctx *c)
{
    struct model_config *cfg = c->cfg;
    char a[128], b[128];

    for (uint32_t w = 0; w < cfg->nwarmups; w++) {
        const struct model_warmup *wu = &cfg->warmups[w];
        for (uint32_t i = 0; i < wu->ninputs; i++) {
            const struct model_warmup_input *in = &wu->inputs[i];
            int k = model_config_input_index(cfg, in->name);
            if (k < 0 && model_config_sequence_input(cfg, in->name))
                continue; /* a control or state input: checked against the model at warm-up */
            if (k < 0)
                return error_set(c->err, 400, "model_warmup[%u] '%s': the model has no input '%s'",
                                 w, wu->name, in->name);
            const struct model_config_io *io = &cfg->inputs[k];
            if (in->dtype != io->dtype)
                return error_set(c->err, 400,
                                 "model_warmup[%u] '%s': input '%s' has data_type %s, the model %s",
                                 w, wu->name, in->name, dtype_config_name(in->dtype),
                                 dtype_config_name(io->dtype));
            bool ok = in->ndim == io->ndim;
            for (uint32_t d = 0; ok && d < in->ndim; d++)
                ok = io->dims[d] == -1 || io->dims[d] == in->dims[d];
            if (!ok) {
                shape_format(in->dims, in->ndim, a, sizeof a);
                shape_format(io->dims, io->ndim, b, sizeof b);
                return error_set(c->err, 400,
                                 "model_warmup[%u] '%s': input '%s' has dims %s, the model %s", w,
                                 wu->name, in->name, a, b);
            }
        }
        for (uint32_t k = 0; k < cfg->ninputs; k++) {
            bool found = false;
            for (uint32_t i = 0; i < wu->ninputs && !found; i++)
                found = !strcmp(wu->inputs[i].name, cfg->inputs[k].name);
            if (!found && !cfg->inputs[k].optional)
                return error_set(c->err, 400, "model_warmup[%u] '%s': input '%s' is missing", w,
                                 wu->name, cfg->inputs[k].name);
        }
    }
    return 0;
}

static int check_groups(struct ctx *c, const char *model_name)
{
    struct model_config *cfg = c->cfg;
    char name[256];

    if (cfg->ninstance_groups == 0) {
        cfg->instance_groups = cfg_calloc(c, 1, sizeof *cfg->instance_groups);
        if (!cfg->instance_groups)
            return ST_ERROR;
        cfg->instance_groups[0].name = cfg_strdup(c, model_name, strlen(model_name));
        if (!cfg->instance_groups[0].name)
            return ST_ERROR;
        cfg->instance_groups[0].kind = MODEL_INSTANCE_CPU;
        cfg->instance_groups[0].count = 1;
        cfg->ninstance_groups = 1;
        return 0;
    }
    for (uint32_t i = 0; i < cfg->ninstance_groups; i++) {
        struct model_instance_group *g = &cfg->instance_groups[i];
        if (!g->name[0]) {
            int n = snprintf(name, sizeof name, "%s_%u", cfg->name, i);
            g->name = cfg_strdup(c, name, n < (int)sizeof name ? (size_t)n : sizeof name - 1);
            if (!g->name)
                return ST_ERROR;
        }
        if (g->kind == MODEL_INSTANCE_AUTO)
            g->kind = MODEL_INSTANCE_CPU;
    }
    return 0;
}

#define PADDING_BUDGET_DEFAULT 0.15

bool model_config_server_parameter(const char *key)
{
    return !strcmp(key, "padding_budget");
}

/* parameters { key: "padding_budget" value: { string_value: "0.15" } }:
 * a fraction in [0, 1), a percentage ("15%"), or "" for the default. */
static int check_padding_budget(struct model_config *cfg, struct error *err)
{
    for (uint32_t i = 0; i < cfg->nparameters; i++) {
        if (strcmp(cfg->parameters[i].key, "padding_budget"))
            continue;
        const char *v = cfg->parameters[i].string_value;
        if (!v[0]) {
            cfg->padding_budget = PADDING_BUDGET_DEFAULT;
            return 0;
        }
        char *end;
        double x = strtod(v, &end);
        if (end != v && *end == '%' && end[1] == '\0') {
            x /= 100;
            end++;
        }
        if (end == v || *end || !(x >= 0 && x < 1))
            return error_set(err, 400,
                             "parameters: padding_budget '%s' must be a fraction in [0, 1) "
                             "(\"0.15\"), a percentage (\"15%%\") or \"\" for the default "
                             "(0.15)",
                             v);
        if (x > 0 && (cfg->max_batch_size <= 0 || !cfg->dynamic_batching.enabled))
            return error_set(err, 400,
                             "parameters: padding_budget needs dynamic_batching and "
                             "max_batch_size > 0 (padding only joins requests into a batch)");
        cfg->padding_budget = x;
    }
    return 0;
}

bool model_config_plugin_backend(const struct model_config *cfg)
{
    return cfg->backend[0] && strcmp(cfg->backend, onnx_backend) != 0;
}

int model_config_require_complete(const struct model_config *cfg, struct error *err)
{
    if (cfg->noutputs == 0)
        return error_set(err, 400,
                         "backend: '%s' models need their inputs and outputs in config.pbtxt "
                         "(there is no model file to take them from)",
                         cfg->backend);
    for (int side = 0; side < 2; side++) {
        const struct model_config_io *ios = side == 0 ? cfg->inputs : cfg->outputs;
        uint32_t n = side == 0 ? cfg->ninputs : cfg->noutputs;
        const char *what = side == 0 ? "input" : "output";
        for (uint32_t i = 0; i < n; i++) {
            if (ios[i].dtype == DT_INVALID)
                return error_set(err, 400,
                                 "%s '%s': data_type is required (backend '%s' cannot fill it in)",
                                 what, ios[i].name, cfg->backend);
            if (!ios[i].has_dims)
                return error_set(err, 400,
                                 "%s '%s': dims are required (backend '%s' cannot fill them in)",
                                 what, ios[i].name, cfg->backend);
        }
    }
    return 0;
}

int model_config_check(struct model_config *cfg, const char *model_name,
                       const struct model_info *onnx, struct error *err)
{
    struct ctx c = {.cfg = cfg, .err = err};
    char names[160];

    if (cfg->name[0] && strcmp(cfg->name, model_name))
        return error_set(err, 400, "name: config name '%s' does not match the model directory '%s'",
                         cfg->name, model_name);
    bool plugin = model_config_plugin_backend(cfg);
    if (plugin && cfg->platform[0])
        return error_set(err, 400,
                         "platform: '%s' cannot be combined with backend '%s' (a plugin backend's "
                         "models have no platform)",
                         cfg->platform, cfg->backend);
    if (cfg->platform[0] && strcmp(cfg->platform, "onnxruntime_onnx"))
        return error_set(
            err, 400, "platform: '%s' is not supported (inferd serves \"onnxruntime_onnx\" models)",
            cfg->platform);
    if (plugin && model_config_require_complete(cfg, err))
        return ST_ERROR;
    if (!cfg->name[0] && !(cfg->name = cfg_strdup(&c, model_name, strlen(model_name))))
        return ST_ERROR;
    if (!plugin) {
        cfg->platform = onnx_platform;
        cfg->backend = onnx_backend;
    }

    /* Nothing about batching or tensor shapes in the text (tensors listed
     * without dims, e.g. only for a label_filename): as without a config. */
    if (!cfg->_max_batch_size_set && !any_dims(cfg->inputs, cfg->ninputs) &&
        !any_dims(cfg->outputs, cfg->noutputs) && onnx_batchable(onnx)) {
        cfg->max_batch_size = MODEL_CONFIG_DEFAULT_MAX_BATCH;
        if (!cfg->dynamic_batching.enabled && !cfg->sequence_batching.enabled) {
            cfg->dynamic_batching.enabled = true;
            cfg->dynamic_batching.max_queue_delay_us = MODEL_CONFIG_DEFAULT_QUEUE_DELAY_US;
        }
    }
    if (cfg->max_batch_size > 0 && onnx->ninputs == 0)
        return error_set(err, 400,
                         "max_batch_size: %d needs a model input to carry the batch size, but the "
                         "model has no inputs (set max_batch_size: 0)",
                         cfg->max_batch_size);
    if (cfg->max_batch_size > 0) {
        for (int side = 0; side < 2; side++) {
            const struct model_io *mios = side == 0 ? onnx->inputs : onnx->outputs;
            uint32_t mn = side == 0 ? onnx->ninputs : onnx->noutputs;
            for (uint32_t k = 0; k < mn; k++) {
                if (mios[k].ndim > 0 && mios[k].dims[0] == -1)
                    continue;
                shape_format(mios[k].dims, mios[k].ndim, names, sizeof names);
                return error_set(
                    err, 400,
                    "max_batch_size: %d needs a variable first dimension in every model input and "
                    "output, but %s '%s' has shape %s",
                    cfg->max_batch_size, side == 0 ? "input" : "output", mios[k].name, names);
            }
        }
    }
    if (check_sequence_batching(cfg, onnx, err) || check_ios(&c, true, onnx) ||
        check_ios(&c, false, onnx) || check_groups(&c, model_name) || check_warmups(&c))
        return ST_ERROR;

    struct model_dynamic_batching *db = &cfg->dynamic_batching;
    if (db->enabled && db->npreferred == 0 && cfg->max_batch_size > 0) {
        db->preferred_batch_size = cfg_calloc(&c, 1, sizeof *db->preferred_batch_size);
        if (!db->preferred_batch_size)
            return ST_ERROR;
        db->preferred_batch_size[0] = cfg->max_batch_size;
        db->npreferred = 1;
        db->_preferred_autocompleted = true;
    }
    if (db->priority_levels > SCHED_MAX_LEVELS)
        return error_set(err, 400,
                         "dynamic_batching: priority_levels %llu is more than this server "
                         "supports (%d)",
                         (unsigned long long)db->priority_levels, SCHED_MAX_LEVELS);
    return check_padding_budget(cfg, err);
}

/* Whether ensemble tensor `name` is produced by a step (its index in
 * *step) or is an ensemble input (*step = -1); false: neither. */
static bool ensemble_source(const struct model_config *cfg, const char *name, int *step)
{
    for (uint32_t s = 0; s < cfg->ensemble.nsteps; s++)
        for (uint32_t i = 0; i < cfg->ensemble.steps[s].noutputs; i++)
            if (!strcmp(cfg->ensemble.steps[s].output_map[i].value, name)) {
                *step = (int)s;
                return true;
            }
    *step = -1;
    return model_config_input_index(cfg, name) >= 0;
}

int model_config_check_ensemble(struct model_config *cfg, const char *model_name,
                                struct error *err)
{
    const struct model_ensemble *en = &cfg->ensemble;
    if (cfg->name[0] && strcmp(cfg->name, model_name))
        return error_set(err, 400, "name: config name '%s' does not match the model directory '%s'",
                         cfg->name, model_name);
    if (!en->enabled)
        return error_set(err, 400, "platform: 'ensemble' needs ensemble_scheduling");
    if (en->nsteps > MODEL_ENSEMBLE_MAX_STEPS)
        return error_set(err, 400, "ensemble_scheduling: at most %d steps", MODEL_ENSEMBLE_MAX_STEPS);
    if (cfg->backend[0])
        return error_set(err, 400, "backend: an ensemble has none (platform: \"ensemble\")");
    if (cfg->dynamic_batching.enabled || cfg->sequence_batching.enabled)
        return error_set(err, 400, "ensemble_scheduling cannot be combined with %s",
                         cfg->dynamic_batching.enabled ? "dynamic_batching" : "sequence_batching");
    if (cfg->nwarmups)
        return error_set(err, 400, "model_warmup: an ensemble is warmed up by its steps' models");
    if (!cfg->noutputs)
        return error_set(err, 400, "output: an ensemble must list its outputs");
    for (int side = 0; side < 2; side++) {
        const struct model_config_io *ios = side ? cfg->outputs : cfg->inputs;
        uint32_t n = side ? cfg->noutputs : cfg->ninputs;
        for (uint32_t i = 0; i < n; i++) {
            if (ios[i].dtype == DT_INVALID || !ios[i].has_dims)
                return error_set(err, 400, "%s '%s': an ensemble's tensors need data_type and dims",
                                 side ? "output" : "input", ios[i].name);
            if (ios[i].has_reshape)
                return error_set(err, 400, "%s '%s': reshape is not supported in an ensemble",
                                 side ? "output" : "input", ios[i].name);
        }
    }
    for (uint32_t s = 0; s < en->nsteps; s++) {
        const struct model_ensemble_step *st = &en->steps[s];
        if (!strcmp(st->model_name, model_name))
            return error_set(err, 400, "ensemble_scheduling.step[%u]: the ensemble cannot run itself", s);
        for (uint32_t i = 0; i < st->noutputs; i++) {
            int from;
            const char *t = st->output_map[i].value;
            if (model_config_input_index(cfg, t) >= 0)
                return error_set(err, 400,
                                 "ensemble_scheduling.step[%u] ('%s'): output_map gives '%s', "
                                 "which is an ensemble input",
                                 s, st->model_name, t);
            if (ensemble_source(cfg, t, &from) && from != (int)s)
                return error_set(err, 400,
                                 "ensemble_scheduling.step[%u] ('%s'): '%s' is also the output of "
                                 "step %d",
                                 s, st->model_name, t, from);
            for (uint32_t j = 0; j < i; j++)
                if (!strcmp(st->output_map[j].value, t))
                    return error_set(err, 400,
                                     "ensemble_scheduling.step[%u] ('%s'): two outputs give '%s'",
                                     s, st->model_name, t);
        }
        for (uint32_t i = 0; i < st->ninputs; i++) {
            int from;
            if (!ensemble_source(cfg, st->input_map[i].value, &from))
                return error_set(err, 400,
                                 "ensemble_scheduling.step[%u] ('%s'): input_map takes '%s', which "
                                 "is neither an ensemble input nor a step's output",
                                 s, st->model_name, st->input_map[i].value);
        }
    }
    for (uint32_t o = 0; o < cfg->noutputs; o++) {
        int from;
        if (!ensemble_source(cfg, cfg->outputs[o].name, &from) || from < 0)
            return error_set(err, 400, "output '%s': no step gives it (an output_map value)",
                             cfg->outputs[o].name);
    }
    /* No cycle: steps run once all their inputs are there. */
    bool done[MODEL_ENSEMBLE_MAX_STEPS] = {false};
    for (uint32_t ran = 0; ran < en->nsteps;) {
        uint32_t before = ran;
        for (uint32_t s = 0; s < en->nsteps; s++) {
            bool ready = !done[s];
            for (uint32_t i = 0; ready && i < en->steps[s].ninputs; i++) {
                int from;
                ensemble_source(cfg, en->steps[s].input_map[i].value, &from);
                ready = from < 0 || done[from];
            }
            if (ready) {
                done[s] = true;
                ran++;
            }
        }
        uint32_t stuck = 0;
        while (ran == before && done[stuck])
            stuck++;
        if (ran == before)
            return error_set(err, 400,
                             "ensemble_scheduling.step[%u] ('%s'): its inputs wait for its own "
                             "outputs (the steps form a cycle)",
                             stuck, en->steps[stuck].model_name);
    }
    if (!cfg->name[0]) {
        struct ctx c = {.cfg = cfg, .err = err};
        if (!(cfg->name = cfg_strdup(&c, model_name, strlen(model_name))))
            return ST_ERROR;
    }
    return 0;
}

int model_config_from_onnx(const char *model_name, const struct model_info *onnx,
                           struct model_config *cfg)
{
    struct error err;
    model_config_init(cfg);
    if (model_config_check(cfg, model_name, onnx, &err) == 0)
        return 0;
    int rc = err.status == 500 ? -ENOMEM : -EINVAL;
    model_config_free(cfg);
    return rc;
}

int model_config_input_index(const struct model_config *cfg, const char *name)
{
    for (uint32_t i = 0; i < cfg->ninputs; i++)
        if (!strcmp(cfg->inputs[i].name, name))
            return (int)i;
    return NOT_FOUND;
}

int model_config_output_index(const struct model_config *cfg, const char *name)
{
    for (uint32_t i = 0; i < cfg->noutputs; i++)
        if (!strcmp(cfg->outputs[i].name, name))
            return (int)i;
    return NOT_FOUND;
}
