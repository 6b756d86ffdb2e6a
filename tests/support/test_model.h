/*
 * test_model: a struct model with a fixed I/O description and no backend,
 * for tests and fuzz targets of the protocol codecs. Inputs:
 *   IN_INT32 INT32 [-1,4], IN_FP32 FP32 [-1,-1], IN_BYTES BYTES [-1],
 *   IN_BOOL BOOL [2], IN_FP16 FP16 [-1], IN_UINT64 UINT64 [-1]
 * Outputs: OUT_A FP32 [-1,4], OUT_B BYTES [-1].
 */
#ifndef INFERD_TESTS_TEST_MODEL_H
#define INFERD_TESTS_TEST_MODEL_H

#include <string.h>

#include "model/model.h"

static struct model_io test_model_inputs[] = {
    {"IN_INT32", DT_INT32, 2, {-1, 4}},
    {"IN_FP32", DT_FP32, 2, {-1, -1}},
    {"IN_BYTES", DT_BYTES, 1, {-1}},
    {"IN_BOOL", DT_BOOL, 1, {2}},
    {"IN_FP16", DT_FP16, 1, {-1}},
    {"IN_UINT64", DT_UINT64, 1, {-1}},
};

static struct model_io test_model_outputs[] = {
    {"OUT_A", DT_FP32, 2, {-1, 4}},
    {"OUT_B", DT_BYTES, 1, {-1}},
};

static inline void test_model_init(struct model *m)
{
    memset(m, 0, sizeof *m);
    m->name = "test";
    m->version = 3;
    strcpy(m->version_str, "3");
    m->platform = "onnxruntime_onnx";
    m->info.inputs = test_model_inputs;
    m->info.ninputs = sizeof test_model_inputs / sizeof test_model_inputs[0];
    m->info.outputs = test_model_outputs;
    m->info.noutputs = sizeof test_model_outputs / sizeof test_model_outputs[0];
    m->run_info = m->info;
    m->batched = false;
}

#endif
