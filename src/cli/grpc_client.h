/*
 * grpc_client: one KServe v2 ModelInfer call for `inferd infer --grpc` —
 * an HTTP/2 client session (nghttp2) over a cli_conn (cleartext with prior
 * knowledge, or TLS with ALPN h2), one stream, the request packed with
 * protobuf-c (proto/grpc_service.proto: inputs with raw_input_contents),
 * the response unpacked (raw_output_contents) into cli_tensors.
 *
 * The host, TLS settings, timeout (sent as grpc-timeout too) and API key
 * (authorization metadata) are the target's; the port is `port`. Returns
 * an exit code of cli/client.h after printing why it failed: 1 for a
 * non-OK grpc-status (with its grpc-message), 3 for connection, TLS,
 * HTTP/2 or timeout failures, naming the address it dialed (the gRPC port,
 * not the REST one). Thread: the caller's.
 */
#ifndef INFERD_CLI_GRPC_CLIENT_H
#define INFERD_CLI_GRPC_CLIENT_H

#include "cli/client.h"
#include "cli/tensors.h"

struct cli_infer_request {
    const char *model;
    const char *version; /* NULL: the server's choice */
    const char *id;      /* NULL: none */
    struct cli_tensor *inputs;
    int ninputs;
    const char *const *outputs; /* requested output names; none: all */
    int noutputs;
};

struct cli_infer_result {
    char model_name[256];
    char model_version[64];
    char id[256];
    struct cli_tensor outputs[CLI_MAX_TENSORS];
    int noutputs;
};

void cli_infer_result_free(struct cli_infer_result *r);

int cli_grpc_infer(const struct cli_target *t, int port, const struct cli_infer_request *rq,
                   struct cli_infer_result *res, const char *prog);

/* ModelMetadata of model (version NULL: the default) over gRPC, appended
 * to *json as the REST form's {"name", "inputs", "outputs"} (each tensor
 * {"name", "datatype", "shape"}), so that the callers read one form. prog
 * NULL: nothing is printed on failure. Returns 0 or an exit code. */
int cli_grpc_metadata(const struct cli_target *t, int port, const char *model,
                      const char *version, struct buf *json, const char *prog);

#endif
