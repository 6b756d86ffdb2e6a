/* Unit tests of cli/npy: headers as NumPy writes them (versions 1.0 and
 * 2.0, every numeric dtype, both byte orders, S and U strings, scalars),
 * the refusals (Fortran order, objects, structured dtypes, bad magic,
 * truncated or extra data, overflowing shapes, too many dims), and the
 * writer's round trip through the reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/npy.h"

/* A .npy file: the magic, version major.0, the header dict padded with
 * spaces and '\n' to a multiple of 64 (as NumPy does), then data. */
static size_t make_npy(uint8_t *out, int major, const char *dict, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t hl = strlen(dict) + 1;
    hl += (64 - (pre + hl) % 64) % 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    out[8] = (uint8_t)hl;
    out[9] = (uint8_t)(hl >> 8);
    if (major != 1) {
        out[10] = 0;
        out[11] = 0;
    }
    memset(out + pre, ' ', hl);
    memcpy(out + pre, dict, strlen(dict));
    out[pre + hl - 1] = '\n';
    memcpy(out + pre + hl, data, n);
    return pre + hl + n;
}

static uint8_t file[1 << 16];

static void test_numeric_little_endian(void **state)
{
    (void)state;
    int32_t v[6] = {1, -2, 3, -4, 5, 6};
    size_t n = make_npy(file, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", v,
                        sizeof v);
    struct npy_array a;
    struct error err;
    error_clear(&err);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    assert_int_equal(a.dtype, DT_INT32);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 2);
    assert_int_equal(a.shape[1], 3);
    assert_int_equal(a.count, 6);
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(npy_data(&a, &b, &err), 0);
    assert_int_equal(b.len, sizeof v);
    assert_memory_equal(b.data, v, sizeof v);
    buf_free(&b);
}

static void test_every_dtype(void **state)
{
    (void)state;
    static const struct {
        const char *descr;
        enum dtype dt;
        size_t size;
    } cases[] = {
        {"|b1", DT_BOOL, 1},   {"|i1", DT_INT8, 1},  {"|u1", DT_UINT8, 1},  {"<i2", DT_INT16, 2},
        {"<u2", DT_UINT16, 2}, {"<i4", DT_INT32, 4}, {"<u4", DT_UINT32, 4}, {"<i8", DT_INT64, 8},
        {"<u8", DT_UINT64, 8}, {"<f2", DT_FP16, 2},  {"<f4", DT_FP32, 4},   {"<f8", DT_FP64, 8},
    };
    uint8_t data[32] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (4,), }",
                 cases[i].descr);
        size_t n = make_npy(file, 1, dict, data, 4 * cases[i].size);
        struct npy_array a;
        struct error err;
        error_clear(&err);
        assert_int_equal(npy_parse(file, n, &a, &err), 0);
        assert_int_equal(a.dtype, cases[i].dt);
        assert_int_equal(a.item_size, cases[i].size);
        /* the writer gives the same descr back */
        struct buf b;
        buf_init(&b, 1 << 20);
        assert_int_equal(npy_write(cases[i].dt, 1, a.shape, data, 4 * cases[i].size, &b, &err), 0);
        assert_non_null(memmem(b.data, b.len, cases[i].descr, 3));
        assert_int_equal((b.len - 4 * cases[i].size) % 64, 0);
        buf_free(&b);
    }
}

static void test_big_endian_swapped(void **state)
{
    (void)state;
    uint8_t be[4] = {0x01, 0x02, 0x03, 0x04}; /* >i2: 0x0102, 0x0304 */
    size_t n = make_npy(file, 2, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,)}", be, 4);
    struct npy_array a;
    struct error err;
    error_clear(&err);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    assert_true(a.big_endian);
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(npy_data(&a, &b, &err), 0);
    static const uint8_t le[4] = {0x02, 0x01, 0x04, 0x03};
    assert_memory_equal(b.data, le, 4);
    buf_free(&b);
}

static void test_scalar(void **state)
{
    (void)state;
    double d = 2.5;
    size_t n =
        make_npy(file, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", &d, sizeof d);
    struct npy_array a;
    struct error err;
    error_clear(&err);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.count, 1);
}

static void test_strings(void **state)
{
    (void)state;
    /* |S3: "ab", "xyz"; trailing NULs are padding */
    size_t n = make_npy(file, 1, "{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }",
                        "ab\0xyz", 6);
    struct npy_array a;
    struct error err;
    error_clear(&err);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    assert_int_equal(a.dtype, DT_BYTES);
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(npy_data(&a, &b, &err), 0);
    assert_int_equal(b.len, 4 + 2 + 4 + 3);
    assert_memory_equal(b.data, "\x02\0\0\0ab\x03\0\0\0xyz", 13);
    /* written back as |S3 and read again the same */
    int64_t shape[1] = {2};
    struct buf w;
    buf_init(&w, 1 << 20);
    assert_int_equal(npy_write(DT_BYTES, 1, shape, b.data, b.len, &w, &err), 0);
    assert_non_null(memmem(w.data, w.len, "'|S3'", 5));
    struct npy_array a2;
    assert_int_equal(npy_parse(w.data, w.len, &a2, &err), 0);
    assert_int_equal(a2.item_size, 3);
    buf_free(&w);
    buf_free(&b);

    /* <U2: "é€" and "a" in UTF-32 -> UTF-8 */
    uint32_t u[4] = {0xE9, 0x20AC, 'a', 0};
    n = make_npy(file, 1, "{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", u, sizeof u);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    buf_init(&b, 1 << 20);
    assert_int_equal(npy_data(&a, &b, &err), 0);
    assert_memory_equal(b.data, "\x05\0\0\0\xc3\xa9\xe2\x82\xac\x01\0\0\0a", 14);
    buf_free(&b);
    /* a surrogate is not text */
    uint32_t bad[1] = {0xD800};
    n = make_npy(file, 1, "{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", bad, 4);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    buf_init(&b, 1 << 20);
    assert_int_equal(npy_data(&a, &b, &err), -1);
    assert_non_null(strstr(err.msg, "surrogate"));
    buf_free(&b);
}

static void expect_refused(const char *dict, size_t data_len, const char *needle)
{
    static const uint8_t zeros[256];
    size_t n = make_npy(file, 1, dict, zeros, data_len);
    struct npy_array a;
    struct error err;
    error_clear(&err);
    assert_int_equal(npy_parse(file, n, &a, &err), -1);
    if (!strstr(err.msg, needle))
        fail_msg("%s: message '%s' lacks '%s'", dict, err.msg, needle);
}

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "Fortran");
    expect_refused("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8, "unsupported");
    expect_refused("{'descr': '|O8', 'fortran_order': False, 'shape': (1,), }", 8, "object");
    expect_refused("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", 4,
                   "structured");
    expect_refused("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8, "unsupported");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, "data holds");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, "data holds");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': "
                   "(4294967296, 4294967296, 4294967296), }",
                   0, "overflows");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': "
                   "(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }",
                   4, "dimensions");
    expect_refused("{'descr': '<f4', 'shape': (1,), }", 4, "fortran_order");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
                   "unexpected key");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1,) ", 4, "malformed");
    expect_refused("[1, 2]", 0, "dictionary");

    struct npy_array a;
    struct error err;
    error_clear(&err);
    assert_int_equal(npy_parse("NUMPY", 5, &a, &err), -1);
    assert_int_equal(npy_parse("\x93NUMPY\x04\x00\x00\x00", 10, &a, &err), -1);
    assert_non_null(strstr(err.msg, "version"));
    /* header length beyond the file */
    assert_int_equal(npy_parse("\x93NUMPY\x01\x00\xff\x00{", 11, &a, &err), -1);
    assert_non_null(strstr(err.msg, "truncated"));
    /* a BOOL byte other than 0/1 is refused when reading the data */
    size_t n = make_npy(file, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
                        "\x01\x02", 2);
    assert_int_equal(npy_parse(file, n, &a, &err), 0);
    struct buf b;
    buf_init(&b, 1 << 20);
    assert_int_equal(npy_data(&a, &b, &err), -1);
    buf_free(&b);
}

static void test_writer_refusals(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 1 << 20);
    struct error err;
    error_clear(&err);
    int64_t shape[2] = {2, 2};
    uint16_t h[4] = {0};
    assert_int_equal(npy_write(DT_BF16, 2, shape, h, sizeof h, &b, &err), -1);
    assert_int_equal(npy_write(DT_FP32, 2, shape, h, sizeof h, &b, &err), -1);
    assert_int_equal(npy_write(DT_BYTES, 2, shape, "\x01\0\0\0a", 5, &b, &err), -1);
    assert_int_equal(b.len, 0);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numeric_little_endian),
        cmocka_unit_test(test_every_dtype),
        cmocka_unit_test(test_big_endian_swapped),
        cmocka_unit_test(test_scalar),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_writer_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
