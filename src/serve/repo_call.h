/*
 * repo_call: a model load or unload asked through a front end (Triton's
 * model repository extension: REST POST /v2/repository/models/{m}/load
 * and /unload, gRPC RepositoryModelLoad/Unload), checked and carried out
 * the same way whatever the protocol.
 *
 * serve_repo_call() checks the model name (1 to 255 bytes, no '/', no NUL,
 * not starting with '.'), turns the optional configuration override (the
 * "config" parameter: the model configuration as JSON text) into
 * config.pbtxt text, and queues the command on the repository manager.
 * When the manager has carried it out, done(ctx, status, msg) is called on
 * the thread's loop (status 0, or an HTTP status with msg). Every error
 * message starts with Triton's wording, "failed to load 'm': " or "failed
 * to unload 'm': ", which clients match on. While it is
 * pending the thread counts it in inflight (shutdown waits for it).
 *
 * Loop thread of `t`.
 */
#ifndef INFERD_SERVE_REPO_CALL_H
#define INFERD_SERVE_REPO_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "serve/call.h"

typedef void (*serve_repo_done_fn)(void *ctx, int status, const char *msg);

/* Returns 0 (done() follows), or ST_ERROR with err (400, 503; done() is never
 * called). config_json may be NULL. */
int serve_repo_call(struct serve_thread *t, bool load, const char *name, size_t name_len,
                    const char *config_json, size_t config_len, serve_repo_done_fn done,
                    void *ctx, struct error *err);

/* A load parameter other than "config": one of Triton's "file:<path>"
 * model file overrides, or a name Triton does not know either. inferd
 * loads models from its repository only, so every such parameter fails
 * the load the way Triton fails a load whose override it cannot use:
 * 500 (gRPC INTERNAL) "failed to load 'm', failed to poll from model
 * repository: " and why (a path component longer than NAME_MAX, file
 * overrides not supported, an unrecognized parameter). Returns ST_ERROR. */
int serve_repo_refuse_param(const char *name, size_t name_len, const char *key, size_t key_len,
                            struct error *err);

#endif
