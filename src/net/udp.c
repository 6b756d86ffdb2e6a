#include "net/udp.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/log.h"
#include "net/sock.h"

/* Socket buffers: a burst of full-size QUIC packets from many streams
 * should not be dropped by the kernel before the loop reads it. */
#define UDP_BUFFER_BYTES (4 * 1024 * 1024)

static void udp_options(int fd, int family, void *arg)
{
    (void)arg;
    int one = 1, size = UDP_BUFFER_BYTES;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    if (family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
    else
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one);
}

int udp_bind(const char *host, int port, int *out_port)
{
    return sock_bind(host, port, SOCK_DGRAM, udp_options, NULL, out_port);
}

ssize_t udp_recv(int fd, void *buf, size_t cap, struct udp_addr *remote, struct udp_addr *local)
{
    union {
        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr msg = {.msg_name = &remote->ss,
                         .msg_namelen = sizeof remote->ss,
                         .msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof ctl.buf};
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    remote->len = msg.msg_namelen;
    local->len = sizeof local->ss;
    if (getsockname(fd, (struct sockaddr *)&local->ss, &local->len) != 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
            local->ss.ss_family == AF_INET) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            ((struct sockaddr_in *)&local->ss)->sin_addr = pi.ipi_addr;
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
                   local->ss.ss_family == AF_INET6) {
            struct in6_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            ((struct sockaddr_in6 *)&local->ss)->sin6_addr = pi.ipi6_addr;
        }
    }
    if (msg.msg_flags & MSG_TRUNC)
        return (ssize_t)cap + 1;
    return n;
}

int udp_send(int fd, const void *buf, size_t len, const struct udp_addr *remote,
             const struct udp_addr *local)
{
    union {
        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg = {.msg_name = (void *)&remote->ss,
                         .msg_namelen = remote->len,
                         .msg_iov = &iov,
                         .msg_iovlen = 1};
    if (local && local->ss.ss_family == AF_INET && remote->ss.ss_family == AF_INET) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
        struct in_pktinfo pi = {.ipi_spec_dst = ((const struct sockaddr_in *)&local->ss)->sin_addr};
        memcpy(CMSG_DATA(c), &pi, sizeof pi);
    } else if (local && local->ss.ss_family == AF_INET6 && remote->ss.ss_family == AF_INET6) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
        struct in6_pktinfo pi = {.ipi6_addr = ((const struct sockaddr_in6 *)&local->ss)->sin6_addr};
        memcpy(CMSG_DATA(c), &pi, sizeof pi);
    }
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return 0;
}

size_t udp_addr_format(const struct udp_addr *a, char *out, size_t cap)
{
    return sock_addr_format((const struct sockaddr *)&a->ss, a->len, out, cap);
}
