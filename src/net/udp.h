/*
 * udp: a non-blocking UDP socket for a datagram server (QUIC), with the
 * local address of every received datagram (IP_PKTINFO / IPV6_PKTINFO), so
 * that a server bound to a wildcard address answers from the address the
 * client wrote to.
 *
 * Addresses are struct udp_addr (a sockaddr_storage and its length). All
 * functions run on the socket's owning thread.
 */
#ifndef INFERD_NET_UDP_H
#define INFERD_NET_UDP_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct udp_addr {
    struct sockaddr_storage ss;
    socklen_t len;
};

/* Binds a UDP socket to host:port (the first address of host that binds).
 * *out_port is the actual port. Returns the fd or -errno (logged). */
int udp_bind(const char *host, int port, int *out_port);
/* Reads one datagram. Returns its length (datagrams longer than cap are
 * cut: the caller drops them), 0 when none is waiting, or -errno. remote
 * and local are filled (local: the socket's address with the destination
 * IP of the datagram). */
ssize_t udp_recv(int fd, void *buf, size_t cap, struct udp_addr *remote, struct udp_addr *local);
/* Sends one datagram to remote from local's IP (NULL: the kernel picks).
 * Returns 0, -EAGAIN when the socket buffer is full, or
 * another -errno. */
int udp_send(int fd, const void *buf, size_t len, const struct udp_addr *remote,
             const struct udp_addr *local);
/* "ip:port" ("[ip6]:port") of a into out, NUL-terminated; returns its
 * length (0 if it cannot be formatted). */
size_t udp_addr_format(const struct udp_addr *a, char *out, size_t cap);

#endif
