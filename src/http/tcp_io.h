/*
 * tcp_io: bytes in and out of one accepted TCP connection, plaintext
 * (read, sendmsg) or through its TLS session (tls.h). What the bytes mean
 * is tcp_conn.c's business; this file only moves them.
 *
 * Threads: the connection's loop thread. Never blocks: the socket is
 * non-blocking and TLS reports "would block" as ST_AGAIN.
 */
#ifndef INFERD_HTTP_TCP_IO_H
#define INFERD_HTTP_TCP_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"
#include "net/tls.h"

/* Reads up to len bytes from fd, or through tls when not NULL. Returns
 * the count (> 0), ST_AGAIN when nothing is waiting, ST_ERROR on end of
 * stream or error. *emptied is set true when a plaintext read came back
 * short: the socket is empty now, and with edge-triggered events the next
 * bytes raise a new event (a TLS session may hold decrypted bytes, so a
 * short TLS read proves nothing and leaves it false). */
ssize_t tcp_io_recv(int fd, struct tls_conn *tls, void *p, size_t len, bool *emptied);

/* Sends head then body from byte *off of the two (as one stream),
 * advancing *off by what was sent. Returns ST_OK when everything is sent,
 * ST_AGAIN when the socket is full (wait for EPOLLOUT), ST_ERROR when the
 * connection failed. */
int tcp_io_send(int fd, struct tls_conn *tls, const struct buf *head, const struct buf *body,
                size_t *off);

#endif
