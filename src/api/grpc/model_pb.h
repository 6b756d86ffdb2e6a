/*
 * model_pb: Triton's ModelConfig and ModelStatistics protobuf messages (the
 * gRPC ModelConfig and ModelStatistics RPCs) built from inferd's effective
 * model configuration and its per-version statistics.
 *
 * Both functions fill a caller-provided message; every sub-message and array
 * comes from arena a, and strings point into cfg / v, so the message is
 * valid while those and the arena are. They return 0, or -ENOMEM when the
 * arena is exhausted (the message is then partly filled and must not be
 * sent). Any thread; no shared state.
 */
#ifndef INFERD_API_MODEL_PB_H
#define INFERD_API_MODEL_PB_H

#include <stddef.h>

#include "base/arena.h"
#include "grpc_service.pb-c.h"
#include "model/config.h"
#include "obs/stats.h"

/* An array of n initialised messages of `size` bytes (plus a spare slot)
 * from a, as protobuf-c's repeated message fields want it: n pointers to
 * the items. NULL when the arena is exhausted. */
void **model_pb_alloc_messages(struct arena *a, size_t n, size_t size, void (*init)(void *));
#define MODEL_PB_ALLOC(a, n, type, init_fn)                                                        \
    ((type **)model_pb_alloc_messages((a), (n), sizeof(type), (void (*)(void *))(init_fn)))

int model_pb_config(struct arena *a, const struct model_config *cfg, Inference__ModelConfig *c);
int model_pb_statistics(struct arena *a, const struct stats_version *v,
                        Inference__ModelStatistics *o);

#endif
