/*
 * playground: GET /playground, a self-contained HTML page (api/pages/playground.html,
 * embedded at build time) to try every served model by hand: a form made
 * from the model's metadata, streaming chat for generative models, and the
 * request shown as code (docs/playground.md).
 *
 * The page is static: it holds no server data and asks the server's public
 * APIs for everything with the key typed into it. So it is served without
 * a key, and every request it makes is checked as any client's.
 */
#ifndef INFERD_API_PLAYGROUND_H
#define INFERD_API_PLAYGROUND_H

#include "http/server.h"

/* Answers txn (a GET or HEAD) with the page: 200 text/html, no-store. */
void playground_page(struct http_txn *txn);

#endif
