/*
 * logging: Triton's logging and trace extensions on the HTTP port,
 *
 *     GET/POST /v2/logging                        rest_logging()
 *     GET/POST /v2[/models/{m}]/trace/setting     rest_trace_setting()
 *
 * The settings themselves are obs/settings.h, shared with the gRPC
 * LogSettings and TraceSetting RPCs; this file reads and writes their JSON
 * form. On the connection's I/O thread.
 */
#ifndef INFERD_API_REST_LOGGING_H
#define INFERD_API_REST_LOGGING_H

#include <stddef.h>

#include "http/txn.h"
#include "model/repository.h"

/* GET answers the settings, POST changes them (only the fields given) and
 * answers the result; 400 for unknown fields or values of the wrong type,
 * 405 for another method. */
void rest_logging(struct http_txn *txn);
/* The same for trace settings; model NULL = the global settings. A model
 * must exist in repo (404 otherwise). */
void rest_trace_setting(struct http_txn *txn, struct repository *repo, const char *model,
                        size_t model_len);

#endif
