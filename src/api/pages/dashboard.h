/*
 * dashboard: a live page of the server on the HTTP port,
 *
 *     GET /dashboard          a self-contained HTML page (dashboard.html,
 *                             embedded at build time)
 *     GET /dashboard/data     the JSON the page polls every second
 *
 * The JSON carries cumulative counters and histogram buckets only; the page
 * derives rates and percentiles from the differences between two polls.
 * On the connection's I/O thread; reads only.
 */
#ifndef INFERD_API_PAGES_DASHBOARD_H
#define INFERD_API_PAGES_DASHBOARD_H

#include "api/obs_sources.h"
#include "http/txn.h"

void dashboard_page(struct http_txn *txn);
/* src NULL: 404, the dashboard is not enabled. */
void dashboard_data(const struct obs_sources *src, struct http_txn *txn);

#endif
