/*
 * model_pb: Triton's ModelConfig and ModelStatistics messages built from
 * inferd's model configuration and statistics (see model_pb.h).
 */
#include "api/grpc/model_pb.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Triton's DataType numbers are inferd's enum dtype values. */
_Static_assert((int)DT_BOOL == INFERENCE__DATA_TYPE__TYPE_BOOL &&
                   (int)DT_INT64 == INFERENCE__DATA_TYPE__TYPE_INT64 &&
                   (int)DT_BYTES == INFERENCE__DATA_TYPE__TYPE_STRING &&
                   (int)DT_BF16 == INFERENCE__DATA_TYPE__TYPE_BF16,
               "enum dtype must follow Triton's DataType numbering");

static Inference__ModelTensorReshape *reshape_of(struct arena *a, bool has, uint32_t n,
                                                 const int64_t *dims, bool *oom)
{
    if (!has)
        return NULL;
    Inference__ModelTensorReshape *r = arena_alloc(a, sizeof *r);
    if (!r) {
        *oom = true;
        return NULL;
    }
    inference__model_tensor_reshape__init(r);
    r->n_shape = n;
    r->shape = (int64_t *)dims;
    return r;
}

static Inference__ModelQueuePolicy *queue_policy(struct arena *a,
                                                 const struct model_queue_policy *p)
{
    Inference__ModelQueuePolicy *q = arena_alloc(a, sizeof *q);
    if (!q)
        return NULL;
    inference__model_queue_policy__init(q);
    q->timeout_action = p->timeout_action == MODEL_TIMEOUT_DELAY
                            ? INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY
                            : INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__REJECT;
    q->default_timeout_microseconds = p->default_timeout_us;
    q->allow_timeout_override = p->allow_timeout_override;
    q->max_queue_size = p->max_queue_size;
    return q;
}

void **model_pb_alloc_messages(struct arena *a, size_t n, size_t size, void (*init)(void *))
{
    void **ptrs = arena_alloc(a, (n + 1) * sizeof *ptrs);
    char *items = arena_alloc(a, (n + 1) * size);
    if (!ptrs || !items)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = items + i * size;
        init(ptrs[i]);
    }
    return ptrs;
}

static int dynamic_batching(struct arena *a, const struct model_dynamic_batching *d,
                            Inference__ModelConfig *c)
{
    Inference__ModelDynamicBatching *b = arena_alloc(a, sizeof *b);
    if (!b)
        return -ENOMEM;
    inference__model_dynamic_batching__init(b);
    b->n_preferred_batch_size = d->npreferred;
    b->preferred_batch_size = d->preferred_batch_size;
    b->max_queue_delay_microseconds = d->max_queue_delay_us;
    b->preserve_ordering = d->preserve_ordering;
    b->priority_levels = d->priority_levels;
    b->default_priority_level = d->default_priority_level;
    b->default_queue_policy = queue_policy(a, &d->default_queue_policy);
    if (!b->default_queue_policy)
        return -ENOMEM;
    b->priority_queue_policy = MODEL_PB_ALLOC(
        a, d->npriority_policies, Inference__ModelDynamicBatching__PriorityQueuePolicyEntry,
        inference__model_dynamic_batching__priority_queue_policy_entry__init);
    if (!b->priority_queue_policy)
        return -ENOMEM;
    b->n_priority_queue_policy = d->npriority_policies;
    for (uint32_t i = 0; i < d->npriority_policies; i++) {
        b->priority_queue_policy[i]->key = d->priority_queue_policy[i].level;
        b->priority_queue_policy[i]->value = queue_policy(a, &d->priority_queue_policy[i].policy);
        if (!b->priority_queue_policy[i]->value)
            return -ENOMEM;
    }
    c->scheduling_choice_case = INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING;
    c->dynamic_batching = b;
    return 0;
}

static int version_policy(struct arena *a, const struct model_version_policy *v,
                          Inference__ModelConfig *c)
{
    Inference__ModelVersionPolicy *p = arena_alloc(a, sizeof *p);
    if (!p)
        return -ENOMEM;
    inference__model_version_policy__init(p);
    if (v->kind == MODEL_VERSIONS_ALL) {
        p->all = arena_alloc(a, sizeof *p->all);
        if (!p->all)
            return -ENOMEM;
        inference__model_version_policy__all__init(p->all);
        p->policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL;
    } else if (v->kind == MODEL_VERSIONS_SPECIFIC) {
        p->specific = arena_alloc(a, sizeof *p->specific);
        if (!p->specific)
            return -ENOMEM;
        inference__model_version_policy__specific__init(p->specific);
        p->specific->n_versions = v->nversions;
        p->specific->versions = v->versions;
        p->policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC;
    } else {
        p->latest = arena_alloc(a, sizeof *p->latest);
        if (!p->latest)
            return -ENOMEM;
        inference__model_version_policy__latest__init(p->latest);
        p->latest->num_versions = v->num_versions;
        p->policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST;
    }
    c->version_policy = p;
    return 0;
}

static int warmups(struct arena *a, const struct model_config *cfg, Inference__ModelConfig *c)
{
    c->model_warmup =
        MODEL_PB_ALLOC(a, cfg->nwarmups, Inference__ModelWarmup, inference__model_warmup__init);
    if (!c->model_warmup)
        return -ENOMEM;
    c->n_model_warmup = cfg->nwarmups;
    for (uint32_t i = 0; i < cfg->nwarmups; i++) {
        const struct model_warmup *w = &cfg->warmups[i];
        Inference__ModelWarmup *o = c->model_warmup[i];
        o->name = w->name;
        o->batch_size = w->batch_size;
        o->count = w->count;
        o->inputs = MODEL_PB_ALLOC(a, w->ninputs, Inference__ModelWarmup__InputsEntry,
                                   inference__model_warmup__inputs_entry__init);
        if (!o->inputs)
            return -ENOMEM;
        o->n_inputs = w->ninputs;
        for (uint32_t k = 0; k < w->ninputs; k++) {
            const struct model_warmup_input *wi = &w->inputs[k];
            Inference__ModelWarmup__Input *in = arena_alloc(a, sizeof *in);
            if (!in)
                return -ENOMEM;
            inference__model_warmup__input__init(in);
            in->data_type = (Inference__DataType)wi->dtype;
            in->n_dims = wi->ndim;
            in->dims = (int64_t *)wi->dims;
            if (wi->source == MODEL_WARMUP_ZERO) {
                in->input_data_type_case =
                    INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_ZERO_DATA;
                in->zero_data = 1;
            } else if (wi->source == MODEL_WARMUP_RANDOM) {
                in->input_data_type_case =
                    INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_RANDOM_DATA;
                in->random_data = 1;
            } else {
                in->input_data_type_case =
                    INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_INPUT_DATA_FILE;
                in->input_data_file = wi->input_data_file;
            }
            o->inputs[k]->key = wi->name;
            o->inputs[k]->value = in;
        }
    }
    return 0;
}

/* The effective configuration as Triton's ModelConfig message (the fields
 * inferd supports), pointing into cfg and allocated from a. */
int model_pb_config(struct arena *a, const struct model_config *cfg, Inference__ModelConfig *c)
{
    inference__model_config__init(c);
    c->name = cfg->name;
    c->platform = cfg->platform;
    c->backend = cfg->backend;
    c->max_batch_size = cfg->max_batch_size;
    bool oom = false;
    c->input = MODEL_PB_ALLOC(a, cfg->ninputs, Inference__ModelInput, inference__model_input__init);
    c->output =
        MODEL_PB_ALLOC(a, cfg->noutputs, Inference__ModelOutput, inference__model_output__init);
    c->instance_group = MODEL_PB_ALLOC(a, cfg->ninstance_groups, Inference__ModelInstanceGroup,
                                       inference__model_instance_group__init);
    c->parameters = MODEL_PB_ALLOC(a, cfg->nparameters, Inference__ModelConfig__ParametersEntry,
                                   inference__model_config__parameters_entry__init);
    if (!c->input || !c->output || !c->instance_group || !c->parameters)
        return -ENOMEM;
    c->n_input = cfg->ninputs;
    for (uint32_t i = 0; i < cfg->ninputs; i++) {
        const struct model_config_io *io = &cfg->inputs[i];
        Inference__ModelInput *in = c->input[i];
        in->name = io->name;
        in->data_type = (Inference__DataType)io->dtype;
        in->format =
            io->format == MODEL_IO_FORMAT_NHWC   ? INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NHWC
            : io->format == MODEL_IO_FORMAT_NCHW ? INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NCHW
                                                 : INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NONE;
        in->n_dims = io->ndim;
        in->dims = (int64_t *)io->dims;
        in->reshape = reshape_of(a, io->has_reshape, io->reshape_ndim, io->reshape, &oom);
        in->optional = io->optional;
    }
    c->n_output = cfg->noutputs;
    for (uint32_t i = 0; i < cfg->noutputs; i++) {
        const struct model_config_io *io = &cfg->outputs[i];
        Inference__ModelOutput *out = c->output[i];
        out->name = io->name;
        out->data_type = (Inference__DataType)io->dtype;
        out->n_dims = io->ndim;
        out->dims = (int64_t *)io->dims;
        out->label_filename = io->label_filename;
        out->reshape = reshape_of(a, io->has_reshape, io->reshape_ndim, io->reshape, &oom);
    }
    c->n_instance_group = cfg->ninstance_groups;
    for (uint32_t i = 0; i < cfg->ninstance_groups; i++) {
        const struct model_instance_group *g = &cfg->instance_groups[i];
        c->instance_group[i]->name = g->name;
        c->instance_group[i]->count = g->count;
        c->instance_group[i]->kind =
            g->kind == MODEL_INSTANCE_CPU     ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU
            : g->kind == MODEL_INSTANCE_MODEL ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL
                                              : INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO;
    }
    c->n_parameters = cfg->nparameters;
    for (uint32_t i = 0; i < cfg->nparameters && !oom; i++) {
        Inference__ModelParameter *p = arena_alloc(a, sizeof *p);
        if (!p)
            return -ENOMEM;
        inference__model_parameter__init(p);
        p->string_value = cfg->parameters[i].string_value;
        c->parameters[i]->key = cfg->parameters[i].key;
        c->parameters[i]->value = p;
    }
    if (oom || version_policy(a, &cfg->version_policy, c) != 0 || warmups(a, cfg, c) != 0)
        return -ENOMEM;
    if (cfg->dynamic_batching.enabled && dynamic_batching(a, &cfg->dynamic_batching, c) != 0)
        return -ENOMEM;
    c->model_transaction_policy = arena_alloc(a, sizeof *c->model_transaction_policy);
    if (!c->model_transaction_policy)
        return -ENOMEM;
    inference__model_transaction_policy__init(c->model_transaction_policy);
    c->model_transaction_policy->decoupled = cfg->decoupled;
    return 0;
}

/* ---- statistics --------------------------------------------------------- */

static Inference__StatisticDuration *duration(struct arena *a, const struct stats_duration *d)
{
    Inference__StatisticDuration *o = arena_alloc(a, sizeof *o);
    if (o) {
        inference__statistic_duration__init(o);
        o->count = d->count;
        o->ns = d->ns;
    }
    return o;
}

/* Triton's response_stats map, keyed by the response index in decimal. */
static int response_stats(struct arena *a, const struct stats_version *v,
                          Inference__ModelStatistics *o)
{
    o->response_stats =
        MODEL_PB_ALLOC(a, v->nresponses, Inference__ModelStatistics__ResponseStatsEntry,
                       inference__model_statistics__response_stats_entry__init);
    if (!o->response_stats)
        return -ENOMEM;
    o->n_response_stats = v->nresponses;
    for (uint32_t i = 0; i < v->nresponses; i++) {
        const struct stats_response *r = &v->responses[i];
        Inference__ModelStatistics__ResponseStatsEntry *e = o->response_stats[i];
        Inference__InferResponseStatistics *s = arena_alloc(a, sizeof *s);
        char *key = arena_alloc(a, 12);
        if (!s || !key)
            return -ENOMEM;
        snprintf(key, 12, "%" PRIu32, r->index);
        inference__infer_response_statistics__init(s);
        s->compute_infer = duration(a, &r->compute_infer);
        s->compute_output = duration(a, &r->compute_output);
        s->success = duration(a, &r->success);
        s->fail = duration(a, &r->fail);
        s->empty_response = duration(a, &r->empty_response);
        s->cancel = duration(a, &r->cancel);
        if (!s->compute_infer || !s->compute_output || !s->success || !s->fail ||
            !s->empty_response || !s->cancel)
            return -ENOMEM;
        e->key = key;
        e->value = s;
    }
    return 0;
}

int model_pb_statistics(struct arena *a, const struct stats_version *v,
                        Inference__ModelStatistics *o)
{
    static const struct stats_duration zero;
    inference__model_statistics__init(o);
    o->name = (char *)v->name;
    o->version = (char *)v->version;
    o->last_inference = v->last_inference_ms;
    o->inference_count = v->inference_count;
    o->execution_count = v->execution_count;
    Inference__InferStatistics *is = arena_alloc(a, sizeof *is);
    if (!is)
        return -ENOMEM;
    inference__infer_statistics__init(is);
    is->success = duration(a, &v->success);
    is->fail = duration(a, &v->fail);
    is->queue = duration(a, &v->queue);
    is->compute_input = duration(a, &v->compute_input);
    is->compute_infer = duration(a, &v->compute_infer);
    is->compute_output = duration(a, &v->compute_output);
    is->cache_hit = duration(a, &zero);
    is->cache_miss = duration(a, &zero);
    if (!is->success || !is->fail || !is->queue || !is->compute_input || !is->compute_infer ||
        !is->compute_output || !is->cache_hit || !is->cache_miss)
        return -ENOMEM;
    o->inference_stats = is;
    o->batch_stats = MODEL_PB_ALLOC(a, v->nbatches, Inference__InferBatchStatistics,
                                    inference__infer_batch_statistics__init);
    if (!o->batch_stats)
        return -ENOMEM;
    o->n_batch_stats = v->nbatches;
    for (uint32_t i = 0; i < v->nbatches; i++) {
        Inference__InferBatchStatistics *b = o->batch_stats[i];
        b->batch_size = v->batches[i].batch_size;
        b->compute_input = duration(a, &v->batches[i].compute_input);
        b->compute_infer = duration(a, &v->batches[i].compute_infer);
        b->compute_output = duration(a, &v->batches[i].compute_output);
        if (!b->compute_input || !b->compute_infer || !b->compute_output)
            return -ENOMEM;
    }
    /* Triton's form: one entry per kind of memory; inferd's is host memory. */
    o->memory_usage = MODEL_PB_ALLOC(a, 1, Inference__MemoryUsage, inference__memory_usage__init);
    if (!o->memory_usage)
        return -ENOMEM;
    o->n_memory_usage = 1;
    o->memory_usage[0]->type = "CPU";
    o->memory_usage[0]->id = 0;
    o->memory_usage[0]->byte_size = v->memory_bytes;
    return response_stats(a, v, o);
}
