/*
 * Fuzz target for the gRPC and gRPC-Web framing (api/grpc/framing.c): the
 * message reader both wires use, and the base64 text form of gRPC-Web.
 * The first input byte chooses: bit 0 set = the rest is a
 * grpc-web-text body (base64, chunks each padded), else a binary body;
 * bits 1-7 = the size of the pieces the decoded body is fed in (1..128,
 * as network reads would cut it).
 * Properties checked:
 *   - the content type of the body's first bytes does not depend on case;
 *   - a text body that decodes re-encodes (padded) to text that decodes to
 *     the same bytes;
 *   - the reader finds the same messages, with the same outcome, whatever
 *     the pieces, and never a message over its limit;
 *   - the messages found, framed again, are the start of the body;
 *   - a trailer frame made of a message (as a grpc-message value) is
 *     flagged 0x80 and announces its own length.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpc/framing.h"
#include "base/base64.h"

#define MAX_MESSAGE 4096
#define MAX_BODY (1u << 20)
#define MAX_MESSAGES 64

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_grpc_web: %s\n", what);
        abort();
    }
}

struct outcome {
    enum grpc_read last;
    uint32_t nmessages;
    size_t lens[MAX_MESSAGES];
    uint64_t hash; /* of every message byte */
};

/* Feeds body to a reader in pieces of `piece` bytes. */
static void read_all(const uint8_t *body, size_t len, size_t piece, struct outcome *o)
{
    struct grpc_reader r = {0};
    struct buf msg;
    buf_init(&msg, MAX_MESSAGE);
    memset(o, 0, sizeof *o);
    o->hash = 1469598103934665603ull;
    o->last = GRPC_READ_MORE;
    size_t off = 0;
    while (off < len && o->last == GRPC_READ_MORE && o->nmessages < MAX_MESSAGES) {
        size_t n = len - off < piece ? len - off : piece;
        const uint8_t *p = body + off;
        size_t left = n;
        for (;;) {
            enum grpc_read rc = grpc_reader_feed(&r, &msg, MAX_MESSAGE, &p, &left);
            if (rc != GRPC_READ_MESSAGE) {
                o->last = rc;
                break;
            }
            check(msg.len <= MAX_MESSAGE, "message over the limit");
            if (o->nmessages == MAX_MESSAGES)
                break;
            o->lens[o->nmessages++] = msg.len;
            for (size_t i = 0; i < msg.len; i++)
                o->hash = (o->hash ^ (uint8_t)msg.data[i]) * 1099511628211ull;
        }
        off += n - left;
        if (left)
            break; /* refused, or the message cap */
    }
    if (o->last == GRPC_READ_TOO_LARGE)
        check(r.msg_len > MAX_MESSAGE, "too large under the limit");
    buf_free(&msg);
}

static void check_reframed(const uint8_t *body, size_t len, const struct outcome *o)
{
    size_t off = 0;
    for (uint32_t i = 0; i < o->nmessages; i++) {
        check(off + GRPC_FRAME_HEADER + o->lens[i] <= len, "message beyond the body");
        uint32_t n = (uint32_t)body[off + 1] << 24 | (uint32_t)body[off + 2] << 16 |
                     (uint32_t)body[off + 3] << 8 | body[off + 4];
        check(body[off] == 0 && n == o->lens[i], "message prefix");
        off += GRPC_FRAME_HEADER + o->lens[i];
    }
}

static void check_trailer(const uint8_t *value, size_t len)
{
    struct h2_header t[2] = {{"grpc-status", 11, "0", 1},
                             {"grpc-message", 12, (const char *)value, len}};
    struct buf f;
    buf_init(&f, MAX_BODY);
    check(grpc_web_trailer_frame(t, 2, &f) == 0, "trailer frame failed");
    const uint8_t *p = (const uint8_t *)f.data;
    uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    check(p[0] == GRPC_WEB_TRAILER_FLAG && n == f.len - GRPC_FRAME_HEADER, "trailer prefix");
    check(n == 11 + 2 + 1 + 2 + 12 + 2 + len + 2, "trailer length");
    buf_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_BODY)
        return 0;
    bool text = data[0] & 1;
    size_t piece = (size_t)(data[0] >> 1) + 1;
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    struct buf decoded, again, enc;
    buf_init(&decoded, MAX_BODY);
    buf_init(&again, MAX_BODY);
    buf_init(&enc, 2 * MAX_BODY);
    char ct[40];
    size_t ctlen = len < sizeof ct ? len : sizeof ct;
    for (size_t i = 0; i < ctlen; i++)
        ct[i] = body[i] >= 'a' && body[i] <= 'z' ? (char)(body[i] - 32) : (char)body[i];
    check(grpc_web_content_type((const char *)body, ctlen) == grpc_web_content_type(ct, ctlen),
          "content type depends on case");
    if (text) {
        if (base64_decode_chunks((const char *)body, len, &decoded) != 0)
            goto out;
        check(base64_append(&enc, decoded.data, decoded.len) == 0, "encode failed");
        check(enc.len % 4 == 0, "encoding not padded");
        check(base64_decode_chunks(enc.data, enc.len, &again) == 0, "re-encoded text refused");
        check(again.len == decoded.len &&
                  (decoded.len == 0 || memcmp(again.data, decoded.data, decoded.len) == 0),
              "round trip");
        body = (const uint8_t *)decoded.data;
        len = decoded.len;
    }
    struct outcome whole, cut;
    read_all(body, len, len ? len : 1, &whole);
    read_all(body, len, piece, &cut);
    check(whole.nmessages == cut.nmessages && whole.hash == cut.hash, "messages depend on pieces");
    check(whole.last == cut.last || whole.nmessages == MAX_MESSAGES, "outcome depends on pieces");
    check_reframed(body, len, &whole);
    check_trailer(body, len < 256 ? len : 256);
out:
    buf_free(&decoded);
    buf_free(&again);
    buf_free(&enc);
    return 0;
}
