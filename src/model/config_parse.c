/*
 * config_parse: config.pbtxt text -> struct model_config (model_config_parse,
 * see config.h, "Parsing"): the root ModelConfig message, its scalar fields
 * and model_transaction_policy, and the sections handed to their parsers
 * (config_parse.h).
 */
#include "model/config_parse.h"

#include <string.h>

#define TREE_ARENA_CHUNK 16384
#define TREE_ARENA_MAX (32u << 20)

/* Fields of ModelConfig that inferd accepts and does not use. */
static const char *const ignored_top[] = {
    "runtime",
    "batch_input",
    "batch_output",
    "optimization",
    "sequence_batching",
    "ensemble_scheduling",
    "default_model_filename",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_repository_agents",
    "response_cache",
    "model_metrics",
};

enum top_bits {
    TOP_NAME = 1,
    TOP_PLATFORM = 2,
    TOP_BACKEND = 4,
    TOP_MAX_BATCH = 8,
    TOP_VERSION = 32,
    TOP_TRANSACTION = 64,
};

/* model_transaction_policy { decoupled: <bool> } */
static int parse_transaction_policy(struct ctx *c, const struct pbtxt_field *f)
{
    uint32_t seen = 0;
    if (config_want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = !strcmp(e->name, "decoupled")
                     ? config_once(c, e, &seen, 1) || config_get_bool(c, e, &c->cfg->decoupled)
                     : config_unknown(c, e, "ModelTransactionPolicy");
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

static bool is_ignored_top(const char *name)
{
    for (size_t i = 0; i < COUNT_OF(ignored_top); i++)
        if (!strcmp(name, ignored_top[i]))
            return true;
    return false;
}

static int parse_root(struct ctx *c, const struct pbtxt_value *root)
{
    struct model_config *cfg = c->cfg;
    uint32_t seen = 0, n;
    const struct pbtxt_field *scheduling = NULL;

    /* max_batch_size first: dims, preferred sizes and warmups depend on it. */
    for (const struct pbtxt_field *f = root->u.fields; f; f = f->next) {
        if (strcmp(f->name, "max_batch_size"))
            continue;
        int64_t x = 0;
        struct mark m = config_path_push(c, f->name);
        int rc = config_once(c, f, &seen, TOP_MAX_BATCH) ||
                 config_get_i64(c, f, 0, INT32_MAX, "a non-negative integer", &x);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
        cfg->max_batch_size = (int32_t)x;
        cfg->_max_batch_size_set = true;
    }
    if (config_parse_ios(c, root, "input", true) || config_parse_ios(c, root, "output", false))
        return ST_ERROR;

    if (config_check_entries(c, root, "instance_group", &n))
        return ST_ERROR;
    cfg->instance_groups = config_calloc(c, n, sizeof *cfg->instance_groups);
    if (config_check_entries(c, root, "model_warmup", &n))
        return ST_ERROR;
    cfg->warmups = config_calloc(c, n, sizeof *cfg->warmups);
    if (config_check_entries(c, root, "parameters", &n))
        return ST_ERROR;
    cfg->parameters = config_calloc(c, n, sizeof *cfg->parameters);
    if (!cfg->instance_groups || !cfg->warmups || !cfg->parameters)
        return ST_ERROR;

    uint32_t instances = 0;
    for (const struct pbtxt_field *f = root->u.fields; f; f = f->next) {
        const char *name = f->name;
        struct mark m = config_path_push(c, name);
        int rc = 0;
        if (!strcmp(name, "name")) {
            rc = config_once(c, f, &seen, TOP_NAME) || config_get_string(c, f, &cfg->name);
        } else if (!strcmp(name, "platform")) {
            rc = config_once(c, f, &seen, TOP_PLATFORM) || config_get_string(c, f, &cfg->platform);
        } else if (!strcmp(name, "backend")) {
            rc = config_once(c, f, &seen, TOP_BACKEND) || config_get_string(c, f, &cfg->backend);
        } else if (!strcmp(name, "max_batch_size") || !strcmp(name, "input") ||
                   !strcmp(name, "output")) {
            /* read above */
        } else if (!strcmp(name, "dynamic_batching") || !strcmp(name, "sequence_batching") ||
                   !strcmp(name, "ensemble_scheduling")) {
            if (scheduling)
                rc = FAIL_F(c, f, "%s and %s cannot both be set (one scheduling policy per model)",
                            scheduling->name, name);
            else if (f->in_list)
                rc = FAIL_F(c, f, "not a repeated field: list syntax is not allowed");
            scheduling = f;
            if (!rc)
                rc = name[0] == 'd'   ? config_parse_dynamic_batching(c, f)
                     : name[0] == 's' ? config_parse_sequence_batching(c, f)
                                      : config_parse_ensemble(c, f);
        } else if (!strcmp(name, "instance_group")) {
            config_path_index(c, cfg->ninstance_groups);
            rc = config_parse_instance_group(c, f, &cfg->instance_groups[cfg->ninstance_groups]);
            if (!rc) {
                instances += (uint32_t)cfg->instance_groups[cfg->ninstance_groups++].count;
                if (instances > CONFIG_MAX_INSTANCES)
                    rc = FAIL_F(c, f, "more than %d instances in all groups", CONFIG_MAX_INSTANCES);
            }
        } else if (!strcmp(name, "version_policy")) {
            rc = config_once(c, f, &seen, TOP_VERSION) || config_parse_version_policy(c, f);
        } else if (!strcmp(name, "model_transaction_policy")) {
            rc = config_once(c, f, &seen, TOP_TRANSACTION) || parse_transaction_policy(c, f);
        } else if (!strcmp(name, "model_warmup")) {
            config_path_index(c, cfg->nwarmups);
            rc = config_parse_warmup(c, f, &cfg->warmups[cfg->nwarmups]);
            cfg->nwarmups += !rc;
        } else if (!strcmp(name, "parameters")) {
            rc = config_parse_parameter(c, f, cfg->nparameters);
        } else if (is_ignored_top(name)) {
            rc = config_ignore(c, f);
        } else {
            rc = config_unknown(c, f, "ModelConfig");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

/* Ignored fields in source order (inputs and outputs are read first). */
static void sort_ignored(struct model_config *cfg)
{
    for (uint32_t i = 1; i < cfg->nignored; i++) {
        struct model_config_ignored x = cfg->ignored[i];
        uint32_t j = i;
        for (; j > 0 && (cfg->ignored[j - 1].line > x.line ||
                         (cfg->ignored[j - 1].line == x.line && cfg->ignored[j - 1].col > x.col));
             j--)
            cfg->ignored[j] = cfg->ignored[j - 1];
        cfg->ignored[j] = x;
    }
}

int model_config_parse(const char *text, size_t len, struct model_config *cfg, struct error *err)
{
    struct arena tree;
    struct pbtxt_value *root;
    struct ctx c = {.cfg = cfg, .err = err};
    int rc;

    model_config_init(cfg);
    if (len > MODEL_CONFIG_MAX_TEXT)
        return error_set(err, 400, "the model configuration is larger than %u bytes",
                         MODEL_CONFIG_MAX_TEXT);
    arena_init(&tree, TREE_ARENA_CHUNK, TREE_ARENA_MAX);
    rc = pbtxt_parse(&tree, text, len, NULL, &root, err);
    if (rc == 0)
        rc = parse_root(&c, root);
    arena_free(&tree);
    if (rc == 0)
        sort_ignored(cfg);
    if (rc) {
        model_config_free(cfg);
        return ST_ERROR;
    }
    return 0;
}
