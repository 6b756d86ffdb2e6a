/*
 * stats: Triton's statistics extension on the HTTP port,
 *
 *     GET /v2/models[/{m}[/versions/{v}]]/stats
 *
 * in Triton's JSON shape (model_stats: inference, response and batch
 * statistics per version), built from obs/stats.h at request time. On the
 * connection's I/O thread.
 */
#ifndef INFERD_API_REST_STATS_H
#define INFERD_API_REST_STATS_H

#include <stddef.h>

#include "http/txn.h"
#include "model/repository.h"

/* Answers a statistics request. model == NULL: every model; version ==
 * NULL: every loaded version of model. 404 JSON error for an unknown model
 * or version. */
void rest_stats(struct repository *repo, struct http_txn *txn, const char *model, size_t model_len,
                const char *version);

#endif
