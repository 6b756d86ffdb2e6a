#include "model/lookup.h"

#include <stdio.h>
#include <string.h>

#include "base/nearest.h"

/* Longest model name or version string quoted in a message. */
#define QUOTE_MAX 200

const struct model_entry *model_lookup_entry(const struct model_snapshot *s, const char *name,
                                             size_t name_len, struct error *err)
{
    const struct model_entry *e = snapshot_find(s, name, name_len);
    if (e)
        return e;
    /* Triton's words, then the served name it most likely meant. */
    struct nearest near;
    nearest_init(&near, name, name_len);
    for (uint32_t i = 0; i < s->count; i++)
        if (s->entries[i].nversions)
            nearest_offer(&near, s->entries[i].name);
    error_set(err, 404, "Request for unknown model: '%.*s' is not found%s%s%s",
              (int)(name_len > QUOTE_MAX ? QUOTE_MAX : name_len), name,
              near.best ? "; did you mean '" : "", near.best ? near.best : "",
              near.best ? "'?" : "");
    return NULL;
}

/* A version string is a non-negative decimal number without sign or
 * spaces (Triton parses it the same way). */
static bool version_valid(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 18)
        return false;
    for (size_t i = 0; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

/* "1, 2" — the loaded versions of e, for a message. */
static void list_versions(const struct model_entry *e, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < e->nversions && used + 1 < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "",
                         e->versions[i]->version_str);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
}

const struct model *model_lookup(const struct model_snapshot *s, const char *name,
                                 size_t name_len, const char *version,
                                 const struct model_entry **entry, struct error *err)
{
    const struct model_entry *e = model_lookup_entry(s, name, name_len, err);
    if (entry)
        *entry = e;
    if (!e)
        return NULL;
    if (e->state != MODEL_READY || !e->model) {
        error_set(err, 404, "Request for unknown model: '%s' has no available versions: %s",
                  e->name, e->reason[0] ? e->reason : "no version is loaded");
        return NULL;
    }
    if (!version || !version[0])
        return e->model;
    if (!version_valid(version)) {
        error_set(err, 400, "failed to get model version from specified version string '%.*s'",
                  QUOTE_MAX, version);
        return NULL;
    }
    const struct model *m = registry_version(e, version);
    if (!m) {
        char loaded[128];
        list_versions(e, loaded, sizeof loaded);
        error_set(err, 404,
                  "Request for unknown model: '%s' version %s is not found (loaded versions: %s)",
                  e->name, version, loaded);
    }
    return m;
}
