/*
 * infer_pb: the KServe v2 gRPC infer messages (protobuf, proto/
 * grpc_service.proto) for a struct infer_request: ModelInferRequest in,
 * ModelInferResponse out.
 *
 * infer_pb_unpack() parses the serialized ModelInferRequest `data[0..len)`
 * with protobuf-c; every byte of the message it keeps (strings, typed
 * contents, raw_input_contents) is copied into `arena` (16-byte aligned),
 * so `data` may be released right after the call. Errors: -1 with err 400
 * for a malformed message, 413 when unpacking would exceed the arena's
 * ceiling (or memory ran out).
 *
 * infer_pb_decode() fills req from an unpacked message for model m, with
 * the same checks as the REST decoder (infer_json.h): input names,
 * presence, duplicates, datatype, rank and fixed dims, element count and
 * each value's range for its datatype; requested outputs (or every output
 * in model order); the id; request parameter `timeout` (µs). Tensor data
 * comes from either every input's typed `contents` or `raw_input_contents`
 * (one entry per input, in the order of `inputs`), never both. Typed
 * contents use the field of the datatype (int_contents for INT8/16/32,
 * uint_contents for UINT8/16/32, ...); FP16 and BF16 only travel raw. Raw
 * layout: little-endian, row-major, no padding, BOOL one byte, each BYTES
 * element a 4-byte little-endian length and its bytes. Tensors point into
 * the unpacked message where they can (so it must live as long as req:
 * unpack into req->arena); converted data goes to req->arena. Errors: -1
 * with err 400 (or 413 when req->arena's ceiling is reached).
 *
 * Shared memory (Triton's extension, serve/shm.h): an input whose parameters
 * name a shared_memory_region (string), shared_memory_byte_size and
 * optionally shared_memory_offset (int64 or uint64) takes its bytes from the
 * region in place (`shm` holds it for the request); it has no contents, and
 * its raw_input_contents entry is empty or left out (then the entries
 * follow the other inputs, as Triton's clients send them). A requested
 * output with those parameters is written into the region by the pipeline;
 * its response entry has no data (an empty raw_output_contents entry keeps
 * the alignment) and the parameters shared_memory_region,
 * shared_memory_byte_size (bytes written) and shared_memory_offset (when
 * not 0). shm NULL: such parameters are refused (400).
 *
 * infer_pb_response() builds one ModelInferResponse of a request in
 * `arena`: model name and version, the id when the request had one, each
 * of the n outputs' name, datatype and shape, and its data in
 * raw_output_contents (always raw, as Triton answers). A response of a
 * decoupled model (final != INFER_PB_NOT_DECOUPLED) carries Triton's
 * parameter triton_final_response (true on the last). Numeric output data
 * is referenced, not copied, so the response must be packed before
 * sched_release(req). Returns 0 or -ENOMEM.
 */
#ifndef INFERD_API_INFER_PB_H
#define INFERD_API_INFER_PB_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "core/infer.h"
#include "grpc_service.pb-c.h"
#include "model/model.h"
#include "serve/shm.h"

int infer_pb_unpack(struct arena *arena, const uint8_t *data, size_t len,
                    Inference__ModelInferRequest **out, struct error *err);

int infer_pb_decode(struct infer_request *req, struct shm_request *shm, const struct model *m,
                    const Inference__ModelInferRequest *msg, struct error *err);

enum infer_pb_final { INFER_PB_NOT_DECOUPLED, INFER_PB_MORE, INFER_PB_FINAL };
int infer_pb_response(const struct infer_request *req, const struct shm_request *shm,
                      const struct tensor *outputs, uint32_t n, enum infer_pb_final final,
                      struct arena *arena, Inference__ModelInferResponse **out);

/* A ProtobufCAllocator that takes memory from `arena` (free is a no-op);
 * `failed` turns true when the arena refused an allocation. Used to
 * unpack any message into request-scoped memory. */
struct infer_pb_allocator {
    ProtobufCAllocator base;
    struct arena *arena;
    bool failed;
};
void infer_pb_allocator_init(struct infer_pb_allocator *a, struct arena *arena);

#endif
