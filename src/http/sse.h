/*
 * sse: Server-Sent Events (WHATWG HTML, "server-sent events") on a
 * streamed HTTP response (txn.h): Content-Type text/event-stream, one
 * write per event so that every event leaves at once (HTTP/1.1: one chunk;
 * HTTP/2: DATA frames).
 *
 *   sse_begin(txn)                       200, text/event-stream; charset=utf-8,
 *                                        Cache-Control: no-cache,
 *                                        X-Accel-Buffering: no (proxies such
 *                                        as nginx must not buffer)
 *   sse_event(txn, id, data, len)        "id: <id>\n" (when id != 0), then
 *                                        one "data: " line per line of data
 *                                        (CR, LF and CRLF all split lines),
 *                                        then a blank line
 *   sse_format(buf, id, id_len, data, len)  the same event appended to a
 *                                        buffer, with any id text (id_len 0:
 *                                        no id line), for streams that keep
 *                                        their events (api/streams.h)
 *   sse_comment(txn, text)               ": <text>\n\n" (keep-alive)
 *   http_txn_stream_end(txn)             ends the stream
 * Each returns 0, or ST_ERROR when the client is gone or does not read (the
 * response queue is over its limit): end the stream then. txn->body is
 * used as the scratch buffer of an event.
 */
#ifndef INFERD_HTTP_SSE_H
#define INFERD_HTTP_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/txn.h"

#define SSE_CONTENT_TYPE "text/event-stream; charset=utf-8"

int sse_begin(struct http_txn *txn);
int sse_event(struct http_txn *txn, uint64_t id, const char *data, size_t len);
void sse_format(struct buf *b, const char *id, size_t id_len, const char *data, size_t len);
int sse_comment(struct http_txn *txn, const char *text);

#endif
