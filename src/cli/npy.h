/*
 * npy: NumPy's .npy file format (format versions 1.0, 2.0 and 3.0) for the
 * CLI client: reading a file's header into a KServe datatype and shape, its
 * data into KServe's raw layout, and writing a tensor as a .npy file.
 *
 * npy_parse() reads the magic, the version and the header dictionary
 * ({'descr': ..., 'fortran_order': ..., 'shape': (...)}) of file[0..len)
 * and checks that the data that follows holds exactly count * item_size
 * bytes. Accepted descr: b1 (BOOL), i1/u1 (INT8/UINT8), i2/u2/i4/u4/i8/u8
 * and f2/f4/f8 (INT16..UINT64, FP16, FP32, FP64) in either byte order
 * ('<', '>', '|' or '=' for one-byte types), S<n> (fixed-length bytes:
 * BYTES, each element without its trailing NULs, as NumPy reads it) and U<n> (UTF-32 text: BYTES
 * in UTF-8). Refused, with a message in err: Fortran order, object arrays
 * (pickles), structured dtypes, more than NPY_MAX_DIMS dimensions, a
 * header over NPY_MAX_HEADER bytes, shapes whose element count or byte
 * size overflows, and truncated or oversized data. Nothing is allocated;
 * thread: any.
 *
 * npy_data() appends the data of a parsed file to out in KServe's raw
 * layout: numeric types little-endian (byte-swapped when the file is
 * big-endian), BOOL one byte 0/1, BYTES a 4-byte little-endian length and
 * the bytes per element. -1 with err (invalid UTF-32 text, a BOOL byte
 * other than 0/1, out's ceiling reached).
 *
 * npy_write() appends a .npy file (format 1.0, C order, little-endian) of
 * a tensor in KServe's raw layout (the same as npy_data's output) to out:
 * BYTES become S<n>, n the longest element (at least 1). BF16 has no NumPy
 * type and is refused. -1 with err.
 */
#ifndef INFERD_CLI_NPY_H
#define INFERD_CLI_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "core/dtype.h"

#define NPY_MAX_DIMS 16
#define NPY_MAX_HEADER 65536

enum npy_kind { NPY_NUMERIC, NPY_FIXED_BYTES, NPY_UTF32 };

struct npy_array {
    enum dtype dtype;
    enum npy_kind kind;
    size_t item_size; /* bytes per element in the file */
    bool big_endian;  /* numeric data to byte-swap */
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    uint64_t count;      /* elements: the product of the shape (1 for a scalar) */
    const uint8_t *data; /* into the parsed file */
    size_t data_len;     /* count * item_size */
};

int npy_parse(const void *file, size_t len, struct npy_array *out, struct error *err);
int npy_data(const struct npy_array *a, struct buf *out, struct error *err);
int npy_write(enum dtype dtype, int ndim, const int64_t *shape, const void *raw, size_t raw_len,
              struct buf *out, struct error *err);

#endif
