/*
 * section_test: the harness of the unit tests of a policy section parser
 * (X_config_parse, the contract of src/policy/<module>.h) without a server.
 * Include after <cmocka.h>.
 *
 *   arena           the arena of the parsed trees: arena_init() it before
 *                   the first tree() and arena_free() it at the end
 *   tree(text)      JSON text (valid YAML) as the section's value tree
 *   SECTION_TEST_PARSE_FAILS(X)
 *                   defines parse_fails(text, message): X_config_parse()
 *                   of tree(text) refuses with status 400 and exactly
 *                   message, and leaves no config
 */
#ifndef INFERD_TESTS_SECTION_TEST_H
#define INFERD_TESTS_SECTION_TEST_H

#include <string.h>

#include "base/arena.h"
#include "base/error.h"
#include "base/json.h"

static struct arena arena;

static inline const struct json_value *tree(const char *text)
{
    struct json_value *v = NULL;
    if (json_parse(&arena, text, strlen(text), NULL, &v, NULL, NULL) != 0)
        fail_msg("bad JSON in the test: %s", text);
    return v;
}

#define SECTION_TEST_PARSE_FAILS(X)                                                                \
    static void parse_fails(const char *text, const char *message)                                 \
    {                                                                                              \
        struct X##_config *c = (struct X##_config *)1;                                             \
        struct error err;                                                                          \
        error_clear(&err);                                                                         \
        assert_int_equal(X##_config_parse(tree(text), &c, &err), -1);                              \
        assert_null(c);                                                                            \
        assert_int_equal(err.status, 400);                                                         \
        if (strcmp(err.msg, message) != 0)                                                         \
            fail_msg("error '%s', expected '%s'", err.msg, message);                               \
    }

#endif
