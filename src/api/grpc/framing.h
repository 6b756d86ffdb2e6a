/*
 * grpc_framing: the length-prefixed messages of gRPC and gRPC-Web, without
 * any transport, so that the fuzz target (tests/fuzz/fuzz_grpc_web.c) runs
 * exactly the code the server runs.
 *
 * Request side. struct grpc_reader splits a byte stream (the DATA of a
 * native gRPC call, or the decoded body of a gRPC-Web request) into
 * messages: a 1-byte flag (bit 0 = compressed: taken when the caller
 * accepts compressed messages, the call's grpc-encoding being one inferd
 * decompresses, else refused; any other bit = invalid), a 4-byte
 * big-endian length and the payload (compressed: its length as sent). A message longer than the caller's maximum is refused as soon
 * as its prefix is read, before any of it is buffered.
 * A gRPC-Web text body (application/grpc-web-text) is base64 of those
 * bytes, possibly as several chunks each padded on its own (a client that
 * encodes each message separately): base64_decode_chunks() (base/base64.h)
 * turns it back into the bytes the reader takes.
 *
 * Response side (gRPC-Web, the grpc/grpc PROTOCOL-WEB.md form): a message
 * is framed as gRPC frames it; the trailers are one more frame, flag 0x80,
 * whose payload is "name: value\r\n" lines (names lowercase). The text
 * form sends base64 of each frame, padded, one after the other.
 *
 * Content types: application/grpc-web and application/grpc-web+proto are
 * binary, application/grpc-web-text and application/grpc-web-text+proto
 * base64 (parameters after ';' ignored, case-insensitive).
 */
#ifndef INFERD_API_GRPC_FRAMING_H
#define INFERD_API_GRPC_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "http/h2.h"

/* gRPC message prefix: flag byte + 4-byte big-endian length. */
#define GRPC_FRAME_HEADER 5
/* gRPC-Web: the flag of the trailer frame. */
#define GRPC_WEB_TRAILER_FLAG 0x80

enum grpc_read {
    GRPC_READ_MORE,       /* the input is used up; no whole message yet */
    GRPC_READ_MESSAGE,    /* msg holds one whole message */
    GRPC_READ_COMPRESSED, /* flag bit 0 (a compressed message) and compressed_ok false */
    GRPC_READ_BAD_FLAGS,  /* any other flag bit */
    GRPC_READ_TOO_LARGE,  /* the prefix announced more than max bytes (msg_len) */
    GRPC_READ_NO_MEMORY,  /* msg could not grow */
};

/* Where the reader is between calls; zero-initialized = before a message. */
struct grpc_reader {
    uint8_t hdr[GRPC_FRAME_HEADER];
    uint32_t hdr_got; /* 0 between messages; GRPC_FRAME_HEADER while reading a payload */
    uint32_t msg_len; /* the current message's length (valid once the prefix is read) */
    bool compressed_ok; /* set by the caller: compressed messages are read, not refused */
    bool compressed;    /* the message being read (or just read) is compressed */
};

/* Consumes bytes from *data (advancing *data and *len) until a message is
 * complete (GRPC_READ_MESSAGE: its payload is in msg, which the reader
 * reset when the message began; call again for the next one), the input
 * is used up (GRPC_READ_MORE), or the stream is refused (any other value;
 * the reader must not be fed again). max: the largest payload accepted. */
enum grpc_read grpc_reader_feed(struct grpc_reader *r, struct buf *msg, uint64_t max,
                                const uint8_t **data, size_t *len);
/* True while a message is partly read (its prefix or payload incomplete). */
bool grpc_reader_inside(const struct grpc_reader *r);

/* What a request content type is for gRPC-Web. */
enum grpc_web_encoding { GRPC_WEB_NONE, GRPC_WEB_BINARY, GRPC_WEB_TEXT };
enum grpc_web_encoding grpc_web_content_type(const char *ct, size_t len);

/* Appends the trailer frame carrying t[0..n) to out. Returns 0 or a buf
 * error. */
int grpc_web_trailer_frame(const struct h2_header *t, size_t n, struct buf *out);

#endif
