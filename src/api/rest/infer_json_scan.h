/*
 * infer_json_scan: the everyday KServe v2 JSON infer request, read in one
 * pass without a JSON tree.
 *
 * Most requests look like
 *   {"id": "...", "inputs": [{"name": "...", "shape": [...],
 *    "datatype": "...", "data": [...]}, ...], "outputs": [{"name": "..."}]}
 * with "id" and "outputs" optional and members in any order; Triton's
 * clients send binary tensor data the same way, with
 * "parameters": {"binary_data_size": N} instead of an input's "data",
 * "parameters": {"binary_data": true} in an output and
 * "parameters": {"binary_data_output": true} in the request.
 * infer_json_scan() reads exactly that shape and returns true with the
 * pieces in *doc; it returns false for everything else, leaving the
 * request to the general decoder (base/json's tree, then
 * api/rest/infer_json.c), which also says what is wrong:
 *   - any other member, anywhere (other parameters, shared memory,
 *     classification, sequences, priorities, ...), or a member given twice;
 *   - a string (key, id, name, datatype, a BYTES element) with an escape
 *     or a byte below 0x20 or above 0x7F;
 *   - a dimension or binary_data_size that is not a plain non-negative
 *     integer below 10^18;
 *   - a `data` array holding an object, nested deeper than
 *     TENSOR_JSON_MAX_DEPTH, or unterminated;
 *   - more than INFER_JSON_SCAN_MAX inputs or outputs, an empty "outputs",
 *     an input without name, datatype, shape and exactly one of data and
 *     binary_data_size, no "inputs";
 *   - anything that is not JSON.
 * The `data` arrays are only delimited here (tensor_json_parse() reads and
 * checks them); everything else is checked. Spans point into text.
 * Nothing is allocated; thread: any.
 */
#ifndef INFERD_API_REST_INFER_JSON_SCAN_H
#define INFERD_API_REST_INFER_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

#define INFER_JSON_SCAN_MAX 16

/* Bytes of text: between the quotes of a string, or a whole `data` array. */
struct infer_json_span {
    const char *p;
    uint32_t n;
};

struct infer_json_scan_input {
    struct infer_json_span name, datatype;
    struct infer_json_span data; /* data.p NULL: binary_data_size instead */
    uint64_t binary_size;
    uint32_t ndim;
    int64_t shape[TENSOR_MAX_DIMS];
};

/* An output asked for: its name, and "binary_data" when given. */
struct infer_json_scan_output {
    struct infer_json_span name;
    bool binary_given, binary;
};

struct infer_json_doc {
    bool has_id, has_outputs;
    bool binary_output; /* the request's "binary_data_output"; false when absent */
    struct infer_json_span id;
    uint32_t ninputs, noutputs;
    struct infer_json_scan_input inputs[INFER_JSON_SCAN_MAX];
    struct infer_json_scan_output outputs[INFER_JSON_SCAN_MAX];
};

bool infer_json_scan(const char *text, size_t len, struct infer_json_doc *doc);

#endif
