/*
 * Fuzz target: KServe v2 JSON infer request decoding (api/infer_json.c)
 * against a model with inputs of several datatypes and ranks. A decoded
 * request is re-encoded as a response (inputs as outputs) to exercise the
 * writer on whatever the decoder accepted.
 */
#include <stdint.h>
#include <string.h>

#include "../support/test_model.h"
#include "api/infer_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct model model;
    if (!model.name)
        test_model_init(&model);
    struct infer_request req;
    memset(&req, 0, sizeof req);
    arena_init(&req.arena, 4096, 4u << 20);
    req.model = &model;
    struct error err;
    if (infer_json_decode(&req, &model, (const char *)data, size, &err) == 0) {
        /* Echo the inputs back through the response encoder. */
        req.outputs = req.inputs;
        req.noutputs = req.ninputs;
        struct buf out;
        buf_init(&out, 64u << 20);
        infer_json_encode(&req, &out);
        buf_free(&out);
    } else if (err.status != 400 && err.status != 413) {
        __builtin_trap(); /* decode errors are always client errors */
    }
    arena_free(&req.arena);
    return 0;
}
