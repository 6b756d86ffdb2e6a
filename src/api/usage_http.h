/*
 * usage_http: GET /v2/usage, the metering of generative models' tokens
 * (obs/usage.h) by day, tenant and model, for admins (routed by api/rest/rest.c,
 * admin scope when API keys are configured; docs/api.md).
 *
 * Query parameters, each at most once, all optional:
 *   tenant=NAME   only this tenant's rows
 *   model=NAME    only this model's rows
 *   from=YYYY-MM-DD, to=YYYY-MM-DD   UTC days, inclusive
 * Percent-escapes are decoded ('+' is a space). An unknown parameter, a
 * repeated one, an empty or too long name, a date that is not one, or from
 * after to: 400 with a JSON error naming the parameter. The body is
 * usage_write_json's (200); 500 when it cannot be built.
 *
 * On the connection's I/O thread.
 */
#ifndef INFERD_API_USAGE_HTTP_H
#define INFERD_API_USAGE_HTTP_H

#include "http/txn.h"
#include "obs/usage.h"

/* Answers a GET or HEAD (the router checks the method). */
void usage_http_get(struct usage *u, struct http_txn *txn);

#endif
