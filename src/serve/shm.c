#include "serve/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/status.h"

struct shm_region {
    atomic_uint refs;
    char name[SHM_NAME_MAX + 1];
    char key[SHM_KEY_MAX + 1];
    uint64_t offset, byte_size;
    void *map; /* the mapping, from the page holding `offset` */
    size_t map_len;
    char *base; /* map + offset's distance into its page */
};

struct shm_registry {
    pthread_mutex_t lock;
    struct shm_region *regions[SHM_MAX_REGIONS]; /* registration order, packed */
    uint32_t n;
};

/* The holds of one request: a short list in its arena. */
struct shm_holds {
    struct shm_region *region;
    struct shm_holds *next;
};

struct shm_registry *shm_registry_new(void)
{
    struct shm_registry *reg = mem_calloc(1, sizeof *reg);
    if (!reg)
        return NULL;
    pthread_mutex_init(&reg->lock, NULL);
    return reg;
}

void shm_registry_free(struct shm_registry *reg)
{
    if (!reg)
        return;
    shm_unregister(reg, NULL);
    pthread_mutex_destroy(&reg->lock);
    mem_free(reg);
}

/* ---- regions --------------------------------------------------------------- */

void shm_release(struct shm_region *r)
{
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    munmap(r->map, r->map_len);
    mem_free(r);
}

const char *shm_region_name(const struct shm_region *r)
{
    return r->name;
}

char *shm_region_base(const struct shm_region *r)
{
    return r->base;
}

uint64_t shm_region_size(const struct shm_region *r)
{
    return r->byte_size;
}

/* Index of `name` in the table, or -1; under the lock. */
static int find(const struct shm_registry *reg, const char *name, size_t len)
{
    for (uint32_t i = 0; i < reg->n; i++)
        if (strlen(reg->regions[i]->name) == len && memcmp(reg->regions[i]->name, name, len) == 0)
            return (int)i;
    return NOT_FOUND;
}

static int check_args(const char *name, const char *key, uint64_t byte_size, struct error *err)
{
    size_t n = strlen(name), k = strlen(key);
    if (n == 0 || n > SHM_NAME_MAX)
        return error_set(err, 400, "a shared-memory region name must have 1 to %d bytes",
                         SHM_NAME_MAX);
    if (k == 0 || k > SHM_KEY_MAX)
        return error_set(err, 400, "region '%.64s': 'key' must have 1 to %d bytes", name,
                         SHM_KEY_MAX);
    if (byte_size == 0)
        return error_set(err, 400, "region '%.64s': byte_size must be positive", name);
    if (byte_size > SHM_REGION_MAX_BYTES)
        return error_set(err, 400,
                         "region '%.64s': byte_size %" PRIu64 " exceeds the limit of %" PRIu64
                         " bytes per region",
                         name, byte_size, SHM_REGION_MAX_BYTES);
    return 0;
}

int shm_register_fd(struct shm_registry *reg, const char *name, const char *key, int fd,
                    uint64_t offset, uint64_t byte_size, struct error *err)
{
    if (check_args(name, key, byte_size, err) != 0)
        return ST_ERROR;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return error_set(err, 400, "region '%.64s': cannot stat key '%.64s': %s", name, key,
                         strerror(errno));
    uint64_t size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    if (offset > size || byte_size > size - offset)
        return error_set(err, 400,
                         "region '%.64s': offset %" PRIu64 " + byte_size %" PRIu64
                         " is beyond the %" PRIu64 " bytes of key '%.64s'",
                         name, offset, byte_size, size, key);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t start = offset - offset % (uint64_t)(page > 0 ? page : 4096);
    size_t map_len = (size_t)(offset - start + byte_size);
    struct shm_region *r = mem_calloc(1, sizeof *r);
    if (!r)
        return error_set(err, 503, "out of memory");
    r->map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
    if (r->map == MAP_FAILED) {
        int e = errno;
        mem_free(r);
        return error_set(err, 400, "region '%.64s': cannot map key '%.64s': %s", name, key,
                         strerror(e));
    }
    r->map_len = map_len;
    r->base = (char *)r->map + (offset - start);
    r->offset = offset;
    r->byte_size = byte_size;
    atomic_init(&r->refs, 1);
    memcpy(r->name, name, strlen(name) + 1);
    memcpy(r->key, key, strlen(key) + 1);

    /* Mapped before the table is checked: the lock is never held across
     * mmap, and a refused region is unmapped again. */
    int rc = 0;
    pthread_mutex_lock(&reg->lock);
    if (find(reg, name, strlen(name)) >= 0)
        rc = error_set(err, 400, "shared-memory region '%.64s' is already registered", name);
    else if (reg->n == SHM_MAX_REGIONS)
        rc = error_set(err, 400,
                       "cannot register region '%.64s': the limit of %d regions is reached", name,
                       SHM_MAX_REGIONS);
    else
        reg->regions[reg->n++] = r;
    pthread_mutex_unlock(&reg->lock);
    if (rc != 0)
        shm_release(r);
    return rc;
}

int shm_register(struct shm_registry *reg, const char *name, const char *key, uint64_t offset,
                 uint64_t byte_size, struct error *err)
{
    if (check_args(name, key, byte_size, err) != 0)
        return ST_ERROR;
    int fd = shm_open(key, O_RDWR, 0);
    if (fd < 0)
        return error_set(err, 400, "region '%.64s': cannot open shared-memory key '%.64s': %s",
                         name, key, strerror(errno));
    int rc = shm_register_fd(reg, name, key, fd, offset, byte_size, err);
    close(fd);
    return rc;
}

void shm_unregister(struct shm_registry *reg, const char *name)
{
    struct shm_region *gone[SHM_MAX_REGIONS];
    uint32_t ngone = 0;
    pthread_mutex_lock(&reg->lock);
    if (!name) {
        memcpy(gone, reg->regions, reg->n * sizeof *gone);
        ngone = reg->n;
        reg->n = 0;
    } else {
        int i = find(reg, name, strlen(name));
        if (i >= 0) {
            gone[ngone++] = reg->regions[i];
            memmove(&reg->regions[i], &reg->regions[i + 1],
                    (reg->n - (uint32_t)i - 1) * sizeof *gone);
            reg->n--;
        }
    }
    pthread_mutex_unlock(&reg->lock);
    for (uint32_t i = 0; i < ngone; i++)
        shm_release(gone[i]); /* requests in flight keep theirs */
}

int shm_status(struct shm_registry *reg, const char *name, struct shm_info *out, uint32_t max,
               uint32_t *n, struct error *err)
{
    *n = 0;
    pthread_mutex_lock(&reg->lock);
    int only = name ? find(reg, name, strlen(name)) : -1;
    for (uint32_t i = 0; i < reg->n && *n < max; i++) {
        if (name && (int)i != only)
            continue;
        const struct shm_region *r = reg->regions[i];
        struct shm_info *s = &out[(*n)++];
        memcpy(s->name, r->name, sizeof s->name);
        memcpy(s->key, r->key, sizeof s->key);
        s->offset = r->offset;
        s->byte_size = r->byte_size;
    }
    pthread_mutex_unlock(&reg->lock);
    if (name && only < 0)
        return error_set(err, 404, "Unable to find system shared memory region: '%.*s'",
                         SHM_NAME_MAX, name);
    return 0;
}

int shm_cuda_status(struct shm_registry *reg, const char *name, struct error *err)
{
    if (!name)
        return 0;
    bool system = false;
    if (reg) {
        pthread_mutex_lock(&reg->lock);
        system = find(reg, name, strlen(name)) >= 0;
        pthread_mutex_unlock(&reg->lock);
    }
    if (system)
        return error_set(err, 404,
                         "The region named '%.*s' is registered as system shared memory, not "
                         "CUDA shared memory",
                         SHM_NAME_MAX, name);
    return error_set(err, 404, "Unable to find cuda shared memory region: '%.*s'", SHM_NAME_MAX,
                     name);
}

int shm_cuda_register(const char *name, struct error *err)
{
    return error_set(err, 400,
                     "failed to register CUDA shared memory region: '%.*s', GPUs not supported",
                     SHM_NAME_MAX, name);
}

struct shm_region *shm_acquire(struct shm_registry *reg, const char *name, size_t len,
                               struct error *err)
{
    struct shm_region *r = NULL;
    pthread_mutex_lock(&reg->lock);
    int i = find(reg, name, len);
    if (i >= 0) {
        r = reg->regions[i];
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&reg->lock);
    if (!r)
        error_set(err, 400, "unknown shared-memory region '%.*s'", (int)(len > 64 ? 64 : len),
                  name);
    return r;
}

/* ---- a request's use -------------------------------------------------------- */

/* A held reference on the region p names, with the window checked. */
static struct shm_region *hold(struct shm_request *sr, struct arena *arena, const char *what,
                               const char *tensor, const struct shm_params *p, struct error *err)
{
    if (!sr->registry) {
        error_set(err, 400, "%s '%s': shared memory is not supported here", what, tensor);
        return NULL;
    }
    if (!p->has_byte_size) {
        error_set(err, 400,
                  "%s '%s': 'shared_memory_byte_size' is required with "
                  "'shared_memory_region'",
                  what, tensor);
        return NULL;
    }
    struct shm_holds *h = arena_alloc(arena, sizeof *h);
    if (!h) {
        error_set(err, 413, "request too large to decode");
        return NULL;
    }
    struct shm_region *r = shm_acquire(sr->registry, p->region, p->region_len, err);
    if (!r) {
        error_set(err, 400, "%s '%s': unknown shared-memory region '%.*s'", what, tensor,
                  (int)(p->region_len > 64 ? 64 : p->region_len), p->region);
        return NULL;
    }
    h->region = r;
    h->next = sr->holds;
    sr->holds = h;
    if (p->offset > r->byte_size || p->byte_size > r->byte_size - p->offset) {
        error_set(err, 400,
                  "%s '%s': shared_memory_offset %" PRIu64 " + shared_memory_byte_size %" PRIu64
                  " is beyond the %" PRIu64 " bytes of region '%.64s'",
                  what, tensor, p->offset, p->byte_size, r->byte_size, r->name);
        return NULL;
    }
    return r;
}

int shm_request_input(struct shm_request *sr, struct arena *arena, struct tensor *t,
                      const struct shm_params *p, struct error *err)
{
    struct shm_region *r = hold(sr, arena, "input", t->name, p, err);
    if (!r)
        return ST_ERROR;
    const char *data = r->base + p->offset;
    int64_t count = tensor_count(t, INT64_MAX);
    if (count < 0)
        return error_set(err, 400, "input '%s': shape has too many elements", t->name);
    if (t->dtype == DT_BYTES)
        return tensor_bytes_split(arena, t, data, (size_t)p->byte_size, count,
                                  "shared_memory_byte_size", err);
    size_t esize = dtype_size(t->dtype);
    if (esize == 0)
        return error_set(err, 400, "input '%s': datatype %s cannot be read from shared memory",
                         t->name, dtype_name(t->dtype));
    if ((uint64_t)count > SIZE_MAX / esize || (uint64_t)count * esize != p->byte_size) {
        char shape[128];
        shape_format(t->shape, t->ndim, shape, sizeof shape);
        return error_set(err, 400,
                         "input '%s': shared_memory_byte_size is %" PRIu64
                         " bytes, shape %s of %s needs %" PRIu64,
                         t->name, p->byte_size, shape, dtype_name(t->dtype),
                         (uint64_t)count * esize);
    }
    t->nbytes = (size_t)p->byte_size;
    if ((uintptr_t)data % esize == 0) {
        t->data = (void *)data;
        return 0;
    }
    /* An offset that does not suit the element type: a backend may not
     * read misaligned elements, so this input is copied. */
    t->data = arena_alloc(arena, t->nbytes ? t->nbytes : 1);
    if (!t->data)
        return error_set(err, 413, "input '%s': request too large to decode", t->name);
    memcpy(t->data, data, t->nbytes);
    return 0;
}

int shm_request_output(struct shm_request *sr, struct arena *arena, uint32_t i, uint32_t n,
                       const char *name, const struct shm_params *p, struct error *err)
{
    struct shm_region *r = hold(sr, arena, "output", name, p, err);
    if (!r)
        return ST_ERROR;
    if (!sr->outputs) {
        sr->outputs = arena_calloc(arena, n, sizeof *sr->outputs);
        if (!sr->outputs)
            return error_set(err, 413, "request too large to decode");
        sr->noutputs = n;
    }
    struct shm_output *o = &sr->outputs[i];
    o->region = r;
    o->offset = p->offset;
    o->byte_size = p->byte_size;
    return 0;
}

bool shm_request_has_output(const struct shm_request *sr, uint32_t i)
{
    return sr && sr->outputs && i < sr->noutputs && sr->outputs[i].region;
}

/* Bytes of t as binary tensor data. */
static uint64_t binary_size(const struct tensor *t, int64_t count)
{
    if (count <= 0)
        return 0;
    if (t->dtype != DT_BYTES)
        return t->nbytes;
    return (uint64_t)count * TENSOR_BYTES_PREFIX + t->nbytes;
}

int shm_request_write(struct shm_request *sr, const struct tensor *outputs, uint32_t n,
                      struct error *err)
{
    for (uint32_t i = 0; i < n && i < sr->noutputs; i++) {
        struct shm_output *o = &sr->outputs[i];
        if (!o->region)
            continue;
        const struct tensor *t = &outputs[i];
        int64_t count = tensor_count(t, INT64_MAX);
        uint64_t size = binary_size(t, count);
        if (size > o->byte_size)
            return error_set(err, 400,
                             "output '%s': %" PRIu64 " bytes do not fit its "
                             "shared_memory_byte_size %" PRIu64 " (region '%.64s')",
                             t->name, size, o->byte_size, o->region->name);
        char *p = o->region->base + o->offset;
        if (t->dtype != DT_BYTES) {
            if (size)
                memcpy(p, t->data, (size_t)size);
        } else {
            const struct tensor_bytes *s = t->data;
            for (int64_t e = 0; e < count; e++) {
                uint32_t len = s[e].len;
                unsigned char prefix[TENSOR_BYTES_PREFIX] = {
                    (unsigned char)len, (unsigned char)(len >> 8), (unsigned char)(len >> 16),
                    (unsigned char)(len >> 24)};
                memcpy(p, prefix, sizeof prefix);
                p += sizeof prefix;
                if (len)
                    memcpy(p, s[e].ptr, len);
                p += len;
            }
        }
        o->written = size;
    }
    return 0;
}

void shm_request_end(struct shm_request *sr)
{
    for (struct shm_holds *h = sr->holds; h; h = h->next)
        shm_release(h->region);
    sr->holds = NULL;
    sr->outputs = NULL;
    sr->noutputs = 0;
}
