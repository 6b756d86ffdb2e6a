/* The playground page (playground.html, embedded at build time). */
#include "api/pages/playground.h"

#include "base/buf.h"
#include "playground_html.h"

void playground_page(struct http_txn *txn)
{
    if (buf_append(&txn->body, playground_html, playground_html_LEN) != 0) {
        http_txn_error(txn, 500, "cannot send the playground");
        return;
    }
    http_txn_add_header(txn, "Cache-Control", "no-store");
    http_txn_respond(txn, 200, "text/html; charset=utf-8");
}
