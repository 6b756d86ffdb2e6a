/*
 * sdnotify: the service manager's notification protocol (systemd's
 * sd_notify(3), Type=notify), without libsystemd.
 *
 * When the manager starts a service with Type=notify it sets NOTIFY_SOCKET
 * to the path of a unix datagram socket ("/run/systemd/notify", or
 * "@name" for the abstract namespace) and, with WatchdogSec=, sets
 * WATCHDOG_USEC (and WATCHDOG_PID, the process it is meant for). Each state
 * change is one datagram of newline-separated KEY=VALUE lines:
 *
 *   READY=1        startup finished, the ports accept (+ STATUS=, MAINPID=)
 *   RELOADING=1    a reload (SIGHUP) started (+ MONOTONIC_USEC=); READY=1
 *                  again when it is done
 *   STOPPING=1     the drain started
 *   WATCHDOG=1     still alive (net/watchdog.h decides when)
 *
 * Without NOTIFY_SOCKET every call is a no-op. A send never blocks
 * (MSG_DONTWAIT): a manager that does not read must not stall serving; a
 * failed send is logged once and dropped.
 *
 * Lifecycle: sdnotify_open() once at startup (reads the environment),
 * sdnotify_close() at exit. Thread: sdnotify_send() may be called from any
 * thread (one datagram per call, sendto on a shared fd).
 */
#ifndef INFERD_NET_SDNOTIFY_H
#define INFERD_NET_SDNOTIFY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/error.h"

/* One datagram's text, at most (the protocol has no limit; ours are short). */
#define SDNOTIFY_MAX_MESSAGE 1024

struct sdnotify {
    int fd; /* -1: notifications off */
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec; /* 0: no watchdog asked for this process */
    atomic_bool send_failed_logged;
};

/* Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID. Returns 0 (n->fd is
 * -1 when NOTIFY_SOCKET is unset or empty), or ST_ERROR with err when it is set
 * but unusable (not an absolute path nor "@name", too long, a malformed
 * WATCHDOG_USEC, no socket). */
int sdnotify_open(struct sdnotify *n, struct error *err);
void sdnotify_close(struct sdnotify *n);

static inline bool sdnotify_enabled(const struct sdnotify *n)
{
    return n->fd >= 0;
}

/* Sends one datagram: fmt's lines ("READY=1\nSTATUS=..."). Returns 0, or
 * -errno (also when notifications are off: -ENOTCONN). */
int sdnotify_send(struct sdnotify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* RELOADING=1 with MONOTONIC_USEC= (what Type=notify-reload asks for; a
 * Type=notify manager ignores the extra line). */
int sdnotify_reloading(struct sdnotify *n);

#endif
