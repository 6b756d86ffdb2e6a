/* Unit tests of model/memory: the accounting of loaded versions and the
 * budget check (the measurement itself is tested against the real process
 * in tests/integration/test_model_memory.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/status.h"
#include "model/memory.h"

/* A version directory with a 3000-byte and a 1000-byte file. */
static void make_version_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/inferd_memory_XXXXXX");
    assert_non_null(mkdtemp(dir));
    static const size_t sizes[] = {3000, 1000};
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/f%zu", dir, i);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (size_t b = 0; b < sizes[i]; b++)
            fputc('x', f);
        fclose(f);
    }
}

static void remove_version_dir(const char *dir)
{
    char path[256];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/f%d", dir, i);
        unlink(path);
    }
    rmdir(dir);
}

static void test_budget(void **state)
{
    (void)state;
    char dir[64];
    make_version_dir(dir, sizeof dir);
    struct error err;
    error_clear(&err);
    assert_int_equal(model_memory_in_use(), 0);
    /* No budget; a budget its files fit in exactly. */
    assert_int_equal(model_memory_admit("m", "1", dir, 0, &err), ST_OK);
    assert_int_equal(model_memory_admit("m", "1", dir, 4000, &err), ST_OK);
    /* Loaded versions count: 4000 + 1 in use leaves no room. */
    struct model loaded = {.memory_bytes = 1};
    model_memory_account(&loaded, UINT64_MAX); /* the process shrank: counts 0 */
    assert_int_equal(loaded.memory_bytes, 0);
    assert_int_equal(model_memory_in_use(), 0);
    model_memory_account(&loaded, 0); /* everything the process holds */
    assert_true(loaded.memory_bytes > 0);
    assert_int_equal(model_memory_in_use(), loaded.memory_bytes);
    uint64_t budget = loaded.memory_bytes + 3999;
    assert_int_equal(model_memory_admit("m", "2", dir, budget, &err), ST_ERROR);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.msg, "model 'm' version 2 was not loaded: its files take 0.0 MiB "
                                    "and the loaded versions use "));
    assert_non_null(strstr(err.msg, "--model-memory-budget; unload a model or raise the budget"));
    /* What is in use alone exceeds the budget (a version measured more
     * than its files promised). */
    assert_int_equal(model_memory_admit("m", "2", dir, loaded.memory_bytes - 1, &err), ST_ERROR);
    model_memory_release(&loaded);
    assert_int_equal(model_memory_in_use(), 0);
    error_clear(&err);
    assert_int_equal(model_memory_admit("m", "2", dir, 4000, &err), ST_OK);
    /* A directory that cannot be read needs nothing. */
    assert_int_equal(model_memory_admit("m", "3", "/nonexistent/3", 1, &err), ST_OK);
    remove_version_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
