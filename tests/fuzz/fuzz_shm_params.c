/*
 * Fuzz target: Triton's shared-memory tensor parameters (serve/shm.h) in
 * both infer decoders, against a registry holding two regions of a memfd:
 * "r" (4096 bytes at offset 0) and "s" (13 bytes at offset 4099, so that
 * its data is misaligned). A decoded request must point every input into
 * its region or the request's memory; its outputs (synthetic OUT_A FP32
 * [n,4] and OUT_B BYTES) are written to their regions and encoded, and
 * every region reference is dropped at the end (regions are registered
 * and unregistered per input, so a leaked reference is a leak LSan sees).
 *
 * Input: 1 byte `v`, then the request.
 *   v & 1 == 0: a KServe JSON body (infer_json_decode, no binary part);
 *   v & 1 == 1: a serialized ModelInferRequest (infer_pb_decode).
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../support/test_model.h"
#include "api/rest/infer_json.h"
#include "api/grpc/infer_pb.h"
#include "serve/shm.h"

#define R_SIZE 4096
#define S_OFFSET 4099
#define S_SIZE 13

static int memfd = -1;

static void check_input(const struct tensor *t, const char *base)
{
    /* BYTES elements and numeric data: inside the memfd mapping or not at
     * all (then they are in the arena) — never beyond the region's end. */
    if (t->dtype == DT_BYTES) {
        const struct tensor_bytes *e = t->data;
        int64_t n = tensor_count(t, INT64_MAX);
        for (int64_t i = 0; i < n; i++)
            if (e[i].ptr >= base && e[i].ptr < base + R_SIZE && e[i].ptr + e[i].len > base + R_SIZE)
                __builtin_trap();
    } else if ((const char *)t->data >= base && (const char *)t->data < base + R_SIZE &&
               (const char *)t->data + t->nbytes > base + R_SIZE) {
        __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct model m;
    if (memfd < 0) {
        test_model_init(&m);
        memfd = memfd_create("fuzz_shm", 0);
        if (memfd < 0 || ftruncate(memfd, 8192) != 0)
            __builtin_trap();
        char fill[8192];
        for (size_t i = 0; i < sizeof fill; i++)
            /* BYTES elements of 4 bytes each from any multiple of 8 */
            fill[i] = (char)(i % 8 == 0 ? 4 : i % 8 < 4 ? 0 : 'a' + (int)(i % 8) - 4);
        if (pwrite(memfd, fill, sizeof fill, 0) != (ssize_t)sizeof fill)
            __builtin_trap();
    }
    if (size < 1)
        return 0;
    struct error err;
    struct shm_registry *reg = shm_registry_new();
    if (!reg || shm_register_fd(reg, "r", "fuzz-r", memfd, 0, R_SIZE, &err) != 0 ||
        shm_register_fd(reg, "s", "fuzz-s", memfd, S_OFFSET, S_SIZE, &err) != 0)
        __builtin_trap();
    struct shm_region *r = shm_acquire(reg, "r", 1, &err);
    const char *base = shm_region_base(r);
    shm_release(r);

    struct infer_request req;
    memset(&req, 0, sizeof req);
    arena_init(&req.arena, 4096, 4u << 20);
    req.model = &m;
    struct shm_request sr = {.registry = reg};
    int rc;
    if (data[0] & 1) {
        Inference__ModelInferRequest *msg;
        rc = infer_pb_unpack(&req.arena, data + 1, size - 1, &msg, &err);
        if (rc == 0)
            rc = infer_pb_decode(&req, &sr, &m, msg, &err);
    } else {
        rc = infer_json_decode(&req, &sr, &m, (const char *)data + 1, size - 1, -1, &err);
    }
    if (rc == 0) {
        for (uint32_t i = 0; i < req.ninputs; i++)
            check_input(&req.inputs[i], base);
        /* Outputs as a model would give them, written where they go. */
        static float floats[8 * 4];
        static struct tensor_bytes strs[3] = {{"ab", 2}, {"", 0}, {"xyz", 3}};
        struct tensor *outs = arena_calloc(&req.arena, req.noutputs + 1, sizeof *outs);
        if (outs) {
            for (uint32_t i = 0; i < req.noutputs; i++) {
                struct tensor *t = &outs[i];
                t->name = req.output_names[i];
                if (strcmp(t->name, "OUT_A") == 0) {
                    *t = (struct tensor){.name = t->name,
                                         .dtype = DT_FP32,
                                         .ndim = 2,
                                         .shape = {(int64_t)(data[0] >> 1) % 9, 4}};
                    t->data = floats;
                    t->nbytes = (size_t)t->shape[0] * 4 * sizeof(float);
                } else {
                    *t = (struct tensor){.name = t->name,
                                         .dtype = DT_BYTES,
                                         .ndim = 1,
                                         .shape = {3},
                                         .data = strs,
                                         .nbytes = 5};
                }
            }
            req.outputs = outs;
            if (shm_request_write(&sr, outs, req.noutputs, &err) == 0) {
                struct buf out;
                buf_init(&out, 1u << 20);
                size_t json_len;
                infer_json_encode(&req, &sr, &out, &json_len);
                Inference__ModelInferResponse *resp;
                if (infer_pb_response(&req, &sr, outs, req.noutputs, INFER_PB_NOT_DECOUPLED,
                                      &req.arena, &resp) == 0) {
                    size_t n = inference__model_infer_response__get_packed_size(resp);
                    uint8_t *packed = arena_alloc(&req.arena, n + 1);
                    if (packed && inference__model_infer_response__pack(resp, packed) != n)
                        __builtin_trap();
                }
                buf_free(&out);
            } else if (err.status != 400) {
                __builtin_trap();
            }
        }
    } else if (err.status != 400 && err.status != 413) {
        __builtin_trap();
    }
    shm_request_end(&sr);
    arena_free(&req.arena);
    shm_registry_free(reg);
    return 0;
}
