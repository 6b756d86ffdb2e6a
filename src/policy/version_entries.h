/*
 * version_entries: a policy section that is a list of entries keyed by a
 * model and an optional version (`breakers`, `concurrency`): reading the
 * list and finding the entry that applies to a model version.
 *
 * Every entry begins with a struct version_key; the rest is the module's.
 * An entry with a version applies to that version, before an entry of the
 * same model without one; a (model, version) pair may appear once. Errors
 * (status 400) name the path, e.g. "breakers[1]: model digits (this
 * version) already has a breaker in breakers[0]". Thread: any; a parsed
 * list is immutable.
 */
#ifndef INFERD_POLICY_VERSION_ENTRIES_H
#define INFERD_POLICY_VERSION_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

#define VERSION_MODEL_MAX 256

struct version_key {
    char model[VERSION_MODEL_MAX];
    int64_t version; /* -1: every version */
};

struct version_entries_spec {
    const char *section; /* its top-level key: "breakers" (paths, messages) */
    uint32_t max;        /* entries at most */
    size_t size;         /* bytes of an entry (it begins with a struct version_key) */
    const char *taken;   /* duplicates: "model M (this version) <taken> <section>[k]" */
    /* Reads the object v at path into e (zeroed), its key included. */
    int (*parse)(const struct json_value *v, const char *path, void *e, struct error *err);
};

struct version_entries {
    uint32_t n;
    size_t size;      /* bytes of an entry */
    unsigned char *e; /* n entries; NULL when n is 0 */
};

/* section: the list, or NULL or null (no entry). 0 and *out (release with
 * version_entries_release), or ST_ERROR with err (400 naming the path; 500 when
 * out of memory) and *out empty. */
int version_entries_parse(const struct json_value *section, const struct version_entries_spec *spec,
                          struct version_entries *out, struct error *err);
void version_entries_release(struct version_entries *l);

/* The entry that applies to (model, version): its own, else the model's;
 * NULL when none (or l is NULL). */
const void *version_entries_for(const struct version_entries *l, const char *model,
                                int64_t version);

#endif
