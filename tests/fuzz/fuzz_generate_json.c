/*
 * Fuzz target: Triton's generate request body (api/rest/generate_json.c),
 * rewritten into an infer request and decoded by the infer decoder
 * (api/rest/infer_json.c), against the test model (batched or not, by the first
 * input byte). Whatever is accepted is answered through the generate
 * response writer, whose output must be one valid JSON object.
 *
 * Input: byte 0 bit 0 = the model is batched; then the body.
 */
#include <stdint.h>
#include <string.h>

#include "../support/test_model.h"
#include "api/rest/generate_json.h"
#include "api/rest/infer_json.h"
#include "base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct model models[2];
    if (!models[0].name) {
        test_model_init(&models[0]);
        test_model_init(&models[1]);
        models[1].batched = true;
    }
    if (size < 1)
        return 0;
    const struct model *m = &models[data[0] & 1];
    const char *body = (const char *)data + 1;
    size -= 1;

    struct infer_request req;
    memset(&req, 0, sizeof req);
    arena_init(&req.arena, 4096, 4u << 20);
    req.model = (struct model *)m;
    struct error err;
    const char *text;
    size_t len;
    int rc = generate_json_to_infer(&req.arena, m, body, size, &text, &len, &err);
    if (rc == 0)
        rc = infer_json_decode(&req, NULL, m, text, len, -1, &err);
    if (rc == 0) {
        struct buf out;
        buf_init(&out, 64u << 20);
        generate_json_response(&out, m, req.inputs, req.ninputs);
        struct arena a;
        arena_init(&a, 4096, 256u << 20);
        struct json_limits limits = {.max_depth = 16, .allow_nonfinite = true};
        struct json_value *root;
        if (!out.err && (json_parse(&a, out.data, out.len, &limits, &root, NULL, NULL) != ST_OK ||
                         root->type != JSON_OBJECT))
            __builtin_trap();
        arena_free(&a);
        buf_free(&out);
    } else if (err.status != 400 && err.status != 413) {
        __builtin_trap(); /* decode errors are always client errors */
    }
    arena_free(&req.arena);
    return 0;
}
