/*
 * rest_obs: request ids, the access log and tracing for the REST front end
 * (HTTP/1.1 and REST over h2), and Triton's logging and trace-setting
 * endpoints. The protocol-independent part is obs/request.h; this file
 * only reads what it needs from a struct http_txn.
 *
 * In rest.c (every request) and rest_infer.c (inference):
 *   rest_obs_begin(txn)                first thing for every request: the
 *                                      x-request-id response header, and
 *                                      (when logging or tracing wants the
 *                                      request) txn->on_head/on_end/obs,
 *                                      which log and record spans when the
 *                                      response is sent
 *   rest_obs_infer_begin(txn, req, m)  infer: before decode/submit
 *   rest_obs_infer_done(txn, req)      infer: when the completed request is
 *                                      back, before sched_release/model_unref
 * All on the connection's I/O thread.
 *
 * Endpoints (their settings logic is obs/settings.h, shared with gRPC):
 *   GET/POST /v2/logging                         rest_obs_logging()
 *   GET/POST /v2[/models/{m}]/trace/setting      rest_obs_trace_setting()
 */
#ifndef INFERD_API_REST_OBS_H
#define INFERD_API_REST_OBS_H

#include <stddef.h>

#include "core/infer.h"
#include "http/server.h"
#include "model/model.h"
#include "model/repository.h"

void rest_obs_begin(struct http_txn *txn);
void rest_obs_infer_begin(struct http_txn *txn, struct infer_request *req, const struct model *m);
void rest_obs_infer_done(struct http_txn *txn, const struct infer_request *req);

/* Triton's logging extension: GET answers the settings, POST changes them
 * (only the fields given) and answers the result; 400 for unknown fields
 * or values of the wrong type. */
void rest_obs_logging(struct http_txn *txn);
/* Triton's trace extension; model NULL = the global settings. A model must
 * exist in repo (404 otherwise). */
void rest_obs_trace_setting(struct http_txn *txn, struct repository *repo, const char *model,
                            size_t model_len);

#endif
