/*
 * http_path_split (api/http_path.c): the request path as percent-decoded
 * segments. Its search for '/' and '%' reads 8 bytes at a time, so the
 * cases put separators and escapes at every offset of a word and segments
 * at the length limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/http_path.h"

/* Splits `path` and checks the segments against `want`, a '|'-separated
 * list ("" = no segment); or expects a refusal when want is NULL. */
static void expect_split(const char *path, const char *want)
{
    static struct http_path p; /* 2 KiB: not on the stack of every case */
    bool ok = http_path_split(path, strlen(path), &p);
    if (!want) {
        if (ok)
            fail_msg("'%s': split into %d segments, expected a refusal", path, p.n);
        return;
    }
    if (!ok)
        fail_msg("'%s': refused, expected '%s'", path, want);
    char got[HTTP_PATH_MAX_SEGMENTS * (HTTP_SEGMENT_MAX + 1)] = "";
    size_t n = 0;
    for (int i = 0; i < p.n; i++) {
        if (strlen(p.seg[i].text) != p.seg[i].len)
            fail_msg("'%s': segment %d length %zu, text of %zu", path, i, p.seg[i].len,
                     strlen(p.seg[i].text));
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%s", i ? "|" : "", p.seg[i].text);
    }
    if (strcmp(got, want) != 0)
        fail_msg("'%s': '%s', expected '%s'", path, got, want);
}

static void test_everyday_paths(void **state)
{
    (void)state;
    expect_split("/v2/models/simple/infer", "v2|models|simple|infer");
    expect_split("/v2/models/simple/versions/1/infer", "v2|models|simple|versions|1|infer");
    expect_split("/", "");
    expect_split("/v2/", "v2");
    expect_split("/v2//ready", "v2||ready");
    expect_split("/a-rather-long-model-name-of-many-words/x",
                 "a-rather-long-model-name-of-many-words|x");
    expect_split("", NULL);
    expect_split("v2/models", NULL);
}

static void test_escapes_at_every_offset(void **state)
{
    (void)state;
    /* "%2F" decodes into the segment, it does not split it. */
    for (int k = 0; k < 17; k++) {
        char path[64], want[64];
        snprintf(path, sizeof path, "/%.*s%%2Fz%%41/end", k, "abcdefghijklmnopq");
        snprintf(want, sizeof want, "%.*s/zA|end", k, "abcdefghijklmnopq");
        expect_split(path, want);
        /* and a separator at offset k */
        snprintf(path, sizeof path, "/%.*s/b", k, "abcdefghijklmnopq");
        snprintf(want, sizeof want, "%.*s|b", k, "abcdefghijklmnopq");
        expect_split(path, want);
    }
    expect_split("/a%", NULL);
    expect_split("/a%4", NULL);
    expect_split("/a%4/", NULL);
    expect_split("/a%zz", NULL);
    expect_split("/%e2%82%ac", "\xe2\x82\xac");
}

static void test_limits(void **state)
{
    (void)state;
    char path[2 * HTTP_SEGMENT_MAX + 16], want[2 * HTTP_SEGMENT_MAX];
    /* The longest segment: HTTP_SEGMENT_MAX - 1 bytes, plain or escaped. */
    path[0] = '/';
    memset(path + 1, 'x', HTTP_SEGMENT_MAX - 1);
    path[HTTP_SEGMENT_MAX] = '\0';
    memset(want, 'x', HTTP_SEGMENT_MAX - 1);
    want[HTTP_SEGMENT_MAX - 1] = '\0';
    expect_split(path, want);
    strcat(path, "x");
    expect_split(path, NULL);
    path[HTTP_SEGMENT_MAX - 1] = '\0'; /* "/" and HTTP_SEGMENT_MAX - 2 bytes */
    strcat(path, "%41");
    want[HTTP_SEGMENT_MAX - 2] = 'A';
    expect_split(path, want);
    strcat(path, "%41");
    expect_split(path, NULL);
    /* At most HTTP_PATH_MAX_SEGMENTS segments. */
    expect_split("/1/2/3/4/5/6/7/8", "1|2|3|4|5|6|7|8");
    expect_split("/1/2/3/4/5/6/7/8/9", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_everyday_paths),
        cmocka_unit_test(test_escapes_at_every_offset),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
