/* Triton's shared-memory RPCs (api/grpc/services.h): the system ones on
 * the registry of serve/shm.h, the CUDA ones as a build without GPUs
 * answers them. */
#include "api/grpc/services.h"

#include <string.h>

#include "base/mem.h"

static struct shm_registry *registry(struct grpc_call *call)
{
    struct shm_registry *reg = call->api->serve->shm;
    if (!reg)
        grpc_call_fail(call, 400, "system shared memory is not available on this server");
    return reg;
}

static void handle_status(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__SystemSharedMemoryStatusRequest *q = grpc_call_unpack(
        call, &inference__system_shared_memory_status_request__descriptor, data, len);
    struct shm_registry *reg = q ? registry(call) : NULL;
    if (!reg)
        return;
    struct arena *a = &call->api->scratch;
    struct shm_info *info = arena_alloc(a, SHM_MAX_REGIONS * sizeof *info);
    Inference__SystemSharedMemoryStatusResponse__RegionsEntry *e =
        arena_alloc(a, SHM_MAX_REGIONS * sizeof *e);
    Inference__SystemSharedMemoryStatusResponse__RegionsEntry **ptrs =
        arena_alloc(a, SHM_MAX_REGIONS * sizeof *ptrs);
    Inference__SystemSharedMemoryStatusResponse__RegionStatus *st =
        arena_alloc(a, SHM_MAX_REGIONS * sizeof *st);
    if (!info || !e || !ptrs || !st) {
        grpc_call_fail(call, 503, "out of memory");
        return;
    }
    struct error err;
    uint32_t n;
    if (shm_status(reg, q->name[0] ? q->name : NULL, info, SHM_MAX_REGIONS, &n, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        inference__system_shared_memory_status_response__region_status__init(&st[i]);
        inference__system_shared_memory_status_response__regions_entry__init(&e[i]);
        st[i].name = info[i].name;
        st[i].key = info[i].key;
        st[i].offset = info[i].offset;
        st[i].byte_size = info[i].byte_size;
        e[i].key = info[i].name;
        e[i].value = &st[i];
        ptrs[i] = &e[i];
    }
    Inference__SystemSharedMemoryStatusResponse r =
        INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    r.n_regions = n;
    r.regions = ptrs;
    grpc_call_reply(call, &r.base);
}

static void handle_register(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__SystemSharedMemoryRegisterRequest *q = grpc_call_unpack(
        call, &inference__system_shared_memory_register_request__descriptor, data, len);
    struct shm_registry *reg = q ? registry(call) : NULL;
    if (!reg)
        return;
    struct error err;
    if (shm_register(reg, q->name, q->key, q->offset, q->byte_size, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    Inference__SystemSharedMemoryRegisterResponse r =
        INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
    grpc_call_reply(call, &r.base);
}

static void handle_unregister(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__SystemSharedMemoryUnregisterRequest *q = grpc_call_unpack(
        call, &inference__system_shared_memory_unregister_request__descriptor, data, len);
    struct shm_registry *reg = q ? registry(call) : NULL;
    if (!reg)
        return;
    shm_unregister(reg, q->name[0] ? q->name : NULL);
    Inference__SystemSharedMemoryUnregisterResponse r =
        INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
    grpc_call_reply(call, &r.base);
}

/* CudaSharedMemory*: answered as a build without GPUs does (serve/shm.h). */
static void handle_cuda_status(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__CudaSharedMemoryStatusRequest *q = grpc_call_unpack(
        call, &inference__cuda_shared_memory_status_request__descriptor, data, len);
    if (!q)
        return;
    struct error err;
    if (shm_cuda_status(call->api->serve->shm, q->name[0] ? q->name : NULL, &err) != 0) {
        grpc_call_fail(call, err.status, err.msg);
        return;
    }
    Inference__CudaSharedMemoryStatusResponse r = INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    grpc_call_reply(call, &r.base);
}

static void handle_cuda_register(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__CudaSharedMemoryRegisterRequest *q = grpc_call_unpack(
        call, &inference__cuda_shared_memory_register_request__descriptor, data, len);
    struct error err;
    if (q && shm_cuda_register(q->name, &err) != 0)
        grpc_call_fail(call, err.status, err.msg);
}

static void handle_cuda_unregister(struct grpc_call *call, const uint8_t *data, size_t len)
{
    Inference__CudaSharedMemoryUnregisterRequest *q = grpc_call_unpack(
        call, &inference__cuda_shared_memory_unregister_request__descriptor, data, len);
    if (!q)
        return;
    Inference__CudaSharedMemoryUnregisterResponse r =
        INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
    grpc_call_reply(call, &r.base);
}

static const struct grpc_method shm_methods[] = {
    {.path = GRPC_KSERVE_SERVICE "SystemSharedMemoryStatus",
     .auth = AUTH_INFER,
     .on_message = handle_status},
    {.path = GRPC_KSERVE_SERVICE "SystemSharedMemoryRegister",
     .auth = AUTH_INFER,
     .on_message = handle_register},
    {.path = GRPC_KSERVE_SERVICE "SystemSharedMemoryUnregister",
     .auth = AUTH_INFER,
     .on_message = handle_unregister},
    {.path = GRPC_KSERVE_SERVICE "CudaSharedMemoryStatus",
     .auth = AUTH_INFER,
     .on_message = handle_cuda_status},
    {.path = GRPC_KSERVE_SERVICE "CudaSharedMemoryRegister",
     .auth = AUTH_INFER,
     .on_message = handle_cuda_register},
    {.path = GRPC_KSERVE_SERVICE "CudaSharedMemoryUnregister",
     .auth = AUTH_INFER,
     .on_message = handle_cuda_unregister},
};

const struct grpc_service grpc_shm_service = {
    .methods = shm_methods,
    .nmethods = sizeof shm_methods / sizeof shm_methods[0],
};
