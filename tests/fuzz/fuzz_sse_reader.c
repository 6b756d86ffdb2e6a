/*
 * Fuzz target for bench/sse_reader (the client-side SSE reader of
 * `inferd bench --openai`). The input is a byte k, then the stream.
 * The stream is read three ways: whole, in pieces of 1 + k % 32 bytes, and
 * one byte at a time. Properties checked:
 *   - the three readings dispatch the same events (data, event name, last
 *     id, byte for byte) and end in the same state (ok, or the same error);
 *   - every event's data is NUL-terminated at data_len and within
 *     SSE_MAX_DATA, ids and names within their limits.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "bench/sse_reader.h"

#define MAX_INPUT (256 * 1024)

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_sse_reader: %s\n", what);
        abort();
    }
}

static void put_field(struct buf *b, const char *p, size_t n)
{
    uint32_t len = (uint32_t)n;
    buf_append(b, &len, sizeof len);
    buf_append(b, p, n);
}

/* Serializes every event into the buf. */
static int record(void *arg, const struct sse_event *ev)
{
    struct buf *b = arg;
    check(ev->data_len <= SSE_MAX_DATA, "data over the limit");
    check(ev->data[ev->data_len] == '\0', "data not NUL-terminated");
    size_t el = strlen(ev->event), il = strlen(ev->id);
    check(el <= SSE_MAX_EVENT && il <= SSE_MAX_ID, "name or id over the limit");
    put_field(b, ev->data, ev->data_len);
    put_field(b, ev->event, el);
    put_field(b, ev->id, il);
    return 0;
}

/* Reads s[0..n) in pieces of `step` bytes; the events into *events.
 * Returns the error message, or NULL. */
static const char *read_stream(const uint8_t *s, size_t n, size_t step, struct buf *events)
{
    struct sse_reader r;
    check(sse_reader_init(&r) == 0, "out of memory");
    const char *err = NULL;
    for (size_t off = 0; off < n;) {
        size_t len = n - off < step ? n - off : step;
        if (sse_reader_feed(&r, (const char *)s + off, len, record, events) != 0) {
            err = r.err;
            check(err != NULL, "failure without a message");
            check(sse_reader_feed(&r, "\n\n", 2, record, events) == -1,
                  "a failed reader accepted more");
            break;
        }
        off += len;
    }
    sse_reader_free(&r);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    size_t step = 1 + data[0] % 32;
    data++;
    size--;
    struct buf whole, pieces, bytes;
    buf_init(&whole, 64u << 20);
    buf_init(&pieces, 64u << 20);
    buf_init(&bytes, 64u << 20);
    const char *e1 = read_stream(data, size, size ? size : 1, &whole);
    const char *e2 = read_stream(data, size, step, &pieces);
    const char *e3 = read_stream(data, size, 1, &bytes);
    check(!whole.err && !pieces.err && !bytes.err, "out of memory");
    check(e1 == e2 && e2 == e3, "the readings end differently");
    check(whole.len == pieces.len && whole.len == bytes.len, "different events");
    check(whole.len == 0 || (memcmp(whole.data, pieces.data, whole.len) == 0 &&
                             memcmp(whole.data, bytes.data, whole.len) == 0),
          "different events");
    buf_free(&whole);
    buf_free(&pieces);
    buf_free(&bytes);
    return 0;
}
