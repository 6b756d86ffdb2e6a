/*
 * config_instances: one entry of the instance_group section of
 * config.pbtxt (ModelInstanceGroup); see config_parse.h for what a section
 * parser receives and returns.
 */
#include "model/config_parse.h"

#include <string.h>

static const char *const kind_names[] = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"};

enum ig_bits { IG_NAME = 1, IG_KIND = 2, IG_COUNT = 4 };

int config_parse_instance_group(struct ctx *c, const struct pbtxt_field *f,
                                struct model_instance_group *g)
{
    uint32_t seen = 0;
    int64_t count = 0;
    int k = 0;

    if (config_want_message(c, f))
        return ST_ERROR;
    g->name = config_empty_string;
    g->kind = MODEL_INSTANCE_AUTO;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (!strcmp(e->name, "name")) {
            rc = config_once(c, e, &seen, IG_NAME) || config_get_string(c, e, &g->name);
        } else if (!strcmp(e->name, "kind")) {
            rc = config_once(c, e, &seen, IG_KIND) ||
                 config_get_enum(c, e, kind_names, COUNT_OF(kind_names),
                                 "KIND_AUTO, KIND_CPU or KIND_MODEL", &k);
            if (!rc && k == 1)
                rc = FAIL_V(c, &e->value,
                            "GPU instances are not supported (inferd runs models on the CPU)");
            if (!rc)
                g->kind = k == 0   ? MODEL_INSTANCE_AUTO
                          : k == 2 ? MODEL_INSTANCE_CPU
                                   : MODEL_INSTANCE_MODEL;
        } else if (!strcmp(e->name, "count")) {
            rc = config_once(c, e, &seen, IG_COUNT) ||
                 config_get_i64(c, e, 0, CONFIG_MAX_INSTANCES, "a positive instance count", &count);
        } else if (!strcmp(e->name, "gpus")) {
            rc = FAIL_V(c, &e->value, "GPUs are not supported (inferd runs models on the CPU)");
        } else if (!strcmp(e->name, "profile")) {
            rc =
                FAIL_V(c, &e->value, "optimization profiles are only supported by TensorRT models");
        } else if (!strcmp(e->name, "rate_limiter") || !strcmp(e->name, "secondary_devices") ||
                   !strcmp(e->name, "passive") || !strcmp(e->name, "host_policy")) {
            rc = config_ignore(c, e);
        } else {
            rc = config_unknown(c, e, "ModelInstanceGroup");
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    g->count = count > 0 ? (int32_t)count : 1; /* 0 is proto3's "unset" */
    return 0;
}
