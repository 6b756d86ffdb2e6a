/*
 * yaml: a YAML document (libyaml) read into the JSON value tree of
 * base/json.h, so that configuration sections are parsed by one code path
 * whether they arrive as YAML (the --config file) or as JSON text (tests,
 * APIs). JSON text is YAML, and gives the tree json_parse would.
 *
 * Mapping of the YAML data model:
 *   mapping            JSON_OBJECT, members in source order
 *   sequence           JSON_ARRAY
 *   plain scalars (unquoted), resolved as follows; every other scalar,
 *   and every quoted or block scalar, is a JSON_STRING:
 *     empty, ~, null, Null, NULL                 JSON_NULL
 *     true, True, TRUE / false, False, FALSE     JSON_TRUE / JSON_FALSE
 *       (only these: YAML 1.1's yes/no/on/off/y/n stay strings, so that
 *        `country: no` means "no")
 *     a decimal number: [-+]? (0 | [1-9][0-9]*) (. [0-9]*)? ([eE] [-+]? [0-9]+)?
 *       or [-+]? . [0-9]+ (exponent optional)    JSON_NUMBER
 *       u.num is the number in JSON's spelling (a leading '+' dropped,
 *       "1." written "1.0", ".5" written "0.5"), so the json_num_*
 *       conversions accept it. Other YAML 1.1 forms (0x1f, 017, 0o17, 1_000,
 *       1:30, .inf, .nan) stay strings, and a number that would need them
 *       is refused by whoever expects a number.
 *   Keys are the scalar's text (any style); a key that is not a scalar is
 *   refused.
 *
 * Refused, with a 400 (413 for the size limits) and "line L, column C: ..."
 * from libyaml's marks (1-based): more than YAML_MAX_TEXT bytes of text,
 * nesting deeper than YAML_MAX_DEPTH, more than YAML_MAX_NODES nodes
 * (scalars, keys included, sequences and mappings), anchors and aliases
 * (no billion laughs), tags (!!str, !custom), a second document, duplicate
 * keys in one mapping, syntax errors. Error messages never contain a
 * scalar's text (a configuration file holds secrets): they name what is
 * wrong and where.
 *
 * An empty stream (no document, or only comments) is a JSON_NULL.
 *
 * Memory: the tree (values, member arrays, strings) and the parse's
 * temporary vectors come from `arena`, which owns them; running into its
 * ceiling fails with 413. libyaml's own buffers are freed before return.
 * Thread: any; nothing global.
 */
#ifndef INFERD_BASE_YAML_H
#define INFERD_BASE_YAML_H

#include <stddef.h>

#include "base/arena.h"
#include "base/error.h"
#include "base/json.h"

#define YAML_MAX_TEXT (1u << 20)
#define YAML_MAX_DEPTH 32
#define YAML_MAX_NODES 100000

/* Parses text[0..len) (no NUL needed). 0 with *out set, or ST_ERROR with err. */
int yaml_parse(struct arena *arena, const char *text, size_t len, struct json_value **out,
               struct error *err);

#endif
