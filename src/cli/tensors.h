/*
 * tensors: the CLI client's tensors — a name, a KServe datatype, a shape
 * and the data in KServe's raw layout (numeric little-endian row-major,
 * BOOL one byte, BYTES a 4-byte little-endian length and the bytes per
 * element: what gRPC's raw contents and the binary extension carry) — and
 * their conversions to and from KServe v2 JSON.
 *
 * cli_tensor_from_json() converts a JSON "data" value (flat or nested
 * arrays, or one scalar) of datatype dt into raw data, checking each
 * value's type and range (integers exact, BOOL true/false, BYTES strings,
 * FP16/BF16 from numbers, rounded to nearest even). With shape_out, the
 * nesting of the arrays gives the shape (they must be rectangular).
 * -1 with err.
 *
 * cli_tensor_write_json() writes the data as a flat JSON array (FP16/BF16
 * widened to numbers; BYTES as strings, invalid UTF-8 escaped as \u00XX by
 * the writer). cli_tensor_print() prints a readable block: a header line
 * and the values, one row of the last dimension per line, at most
 * `limit` values. Each owns its `raw` buffer (bounded by CLI_MAX_TENSOR).
 */
#ifndef INFERD_CLI_TENSORS_H
#define INFERD_CLI_TENSORS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/json.h"
#include "core/dtype.h"

#define CLI_MAX_TENSORS 64
#define CLI_MAX_TENSOR ((size_t)256 << 20)
#define CLI_MAX_DIMS 16

struct cli_tensor {
    char name[256];
    enum dtype dtype;
    int ndim;
    int64_t shape[CLI_MAX_DIMS];
    struct buf raw;
};

void cli_tensor_init(struct cli_tensor *t);
void cli_tensor_free(struct cli_tensor *t);
/* The product of the shape (1 for a scalar); -1 on overflow. */
int64_t cli_tensor_count(const struct cli_tensor *t);
/* Checks that raw holds exactly count elements of dtype: 0 or ST_ERROR with err. */
int cli_tensor_check(const struct cli_tensor *t, struct error *err);

int cli_tensor_from_json(struct cli_tensor *t, const struct json_value *data, bool shape_out,
                         struct error *err);
void cli_tensor_write_json(const struct cli_tensor *t, struct json_writer *w);
void cli_tensor_print(const struct cli_tensor *t, FILE *f, uint64_t limit);
/* True when the data can travel as JSON without change (no FP16/BF16, BYTES
 * valid UTF-8). */
bool cli_tensor_json_safe(const struct cli_tensor *t);

#endif
