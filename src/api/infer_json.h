/*
 * infer_json: the KServe v2 JSON body of an infer request and response.
 *
 * infer_json_decode() parses `body` (any bytes, any length) and fills req:
 * inputs (converted into typed buffers in req->arena, in the model's input
 * order), the requested outputs (or all outputs in model order) and the id.
 * It checks every input against the model: names, presence, duplicates,
 * datatype, rank and fixed dims, element count, and each value's range for
 * its datatype. Errors are -1 with err->status 400 (or 413 when decoding
 * would exceed the request's memory ceiling) and a message for the client.
 *
 * infer_json_encode() writes the response of a completed request into out;
 * errors are sticky in out->err.
 */
#ifndef INFERD_API_INFER_JSON_H
#define INFERD_API_INFER_JSON_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"
#include "core/infer.h"
#include "model/model.h"

int infer_json_decode(struct infer_request *req, const struct model *m, const char *body,
                      size_t len, struct error *err);
void infer_json_encode(const struct infer_request *req, struct buf *out);

#endif
