#include "policy/version_entries.h"

#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "base/status.h"
#include "policy/fields.h"

static const struct version_key *key_at(const struct version_entries *l, uint32_t i)
{
    return (const struct version_key *)(l->e + (size_t)i * l->size);
}

int version_entries_parse(const struct json_value *section, const struct version_entries_spec *spec,
                          struct version_entries *out, struct error *err)
{
    *out = (struct version_entries){.size = spec->size};
    if (section && section->type == JSON_NULL)
        section = NULL; /* `breakers:` with nothing under it */
    if (!section)
        return 0;
    if (fields_check_list(section, spec->section, spec->max, err) != 0)
        return ST_ERROR;
    if (!section->len)
        return 0;
    out->e = mem_calloc(section->len, spec->size);
    if (!out->e)
        return error_set(err, 500, "out of memory reading the %s section", spec->section);
    for (uint32_t i = 0; i < section->len; i++) {
        char path[48];
        snprintf(path, sizeof path, "%s[%u]", spec->section, i);
        const struct version_key *e = key_at(out, i);
        if (spec->parse(&section->u.items[i], path, out->e + (size_t)i * spec->size, err) != 0)
            goto fail;
        for (uint32_t k = 0; k < i; k++)
            if (key_at(out, k)->version == e->version &&
                strcmp(key_at(out, k)->model, e->model) == 0) {
                error_set(err, 400, "%s: model %.64s%s %s %s[%u]", path, e->model,
                          e->version < 0 ? "" : " (this version)", spec->taken, spec->section, k);
                goto fail;
            }
        out->n++;
    }
    return 0;
fail:
    version_entries_release(out);
    return ST_ERROR;
}

void version_entries_release(struct version_entries *l)
{
    mem_free(l->e);
    l->e = NULL;
    l->n = 0;
}

const void *version_entries_for(const struct version_entries *l, const char *model, int64_t version)
{
    const struct version_key *any = NULL;
    for (uint32_t i = 0; l && i < l->n; i++) {
        const struct version_key *k = key_at(l, i);
        if (strcmp(k->model, model) != 0)
            continue;
        if (k->version == version)
            return k;
        if (k->version < 0)
            any = k;
    }
    return any;
}
