/*
 * Unit tests of net/sock.h: a listening TCP socket on an ephemeral port
 * and a connection to it (the wait callback is used and can give up), a
 * bound UDP socket with its options hook, and the failures (a port
 * nothing listens on, a name that does not resolve, a port in use).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/sock.h"

static int wait_writable(int fd, void *arg)
{
    int *calls = arg;
    ++*calls;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    return poll(&p, 1, 2000) == 1 ? 0 : -1;
}

static int give_up(int fd, void *arg)
{
    (void)fd;
    (void)arg;
    return -1;
}

static void count_setup(int fd, int family, void *arg)
{
    (void)family;
    int type = 0;
    socklen_t len = sizeof type;
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len), 0);
    assert_int_equal(type, SOCK_DGRAM);
    ++*(int *)arg;
}

static void test_tcp_listen_and_connect(void **state)
{
    (void)state;
    int port = 0;
    int lfd = sock_bind("127.0.0.1", 0, SOCK_STREAM, NULL, NULL, &port);
    assert_true(lfd >= 0);
    assert_true(port > 0);
    assert_true(fcntl(lfd, F_GETFL) & O_NONBLOCK);
    int calls = 0;
    int fd = sock_connect("127.0.0.1", port, wait_writable, &calls);
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 2000), 1);
    int afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    close(afd);
    close(fd);
    /* The same port again: in use. */
    int other = 0;
    assert_true(sock_bind("127.0.0.1", port, SOCK_STREAM, NULL, NULL, &other) < 0);
    close(lfd);
    /* Nothing listens there now: refused (at once or after the wait). */
    assert_int_equal(sock_connect("127.0.0.1", port, wait_writable, &calls), -1);
}

static void test_udp_and_failures(void **state)
{
    (void)state;
    int port = 0, setups = 0;
    int fd = sock_bind("127.0.0.1", 0, SOCK_DGRAM, count_setup, &setups, &port);
    assert_true(fd >= 0);
    assert_true(port > 0);
    assert_int_equal(setups, 1);
    close(fd);
    assert_true(sock_bind("no-such-host.invalid", 0, SOCK_STREAM, NULL, NULL, &port) < 0);
    assert_int_equal(sock_connect("no-such-host.invalid", 80, wait_writable, &setups), -1);
    /* A connect still in progress is abandoned when the wait gives up
     * (an address that does not answer: TEST-NET-1). */
    int fd2 = sock_connect("192.0.2.1", 9, give_up, NULL);
    assert_int_equal(fd2, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_listen_and_connect),
        cmocka_unit_test(test_udp_and_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
