/*
 * config_versions: the version_policy section of config.pbtxt
 * (ModelVersionPolicy: latest, all or specific) into cfg->version_policy;
 * see config_parse.h for what a section parser receives and returns.
 */
#include "model/config_parse.h"

#include <string.h>

static int parse_version_list(struct ctx *c, const struct pbtxt_field *f,
                              struct model_version_policy *vp)
{
    uint32_t n;
    if (config_want_message(c, f) || config_check_entries(c, &f->value, "versions", &n))
        return ST_ERROR;
    vp->versions = config_calloc(c, n, sizeof *vp->versions);
    if (!vp->versions)
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = !strcmp(e->name, "versions")
                     ? config_get_i64(c, e, 0, INT64_MAX, "a version number >= 0",
                                      &vp->versions[vp->nversions])
                     : config_unknown(c, e, "ModelVersionPolicy.Specific");
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
        vp->nversions++;
    }
    if (vp->nversions == 0)
        return FAIL_V(c, &f->value, "must list at least one version");
    return 0;
}

int config_parse_version_policy(struct ctx *c, const struct pbtxt_field *f)
{
    struct model_version_policy *vp = &c->cfg->version_policy;
    const struct pbtxt_field *choice = NULL;
    uint64_t num = 0;

    if (config_want_message(c, f))
        return ST_ERROR;
    for (const struct pbtxt_field *e = f->value.u.fields; e; e = e->next) {
        struct mark m = config_path_push(c, e->name);
        int rc = 0;
        if (strcmp(e->name, "latest") && strcmp(e->name, "all") && strcmp(e->name, "specific"))
            rc = config_unknown(c, e, "ModelVersionPolicy");
        else if (choice)
            rc = FAIL_F(c, e, "only one of latest, all and specific may be set");
        else if (e->in_list)
            rc = FAIL_F(c, e, "not a repeated field: list syntax is not allowed");
        else if (config_want_message(c, e))
            rc = ST_ERROR;
        choice = e;
        if (!rc && !strcmp(e->name, "latest")) {
            uint32_t seen = 0;
            vp->kind = MODEL_VERSIONS_LATEST;
            for (const struct pbtxt_field *l = e->value.u.fields; l && !rc; l = l->next) {
                struct mark ml = config_path_push(c, l->name);
                rc = !strcmp(l->name, "num_versions")
                         ? config_once(c, l, &seen, 1) ||
                               config_get_u64(c, l, UINT32_MAX, "a positive 32-bit integer", &num)
                         : config_unknown(c, l, "ModelVersionPolicy.Latest");
                config_path_pop(c, ml);
            }
            if (!rc && num == 0) {
                struct mark ml = config_path_push(c, "num_versions");
                const struct pbtxt_field *nf = pbtxt_find(&e->value, "num_versions");
                rc = FAIL_V(c, nf ? &nf->value : &e->value, "must be at least 1");
                config_path_pop(c, ml);
            }
            vp->num_versions = (uint32_t)num;
        } else if (!rc && !strcmp(e->name, "all")) {
            vp->kind = MODEL_VERSIONS_ALL;
            if (e->value.u.fields)
                rc = config_unknown(c, e->value.u.fields, "ModelVersionPolicy.All");
        } else if (!rc) {
            vp->kind = MODEL_VERSIONS_SPECIFIC;
            rc = parse_version_list(c, e, vp);
        }
        config_path_pop(c, m);
        if (rc)
            return ST_ERROR;
    }
    if (!choice)
        return FAIL_V(c, &f->value, "must set one of latest, all and specific");
    return 0;
}
