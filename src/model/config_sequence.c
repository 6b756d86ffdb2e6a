/*
 * config_sequence: the sequence_batching section of config.pbtxt
 * (ModelSequenceBatching: the strategy, the idle timeout, control inputs
 * and implicit state) into cfg->sequence_batching; see config_parse.h for
 * what a section parser receives and returns. Whether the tensors exist in
 * the model is checked by config_check.c; serve/sequence.c runs them.
 */
#include "model/config_parse.h"

#include <string.h>

static const char *const control_names[] = {"CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY",
                                            "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_CORRID"};

const char *model_seq_control_name(enum model_seq_control_kind k)
{
    return (size_t)k < COUNT_OF(control_names) ? control_names[k] : control_names[0];
}

/* One element of a false_true list: index 0 false, 1 true. */
static int false_true_value(struct ctx *c, const struct pbtxt_field *e, uint32_t *n,
                            struct model_seq_control *ctl)
{
    if (*n >= 2)
        return FAIL_F(c, e, "must have exactly two values: false, then true");
    int rc = 0;
    if (!strcmp(e->name, "int32_false_true")) {
        int64_t x = 0;
        rc = config_get_i64(c, e, INT32_MIN, INT32_MAX, "a 32-bit integer", &x);
        ctl->int32_false_true[*n] = (int32_t)x;
    } else if (!strcmp(e->name, "fp32_false_true")) {
        double d = 0;
        if (pbtxt_to_double(&e->value, &d) != 0)
            rc = FAIL_V(c, &e->value, "expected a number");
        ctl->fp32_false_true[*n] = (float)d;
    } else {
        rc = config_get_bool(c, e, &ctl->bool_false_true[*n]);
    }
    (*n)++;
    return rc;
}

enum control_bits { CT_KIND = 1, CT_DTYPE = 2 };

static int parse_control(struct ctx *c, const struct pbtxt_field *f, struct model_seq_control *ctl)
{
    uint32_t seen = 0, nvalues = 0;
    const char *values = NULL; /* the false_true field used */
    int kind = 0;
    if (config_want_message(c, f))
        return ST_ERROR;
    ctl->dtype = DT_INVALID;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "kind")) {
            rc = config_once(c, e, &seen, CT_KIND) ||
                 config_get_enum(c, e, control_names, COUNT_OF(control_names),
                                 "a kind such as CONTROL_SEQUENCE_START", &kind);
        } else if (!strcmp(e->name, "int32_false_true") || !strcmp(e->name, "fp32_false_true") ||
                   !strcmp(e->name, "bool_false_true")) {
            if (values && strcmp(values, e->name))
                rc = FAIL_F(c, e, "only one of int32_false_true, fp32_false_true and "
                                  "bool_false_true may be set");
            values = e->name;
            if (!rc)
                rc = false_true_value(c, e, &nvalues, ctl);
        } else if (!strcmp(e->name, "data_type")) {
            rc = config_once(c, e, &seen, CT_DTYPE) || config_get_dtype(c, e, &ctl->dtype);
        } else {
            rc = config_unknown(c, e, "ModelSequenceBatching.Control");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    ctl->kind = (enum model_seq_control_kind)kind;
    if (ctl->kind == MODEL_SEQ_CORRID) {
        if (values)
            return FAIL_F(c, f, "CONTROL_SEQUENCE_CORRID takes data_type, not %s", values);
        if (ctl->dtype != DT_UINT64 && ctl->dtype != DT_INT64 && ctl->dtype != DT_UINT32 &&
            ctl->dtype != DT_INT32 && ctl->dtype != DT_BYTES)
            return FAIL_F(c, f, "CONTROL_SEQUENCE_CORRID needs data_type TYPE_UINT64, "
                                "TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING");
        return 0;
    }
    if (!values || nvalues != 2)
        return FAIL_F(c, f, "%s needs two values (false, then true) in one of int32_false_true, "
                            "fp32_false_true and bool_false_true",
                      control_names[kind]);
    if (seen & CT_DTYPE)
        return FAIL_F(c, f, "data_type is for CONTROL_SEQUENCE_CORRID only");
    ctl->dtype = values[0] == 'i' ? DT_INT32 : values[0] == 'f' ? DT_FP32 : DT_BOOL;
    return 0;
}

static int parse_control_input(struct ctx *c, const struct pbtxt_field *f,
                               struct model_sequence_batching *sb)
{
    struct model_seq_control *ctl = &sb->controls[sb->ncontrols];
    uint32_t controls = 0;
    bool named = false;
    if (config_want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "name")) {
            rc = named ? FAIL_F(c, e, "set more than once") : config_get_string(c, e, &ctl->input);
            named = true;
        } else if (!strcmp(e->name, "control")) {
            config_path_index(c, controls);
            rc = controls++ ? FAIL_F(c, e, "one control per control input") : parse_control(c, e, ctl);
        } else {
            rc = config_unknown(c, e, "ModelSequenceBatching.ControlInput");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!named || !ctl->input[0])
        return FAIL_F(c, f, "needs a name (the model input the control feeds)");
    if (!controls)
        return FAIL_F(c, f, "needs a control");
    for (uint32_t i = 0; i < sb->ncontrols; i++) {
        if (!strcmp(sb->controls[i].input, ctl->input))
            return FAIL_F(c, f, "input '%s' has two control inputs", ctl->input);
        if (sb->controls[i].kind == ctl->kind)
            return FAIL_F(c, f, "%s is given twice", control_names[ctl->kind]);
    }
    sb->ncontrols++;
    return 0;
}

static int parse_initial_state(struct ctx *c, const struct pbtxt_field *f,
                               struct model_seq_state *st, bool *dims_given)
{
    bool zero = false;
    enum dtype dt = DT_INVALID;
    int64_t dims[TENSOR_MAX_DIMS];
    uint32_t ndim = 0;
    if (config_want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "data_type")) {
            rc = config_get_dtype(c, e, &dt);
        } else if (!strcmp(e->name, "dims")) {
            rc = config_add_dim(c, e, false, dims, &ndim);
        } else if (!strcmp(e->name, "zero_data")) {
            rc = config_get_bool(c, e, &zero);
        } else if (!strcmp(e->name, "data_file")) {
            rc = FAIL_F(c, e, "not supported by inferd: initial states are zeros (zero_data)");
        } else if (!strcmp(e->name, "name")) {
            char *ignored;
            rc = config_get_string(c, e, &ignored);
        } else {
            rc = config_unknown(c, e, "ModelSequenceBatching.InitialState");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!zero)
        return FAIL_F(c, f, "needs zero_data: true (the only initial state inferd supports)");
    if (dt != DT_INVALID && dt != st->dtype)
        return FAIL_F(c, f, "data_type %s differs from the state's %s", dtype_config_name(dt),
                      dtype_config_name(st->dtype));
    if (ndim) {
        memcpy(st->dims, dims, ndim * sizeof *dims);
        st->ndim = ndim;
        *dims_given = true;
    }
    return 0;
}

enum state_bits { ST_IN = 1, ST_OUT = 2, ST_DTYPE = 4 };

static int parse_state(struct ctx *c, const struct pbtxt_field *f,
                       struct model_sequence_batching *sb)
{
    struct model_seq_state *st = &sb->states[sb->nstates];
    uint32_t seen = 0, initial = 0;
    bool initial_dims = false, has_dims = false, flag;
    const struct pbtxt_field *initial_field = NULL;
    if (config_want_message(c, f))
        return ST_ERROR;
    st->input_name = st->output_name = config_empty_string;
    st->dtype = DT_INVALID;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "input_name")) {
            rc = config_once(c, e, &seen, ST_IN) || config_get_string(c, e, &st->input_name);
        } else if (!strcmp(e->name, "output_name")) {
            rc = config_once(c, e, &seen, ST_OUT) || config_get_string(c, e, &st->output_name);
        } else if (!strcmp(e->name, "data_type")) {
            rc = config_once(c, e, &seen, ST_DTYPE) || config_get_dtype(c, e, &st->dtype);
        } else if (!strcmp(e->name, "dims")) {
            rc = config_add_dim(c, e, true, st->dims, &st->ndim);
            has_dims = true;
        } else if (!strcmp(e->name, "initial_state")) {
            initial_field = e;
            config_path_index(c, initial);
            rc = initial++ ? FAIL_F(c, e, "one initial state per state") : 0;
        } else if (!strcmp(e->name, "use_same_buffer_for_input_output") ||
                   !strcmp(e->name, "use_growable_memory")) {
            rc = config_get_bool(c, e, &flag); /* memory hints for GPU backends */
        } else {
            rc = config_unknown(c, e, "ModelSequenceBatching.State");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!st->input_name[0] || !st->output_name[0])
        return FAIL_F(c, f, "needs input_name and output_name");
    if (st->dtype == DT_INVALID)
        return FAIL_F(c, f, "needs data_type");
    if (st->dtype == DT_BYTES)
        return FAIL_F(c, f, "TYPE_STRING states are not supported by inferd");
    if (!has_dims)
        return FAIL_F(c, f, "needs dims");
    if (initial_field) {
        struct mark m = config_path_push(c, "initial_state");
        int rc = parse_initial_state(c, initial_field, st, &initial_dims);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    for (uint32_t d = 0; d < st->ndim && !initial_dims; d++)
        if (st->dims[d] < 0)
            return FAIL_F(c, f, "dims has a variable dimension: give initial_state dims (the "
                                "shape of the state a sequence starts with)");
    for (uint32_t i = 0; i < sb->nstates; i++)
        if (!strcmp(sb->states[i].input_name, st->input_name) ||
            !strcmp(sb->states[i].output_name, st->output_name))
            return FAIL_F(c, f, "state '%s' -> '%s' shares a tensor with an earlier state",
                          st->input_name, st->output_name);
    for (uint32_t i = 0; i < sb->ncontrols; i++)
        if (!strcmp(sb->controls[i].input, st->input_name))
            return FAIL_F(c, f, "'%s' is a control input and a state", st->input_name);
    sb->nstates++;
    return 0;
}

/* direct { } or oldest { }: how requests of different sequences batch. */
static int parse_strategy(struct ctx *c, const struct pbtxt_field *f,
                          struct model_sequence_batching *sb)
{
    bool oldest = f->name[0] == 'o';
    int32_t max_batch = c->cfg->max_batch_size;
    if (config_want_message(c, f))
        return ST_ERROR;
    sb->oldest = oldest;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        int64_t x = 0;
        if (!strcmp(e->name, "max_queue_delay_microseconds")) {
            rc = config_get_u64(c, e, UINT64_MAX, "a non-negative integer",
                                &sb->max_queue_delay_us);
        } else if (oldest && !strcmp(e->name, "max_candidate_sequences")) {
            rc = config_get_i64(c, e, 0, INT32_MAX, "a non-negative integer", &x);
            sb->max_candidate_sequences = (uint32_t)x;
        } else if (oldest && !strcmp(e->name, "preferred_batch_size")) {
            rc = config_get_i64(c, e, 1, INT32_MAX, "a positive batch size", &x);
            if (!rc && x > max_batch)
                rc = FAIL_V(c, &e->value,
                            "preferred batch size %lld is larger than max_batch_size %d",
                            (long long)x, max_batch);
            if (!rc && sb->npreferred < CONFIG_MAX_ENTRIES) {
                int32_t *grown = config_calloc(c, sb->npreferred + 1, sizeof *grown);
                if (!grown)
                    rc = ST_ERROR;
                else {
                    if (sb->npreferred)
                        memcpy(grown, sb->preferred_batch_size,
                               sb->npreferred * sizeof *grown);
                    grown[sb->npreferred++] = (int32_t)x;
                    sb->preferred_batch_size = grown;
                }
            }
        } else if ((oldest && !strcmp(e->name, "preserve_ordering")) ||
                   (!oldest && !strcmp(e->name, "minimum_slot_utilization"))) {
            rc = config_ignore(c, e); /* about slots, which inferd does not have */
        } else {
            rc = config_unknown(c, e, oldest ? "ModelSequenceBatching.StrategyOldest"
                                             : "ModelSequenceBatching.StrategyDirect");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

enum sb_bits { SB_IDLE = 1, SB_STRATEGY = 2 };

int config_parse_sequence_batching(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_sequence_batching *sb = &c->cfg->sequence_batching;
    uint32_t seen = 0, ncontrols, nstates;
    if (config_want_message(c, f))
        return ST_ERROR;
    const struct pbtxt_value *msg = &f->value;
    sb->enabled = true;
    sb->max_sequence_idle_us = MODEL_SEQ_DEFAULT_IDLE_US;
    if (config_check_entries(c, msg, "control_input", &ncontrols) ||
        config_check_entries(c, msg, "state", &nstates))
        return ST_ERROR;
    sb->controls = config_calloc(c, ncontrols, sizeof *sb->controls);
    sb->states = config_calloc(c, nstates, sizeof *sb->states);
    if (!sb->controls || !sb->states)
        return ST_ERROR;
    /* Control inputs first: a state may not reuse one. */
    for (int pass = 0; pass < 2; pass++) {
        for (const struct pbtxt_field *e = msg->u.fields; e; e = e->next) {
            bool control = !strcmp(e->name, "control_input");
            if (control != (pass == 0))
                continue;
            struct mark m = config_path_push(c, e->name);
            int rc = 0;
            if (control) {
                config_path_index(c, sb->ncontrols);
                rc = parse_control_input(c, e, sb);
            } else if (!strcmp(e->name, "max_sequence_idle_microseconds")) {
                rc = config_once(c, e, &seen, SB_IDLE) ||
                     config_get_u64(c, e, UINT64_MAX, "a non-negative integer",
                                    &sb->max_sequence_idle_us);
            } else if (!strcmp(e->name, "direct") || !strcmp(e->name, "oldest")) {
                rc = (seen & SB_STRATEGY) ? FAIL_F(c, e, "direct and oldest cannot both be set")
                                          : parse_strategy(c, e, sb);
                seen |= SB_STRATEGY;
            } else if (!strcmp(e->name, "state")) {
                config_path_index(c, sb->nstates);
                rc = parse_state(c, e, sb);
            } else if (!strcmp(e->name, "iterative_sequence")) {
                bool on = false;
                rc = config_get_bool(c, e, &on);
                if (!rc && on)
                    rc = FAIL_F(c, e, "not supported by inferd");
            } else {
                rc = config_unknown(c, e, "ModelSequenceBatching");
            }
            config_path_pop(c, m);
            if (rc)
                return ST_ERROR;
        }
    }
    if (sb->max_sequence_idle_us == 0)
        sb->max_sequence_idle_us = MODEL_SEQ_DEFAULT_IDLE_US; /* Triton: 0 means the default */
    return 0;
}
