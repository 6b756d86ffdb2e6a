/*
 * config_parse: the parts of the config.pbtxt parser, internal to
 * src/model/ (the interface is model_config_parse in config.h).
 * model_config_parse (config_parse.c) reads the root ModelConfig message
 * and hands each section to the file that owns it:
 *
 *   config_io.c         input and output, with reshape
 *   config_batching.c   dynamic_batching, with its queue and priority policies
 *   config_sequence.c   sequence_batching: strategy, control inputs, state
 *   config_ensemble.c   ensemble_scheduling: the steps and their tensor maps
 *   config_instances.c  instance_group
 *   config_versions.c   version_policy
 *   config_warmup.c     model_warmup
 *   config_params.c     parameters
 *
 * They share what this header declares: the parse context (struct ctx),
 * the field path, errors and the readers of one field of each kind
 * (config_fields.c), and memory from the config's arena (config_arena.c,
 * which also holds the struct's lifecycle).
 *
 * A section parser (config_parse_<section>):
 * - receives the context and its section's field, whose name (and index,
 *   for a repeated section) the caller has already put on the path; it
 *   pushes each field it reads below that and pops it again, and the
 *   caller returns the path to its own mark afterwards (a parser may leave
 *   an index or a map key on it). config_parse_ios is the exception: it
 *   receives the root message and reads every input, or every output.
 * - fills its part of c->cfg and returns 0, or ST_ERROR with *c->err set:
 *   400 and "line:col: path: message" (config_fail_at, with c->path at the
 *   failing field), or 500 when memory ran out. The messages are part of
 *   the interface: users read them and tests match them.
 * - allocates only from the config's arena (config_calloc, config_strdup,
 *   the strings of config_get_string), so nothing is freed on error:
 *   model_config_parse frees the whole config. Nothing may point into the
 *   pbtxt tree, which is freed when parsing ends.
 */
#ifndef INFERD_MODEL_CONFIG_PARSE_H
#define INFERD_MODEL_CONFIG_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/config.h"
#include "model/pbtxt.h"

/* Entries of any one repeated field or map (inputs, preferred sizes, ...):
 * keeps the duplicate checks, which compare pairs, cheap. */
#define CONFIG_MAX_ENTRIES 4096
/* Model instances over all instance groups. */
#define CONFIG_MAX_INSTANCES 256
#define CONFIG_PATH_MAX 160

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The value of string fields the text does not set; never written to. */
extern char config_empty_string[];

/* Parse context: the config being filled and the path of the field being
 * read, with indexes for messages ("input[1].dims") and without them for
 * the list of ignored fields ("input.dims"). */
struct ctx {
    struct model_config *cfg;
    struct error *err;
    char path[CONFIG_PATH_MAX];
    size_t plen;
    char spath[CONFIG_PATH_MAX];
    size_t splen;
};

/* Both paths as they were before a push: config_path_pop returns to it. */
struct mark {
    size_t plen, splen;
};

/* ---- the field path and errors (config_fields.c) ---- */

/* Appends ".name" (or "name" at the root) to both paths. */
struct mark config_path_push(struct ctx *c, const char *name);
/* Append "[i]" and "[\"key\"]" to the path with indexes only. */
void config_path_index(struct ctx *c, uint32_t i);
void config_path_key(struct ctx *c, const char *key);
void config_path_pop(struct ctx *c, struct mark m);

/* Sets *c->err to 400 "line:col: path: message" and returns ST_ERROR. */
int config_fail_at(struct ctx *c, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* config_fail_at at a value's or a field's position. */
#define FAIL_V(c, v, ...) config_fail_at((c), (v)->line, (v)->col, __VA_ARGS__)
#define FAIL_F(c, f, ...) config_fail_at((c), (f)->line, (f)->col, __VA_ARGS__)

/* ---- memory from the config's arena (config_arena.c) ---- */

/* model_config_alloc and model_config_strndup for c->cfg, errors in c->err. */
void *config_calloc(struct ctx *c, size_t count, size_t size);
char *config_strdup(struct ctx *c, const char *s, size_t n);

/* ---- field kinds (config_fields.c) ----
 * Each reads the field the path names and returns 0, or ST_ERROR with the
 * error at the field (or its value) in *c->err. */

/* A field that is not part of message_type: always an error. */
int config_unknown(struct ctx *c, const struct pbtxt_field *f, const char *message_type);
int config_ignore(struct ctx *c, const struct pbtxt_field *f);
/* `bit` is the field's own bit in *seen, the fields the message has had. */
int config_once(struct ctx *c, const struct pbtxt_field *f, uint32_t *seen, uint32_t bit);
int config_want_message(struct ctx *c, const struct pbtxt_field *f);
/* *out is a copy in the config's arena. */
int config_get_string(struct ctx *c, const struct pbtxt_field *f, char **out);
/* An integer in [min, max]; `expect` names what was expected in the message. */
int config_get_i64(struct ctx *c, const struct pbtxt_field *f, int64_t min, int64_t max,
                   const char *expect, int64_t *out);
int config_get_u64(struct ctx *c, const struct pbtxt_field *f, uint64_t max, const char *expect,
                   uint64_t *out);
int config_get_bool(struct ctx *c, const struct pbtxt_field *f, bool *out);
/* *out is the index of the value in names[0..n). */
int config_get_enum(struct ctx *c, const struct pbtxt_field *f, const char *const *names, size_t n,
                    const char *expect, int *out);
int config_get_dtype(struct ctx *c, const struct pbtxt_field *f, enum dtype *out);
/* *n = the number of `name` fields in msg, at most CONFIG_MAX_ENTRIES: what
 * to size a repeated field's array by before reading it. */
int config_check_entries(struct ctx *c, const struct pbtxt_value *msg, const char *name,
                         uint32_t *n);
/* Appends one dimension to dims[0..*ndim), at most TENSOR_MAX_DIMS. */
int config_add_dim(struct ctx *c, const struct pbtxt_field *f, bool allow_variable, int64_t *dims,
                   uint32_t *ndim);
int config_map_entry(struct ctx *c, const struct pbtxt_field *f, const struct pbtxt_field **key,
                     const struct pbtxt_field **value);
int config_map_string_key(struct ctx *c, const struct pbtxt_field *key, char **out);

/* ---- the sections (one file each, named above) ---- */

/* Every `name` field ("input" or "output") of the root message into
 * cfg->inputs or cfg->outputs. Reads max_batch_size: call after it is set. */
int config_parse_ios(struct ctx *c, const struct pbtxt_value *root, const char *name, bool input);
/* Into cfg->dynamic_batching; reads max_batch_size. */
int config_parse_dynamic_batching(struct ctx *c, const struct pbtxt_field *f);
/* Into cfg->sequence_batching; reads max_batch_size. */
int config_parse_sequence_batching(struct ctx *c, const struct pbtxt_field *f);
/* Into cfg->ensemble. */
int config_parse_ensemble(struct ctx *c, const struct pbtxt_field *f);
/* One entry of instance_group into *g. */
int config_parse_instance_group(struct ctx *c, const struct pbtxt_field *f,
                                struct model_instance_group *g);
/* Into cfg->version_policy. */
int config_parse_version_policy(struct ctx *c, const struct pbtxt_field *f);
/* One entry of model_warmup into *w; reads max_batch_size. */
int config_parse_warmup(struct ctx *c, const struct pbtxt_field *f, struct model_warmup *w);
/* One map entry of parameters, the index-th, into cfg->parameters (sized
 * by the caller): a key seen before takes the new value. */
int config_parse_parameter(struct ctx *c, const struct pbtxt_field *f, uint32_t index);

#endif
