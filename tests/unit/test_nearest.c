/* Unit tests of base/nearest: the distance, and which name counts as near. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/nearest.h"

static size_t dist(const char *a, const char *b)
{
    return nearest_distance(a, strlen(a), b, strlen(b));
}

static void test_distance(void **state)
{
    (void)state;
    assert_int_equal(dist("simple", "simple"), 0);
    assert_int_equal(dist("simpel", "simple"), 1); /* a transposition counts 1 */
    assert_int_equal(dist("simpl", "simple"), 1);
    assert_int_equal(dist("sample", "simple"), 1);
    assert_int_equal(dist("smple", "simple"), 1);
    assert_int_equal(dist("digts", "digits"), 1);
    assert_int_equal(dist("", "abc"), 3);
    assert_int_equal(dist("kitten", "sitting"), 3);
    assert_int_equal(dist("ca", "abc"), 3); /* OSA: no edit of a transposed pair */
    char long_name[NEAREST_MAX_LEN + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(dist(long_name, "a"), NEAREST_MAX_LEN + 1);
}

static const char *nearest_of(const char *name, const char *const *candidates)
{
    struct nearest n;
    nearest_init(&n, name, strlen(name));
    for (const char *const *c = candidates; *c; c++)
        nearest_offer(&n, *c);
    return n.best;
}

static void test_nearest(void **state)
{
    (void)state;
    const char *served[] = {"digits", "kjv", "langid", "simple", "spoken_digits", "strings", NULL};
    assert_string_equal(nearest_of("simpel", served), "simple");
    assert_string_equal(nearest_of("digit", served), "digits");
    assert_string_equal(nearest_of("string", served), "strings");
    assert_string_equal(nearest_of("kvj", served), "kjv");
    assert_null(nearest_of("resnet50", served)); /* nothing near */
    assert_null(nearest_of("xy", served));       /* too short to be near anything */
    assert_null(nearest_of("simple", served) ? "exact is not a suggestion" : NULL);
    /* Equally near: the first one offered wins. */
    const char *twins[] = {"abcd1", "abcd2", NULL};
    assert_string_equal(nearest_of("abcd3", twins), "abcd1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_nearest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
