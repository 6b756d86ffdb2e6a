/*
 * config_params: one map entry of the parameters section of config.pbtxt
 * (ModelParameter) into cfg->parameters; see config_parse.h for what a
 * section parser receives and returns.
 */
#include "model/config_parse.h"

#include <string.h>

int config_parse_parameter(struct ctx *c, const struct pbtxt_field *f, uint32_t index)
{
    struct model_config *cfg = c->cfg;
    const struct pbtxt_field *key, *value;
    char *k, *v = config_empty_string;

    size_t before = c->plen;
    config_path_index(c, index);
    if (config_map_entry(c, f, &key, &value) || config_map_string_key(c, key, &k))
        return ST_ERROR;
    c->plen = before; /* from here on the key names the entry */
    c->path[before] = '\0';
    config_path_key(c, k);
    if (value) {
        uint32_t seen = 0;
        struct mark m = config_path_push(c, "value");
        if (config_want_message(c, value)) {
            config_path_pop(c, m);
            return ST_ERROR;
        }
        for (const struct pbtxt_field *e = value->value.u.fields; e; e = e->next) {
            struct mark me = config_path_push(c, e->name);
            int rc = !strcmp(e->name, "string_value")
                         ? config_once(c, e, &seen, 1) || config_get_string(c, e, &v)
                         : config_unknown(c, e, "ModelParameter");
            config_path_pop(c, me);
            if (rc)
                return ST_ERROR;
        }
        config_path_pop(c, m);
    }
    struct model_parameter *p = NULL;
    for (uint32_t i = 0; i < cfg->nparameters; i++)
        if (!strcmp(cfg->parameters[i].key, k))
            p = &cfg->parameters[i]; /* the last entry wins */
    if (!p)
        p = &cfg->parameters[cfg->nparameters++];
    p->key = k;
    p->string_value = v;
    return 0;
}
