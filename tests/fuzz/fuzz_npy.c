/*
 * Fuzz target for the .npy reader and writer of the CLI client
 * (cli/npy.c). Every input is a .npy file. Properties checked:
 *   - npy_parse() accepts, or refuses with a 400 message; an accepted
 *     file's data lies inside the input and holds count * item_size bytes;
 *   - npy_data() of an accepted file succeeds or refuses with a message,
 *     and for numeric dtypes yields exactly data_len bytes;
 *   - what npy_data() yields, written by npy_write() (BYTES as S<n>), parses
 *     again to the same dtype and shape and reads back to the same bytes.
 * A violated property aborts, which libFuzzer and the replay driver report.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/npy.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_npy: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct npy_array a;
    struct error err;
    error_clear(&err);
    if (npy_parse(data, size, &a, &err) != 0) {
        check(err.status == 400 && err.msg[0], "refusal without a message");
        return 0;
    }
    check(a.data >= data && a.data + a.data_len == data + size, "data outside the input");
    check(a.count * a.item_size == a.data_len, "data length");
    struct buf raw, file, again;
    buf_init(&raw, 1 << 22);
    buf_init(&file, 1 << 23);
    buf_init(&again, 1 << 22);
    error_clear(&err);
    if (npy_data(&a, &raw, &err) != 0) {
        check(err.msg[0] != '\0', "npy_data refusal without a message");
        goto out;
    }
    if (a.kind == NPY_NUMERIC)
        check(raw.len == a.data_len, "numeric data length");
    if (npy_write(a.dtype, a.ndim, a.shape, raw.data, raw.len, &file, &err) != 0) {
        check(err.msg[0] != '\0', "npy_write refusal without a message");
        goto out;
    }
    struct npy_array b;
    check(npy_parse(file.data, file.len, &b, &err) == 0, "written file does not parse");
    check(b.dtype == a.dtype && b.ndim == a.ndim &&
              memcmp(a.shape, b.shape, sizeof a.shape[0] * (size_t)a.ndim) == 0,
          "dtype or shape changed");
    check(npy_data(&b, &again, &err) == 0, "written data does not read");
    check(again.len == raw.len && (raw.len == 0 || memcmp(again.data, raw.data, raw.len) == 0),
          "data changed through write and read");
out:
    buf_free(&raw);
    buf_free(&file);
    buf_free(&again);
    return 0;
}
