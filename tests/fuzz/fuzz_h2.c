/*
 * Fuzz target for the server side of HTTP/2 (src/http/h2.c on libnghttp2):
 * the bytes a client sent are fed to a session exactly as a connection
 * does (h2_session_recv, then h2_session_send into the output buffer).
 *
 * Input: byte 0 is a control byte:
 *   bit 0   prepend the client connection preface (so mutations start past it)
 *   bit 1   REST handler answers later (after the next chunk) instead of at once
 *   bit 2   tight limits (small header list, few headers, small bodies)
 *   bit 3   keep some REST answers until after the session is freed
 *           (the detached, aborted txn path)
 *   bits 4-7 chunk size: the input is fed in pieces of 1 << (bits + 2) bytes
 * The REST handler answers each request with a JSON body naming its path
 * (odd-length paths: a streamed response of two writes). Requests whose
 * path starts with "/e" are taken on their head (h2_session_config.early,
 * http/txn.h): a path length divisible by 3 is answered without its body
 * (a refusal), the others when the transport reports the body done
 * (complete, failed, or the stream gone);
 * the gRPC app echoes every DATA chunk and finishes with trailers when the
 * client half-closes (a trailers-only answer for empty requests).
 *
 * Checks beyond ASan/UBSan: the output never grows past the high-water mark
 * plus one frame, and every txn handed to the handler is answered exactly
 * once (its stream stays valid until then).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "http/h2.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_h2: check failed at line %d: %s\n", __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_PENDING 64
#define HIGH_WATER (32 * 1024)

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct fuzz_state {
    bool answer_later;
    struct http_txn *pending[MAX_PENDING];
    int npending;
    long handled, answered;
};

static void answer(struct fuzz_state *fs, struct http_txn *txn)
{
    if (txn->aborted) {
        http_txn_respond(txn, 0, NULL);
    } else if (txn->req.path_len % 2) {
        /* Odd paths get a streamed response (DATA frames as written). */
        if (http_txn_stream_begin(txn, 200, "text/event-stream") == 0) {
            http_txn_stream_write(txn, "data: 1\n\n", 9);
            http_txn_stream_write(txn, txn->req.path, txn->req.path_len);
        }
        http_txn_stream_end(txn);
    } else {
        buf_printf(&txn->body, "{\"path\":\"%.*s\"}", (int)(txn->req.path_len > 64 ? 64 : txn->req.path_len),
                   txn->req.path);
        http_txn_add_header(txn, "X-Fuzz", "1");
        http_txn_respond(txn, txn->req.body_len ? 200 : 204, "application/json");
    }
    fs->answered++;
}

static void answer_or_keep(struct fuzz_state *fs, struct http_txn *txn)
{
    if (fs->answer_later && fs->npending < MAX_PENDING) {
        fs->pending[fs->npending++] = txn;
        return;
    }
    answer(fs, txn);
}

static bool early(void *app, const struct http_txn *txn)
{
    (void)app;
    return txn->req.path_len >= 2 && memcmp(txn->req.path, "/e", 2) == 0;
}

/* The body of a request taken on its head is done (txn.h): exactly once,
 * before any answer. */
static void on_body(struct http_txn *txn, void *ctx)
{
    CHECK(!txn->body_pending);
    CHECK(txn->body_status || txn->req.body_len == 0 || txn->req.body != NULL);
    answer_or_keep(ctx, txn);
}

static void rest_handler(void *app, struct http_txn *txn)
{
    struct fuzz_state *fs = app;
    fs->handled++;
    CHECK(txn->version == HTTP_VERSION_2 && txn->transport != NULL && txn->req.method &&
          txn->req.path);
    if (txn->body_pending && txn->req.path_len % 3) {
        CHECK(early(app, txn) && !txn->req.body);
        txn->on_body = on_body;
        txn->body_ctx = fs;
        return;
    }
    answer_or_keep(fs, txn);
}

static void answer_pending(struct fuzz_state *fs, int keep)
{
    while (fs->npending > keep)
        answer(fs, fs->pending[--fs->npending]);
}

static void grpc_headers(void *app, struct h2_stream *st)
{
    (void)app;
    size_t len;
    CHECK(h2_stream_path(st, &len) != NULL);
    for (size_t i = 0; i < h2_stream_header_count(st); i++)
        CHECK(h2_stream_header_at(st, i)->name != NULL);
}

static void grpc_data(void *app, struct h2_stream *st, const uint8_t *data, size_t len)
{
    (void)app;
    if (!h2_stream_user(st)) {
        static const struct h2_header h[] = {{"content-type", 12, "application/grpc", 16}};
        h2_stream_respond_headers(st, 200, h, 1);
        h2_stream_set_user(st, st);
    }
    if (h2_stream_write(st, data, len) != 0 || h2_stream_pending(st) > 4 * HIGH_WATER)
        h2_stream_reset(st, H2_ENHANCE_YOUR_CALM);
}

static void grpc_end(void *app, struct h2_stream *st)
{
    (void)app;
    static const struct h2_header tr[] = {
        {"content-type", 12, "application/grpc", 16},
        {"grpc-status", 11, "0", 1},
    };
    if (h2_stream_user(st))
        h2_stream_finish(st, tr + 1, 1);
    else
        h2_stream_finish(st, tr, 2); /* trailers-only */
}

static void grpc_close(void *app, struct h2_stream *st, uint32_t error_code)
{
    (void)app;
    (void)error_code;
    h2_stream_set_user(st, NULL);
}

static const struct h2_stream_app grpc_app = {
    .on_headers = grpc_headers,
    .on_data = grpc_data,
    .on_end = grpc_end,
    .on_close = grpc_close,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    data++;
    size--;
    struct fuzz_state fs = {.answer_later = ctl & 2};
    struct http1_limits limits = {.max_request_line = 8192, .max_header_bytes = 16384,
                                  .max_headers = 32, .max_body = 1 << 20};
    if (ctl & 4)
        limits = (struct http1_limits){.max_request_line = 64, .max_header_bytes = 256,
                                       .max_headers = 4, .max_body = 32};
    struct h2_session_config cfg = {
        .limits = &limits,
        .max_concurrent_streams = 16,
        .max_response_bytes = 1 << 20,
        .grpc = &grpc_app,
        .handler = rest_handler,
        .handler_app = &fs,
        .early = early,
    };
    struct h2_session *s;
    if (h2_session_new(&cfg, &s) != 0)
        return 0;
    struct buf out;
    buf_init(&out, 1 << 20);
    size_t chunk = (size_t)1 << (((ctl >> 4) & 15) + 2);
    bool failed = false;
    if (ctl & 1)
        failed = h2_session_recv(s, (const uint8_t *)preface, sizeof preface - 1) != 0;
    for (size_t off = 0; off < size && !failed; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        failed = h2_session_recv(s, data + off, n) != 0;
        answer_pending(&fs, (ctl & 8) ? 1 : 0);
        /* The connection drains its output between reads. */
        for (int i = 0; i < 64; i++) {
            out.len = 0;
            if (h2_session_send(s, &out, HIGH_WATER) != 0) {
                failed = true;
                break;
            }
            CHECK(out.len <= HIGH_WATER + 16384 + 9 + 64 * 1024);
            if (out.len == 0)
                break;
        }
        if (h2_session_done(s))
            break;
    }
    if (!failed && (ctl & 8))
        h2_session_drain(s);
    h2_session_free(s);
    answer_pending(&fs, 0); /* detached txns: only freed */
    CHECK(fs.answered == fs.handled);
    buf_free(&out);
    return 0;
}
