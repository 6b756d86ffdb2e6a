/*
 * drain: the end of a server's drain, shared by the TCP (http/tcp_conn.c)
 * and QUIC (http/h3_server.c) servers: once the server drains and its
 * last connection has gone, its on_drained callback runs, once.
 */
#ifndef INFERD_NET_DRAIN_H
#define INFERD_NET_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Calls *on_drained(arg) and clears it when draining and nconns is 0. */
static inline void drain_notify_if_done(bool draining, uint32_t nconns,
                                        void (**on_drained)(void *arg), void *arg)
{
    if (draining && nconns == 0 && *on_drained) {
        void (*cb)(void *) = *on_drained;
        *on_drained = NULL;
        cb(arg);
    }
}

#endif
