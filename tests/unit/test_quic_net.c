/*
 * The network pieces of HTTP/3 (net/quic_tls.h, net/udp.h): the GnuTLS
 * credential store loads, refuses what QUIC cannot do, keeps its
 * certificate when a reload fails and hands out sessions across a reload;
 * the UDP socket reports each datagram's peer and local address.
 *
 * The certificate and key below are a throwaway self-signed P-256 pair
 * made for this test (CN inferd-unit, valid for 100 years); they protect
 * nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "net/quic_tls.h"
#include "net/udp.h"

static const char cert_pem[] = "-----BEGIN CERTIFICATE-----\n"
                               "MIIBkzCCATqgAwIBAgIUWXeyf+KJd/QMt30qAIvKxYXASjgwCgYIKoZIzj0EAwIw\n"
                               "FjEUMBIGA1UEAwwLaW5mZXJkLXVuaXQwIBcNMjYxMjAyMDUwNjU1WhgPMjEyNjEx\n"
                               "MDgwNTA2NTVaMBYxFDASBgNVBAMMC2luZmVyZC11bml0MFkwEwYHKoZIzj0CAQYI\n"
                               "KoZIzj0DAQcDQgAEElPIfr13RJ5M/SNSPcHX3qQfV58yoq+8VusHkIaT4En+qjv8\n"
                               "wdxJNVXWSY7PkYjuaXSnp3YCAJzcf4IRb1n0HaNkMGIwHQYDVR0OBBYEFJzmgVwc\n"
                               "dj+SWmuOfWPoZ7cqppjRMB8GA1UdIwQYMBaAFJzmgVwcdj+SWmuOfWPoZ7cqppjR\n"
                               "MA8GA1UdEwEB/wQFMAMBAf8wDwYDVR0RBAgwBocEfwAAATAKBggqhkjOPQQDAgNH\n"
                               "ADBEAiBa8r0UBhae1oRPnht8u0hNciENxQGCwEnN1yefFWWK8wIgRhwdtuGTCzjc\n"
                               "KsikpPcr6O5hLYInvaQyoDHkkzOtDdk=\n"
                               "-----END CERTIFICATE-----\n";

static const char key_pem[] = "-----BEGIN PRIVATE KEY-----\n"
                              "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgKjP7t6vvKMvzopvZ\n"
                              "b8Qpv2JJUcarI/IAthQixs9UHpChRANCAAQSU8h+vXdEnkz9I1I9wdfepB9XnzKi\n"
                              "r7xW6weQhpPgSf6qO/zB3Ek1VdZJjs+RiO5pdKendgIAnNx/ghFvWfQd\n"
                              "-----END PRIVATE KEY-----\n";

struct files {
    char dir[64];
    char cert[96], key[96], other[96];
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    struct files *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/inferd-quic-tls-XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    snprintf(f->cert, sizeof f->cert, "%s/cert.pem", f->dir);
    snprintf(f->key, sizeof f->key, "%s/key.pem", f->dir);
    snprintf(f->other, sizeof f->other, "%s/other.pem", f->dir);
    write_file(f->cert, cert_pem);
    write_file(f->key, key_pem);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct files *f = *state;
    unlink(f->cert);
    unlink(f->key);
    unlink(f->other);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void test_store_loads_and_makes_sessions(void **state)
{
    struct files *f = *state;
    struct tls_options o = {.cert_file = f->cert, .key_file = f->key};
    for (int zero_rtt = 0; zero_rtt <= 1; zero_rtt++) {
        struct quic_tls_store *s = NULL;
        struct error err;
        error_clear(&err);
        assert_int_equal(quic_tls_store_new(&o, zero_rtt, &s, &err), 0);
        struct quic_tls_session ts = {0};
        int user;
        assert_int_equal(quic_tls_session_init(s, &ts, &user), 0);
        assert_non_null(ts.gnutls);
        assert_false(quic_tls_session_early_accepted(&ts));
        quic_tls_session_free(&ts);
        assert_null(ts.gnutls);
        quic_tls_session_free(&ts); /* twice: nothing left to free */
        quic_tls_store_free(s);
    }
}

static void test_store_refuses(void **state)
{
    struct files *f = *state;
    struct quic_tls_store *s = NULL;
    struct error err;
    error_clear(&err);
    struct tls_options mtls = {.cert_file = f->cert, .key_file = f->key, .client_ca_file = f->cert};
    assert_int_equal(quic_tls_store_new(&mtls, false, &s, &err), -1);
    assert_non_null(strstr(err.msg, "client certificates"));
    assert_null(s);

    error_clear(&err);
    struct tls_options missing = {.cert_file = f->cert, .key_file = "/nonexistent/key.pem"};
    assert_int_equal(quic_tls_store_new(&missing, false, &s, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/key.pem"));

    error_clear(&err);
    write_file(f->other, "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n");
    struct tls_options bad = {.cert_file = f->cert, .key_file = f->other};
    assert_int_equal(quic_tls_store_new(&bad, false, &s, &err), -1);
    assert_non_null(strstr(err.msg, "cannot load certificate"));
}

static void test_reload_failure_keeps_the_certificate(void **state)
{
    struct files *f = *state;
    struct tls_options o = {.cert_file = f->cert, .key_file = f->key};
    struct quic_tls_store *s = NULL;
    struct error err;
    error_clear(&err);
    assert_int_equal(quic_tls_store_new(&o, false, &s, &err), 0);
    /* A session made before the reload keeps its credentials. */
    struct quic_tls_session before = {0};
    int user;
    assert_int_equal(quic_tls_session_init(s, &before, &user), 0);
    assert_int_equal(quic_tls_store_reload(s, &err), 0);
    /* A broken key: the reload fails, new sessions still get the old pair. */
    write_file(f->key, "garbage\n");
    assert_int_equal(quic_tls_store_reload(s, &err), -1);
    assert_non_null(strstr(err.msg, f->key));
    struct quic_tls_session after = {0};
    assert_int_equal(quic_tls_session_init(s, &after, &user), 0);
    quic_tls_session_free(&after);
    quic_tls_session_free(&before);
    quic_tls_store_free(s);
    write_file(f->key, key_pem);
}

static void test_udp_addresses(void **state)
{
    (void)state;
    int port = 0;
    int fd = udp_bind("127.0.0.1", 0, &port);
    assert_true(fd >= 0);
    assert_true(port > 0);
    int out = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(out >= 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    assert_int_equal(sendto(out, "hello", 5, 0, (struct sockaddr *)&to, sizeof to), 5);
    char buf[16];
    struct udp_addr remote, local;
    ssize_t n = 0;
    for (int i = 0; i < 100 && n == 0; i++) {
        n = udp_recv(fd, buf, sizeof buf, &remote, &local);
        if (n == 0)
            usleep(1000);
    }
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "hello", 5);
    char text[64];
    assert_true(udp_addr_format(&local, text, sizeof text) > 0);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    assert_string_equal(text, want);
    assert_true(udp_addr_format(&remote, text, sizeof text) > 0);
    assert_int_equal(strncmp(text, "127.0.0.1:", 10), 0);
    /* The answer goes back from the local address to the sender. */
    assert_int_equal(udp_send(fd, "world", 5, &remote, &local), 0);
    assert_int_equal(recv(out, buf, sizeof buf, 0), 5);
    assert_memory_equal(buf, "world", 5);
    /* A datagram longer than the buffer is reported as too long. */
    assert_int_equal(sendto(out, "0123456789abcdefXYZ", 19, 0, (struct sockaddr *)&to, sizeof to),
                     19);
    n = 0;
    for (int i = 0; i < 100 && n == 0; i++) {
        n = udp_recv(fd, buf, sizeof buf, &remote, &local);
        if (n == 0)
            usleep(1000);
    }
    assert_true(n > (ssize_t)sizeof buf);
    assert_int_equal(udp_recv(fd, buf, sizeof buf, &remote, &local), 0);
    assert_int_equal(udp_addr_format(&remote, text, 4), 0);
    close(out);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_loads_and_makes_sessions),
        cmocka_unit_test(test_store_refuses),
        cmocka_unit_test(test_reload_failure_keeps_the_certificate),
        cmocka_unit_test(test_udp_addresses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
