#include "base/inflate.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "base/status.h"

int inflate_format_of(const char *name, size_t len)
{
    if ((len == 4 && strncasecmp(name, "gzip", 4) == 0) ||
        (len == 6 && strncasecmp(name, "x-gzip", 6) == 0))
        return INFLATE_GZIP;
    if (len == 7 && strncasecmp(name, "deflate", 7) == 0)
        return INFLATE_DEFLATE;
    return NOT_FOUND;
}

/* One pass of zlib over in with the given window bits. 0, ST_ERROR with
 * err, or ST_AGAIN when the data is not of this format (nothing kept). */
static int run(int window_bits, const uint8_t *in, size_t len, struct buf *out,
               struct error *err)
{
    size_t start = out->len;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, window_bits) != Z_OK)
        return error_set(err, 500, "out of memory to decompress the body");
    z.next_in = (Bytef *)in;
    int rc = Z_OK;
    size_t left = len;
    while (rc != Z_STREAM_END) {
        if (z.avail_in == 0) {
            uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
            z.avail_in = chunk;
            left -= chunk;
        }
        size_t room = out->len < out->max ? out->max - out->len : 0;
        if (room == 0) {
            inflateEnd(&z);
            out->len = start;
            return error_set(err, 413, "the decompressed body is larger than %zu bytes",
                             out->max - start);
        }
        size_t want = room < 65536 ? room : 65536;
        if (buf_reserve(out, want) != 0) {
            inflateEnd(&z);
            out->len = start;
            return error_set(err, out->err == -E2BIG ? 413 : 500,
                             "out of memory to decompress the body");
        }
        z.next_out = (Bytef *)out->data + out->len;
        z.avail_out = (uInt)want;
        rc = inflate(&z, Z_NO_FLUSH);
        out->len += want - z.avail_out;
        if (rc == Z_STREAM_END)
            break;
        if (rc == Z_BUF_ERROR && z.avail_in == 0 && left == 0) {
            inflateEnd(&z);
            out->len = start;
            return error_set(err, 400, "the compressed body ends too early");
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            inflateEnd(&z);
            out->len = start;
            return rc == Z_DATA_ERROR && z.total_out == 0 ? ST_AGAIN
                                                          : error_set(err, 400,
                                                                      "not valid compressed data");
        }
    }
    bool trailing = z.avail_in != 0 || left != 0;
    inflateEnd(&z);
    if (trailing) {
        out->len = start;
        return error_set(err, 400, "bytes after the end of the compressed data");
    }
    return 0;
}

int inflate_all(enum inflate_format f, const uint8_t *in, size_t len, struct buf *out,
                struct error *err)
{
    /* 15 + 16: gzip; 15: zlib; -15: raw DEFLATE. */
    int rc = run(f == INFLATE_GZIP ? 15 + 16 : 15, in, len, out, err);
    if (rc == ST_AGAIN && f == INFLATE_DEFLATE)
        rc = run(-15, in, len, out, err);
    if (rc == ST_AGAIN)
        return error_set(err, 400, "not valid %s data", f == INFLATE_GZIP ? "gzip" : "deflate");
    return rc;
}
