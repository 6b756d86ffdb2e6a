/*
 * tensor: a named, typed, shaped block of elements as it travels between the
 * protocol front ends and the backends.
 *
 * A tensor never owns its memory: `data` points into a request's receive
 * buffer or arena, or into a backend's output (see backend.h for how long
 * that lives).
 *   numeric types: `data` holds count*dtype_size bytes, little-endian,
 *                  row-major, no padding; BOOL is one byte (0 or 1).
 *   DT_BYTES:      `data` is an array of `count` struct tensor_bytes.
 */
#ifndef INFERD_CORE_TENSOR_H
#define INFERD_CORE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "core/dtype.h"

#define TENSOR_MAX_DIMS 16

struct tensor_bytes {
    const char *ptr; /* may contain NUL bytes; not NUL-terminated */
    uint32_t len;
};

struct tensor {
    const char *name; /* NUL-terminated */
    enum dtype dtype;
    uint32_t ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    void *data;
    size_t nbytes; /* numeric: bytes at data; BYTES: sum of element lengths */
};

/* Product of the shape; -1 if a dim is negative or the product overflows
 * `limit` (pass INT64_MAX for no limit). A 0-d tensor has one element. */
int64_t tensor_count(const struct tensor *t, int64_t limit);
int64_t shape_count(const int64_t *shape, uint32_t ndim, int64_t limit);

/* Length prefix of one BYTES element in binary tensor data (Triton's
 * binary extension and gRPC raw contents): 4 bytes, little-endian. */
#define TENSOR_BYTES_PREFIX 4

/* Splits `size` bytes at p into `count` BYTES elements, each a
 * TENSOR_BYTES_PREFIX length and that many bytes, every byte claimed. The
 * element array comes from `arena` and points into p; fills t->data and
 * t->nbytes. `what` names the bytes in messages ("raw_input_contents").
 * Returns 0, or ST_ERROR with err 400 (or 413 when the arena is full). */
int tensor_bytes_split(struct arena *arena, struct tensor *t, const char *p, size_t size,
                       int64_t count, const char *what, struct error *err);

/* Formats a shape as "[1,16]" into out (always NUL-terminated). */
/* Deep copies. tensor_copy_size(): the bytes a copy of t's data takes
 * (BYTES: its element array and their contents), plus alignment slack.
 * tensor_copy_to(): copies src's data to p (16-byte aligned inside), sets
 * *dst to src pointing at the copy, and returns the end of the copy. */
size_t tensor_copy_size(const struct tensor *t);
char *tensor_copy_to(struct tensor *dst, const struct tensor *src, char *p);

void shape_format(const int64_t *shape, uint32_t ndim, char *out, size_t size);

#endif
