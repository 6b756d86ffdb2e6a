/*
 * infer_json: the KServe v2 body of an infer request and response, in JSON
 * and with Triton's binary tensor data extension.
 *
 * infer_json_decode() parses `body` (any bytes, any length) and fills req:
 * inputs (in the model's input order), the requested outputs (or all
 * outputs in model order) with their binary flags, and the id. It checks
 * every input against the model: names, presence, duplicates, datatype,
 * rank and fixed dims, element count, and each JSON value's range for its
 * datatype. Errors are -1 with err->status 400 (or 413 when decoding would
 * exceed the request's memory ceiling) and a message for the client.
 *
 * `header_len` is the request's Inference-Header-Content-Length:
 *   -1  no such header: the whole body is the JSON request.
 *   N>0 the first N bytes are the JSON request; the rest are the tensors of
 *       the inputs that carry "parameters":{"binary_data_size":S}, S bytes
 *       each, concatenated in the order the JSON lists those inputs. Every
 *       byte must be claimed.
 *   0   raw binary request (Triton): the whole body is the single input of
 *       a one-input model; its shape is the model's with the batch dim set
 *       to 1 and at most one other variable dim deduced from the length.
 *       Every output is returned as binary data.
 * Binary layout: little-endian, row-major, no padding; BOOL one byte; each
 * BYTES element a 4-byte little-endian length and that many bytes.
 *
 * Shared memory (Triton's extension, serve/shm.h): an input whose
 * "parameters" name a "shared_memory_region" (with "shared_memory_byte_size"
 * and optionally "shared_memory_offset") has no "data" or binary_data_size:
 * its bytes (laid out as binary data) are read from the region in place;
 * `shm` takes a reference on the region for the request. An output with
 * those parameters is written into the region by the pipeline, and the
 * encoder gives only its name, datatype, shape and "parameters":
 * {"shared_memory_region", "shared_memory_byte_size" (bytes written),
 * "shared_memory_offset" (when not 0)}. shm NULL: such parameters are
 * refused (400, not supported).
 *
 * Memory: JSON-decoded data lives in req->arena. Binary tensors are not
 * copied: a numeric tensor's data points into `body` when that address is
 * aligned to the element size (else it is copied into req->arena), and
 * BYTES elements point into `body`. So `body` must stay unchanged and alive
 * until the request is released.
 *
 * infer_json_encode() writes the response of a completed request into out
 * (appending). Outputs flagged in req->output_binary carry
 * "parameters":{"binary_data_size":S} instead of "data", and their bytes
 * follow the JSON document in output order. *json_len (if not NULL) is set
 * to the JSON document's length when some output is binary — the value of
 * the response's Inference-Header-Content-Length — and to 0 otherwise.
 * Errors are sticky in out->err.
 */
#ifndef INFERD_API_INFER_JSON_H
#define INFERD_API_INFER_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "core/infer.h"
#include "model/model.h"
#include "serve/shm.h"

int infer_json_decode(struct infer_request *req, struct shm_request *shm, const struct model *m,
                      const char *body, size_t len, int64_t header_len, struct error *err);
/* The general decoder alone, over a JSON tree: what infer_json_decode()
 * uses for every request but the everyday JSON one (infer_json_scan.h),
 * which it decodes without a tree into the same result. For the tests
 * and the fuzz target that compare the two. */
int infer_json_decode_general(struct infer_request *req, struct shm_request *shm,
                              const struct model *m, const char *body, size_t len,
                              int64_t header_len, struct error *err);
void infer_json_encode(const struct infer_request *req, const struct shm_request *shm,
                       struct buf *out, size_t *json_len);

/* Parses the value of an Inference-Header-Content-Length header (`n` bytes,
 * not NUL-terminated): decimal digits only, no sign or spaces, not above
 * body_len. Returns 0 with *out set, or ST_ERROR with a 400 in err. */
int infer_json_header_length(const char *value, size_t n, size_t body_len, int64_t *out,
                             struct error *err);

#endif
