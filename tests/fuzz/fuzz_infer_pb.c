/*
 * Fuzz target: KServe v2 gRPC ModelInferRequest decoding (api/grpc/infer_pb.c):
 * protobuf-c unpacking into a request arena with a ceiling, then the checks
 * against a model with inputs of several datatypes and ranks
 * (tests/support/test_model.h). A decoded request is encoded as a
 * ModelInferResponse (its inputs standing in for outputs), packed, and the
 * packed response is unpacked again and compared, to exercise the encoder
 * on whatever the decoder accepted.
 *
 * Input: one byte choosing the model (even: the test model, whose FP16
 * input needs raw contents; odd: the same without the FP16 input, so that
 * requests with typed contents can succeed), then a serialized
 * ModelInferRequest (seeds: tests/fuzz/corpus/infer_pb, made by
 * tests/fuzz/make_infer_pb_corpus.py).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test_model.h"
#include "api/grpc/infer_pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct model models[2];
    static struct model_io typed_inputs[5];
    if (!models[0].name) {
        test_model_init(&models[0]);
        test_model_init(&models[1]);
        uint32_t n = 0;
        for (uint32_t i = 0; i < models[0].info.ninputs; i++)
            if (test_model_inputs[i].dtype != DT_FP16)
                typed_inputs[n++] = test_model_inputs[i];
        models[1].info.inputs = typed_inputs;
        models[1].info.ninputs = n;
    }
    if (size < 1)
        return 0;
    struct model *model = &models[data[0] & 1];
    data++;
    size--;
    struct infer_request req;
    memset(&req, 0, sizeof req);
    /* The server's ceiling: 32 times the message plus a little. */
    arena_init(&req.arena, 4096, size * 32 + (1u << 20));
    struct error err;
    error_clear(&err);
    Inference__ModelInferRequest *msg;
    int rc = infer_pb_unpack(&req.arena, data, size, &msg, &err);
    if (rc == 0)
        rc = infer_pb_decode(&req, NULL, model, msg, &err);
    if (rc != 0) {
        if ((err.status != 400 && err.status != 413) || !err.msg[0])
            __builtin_trap();
        goto out;
    }
    if (req.ninputs != model->info.ninputs || req.noutputs == 0)
        __builtin_trap();
    for (uint32_t i = 0; i < req.ninputs; i++) {
        const struct tensor *t = &req.inputs[i];
        int64_t count = tensor_count(t, INT64_MAX);
        if (count < 0 || !t->data)
            __builtin_trap();
        if (t->dtype != DT_BYTES && t->nbytes != (size_t)count * dtype_size(t->dtype))
            __builtin_trap();
    }
    req.model = model;
    req.outputs = req.inputs;
    req.noutputs = req.ninputs;
    Inference__ModelInferResponse *resp;
    if (infer_pb_response(&req, NULL, req.outputs, req.noutputs, INFER_PB_NOT_DECOUPLED,
                          &req.arena, &resp) != 0)
        goto out;
    size_t len = inference__model_infer_response__get_packed_size(resp);
    uint8_t *wire = malloc(len ? len : 1);
    if (!wire)
        goto out;
    inference__model_infer_response__pack(resp, wire);
    Inference__ModelInferResponse *back = inference__model_infer_response__unpack(NULL, len, wire);
    if (!back || back->n_outputs != req.ninputs || back->n_raw_output_contents != req.ninputs)
        __builtin_trap();
    for (uint32_t i = 0; i < req.ninputs; i++)
        if (back->raw_output_contents[i].len != resp->raw_output_contents[i].len ||
            (back->raw_output_contents[i].len &&
             memcmp(back->raw_output_contents[i].data, resp->raw_output_contents[i].data,
                    back->raw_output_contents[i].len) != 0))
            __builtin_trap();
    inference__model_infer_response__free_unpacked(back, NULL);
    free(wire);
out:
    arena_free(&req.arena);
    return 0;
}
