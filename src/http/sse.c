#include "http/sse.h"

#include <inttypes.h>
#include <stdio.h>

int sse_begin(struct http_txn *txn)
{
    http_txn_add_header(txn, "Cache-Control", "no-cache");
    http_txn_add_header(txn, "X-Accel-Buffering", "no");
    return http_txn_stream_begin(txn, 200, SSE_CONTENT_TYPE);
}

/* Sends what is in the scratch buffer as one write. */
static int flush_event(struct http_txn *txn)
{
    struct buf *b = &txn->body;
    int rc = b->err ? -1 : http_txn_stream_write(txn, b->data, b->len);
    buf_reset(b);
    return rc;
}

void sse_format(struct buf *b, const char *id, size_t id_len, const char *data, size_t len)
{
    if (id_len) {
        buf_puts(b, "id: ");
        buf_append(b, id, id_len);
        buf_putc(b, '\n');
    }
    size_t i = 0;
    do {
        size_t start = i;
        while (i < len && data[i] != '\n' && data[i] != '\r')
            i++;
        buf_puts(b, "data: ");
        buf_append(b, data + start, i - start);
        buf_putc(b, '\n');
        if (i < len && data[i] == '\r' && i + 1 < len && data[i + 1] == '\n')
            i++;
        if (i < len)
            i++; /* the line break; a break at the very end adds an empty line */
        else
            break;
    } while (1);
    buf_putc(b, '\n');
}

int sse_event(struct http_txn *txn, uint64_t id, const char *data, size_t len)
{
    struct buf *b = &txn->body;
    char text[24];
    int n = id ? snprintf(text, sizeof text, "%" PRIu64, id) : 0;
    buf_reset(b);
    sse_format(b, text, (size_t)n, data, len);
    return flush_event(txn);
}

int sse_comment(struct http_txn *txn, const char *text)
{
    struct buf *b = &txn->body;
    buf_reset(b);
    buf_printf(b, ": %s\n\n", text);
    return flush_event(txn);
}
