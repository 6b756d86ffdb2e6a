/* Unit tests of the gRPC and gRPC-Web framing (api/grpc/framing.c): the
 * message reader (pieces, empty messages, refusals), the content types
 * and the trailer frame (the text form's base64: tests/unit/test_base64.c). The
 * wire behaviour is tested end to end by tests/integration/test_grpc_web.py
 * and fuzzed by tests/fuzz/fuzz_grpc_web.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/grpc/framing.h"

static enum grpc_read feed(struct grpc_reader *r, struct buf *msg, uint64_t max, const char *data,
                           size_t len, size_t *left)
{
    const uint8_t *p = (const uint8_t *)data;
    enum grpc_read rc = grpc_reader_feed(r, msg, max, &p, &len);
    *left = len;
    return rc;
}

static void test_reader_messages_in_pieces(void **state)
{
    (void)state;
    /* "ab", then an empty message, then "xyz", fed one byte at a time. */
    static const char body[] = "\0\0\0\0\2ab\0\0\0\0\0\0\0\0\0\3xyz";
    size_t n = sizeof body - 1, left;
    struct grpc_reader r = {0};
    struct buf msg;
    buf_init(&msg, 16);
    const char *want[] = {"ab", "", "xyz"};
    int got = 0;
    for (size_t i = 0; i < n; i++) {
        enum grpc_read rc = feed(&r, &msg, 16, body + i, 1, &left);
        assert_int_equal(left, 0);
        if (rc == GRPC_READ_MORE) {
            /* an empty message is complete with its prefix: fed again with nothing */
            const uint8_t *p = NULL;
            size_t zero = 0;
            if (grpc_reader_inside(&r) && r.msg_len == 0 &&
                grpc_reader_feed(&r, &msg, 16, &p, &zero) == GRPC_READ_MESSAGE)
                assert_int_equal(msg.len, strlen(want[got++]));
            continue;
        }
        assert_int_equal(rc, GRPC_READ_MESSAGE);
        assert_int_equal(msg.len, strlen(want[got]));
        assert_memory_equal(msg.data, want[got], msg.len);
        got++;
    }
    assert_int_equal(got, 3);
    assert_false(grpc_reader_inside(&r));
    buf_free(&msg);
}

static void test_reader_whole_body_and_refusals(void **state)
{
    (void)state;
    struct grpc_reader r = {0};
    struct buf msg;
    buf_init(&msg, 64);
    size_t left;
    static const char two[] = "\0\0\0\0\1a\0\0\0\0\1b";
    assert_int_equal(feed(&r, &msg, 64, two, 12, &left), GRPC_READ_MESSAGE);
    assert_int_equal(left, 6); /* the second message is left for the next call */
    assert_int_equal(feed(&r, &msg, 64, two + 6, 6, &left), GRPC_READ_MESSAGE);
    assert_memory_equal(msg.data, "b", 1);
    assert_int_equal(feed(&r, &msg, 64, "\0\0\0", 3, &left), GRPC_READ_MORE);
    assert_true(grpc_reader_inside(&r));

    struct grpc_reader z = {0};
    assert_int_equal(feed(&z, &msg, 64, "\1\0\0\0\1a", 6, &left), GRPC_READ_COMPRESSED);
    struct grpc_reader f = {0};
    assert_int_equal(feed(&f, &msg, 64, "\x80\0\0\0\1a", 6, &left), GRPC_READ_BAD_FLAGS);
    struct grpc_reader big = {0};
    assert_int_equal(feed(&big, &msg, 64, "\0\0\0\0\101", 5, &left), GRPC_READ_TOO_LARGE);
    assert_int_equal(big.msg_len, 65);
    struct grpc_reader nomem = {0};
    struct buf small;
    buf_init(&small, 2); /* the buffer's own ceiling below the reader's limit */
    assert_int_equal(feed(&nomem, &small, 64, "\0\0\0\0\3abc", 8, &left), GRPC_READ_NO_MEMORY);
    buf_free(&small);
    buf_free(&msg);
}

static void test_content_types(void **state)
{
    (void)state;
    struct {
        const char *ct;
        enum grpc_web_encoding want;
    } cases[] = {
        {"application/grpc-web", GRPC_WEB_BINARY},
        {"application/grpc-web+proto", GRPC_WEB_BINARY},
        {"Application/GRPC-Web+Proto; charset=x", GRPC_WEB_BINARY},
        {"application/grpc-web-text", GRPC_WEB_TEXT},
        {"application/grpc-web-text+proto", GRPC_WEB_TEXT},
        {"application/grpc", GRPC_WEB_NONE},
        {"application/grpc-web+json", GRPC_WEB_NONE},
        {"application/grpc-webx", GRPC_WEB_NONE},
        {"", GRPC_WEB_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (grpc_web_content_type(cases[i].ct, strlen(cases[i].ct)) != cases[i].want)
            fail_msg("'%s'", cases[i].ct);
}

static void test_trailer_frame(void **state)
{
    (void)state;
    struct h2_header t[] = {{"grpc-status", 11, "5", 1}, {"grpc-message", 12, "not found", 9}};
    struct buf out;
    buf_init(&out, 256);
    assert_int_equal(grpc_web_trailer_frame(t, 2, &out), 0);
    static const char want[] = "\x80\0\0\0\x29"
                               "grpc-status: 5\r\ngrpc-message: not found\r\n";
    assert_int_equal(out.len, sizeof want - 1);
    assert_memory_equal(out.data, want, out.len);
    struct buf tiny;
    buf_init(&tiny, 8);
    assert_int_not_equal(grpc_web_trailer_frame(t, 2, &tiny), 0);
    assert_int_equal(tiny.len, 0); /* nothing half-written */
    buf_free(&tiny);
    buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_messages_in_pieces),
        cmocka_unit_test(test_reader_whole_body_and_refusals),
        cmocka_unit_test(test_content_types),
        cmocka_unit_test(test_trailer_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
