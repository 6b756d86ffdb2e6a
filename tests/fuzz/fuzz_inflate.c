/*
 * Fuzz target for the decompression of request bodies and gRPC messages
 * (base/inflate.c). The first byte picks the format (bit 0: gzip or
 * deflate) and the output limit (bits 1-7: 0 .. 127 KiB); the rest is the
 * compressed data. Properties checked:
 *   - the output never exceeds the limit, success or not;
 *   - a failure leaves the output as it was (nothing half-appended) with a
 *     400, 413 or 500 status;
 *   - data that decompressed compresses back (zlib) and decompresses again
 *     to the same bytes.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/inflate.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_inflate: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum inflate_format f = data[0] & 1 ? INFLATE_GZIP : INFLATE_DEFLATE;
    size_t max = (size_t)(data[0] >> 1) * 1024;
    struct buf out;
    buf_init(&out, max);
    struct error err;
    int rc = inflate_all(f, data + 1, size - 1, &out, &err);
    check(out.len <= max, "output past the limit");
    if (rc != 0) {
        check(out.len == 0, "a failure left output behind");
        check(err.status == 400 || err.status == 413 || err.status == 500, "failure status");
        buf_free(&out);
        return 0;
    }
    uLong bound = compressBound(out.len);
    uint8_t *z = malloc(bound ? bound : 1);
    check(z != NULL, "out of memory");
    check(compress(z, &bound, (const Bytef *)out.data, out.len) == Z_OK, "recompress");
    struct buf again;
    buf_init(&again, max);
    check(inflate_all(INFLATE_DEFLATE, z, bound, &again, &err) == 0, "round trip failed");
    check(again.len == out.len && memcmp(again.data, out.data, out.len) == 0,
          "round trip differs");
    free(z);
    buf_free(&again);
    buf_free(&out);
    return 0;
}
