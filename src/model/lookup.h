/*
 * lookup: finding a model version in a repository snapshot by name and
 * version string, with the answers clients match on. Every front end and
 * API (inference, metadata, readiness, configuration, statistics, trace
 * settings) uses this one function, so the messages cannot drift apart.
 *
 * The messages begin with Triton's wording (clients such as Triton's own
 * examples test for it); inferd may add detail after it:
 *   404 "Request for unknown model: 'm' is not found"
 *   404 "Request for unknown model: 'm' has no available versions: <why>"
 *       (the model exists but no version is loaded: load failure, unload)
 *   400 "failed to get model version from specified version string 'v'"
 *       (not a non-negative decimal number)
 *   404 "Request for unknown model: 'm' version 3 is not found"
 *       (not a loaded version; the loaded ones are listed)
 */
#ifndef INFERD_MODEL_LOOKUP_H
#define INFERD_MODEL_LOOKUP_H

#include <stddef.h>

#include "base/error.h"
#include "model/repository.h"

/* The version `version` (decimal text; NULL or "" = the newest loaded) of
 * model `name` (name_len bytes, may hold any byte) in snapshot s, or NULL
 * with err set as above. *entry (if not NULL) is the model's entry, or
 * NULL when the name is unknown. The result lives as long as s. */
const struct model *model_lookup(const struct model_snapshot *s, const char *name,
                                 size_t name_len, const char *version,
                                 const struct model_entry **entry, struct error *err);

/* The entry of model `name`, or NULL with the "is not found" 404 in err. */
const struct model_entry *model_lookup_entry(const struct model_snapshot *s, const char *name,
                                             size_t name_len, struct error *err);

#endif
