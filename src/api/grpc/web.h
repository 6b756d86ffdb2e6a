/*
 * grpc_web: gRPC-Web on the HTTP port (HTTP/1.1 and HTTP/2, TLS or not),
 * for browsers, which cannot speak gRPC itself (no trailers, no control
 * of HTTP/2 framing). It is another wire for the calls of api/grpc/grpc.h —
 * the same methods, status mapping, limits, deadlines (grpc-timeout),
 * auth (API keys in the metadata) and access log, only framed as the
 * gRPC-Web protocol says (api/grpc/framing.h):
 *
 *   request    POST /<service>/<method>, content type
 *              application/grpc-web[+proto] (binary) or
 *              application/grpc-web-text[+proto] (base64, chunks each
 *              padded allowed); the whole body is the request messages
 *              (bounded by --max-body-bytes, each message by
 *              --grpc-max-message-bytes)
 *   response   HTTP 200, the same content type as the request's form
 *              (+proto); initial metadata as HTTP headers; each response
 *              message as a data frame, as soon as it is ready (server
 *              streaming: ModelStreamInfer, Health/Watch); then the
 *              trailers (grpc-status, grpc-message, ...) as a frame with
 *              flag 0x80. An answer without any message (an error before
 *              one) is "trailers-only": grpc-status and grpc-message in
 *              the HTTP headers and an empty body.
 *
 * ModelStreamInfer is bidirectional in gRPC; over gRPC-Web the client
 * sends all its requests in the body and reads the responses as a server
 * stream. A client that goes away cancels the call (queued work is
 * dropped, a generation stops), as a reset gRPC stream does; the access
 * log line and metrics say protocol "grpc-web".
 *
 * On the loop thread that owns the exchange.
 */
#ifndef INFERD_API_GRPC_WEB_H
#define INFERD_API_GRPC_WEB_H

#include "api/grpc/grpc.h"
#include "api/grpc/framing.h"
#include "http/txn.h"

/* Whether txn is a gRPC-Web request (by its content type). */
enum grpc_web_encoding grpc_web_request(const struct http_txn *txn);
/* Runs txn, a gRPC-Web request of encoding enc, as a call of api. */
void grpc_web_handle(struct grpc_api *api, struct http_txn *txn, enum grpc_web_encoding enc);

#endif
