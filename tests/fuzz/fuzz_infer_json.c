/*
 * Fuzz target: KServe v2 infer request decoding (api/rest/infer_json.c), JSON and
 * Triton's binary tensor data extension, against a model with inputs of
 * several datatypes and ranks or one of a few single-input models (for raw
 * binary requests). Every body is also decoded by the general decoder alone
 * (infer_json_decode_general): both must give the same request or the same
 * error, which checks the everyday path (infer_json_scan.h) against it. A
 * decoded request is re-encoded as a response (inputs
 * as outputs, some of them binary) to exercise the writer on whatever the
 * decoder accepted, and the response is checked for consistency.
 *
 * Input: 2 bytes little-endian `v`, then the request body.
 *   v >> 13 (0..7): 0-1 the multi-input test model, 2-7 single-input model
 *                   (v >> 13) - 2;
 *   v & 0x1fff:     the Inference-Header-Content-Length, 0x1fff = none (-1).
 * Existing seeds: a pure JSON body is prefixed with ff 1f.
 */
#include <stdint.h>
#include <string.h>

#include "../support/infer_compare.h"
#include "../support/test_model.h"
#include "api/rest/infer_json.h"
#include "base/json.h"

#define NO_HEADER 0x1fff

#define NRAW 6
static struct model_io raw_inputs[NRAW][1] = {
    {{"X", DT_FP32, 2, {-1, -1}}},   {{"S", DT_BYTES, 1, {-1}}},
    {{"H", DT_INT16, 2, {2, -1}}},   {{"B", DT_BOOL, 2, {-1, -1}}},
    {{"U", DT_UINT8, 2, {3, 4}}},    {{"Z", DT_BYTES, 2, {-1, -1}}},
};
static struct model_io raw_outputs[NRAW][1] = {
    {{"Y", DT_FP32, 2, {-1, -1}}},   {{"T", DT_BYTES, 1, {-1}}},
    {{"I", DT_INT16, 2, {2, -1}}},   {{"C", DT_BOOL, 2, {-1, -1}}},
    {{"V", DT_FP64, 1, {-1}}},       {{"W", DT_BYTES, 2, {-1, -1}}},
};
static const bool raw_batched[NRAW] = {true, true, false, false, false, true};

/* The response must be a JSON document of json_len bytes followed by
 * exactly the bytes its binary_data_size parameters announce; json_len is
 * set when an output is binary, even one of 0 bytes. */
static void check_response(const struct buf *out, size_t json_len)
{
    if (out->err)
        return;
    size_t doc_len = json_len ? json_len : out->len;
    if (doc_len > out->len)
        __builtin_trap();
    struct arena a;
    arena_init(&a, 4096, 256u << 20);
    struct json_limits limits = {.max_depth = 16, .allow_nonfinite = true};
    struct json_value *root;
    if (json_parse(&a, out->data, doc_len, &limits, &root, NULL, NULL) != ST_OK)
        __builtin_trap();
    const struct json_value *outs = json_get(root, "outputs");
    uint64_t total = 0;
    uint32_t nbinary = 0;
    for (uint32_t i = 0; outs && i < outs->len; i++) {
        const struct json_value *size =
            json_get(json_get(&outs->u.items[i], "parameters"), "binary_data_size");
        uint64_t n;
        if (size && json_num_u64(size, &n) == 0) {
            total += n;
            nbinary++;
        }
    }
    if (total != out->len - doc_len || (nbinary > 0) != (json_len > 0))
        __builtin_trap();
    arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct model test_model, raw_models[NRAW];
    if (!test_model.name) {
        test_model_init(&test_model);
        for (int i = 0; i < NRAW; i++) {
            test_model_init(&raw_models[i]);
            raw_models[i].info.inputs = raw_inputs[i];
            raw_models[i].info.ninputs = 1;
            raw_models[i].info.outputs = raw_outputs[i];
            raw_models[i].info.noutputs = 1;
            raw_models[i].batched = raw_batched[i];
        }
    }
    if (size < 2)
        return 0;
    unsigned v = data[0] | (unsigned)data[1] << 8;
    const struct model *m = v >> 13 < 2 ? &test_model : &raw_models[(v >> 13) - 2];
    int64_t header_len = (v & NO_HEADER) == NO_HEADER ? -1 : (int64_t)(v & NO_HEADER);
    const char *body = (const char *)data + 2;
    size -= 2;

    struct infer_request req;
    memset(&req, 0, sizeof req);
    arena_init(&req.arena, 4096, 4u << 20);
    req.model = (struct model *)m;
    struct error err;
    int rc = infer_json_decode(&req, NULL, m, body, size, header_len, &err);
    struct infer_request general;
    memset(&general, 0, sizeof general);
    arena_init(&general.arena, 4096, 4u << 20);
    general.model = (struct model *)m;
    struct error general_err;
    int general_rc =
        infer_json_decode_general(&general, NULL, m, body, size, header_len, &general_err);
    if (rc != general_rc || (rc == 0 && infer_request_diff(&req, &general)) ||
        (rc != 0 && (err.status != general_err.status || strcmp(err.msg, general_err.msg) != 0)))
        __builtin_trap(); /* the two decoders disagree */
    arena_free(&general.arena);
    if (rc == 0) {
        /* Numeric binary data must be aligned for its type wherever it is. */
        for (uint32_t i = 0; i < req.ninputs; i++) {
            const struct tensor *t = &req.inputs[i];
            size_t align =
                t->dtype == DT_BYTES ? _Alignof(struct tensor_bytes) : dtype_size(t->dtype);
            if (t->nbytes && align && (uintptr_t)t->data % align)
                __builtin_trap();
        }
        /* Echo the inputs back through the response encoder, some binary. */
        bool *binary = arena_calloc(&req.arena, req.ninputs, sizeof *binary);
        if (binary) {
            for (uint32_t i = 0; i < req.ninputs; i++)
                binary[i] = ((size >> i) & 1) != 0;
            req.output_binary = binary;
            req.outputs = req.inputs;
            req.noutputs = req.ninputs;
            struct buf out;
            buf_init(&out, 64u << 20);
            size_t json_len;
            infer_json_encode(&req, NULL, &out, &json_len);
            check_response(&out, json_len);
            buf_free(&out);
        }
    } else if (err.status != 400 && err.status != 413) {
        __builtin_trap(); /* decode errors are always client errors */
    }
    arena_free(&req.arena);
    return 0;
}
