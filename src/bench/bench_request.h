/*
 * bench_request: what `inferd bench` sends. One request, built once before
 * the run from the options (bench_options.h), head and body in one
 * contiguous buffer that every client thread then sends as it is.
 *
 *   --openai  POST <prefix>/v1/completions, gen_request_body() (gen_stream.h)
 *   --model   POST <prefix>/v2/models/M[/versions/V]/infer, the body built
 *             by bench_build_infer_body() from the model's metadata, fetched
 *             first (a blocking GET of /v2/models/M[/versions/V], with the
 *             user's headers but Content-Type)
 *   raw       --method (default POST with --body-file, else GET)
 *             <prefix><--path>, the body --body-file's bytes
 * The head: Host, User-Agent, Content-Type and Accept unless a --header
 * names them, Inference-Header-Content-Length (binary format),
 * Content-Length when there is a body, then every --header.
 *
 * bench_request_build() returns 0, or an exit status after saying why on
 * stderr: 1 the metadata could not be fetched or used, or the request is
 * too large; 2 a usage error (--body-file cannot be read, the target is too
 * long). bench_request_free() then, whatever build returned.
 *
 * Ownership: struct bench_request owns its buffers; method points to a
 * literal or into the options. Once built it is read-only, so the client
 * threads share req without locks.
 * Thread: any; bench_request_build() blocks on the metadata fetch.
 */
#ifndef INFERD_BENCH_BENCH_REQUEST_H
#define INFERD_BENCH_BENCH_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "bench/bench_options.h"
#include "bench/http_client.h"

struct bench_request {
    struct buf req;    /* head + body, contiguous: what is sent */
    struct buf body;   /* the body alone (its size is reported) */
    struct buf target; /* the request target, NUL-terminated */
    const char *method;
    bool head_request; /* HEAD: responses have no body */
};

int bench_request_build(struct bench_request *r, const struct bench_options *o,
                        const struct http_url *u, const struct sockaddr_storage *addr,
                        socklen_t addrlen);
void bench_request_free(struct bench_request *r);

/* Builds the body of an infer request from a model metadata document
 * (GET /v2/models/{m}): every input with its shape (a variable first
 * dimension becomes `batch`, other variable dimensions 1), filled with
 * deterministic pseudo-random values of its datatype. JSON format: a
 * KServe v2 JSON body. Binary format: Triton's binary tensor extension, a
 * JSON header followed by the raw little-endian tensors; *json_len is the
 * header's length (the Inference-Header-Content-Length), else 0.
 * The body is appended to *body. Returns 0, or ST_ERROR with a message in
 * err. */
int bench_build_infer_body(const char *metadata, size_t metadata_len, enum bench_format format,
                           uint32_t batch, struct buf *body, size_t *json_len, char *err,
                           size_t err_size);

#endif
