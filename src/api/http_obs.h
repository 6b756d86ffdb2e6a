/*
 * http_obs: request ids, the access log, tracing and the HTTP metrics of
 * every exchange on the HTTP port (HTTP/1.1, HTTP/2 and HTTP/3; gRPC-Web
 * calls have their own, api/grpc/call.h). The protocol-independent part is
 * obs/request.h; this file only reads what it needs from a struct
 * http_txn.
 *
 *   http_obs_begin(txn)                first thing for every request
 *                                      (api/http_api.c): the x-request-id
 *                                      response header, and (when logging
 *                                      or tracing wants the request)
 *                                      txn->on_head/on_end/obs, which log
 *                                      and record spans when the response
 *                                      is sent
 *   http_obs_infer_begin(txn, req, m)  an inference: before decode/submit,
 *                                      with the body complete (its size
 *                                      replaces the 0 of a request handed
 *                                      over on its head)
 *   http_obs_infer_done(txn, req)      an inference: when the completed
 *                                      request is back, before
 *                                      sched_release/model_unref
 *   http_obs_on_response               the HTTP servers' on_response
 *                                      observer (http/server.h): counts
 *                                      responses by endpoint and status,
 *                                      and body bytes (inferd_http_*)
 * All on the connection's I/O thread.
 */
#ifndef INFERD_API_HTTP_OBS_H
#define INFERD_API_HTTP_OBS_H

#include <stddef.h>

#include "core/infer.h"
#include "http/txn.h"
#include "model/model.h"

void http_obs_begin(struct http_txn *txn);
void http_obs_infer_begin(struct http_txn *txn, struct infer_request *req, const struct model *m);
void http_obs_infer_done(struct http_txn *txn, const struct infer_request *req);
/* txn NULL: a response the server made without an exchange (a malformed
 * request), counted under no endpoint. */
void http_obs_on_response(const struct http_txn *txn, int status, size_t body_bytes);

#endif
