/*
 * fields: reading the members of a policy section of the configuration
 * file (the YAML document as a base/json.h tree: see docs/limits.md), with
 * errors that name the field's path and what was found there:
 *
 *   "concurrency[1].min: expected an integer from 1 to 100000, got -3"
 *
 * `path` is the path of the object the member belongs to (e.g.
 * "breakers[0]"); every function returns 0, or ST_ERROR with err (status 400).
 * Strings in messages are cut to a few dozen bytes; nothing here
 * allocates. Thread: any.
 */
#ifndef INFERD_POLICY_FIELDS_H
#define INFERD_POLICY_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

/* What v is, for "got ..." in a message: a number as written, a string
 * quoted, else its kind ("a list"); cut to 32 bytes of source text. */
void fields_describe(const struct json_value *v, char *out, size_t size);

/* Fails unless v is an object whose member names are all in known
 * (NULL-terminated) and appear once. */
int fields_check_object(const struct json_value *v, const char *path, const char *const *known,
                        struct error *err);

/* Fails unless v is a sequence of at most max entries. */
int fields_check_list(const struct json_value *v, const char *path, uint32_t max,
                      struct error *err);

/* Member `key` of object obj: NULL when absent (or null), leaving *out
 * alone. The integer forms take plain integers; a ratio any number. */
int fields_u32(const struct json_value *obj, const char *path, const char *key, uint32_t lo,
               uint32_t hi, uint32_t *out, struct error *err);
int fields_u64(const struct json_value *obj, const char *path, const char *key, uint64_t lo,
               uint64_t hi, uint64_t *out, struct error *err);
int fields_double(const struct json_value *obj, const char *path, const char *key, double lo,
                  double hi, double *out, struct error *err);
int fields_bool(const struct json_value *obj, const char *path, const char *key, bool *out,
                struct error *err);
/* A string of 1 to size - 1 bytes without NUL, copied to out[size];
 * required: an absent member fails. */
int fields_name(const struct json_value *obj, const char *path, const char *key, char *out,
                size_t size, bool required, struct error *err);
/* A model version: a decimal integer >= 1, as a number or a string ("1").
 * Absent: *out = -1. */
int fields_version(const struct json_value *obj, const char *path, const char *key, int64_t *out,
                   struct error *err);

#endif
