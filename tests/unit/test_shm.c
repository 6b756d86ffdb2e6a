/*
 * The shared-memory region registry (serve/shm.h) on memfd objects:
 * register/status/unregister, the limits (region count, size, window),
 * references that outlive an unregister, and a request's inputs and
 * outputs in a region (in place, misaligned copies, BYTES, too small).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "serve/shm.h"

static int make_fd(size_t size)
{
    int fd = memfd_create("test_shm", 0);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    return fd;
}

static void test_register_status_unregister(void **state)
{
    (void)state;
    struct error err;
    struct shm_registry *reg = shm_registry_new();
    int fd = make_fd(8192);
    assert_int_equal(shm_register_fd(reg, "a", "key-a", fd, 0, 100, &err), 0);
    /* An offset that is not page-aligned maps from its page. */
    assert_int_equal(shm_register_fd(reg, "b", "key-b", fd, 5000, 3192, &err), 0);
    assert_int_equal(shm_register_fd(reg, "a", "key-a", fd, 0, 100, &err), -1);
    assert_string_equal(err.msg, "shared-memory region 'a' is already registered");
    assert_int_equal(shm_register_fd(reg, "c", "k", fd, 5000, 3193, &err), -1);
    assert_string_equal(
        err.msg, "region 'c': offset 5000 + byte_size 3193 is beyond the 8192 bytes of key 'k'");
    assert_int_equal(shm_register_fd(reg, "c", "k", fd, 0, 0, &err), -1);
    assert_int_equal(shm_register_fd(reg, "c", "k", fd, 0, SHM_REGION_MAX_BYTES + 1, &err), -1);
    assert_non_null(strstr(err.msg, "exceeds the limit"));
    assert_int_equal(shm_register_fd(reg, "", "k", fd, 0, 1, &err), -1);

    struct shm_info info[SHM_MAX_REGIONS];
    uint32_t n;
    assert_int_equal(shm_status(reg, NULL, info, SHM_MAX_REGIONS, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(info[1].name, "b");
    assert_string_equal(info[1].key, "key-b");
    assert_int_equal(info[1].offset, 5000);
    assert_int_equal(info[1].byte_size, 3192);
    assert_int_equal(shm_status(reg, "zz", info, SHM_MAX_REGIONS, &n, &err), -1);
    assert_int_equal(err.status, 404);
    assert_string_equal(err.msg, "Unable to find system shared memory region: 'zz'");

    /* A reference outlives the unregister; the name is free at once. */
    struct shm_region *b = shm_acquire(reg, "b", 1, &err);
    assert_non_null(b);
    shm_region_base(b)[3191] = 'x';
    shm_unregister(reg, "b");
    shm_unregister(reg, "b"); /* no longer registered: nothing to do */
    assert_null(shm_acquire(reg, "b", 1, &err));
    assert_int_equal(shm_region_base(b)[3191], 'x');
    assert_string_equal(shm_region_name(b), "b");
    shm_release(b);
    char c;
    assert_int_equal(pread(fd, &c, 1, 5000 + 3191), 1);
    assert_int_equal(c, 'x');

    shm_unregister(reg, NULL);
    assert_int_equal(shm_status(reg, NULL, info, SHM_MAX_REGIONS, &n, &err), 0);
    assert_int_equal(n, 0);
    close(fd);
    shm_registry_free(reg);
}

static void test_region_limit(void **state)
{
    (void)state;
    struct error err;
    struct shm_registry *reg = shm_registry_new();
    int fd = make_fd(4096);
    char name[16];
    for (int i = 0; i < SHM_MAX_REGIONS; i++) {
        snprintf(name, sizeof name, "r%d", i);
        assert_int_equal(shm_register_fd(reg, name, "k", fd, 0, 16, &err), 0);
    }
    assert_int_equal(shm_register_fd(reg, "one-more", "k", fd, 0, 16, &err), -1);
    assert_string_equal(err.msg,
                        "cannot register region 'one-more': the limit of 128 regions is reached");
    close(fd);
    shm_registry_free(reg);
}

static void test_request_inputs_outputs(void **state)
{
    (void)state;
    struct error err;
    struct shm_registry *reg = shm_registry_new();
    int fd = make_fd(4096);
    assert_int_equal(shm_register_fd(reg, "r", "k", fd, 0, 256, &err), 0);
    struct shm_region *r = shm_acquire(reg, "r", 1, &err);
    char *base = shm_region_base(r);
    shm_release(r);
    int32_t v[4] = {1, 2, 3, 4};
    memcpy(base + 16, v, sizeof v);
    memcpy(base + 33, v, sizeof v);
    memcpy(base + 64, "\x02\x00\x00\x00hi\x00\x00\x00\x00", 10);

    struct arena arena;
    arena_init(&arena, 4096, 1 << 20);
    struct shm_request sr = {.registry = reg};
    struct tensor t = {.name = "X", .dtype = DT_INT32, .ndim = 1, .shape = {4}};
    struct shm_params p = {.region = "r",
                           .region_len = 1,
                           .offset = 16,
                           .byte_size = 16,
                           .has_region = true,
                           .has_byte_size = true};
    assert_int_equal(shm_request_input(&sr, &arena, &t, &p, &err), 0);
    assert_ptr_equal(t.data, base + 16); /* in place */
    p.offset = 33;                       /* misaligned: copied */
    assert_int_equal(shm_request_input(&sr, &arena, &t, &p, &err), 0);
    assert_ptr_not_equal(t.data, base + 33);
    assert_memory_equal(t.data, v, sizeof v);
    p.byte_size = 12;
    assert_int_equal(shm_request_input(&sr, &arena, &t, &p, &err), -1);
    assert_string_equal(
        err.msg, "input 'X': shared_memory_byte_size is 12 bytes, shape [4] of INT32 needs 16");
    p.offset = 250;
    p.byte_size = 16;
    assert_int_equal(shm_request_input(&sr, &arena, &t, &p, &err), -1);
    assert_non_null(strstr(err.msg, "is beyond the 256 bytes of region 'r'"));
    p.has_byte_size = false;
    assert_int_equal(shm_request_input(&sr, &arena, &t, &p, &err), -1);
    assert_non_null(strstr(err.msg, "'shared_memory_byte_size' is required"));

    struct tensor s = {.name = "S", .dtype = DT_BYTES, .ndim = 1, .shape = {2}};
    struct shm_params ps = {.region = "r",
                            .region_len = 1,
                            .offset = 64,
                            .byte_size = 10,
                            .has_region = true,
                            .has_byte_size = true};
    assert_int_equal(shm_request_input(&sr, &arena, &s, &ps, &err), 0);
    const struct tensor_bytes *el = s.data;
    assert_int_equal(el[0].len, 2);
    assert_ptr_equal(el[0].ptr, base + 68);
    assert_int_equal(el[1].len, 0);

    /* Output 1 of 2 goes to the region at 128, 8 bytes at most. */
    struct shm_params po = {.region = "r",
                            .region_len = 1,
                            .offset = 128,
                            .byte_size = 8,
                            .has_region = true,
                            .has_byte_size = true};
    assert_int_equal(shm_request_output(&sr, &arena, 1, 2, "Y", &po, &err), 0);
    assert_false(shm_request_has_output(&sr, 0));
    assert_true(shm_request_has_output(&sr, 1));
    int32_t y[2] = {7, 8};
    struct tensor outs[2] = {
        {.name = "Z", .dtype = DT_INT32, .ndim = 1, .shape = {4}, .data = v, .nbytes = 16},
        {.name = "Y", .dtype = DT_INT32, .ndim = 1, .shape = {2}, .data = y, .nbytes = 8}};
    assert_int_equal(shm_request_write(&sr, outs, 2, &err), 0);
    assert_memory_equal(base + 128, y, sizeof y);
    assert_int_equal(sr.outputs[1].written, 8);
    outs[1].shape[0] = 4;
    outs[1].data = v;
    outs[1].nbytes = 16;
    assert_int_equal(shm_request_write(&sr, outs, 2, &err), -1);
    assert_string_equal(err.msg, "output 'Y': 16 bytes do not fit its shared_memory_byte_size 8 "
                                 "(region 'r')");

    /* Unknown region, and no registry at all. */
    p.region = "q";
    p.has_byte_size = true;
    assert_int_equal(shm_request_input(&sr, &arena, &t, &p, &err), -1);
    assert_string_equal(err.msg, "input 'X': unknown shared-memory region 'q'");
    struct shm_request none = {0};
    assert_int_equal(shm_request_input(&none, &arena, &t, &p, &err), -1);
    assert_non_null(strstr(err.msg, "not supported"));

    /* The request's references keep the region after an unregister. */
    shm_unregister(reg, "r");
    assert_int_equal(base[128], 7);
    shm_request_end(&sr);
    arena_free(&arena);
    close(fd);
    shm_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_status_unregister),
        cmocka_unit_test(test_region_limit),
        cmocka_unit_test(test_request_inputs_outputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
