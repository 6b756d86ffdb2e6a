/*
 * sock: the TCP and UDP socket set-up shared by the servers and the
 * clients: a bound (and, for TCP, listening) socket on host:port, and an
 * outgoing TCP connection with a bounded wait.
 *
 * Every socket is non-blocking and close-on-exec. Names resolve with
 * getaddrinfo (numeric ports); the first address of host that works is
 * used. Thread: any; blocking only inside sock_connect()'s wait.
 */
#ifndef INFERD_NET_SOCK_H
#define INFERD_NET_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

/* Binds a socket of type SOCK_STREAM (then also listening, backlog 1024)
 * or SOCK_DGRAM to host:port. setup, when given, sets options on each
 * socket tried, before its bind (family: its address family). *out_port
 * is the actual port. Returns the fd, or -errno after logging why
 * ("cannot resolve [UDP ]listen address", "cannot listen on" or "cannot
 * bind UDP"). */
int sock_bind(const char *host, int port, int type, void (*setup)(int fd, int family, void *arg),
              void *arg, int *out_port);

/* Connects a TCP socket to host:port, with TCP_NODELAY. While a connect
 * is in progress, wait(fd, arg) waits until fd is writable: 0 then, any
 * other value to give up that address. Returns the connected fd, or -1
 * when no address of host could be reached. */
int sock_connect(const char *host, int port, int (*wait)(int fd, void *arg), void *arg);

/* Writes the address "ip:port" ("[ip6]:port" for IPv6), numeric, into
 * out (NUL-terminated). Returns its length, 0 when it cannot be formatted
 * or does not fit cap (out is then ""). */
size_t sock_addr_format(const struct sockaddr *sa, socklen_t len, char *out, size_t cap);

/* sock_addr_format() of the peer of the connected socket fd. */
size_t sock_peer_format(int fd, char *out, size_t cap);

#endif
