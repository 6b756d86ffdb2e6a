/*
 * config_ensemble: the ensemble_scheduling section of config.pbtxt
 * (ModelEnsembling: steps, each a model with maps from its inputs and
 * outputs to the ensemble's tensors) into cfg->ensemble; see
 * config_parse.h for what a section parser receives and returns. How the
 * steps fit together is checked by config_check.c; serve/ensemble.c runs
 * them.
 */
#include "model/config_parse.h"

#include <string.h>

/* One entry of input_map or output_map into map[*n]; a repeated key
 * replaces the earlier entry, as in protobuf. */
static int parse_map_entry(struct ctx *c, const struct pbtxt_field *f, uint32_t index,
                           struct model_map_entry *map, uint32_t *n)
{
    const struct pbtxt_field *key, *value;
    char *k, *v = config_empty_string;
    config_path_index(c, index);
    if (config_map_entry(c, f, &key, &value) || config_map_string_key(c, key, &k))
        return ST_ERROR;
    if (value) {
        struct mark m = config_path_push(c, "value");
        int rc = config_get_string(c, value, &v);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!k[0] || !v[0])
        return FAIL_F(c, f, "needs a key (the step model's tensor) and a value (the ensemble's)");
    uint32_t i = 0;
    while (i < *n && strcmp(map[i].key, k))
        i++;
    map[i] = (struct model_map_entry){.key = k, .value = v};
    if (i == *n)
        (*n)++;
    return 0;
}

enum step_bits { ST_NAME = 1, ST_VERSION = 2 };

static int parse_step(struct ctx *c, const struct pbtxt_field *f, struct model_ensemble_step *st)
{
    uint32_t seen = 0, nin, nout, in_index = 0, out_index = 0;
    if (config_want_message(c, f))
        return ST_ERROR;
    const struct pbtxt_value *msg = &f->value;
    st->model_name = config_empty_string;
    st->model_version = -1;
    if (config_check_entries(c, msg, "input_map", &nin) ||
        config_check_entries(c, msg, "output_map", &nout))
        return ST_ERROR;
    st->input_map = config_calloc(c, nin ? nin : 1, sizeof *st->input_map);
    st->output_map = config_calloc(c, nout ? nout : 1, sizeof *st->output_map);
    if (!st->input_map || !st->output_map)
        return ST_ERROR;
    for (const struct pbtxt_field *e = msg->u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "model_name")) {
            rc = config_once(c, e, &seen, ST_NAME) || config_get_string(c, e, &st->model_name);
        } else if (!strcmp(e->name, "model_version")) {
            rc = config_once(c, e, &seen, ST_VERSION) ||
                 config_get_i64(c, e, -1, INT64_MAX, "a version number, or -1",
                                &st->model_version);
        } else if (!strcmp(e->name, "input_map")) {
            rc = parse_map_entry(c, e, in_index++, st->input_map, &st->ninputs);
        } else if (!strcmp(e->name, "output_map")) {
            rc = parse_map_entry(c, e, out_index++, st->output_map, &st->noutputs);
        } else if (!strcmp(e->name, "model_namespace")) {
            rc = config_ignore(c, e);
        } else {
            rc = config_unknown(c, e, "ModelEnsembling.Step");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!st->model_name[0])
        return FAIL_F(c, f, "needs model_name");
    if (!st->noutputs)
        return FAIL_F(c, f, "needs an output_map entry (what the step gives the ensemble)");
    return 0;
}

int config_parse_ensemble(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_ensemble *en = &c->cfg->ensemble;
    uint32_t nsteps;
    if (config_want_message(c, f))
        return ST_ERROR;
    if (config_check_entries(c, &f->value, "step", &nsteps))
        return ST_ERROR;
    en->steps = config_calloc(c, nsteps ? nsteps : 1, sizeof *en->steps);
    if (!en->steps)
        return ST_ERROR;
    en->enabled = true;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc;
        if (!strcmp(e->name, "step")) {
            config_path_index(c, en->nsteps);
            rc = parse_step(c, e, &en->steps[en->nsteps]);
            en->nsteps += !rc;
        } else {
            rc = config_unknown(c, e, "ModelEnsembling");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!en->nsteps)
        return FAIL_F(c, f, "needs at least one step");
    return 0;
}
