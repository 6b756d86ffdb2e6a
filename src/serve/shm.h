/*
 * shm: Triton's system shared-memory extension. A client creates a POSIX
 * shared-memory object, registers a window of it under a region name, and
 * then names the region in a tensor's parameters (shared_memory_region,
 * shared_memory_offset, shared_memory_byte_size) instead of sending the
 * tensor's bytes: an input is read from the region in place, an output is
 * written into it instead of the response.
 *
 * The registry (struct shm_registry) is process-wide: one per server,
 * shared by every I/O thread, guarded by a mutex held only for the table
 * lookups (never across a map, a copy or I/O other than shm_open/mmap).
 *
 * Lifetime of a region (struct shm_region, reference counted):
 *   shm_register()   opens the object (shm_open, read-write), checks the
 *                    window against its size, maps it, and the registry
 *                    holds one reference;
 *   shm_acquire()    a request takes a reference for as long as it runs
 *                    (struct shm_request, released at the call's end);
 *   shm_unregister() drops the registry's reference: the name is free at
 *                    once, the mapping goes with the last reference, so a
 *                    request in flight keeps reading and writing it.
 *
 * Limits: at most SHM_MAX_REGIONS regions, each at most SHM_REGION_MAX_BYTES
 * bytes; names up to SHM_NAME_MAX, keys up to SHM_KEY_MAX bytes. Every
 * refusal is a 400 with a message naming the region.
 *
 * The client owns the object's contents. Truncating an object below a
 * registered window is the client's fault and would make a read of it
 * fault (SIGBUS), as with Triton; inferd checks the window at registration.
 */
#ifndef INFERD_SERVE_SHM_H
#define INFERD_SERVE_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/error.h"
#include "core/tensor.h"

#define SHM_MAX_REGIONS 128
#define SHM_REGION_MAX_BYTES ((uint64_t)1 << 32) /* 4 GiB per region */
#define SHM_NAME_MAX 255
#define SHM_KEY_MAX 255

struct shm_registry;
struct shm_region;

/* A new, empty registry, or NULL when out of memory. */
struct shm_registry *shm_registry_new(void);
/* Unregisters every region and frees the registry; no request may hold a
 * region any more (after the I/O threads stopped). */
void shm_registry_free(struct shm_registry *reg);

/* Registers region `name` as the window [offset, offset + byte_size) of the
 * shared-memory object `key` (shm_open's name). Returns 0, or ST_ERROR with err
 * 400: empty or too long name or key, a name already registered, the
 * region limit reached, byte_size 0 or above SHM_REGION_MAX_BYTES, no such
 * object (or no permission), a window beyond the object's size. */
int shm_register(struct shm_registry *reg, const char *name, const char *key, uint64_t offset,
                 uint64_t byte_size, struct error *err);
/* The same for an open descriptor (a memfd in the tests and fuzz targets);
 * `key` is only what status reports. The descriptor is not kept. */
int shm_register_fd(struct shm_registry *reg, const char *name, const char *key, int fd,
                    uint64_t offset, uint64_t byte_size, struct error *err);

/* Unregisters `name` (NULL: every region). A name that is not registered
 * is nothing to do, as in Triton, so this cannot fail. */
void shm_unregister(struct shm_registry *reg, const char *name);

/* What status reports of a region. */
struct shm_info {
    char name[SHM_NAME_MAX + 1];
    char key[SHM_KEY_MAX + 1];
    uint64_t offset, byte_size;
};
/* Copies the status of `name` (NULL: every region, in registration order)
 * into out[0..max); *n gets the number. Returns 0, or ST_ERROR for an
 * unknown name: 404 "Unable to find system shared memory region: 'name'"
 * (Triton's words). With SHM_MAX_REGIONS entries out is always big enough. */
int shm_status(struct shm_registry *reg, const char *name, struct shm_info *out, uint32_t max,
               uint32_t *n, struct error *err);

/* ---- CUDA shared memory on a build without GPUs --------------------------- */

/* Triton's CPU-only build answers the CUDA shared-memory calls too, and
 * clients (tritonclient's examples, perf_analyzer) make them to clean up,
 * so inferd answers them the same way. No CUDA region can ever be
 * registered, hence:
 *   status, all regions:  none (an empty list);
 *   status of `name`:     shm_cuda_status() returns ST_ERROR, 404 "Unable to
 *                         find cuda shared memory region: 'name'", or when
 *                         `name` is a system region, 404 "The region named
 *                         'name' is registered as system shared memory, not
 *                         CUDA shared memory";
 *   unregister (one, all): nothing to do; succeeds, as Triton's does for a
 *                         name it does not hold;
 *   register:             shm_cuda_register() returns ST_ERROR, 400 "failed
 *                         to register CUDA shared memory region: 'name',
 *                         GPUs not supported".
 * reg may be NULL (a server without system shared memory). */
int shm_cuda_status(struct shm_registry *reg, const char *name, struct error *err);
int shm_cuda_register(const char *name, struct error *err);

/* A reference on region `name` (not NUL-terminated), or NULL with a 400
 * naming it. Any thread. */
struct shm_region *shm_acquire(struct shm_registry *reg, const char *name, size_t len,
                               struct error *err);
/* Drops a reference; the last one unmaps. Any thread. */
void shm_release(struct shm_region *r);
/* The region's name (NUL-terminated) and its bytes (byte_size of them). */
const char *shm_region_name(const struct shm_region *r);
char *shm_region_base(const struct shm_region *r);
uint64_t shm_region_size(const struct shm_region *r);

/* ---- a request's use of regions ------------------------------------------ */

/* Where one output goes instead of the response. */
struct shm_output {
    struct shm_region *region; /* NULL: the output travels in the response */
    uint64_t offset, byte_size;
    uint64_t written; /* bytes of the output written, set by shm_request_write() */
};

/* The tensor parameters of Triton's extension, as a decoder read them.
 * has_region false: the tensor does not use shared memory. */
struct shm_params {
    const char *region;
    size_t region_len;
    uint64_t offset, byte_size;
    bool has_region, has_byte_size;
};

/* What one request holds: every region reference it took (released by
 * shm_request_end()) and where its outputs go. Embedded in the call,
 * zeroed with it; `registry` NULL means shared memory is not available
 * (a decoder answers that it is not supported). */
struct shm_holds;
struct shm_request {
    struct shm_registry *registry;
    struct shm_holds *holds;
    struct shm_output *outputs; /* NULL, or noutputs entries */
    uint32_t noutputs;
};

/* Points input t (name, dtype and shape set) at its data in the region p
 * names: numeric data in place when the offset suits the element size
 * (else copied into `arena`), BYTES elements split as in binary tensor data
 * (tensor_bytes_split) pointing into the mapping. byte_size must be given
 * and equal the tensor's size (numeric), and the window [offset, offset +
 * byte_size) lie inside the region. Holds a reference until
 * shm_request_end(). Returns 0, or ST_ERROR with err 400 naming the tensor,
 * the region and the sizes (413 when the arena is full). */
int shm_request_input(struct shm_request *sr, struct arena *arena, struct tensor *t,
                      const struct shm_params *p, struct error *err);
/* Output number i of n (named `name`) goes into the region p names, at
 * offset, at most byte_size bytes (required). Returns 0 or ST_ERROR with err. */
int shm_request_output(struct shm_request *sr, struct arena *arena, uint32_t i, uint32_t n,
                       const char *name, const struct shm_params *p, struct error *err);
/* Whether output i goes to shared memory (then sr->outputs[i] says where). */
bool shm_request_has_output(const struct shm_request *sr, uint32_t i);
/* Writes the outputs that go to shared memory into their regions (numeric
 * bytes as they are, BYTES length-prefixed). Returns 0, or ST_ERROR with a 400
 * naming the output when its bytes do not fit its byte_size. */
int shm_request_write(struct shm_request *sr, const struct tensor *outputs, uint32_t n,
                      struct error *err);
/* Releases every region the request holds; the outputs are forgotten. */
void shm_request_end(struct shm_request *sr);

#endif
