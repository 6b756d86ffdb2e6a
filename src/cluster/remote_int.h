/*
 * remote_int: what the two halves of cluster/remote.h share. remote.c has
 * the section, the running set and the loading of versions;
 * remote_infer.c runs a version's requests (remote_ops):
 *
 *   an ordinary version: one ModelInfer per request, its outputs copied
 *   into the request;
 *
 *   a decoupled version (the upstream's config says
 *   model_transaction_policy { decoupled: true }, e.g. a generative
 *   model): one ModelStreamInfer per request, with Triton's
 *   triton_enable_empty_final_response, each response handed on
 *   (on_response) as it comes, tensors pointing into the message. Such a
 *   stream is replayable: when its upstream's connection is lost
 *   mid-stream, the pool sends it again to another upstream
 *   (cluster/upstream.h) and the responses the request already had are
 *   skipped, after checking that the replay repeats them (a hash of each
 *   response's outputs): a replay that differs ends the request with 502
 *   instead of sending a text that does not follow. A generative request
 *   without a random_seed gets one chosen here, so that a sampled
 *   generation repeats itself. Requests of a sequence (sequence_id) are
 *   never replayed (their state is on the upstream) and go to one
 *   upstream per correlation id.
 *
 * Sequence parameters and the priority travel as the request's
 * parameters; the deadline as grpc-timeout; the trace context and the
 * request id as headers. An upstream's error keeps its status: the gRPC
 * status of a call, or a stream error's inferd_http_status parameter.
 */
#ifndef INFERD_CLUSTER_REMOTE_INT_H
#define INFERD_CLUSTER_REMOTE_INT_H

#include "cluster/upstream.h"
#include "model/model.h"

struct remote_model_config; /* cluster/remote.h */

struct remote_engine {
    const struct remote_model_config *cfg;
    struct upstream_pool *pool;
    char label[300];
};

extern const struct model_engine_ops remote_ops;

#endif
