/*
 * rest_shm: Triton's system shared-memory extension over REST (the
 * registry is serve/shm.h). api/rest/rest.c routes:
 *   POST /v2/systemsharedmemory/region/{name}/register  rest_shm_register()
 *        body {"key": string, "offset": integer (default 0), "byte_size": integer}
 *   GET  /v2/systemsharedmemory[/region/{name}]/status   rest_shm_status()
 *        a JSON list of {"name", "key", "offset", "byte_size"}
 *   POST /v2/systemsharedmemory[/region/{name}]/unregister  rest_shm_unregister()
 * Every refusal is a 400 {"error": "..."} naming the region. `reg` NULL
 * (a server without a registry) answers 400 as well.
 *
 * /v2/cudasharedmemory/... with the same paths goes to rest_shm_cuda(),
 * answered as a build without GPUs does (serve/shm.h): status lists no
 * region, unregister succeeds, register is refused. On the loop thread.
 */
#ifndef INFERD_API_REST_SHM_H
#define INFERD_API_REST_SHM_H

#include "http/server.h"
#include "serve/shm.h"

/* name: the {name} segment (NUL-terminated); NULL for every region. */
void rest_shm_register(struct shm_registry *reg, struct http_txn *txn, const char *name);
void rest_shm_status(struct shm_registry *reg, struct http_txn *txn, const char *name);
void rest_shm_unregister(struct shm_registry *reg, struct http_txn *txn, const char *name);
/* action: "status", "register" or "unregister" (checked by the router). */
void rest_shm_cuda(struct shm_registry *reg, struct http_txn *txn, const char *action,
                   const char *name);

#endif
