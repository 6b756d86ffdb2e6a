/*
 * auth_http: the API-key check of the HTTP endpoints (policy/auth.h) —
 * the HTTP entry (api/http_api.c), the metrics port (api/metrics_port.c) — and the
 * answer to a refused request: 401 with WWW-Authenticate, or 403, with a
 * JSON error body; the tenant goes to the access log.
 *
 * On the I/O thread that owns the txn.
 */
#ifndef INFERD_API_AUTH_HTTP_H
#define INFERD_API_AUTH_HTTP_H

#include <stdbool.h>

#include "base/error.h"
#include "http/txn.h"
#include "policy/auth.h"

/* Whether the request may use an endpoint of class cls; false: it was
 * answered. a NULL: true. */
bool auth_http_allow(struct auth *a, enum auth_class cls, struct http_txn *txn);
/* Adds WWW-Authenticate to the answer of err when it is a 401. */
void auth_http_challenge(struct http_txn *txn, const struct error *err);

#endif
