/*
 * inflate: decompresses a whole message compressed by a client: gRPC's
 * message compression (grpc-encoding gzip or deflate) and HTTP's
 * Content-Encoding (gzip, deflate) of request bodies. gzip is RFC 1952;
 * deflate is the zlib format (RFC 1950) as both protocols define it, and
 * raw DEFLATE (RFC 1951), which some HTTP clients send under that name,
 * is taken too.
 *
 * inflate_all(in, len, out, err) appends the decompressed bytes to out,
 * whose `max` bounds them (a zip bomb stops there): 0, or ST_ERROR with
 * err 400 (not valid compressed data, or trailing bytes), 413 (larger than
 * out->max decompressed) or 500 (out of memory).
 */
#ifndef INFERD_BASE_INFLATE_H
#define INFERD_BASE_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"

enum inflate_format { INFLATE_GZIP, INFLATE_DEFLATE };

/* The format a Content-Encoding / grpc-encoding names ("gzip", "x-gzip",
 * "deflate"; case-insensitive), or NOT_FOUND (base/status.h) for any other. */
int inflate_format_of(const char *name, size_t len);
int inflate_all(enum inflate_format f, const uint8_t *in, size_t len, struct buf *out,
                struct error *err);

#endif
