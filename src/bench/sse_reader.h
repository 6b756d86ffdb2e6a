/*
 * sse_reader: the client side of Server-Sent Events (the WHATWG
 * "event stream interpretation"), incremental, for `inferd bench`'s
 * streaming modes.
 *
 * The caller feeds the decoded response body in pieces of any size (an HTTP
 * chunk, half a line, one byte); the reader calls on_event once per complete
 * event, in order. No line buffer: bytes go straight into the field they
 * belong to, so a piece boundary anywhere is the same as none.
 *
 * Rules (as the standard): lines end with CRLF, LF or CR; a line starting
 * with ':' is a comment; "field: value" drops one space after the colon; a
 * line without a colon is a field with an empty value; "data" lines are
 * joined with LF; "event" names the next event; "id" sets the last event id,
 * which persists across events (an id containing NUL is ignored); other
 * fields ("retry", unknown ones) are ignored; a blank line dispatches the
 * event unless its data is empty (then it only resets the event name). A
 * UTF-8 byte order mark at the very start of the stream is skipped. An
 * unterminated last event (the stream ends mid-event) is not dispatched.
 *
 * Limits: one event's data SSE_MAX_DATA bytes, an id SSE_MAX_ID, an event
 * name SSE_MAX_EVENT; beyond them sse_reader_feed() fails (the stream is
 * not what a server of ours sends).
 *
 * Lifecycle: sse_reader_init() allocates the data buffer once;
 * sse_reader_reset() starts a new stream (nothing allocated);
 * sse_reader_free(). One thread at a time.
 */
#ifndef INFERD_BENCH_SSE_READER_H
#define INFERD_BENCH_SSE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SSE_MAX_DATA (64 * 1024)
#define SSE_MAX_ID 256
#define SSE_MAX_EVENT 64
#define SSE_MAX_FIELD 16 /* longer field names are unknown fields */

/* Valid during the on_event call only. data is NUL-terminated (the final LF
 * removed); event is "" when the stream named none; id is the last event id
 * ("" if none). */
struct sse_event {
    const char *data;
    size_t data_len;
    const char *event;
    const char *id;
};

/* Returns 0 to go on, non-zero to stop: sse_reader_feed() then returns -1
 * with err "stopped by the caller". */
typedef int (*sse_event_fn)(void *arg, const struct sse_event *ev);

struct sse_reader {
    const char *err; /* static, after a failed feed */
    /* Private. */
    int _state;
    bool _bom_checked, _after_cr;
    uint8_t _bom_seen;
    uint32_t _field_len;
    char _field[SSE_MAX_FIELD];
    int _target; /* where the value goes */
    char *_data; /* SSE_MAX_DATA + 1 */
    size_t _data_len;
    char _event[SSE_MAX_EVENT + 1];
    size_t _event_len;
    char _value[SSE_MAX_ID + 1]; /* an id or event name being read */
    size_t _value_len;
    char _id[SSE_MAX_ID + 1];
    bool _value_nul;
};

/* 0 or -ENOMEM. */
int sse_reader_init(struct sse_reader *r);
void sse_reader_reset(struct sse_reader *r);
void sse_reader_free(struct sse_reader *r);

/* Consumes p[0..n). Returns 0, or ST_ERROR with r->err (a limit exceeded, or
 * on_event asked to stop); after -1 the reader needs a reset. */
int sse_reader_feed(struct sse_reader *r, const char *p, size_t n, sse_event_fn on_event,
                    void *arg);

#endif
