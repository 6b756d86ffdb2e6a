/*
 * config_batching: the dynamic_batching section of config.pbtxt
 * (ModelDynamicBatching, with its default and per-priority queue
 * policies) into cfg->dynamic_batching; see config_parse.h for what a
 * section parser receives and returns.
 */
#include "model/config_parse.h"

#include <stdio.h>
#include <string.h>

static const char *const timeout_action_names[] = {"REJECT", "DELAY"};

const char *model_timeout_action_name(enum model_timeout_action a)
{
    return (size_t)a < COUNT_OF(timeout_action_names) ? timeout_action_names[a] : "REJECT";
}

enum queue_bits { QP_ACTION = 1, QP_TIMEOUT = 2, QP_OVERRIDE = 4, QP_SIZE = 8 };

static int parse_queue_policy(struct ctx *c, const struct pbtxt_field *f,
                              struct model_queue_policy *qp)
{
    uint32_t seen = 0;
    uint64_t u = 0;
    int k = 0;
    if (config_want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc;
        if (!strcmp(e->name, "timeout_action")) {
            rc = config_once(c, e, &seen, QP_ACTION) ||
                 config_get_enum(c, e, timeout_action_names, COUNT_OF(timeout_action_names),
                                 "REJECT or DELAY", &k);
            if (!rc)
                qp->timeout_action = (enum model_timeout_action)k;
        } else if (!strcmp(e->name, "default_timeout_microseconds")) {
            rc =
                config_once(c, e, &seen, QP_TIMEOUT) ||
                config_get_u64(c, e, UINT64_MAX, "a non-negative integer", &qp->default_timeout_us);
        } else if (!strcmp(e->name, "allow_timeout_override")) {
            rc = config_once(c, e, &seen, QP_OVERRIDE) ||
                 config_get_bool(c, e, &qp->allow_timeout_override);
        } else if (!strcmp(e->name, "max_queue_size")) {
            rc = config_once(c, e, &seen, QP_SIZE) ||
                 config_get_u64(c, e, UINT32_MAX, "a non-negative 32-bit integer", &u);
            if (!rc)
                qp->max_queue_size = (uint32_t)u;
        } else {
            rc = config_unknown(c, e, "ModelQueuePolicy");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

static int parse_priority_policy(struct ctx *c, const struct pbtxt_field *f,
                                 struct model_dynamic_batching *db, uint32_t index)
{
    const struct pbtxt_field *key, *value;
    char buf[64];
    uint64_t level = 0;

    config_path_index(c, index);
    if (config_map_entry(c, f, &key, &value))
        return ST_ERROR;
    if (key) {
        struct mark m = config_path_push(c, "key");
        int rc = config_get_u64(c, key, UINT64_MAX, "a priority level", &level);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (db->priority_levels == 0)
        return FAIL_F(c, f, "needs priority_levels");
    if (level < 1 || level > db->priority_levels) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)level);
        return FAIL_V(c, key ? &key->value : &f->value, "priority level %s is not in [1, %llu]",
                      buf, (unsigned long long)db->priority_levels);
    }
    struct model_priority_policy *pp = NULL;
    for (uint32_t i = 0; i < db->npriority_policies; i++)
        if (db->priority_queue_policy[i].level == level)
            pp = &db->priority_queue_policy[i]; /* the last entry wins, as in protobuf maps */
    if (!pp)
        pp = &db->priority_queue_policy[db->npriority_policies++];
    memset(pp, 0, sizeof *pp);
    pp->level = level;
    if (value) {
        struct mark m = config_path_push(c, "value");
        int rc = parse_queue_policy(c, value, &pp->policy);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    return 0;
}

enum db_bits { DB_DELAY = 1, DB_ORDER = 2, DB_LEVELS = 4, DB_DEFAULT_LEVEL = 8, DB_POLICY = 16 };

int config_parse_dynamic_batching(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_dynamic_batching *db = &c->cfg->dynamic_batching;
    int32_t max_batch = c->cfg->max_batch_size;
    const struct pbtxt_field *default_level = NULL;
    uint32_t seen = 0, npreferred, npolicies;

    if (config_want_message(c, f))
        return ST_ERROR;
    const struct pbtxt_value *msg = &f->value;
    db->enabled = true;

    /* priority_levels first: the levels of the other fields depend on it. */
    for (const struct pbtxt_field *e = msg->u.fields; e; e = e->next) {
        if (strcmp(e->name, "priority_levels"))
            continue;
        struct mark m = config_path_push(c, e->name);
        int rc = config_once(c, e, &seen, DB_LEVELS) ||
                 config_get_u64(c, e, UINT64_MAX, "a non-negative integer", &db->priority_levels);
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (config_check_entries(c, msg, "preferred_batch_size", &npreferred) ||
        config_check_entries(c, msg, "priority_queue_policy", &npolicies))
        return ST_ERROR;
    db->preferred_batch_size = config_calloc(c, npreferred, sizeof *db->preferred_batch_size);
    db->priority_queue_policy = config_calloc(c, npolicies, sizeof *db->priority_queue_policy);
    if (!db->preferred_batch_size || !db->priority_queue_policy)
        return ST_ERROR;

    for (const struct pbtxt_field *e = msg->u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        int64_t x = 0;
        if (!strcmp(e->name, "preferred_batch_size")) {
            rc = config_get_i64(c, e, 1, INT32_MAX, "a positive batch size", &x);
            if (!rc && x > max_batch)
                rc = FAIL_V(c, &e->value,
                            "preferred batch size %lld is larger than max_batch_size %d",
                            (long long)x, max_batch);
            if (!rc)
                db->preferred_batch_size[db->npreferred++] = (int32_t)x;
        } else if (!strcmp(e->name, "max_queue_delay_microseconds")) {
            rc =
                config_once(c, e, &seen, DB_DELAY) ||
                config_get_u64(c, e, UINT64_MAX, "a non-negative integer", &db->max_queue_delay_us);
        } else if (!strcmp(e->name, "preserve_ordering")) {
            rc =
                config_once(c, e, &seen, DB_ORDER) || config_get_bool(c, e, &db->preserve_ordering);
        } else if (!strcmp(e->name, "priority_levels")) {
            /* read above */
        } else if (!strcmp(e->name, "default_priority_level")) {
            default_level = e;
            rc = config_once(c, e, &seen, DB_DEFAULT_LEVEL) ||
                 config_get_u64(c, e, UINT64_MAX, "a non-negative integer",
                                &db->default_priority_level);
        } else if (!strcmp(e->name, "default_queue_policy")) {
            rc = config_once(c, e, &seen, DB_POLICY) ||
                 parse_queue_policy(c, e, &db->default_queue_policy);
            db->_queue_policy_set = true;
        } else if (!strcmp(e->name, "priority_queue_policy")) {
            rc = parse_priority_policy(c, e, db, db->npriority_policies);
            db->_queue_policy_set = true;
        } else {
            rc = config_unknown(c, e, "ModelDynamicBatching");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }

    if (db->priority_levels > 0 &&
        (db->default_priority_level < 1 || db->default_priority_level > db->priority_levels)) {
        struct mark m = config_path_push(c, "default_priority_level");
        config_fail_at(c, default_level ? default_level->value.line : msg->line,
                       default_level ? default_level->value.col : msg->col,
                       "must be in [1, %llu] when priority_levels is set",
                       (unsigned long long)db->priority_levels);
        config_path_pop(c, m);
        return ST_ERROR;
    }
    if (db->priority_levels == 0 && db->default_priority_level != 0) {
        struct mark m = config_path_push(c, "default_priority_level");
        FAIL_V(c, &default_level->value, "needs priority_levels");
        config_path_pop(c, m);
        return ST_ERROR;
    }
    if (db->preserve_ordering) {
        if (db->priority_levels > 1)
            return FAIL_V(c, msg, "preserve_ordering allows only one priority level");
        bool delay = db->default_queue_policy.timeout_action == MODEL_TIMEOUT_DELAY &&
                     db->default_queue_policy.default_timeout_us != 0;
        for (uint32_t i = 0; i < db->npriority_policies; i++)
            delay |= db->priority_queue_policy[i].policy.timeout_action == MODEL_TIMEOUT_DELAY &&
                     db->priority_queue_policy[i].policy.default_timeout_us != 0;
        if (delay)
            return FAIL_V(c, msg, "preserve_ordering does not allow the DELAY timeout action");
    }
    return 0;
}
