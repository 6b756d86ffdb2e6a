/* sdnotify: see sdnotify.h. */
#include "net/sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/numparse.h"
#include "base/status.h"

/* WATCHDOG_USEC: a decimal count of microseconds, > 0; honoured only when
 * WATCHDOG_PID is unset or names this process (as sd_watchdog_enabled()). */
static int read_watchdog(struct sdnotify *n, struct error *err)
{
    const char *usec = getenv("WATCHDOG_USEC");
    if (!usec || !*usec)
        return 0;
    const char *end = usec + strlen(usec), *next;
    uint64_t v;
    if (numparse_u64(usec, end, 0, &v, &next) != 0 || next != end || v == 0)
        return error_set(err, 400, "WATCHDOG_USEC: expected a positive number, got '%.32s'", usec);
    const char *pid = getenv("WATCHDOG_PID");
    if (pid && *pid) {
        const char *pend = pid + strlen(pid);
        uint64_t p;
        if (numparse_u64(pid, pend, 0, &p, &next) != 0 || next != pend)
            return error_set(err, 400, "WATCHDOG_PID: expected a process id, got '%.32s'", pid);
        if (p != (uint64_t)getpid())
            return 0; /* meant for another process (our parent's) */
    }
    n->watchdog_usec = v;
    return 0;
}

int sdnotify_open(struct sdnotify *n, struct error *err)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    atomic_init(&n->send_failed_logged, false);
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    size_t len = strlen(path);
    if (path[0] != '/' && path[0] != '@')
        return error_set(err, 400, "NOTIFY_SOCKET: expected an absolute path or @name, got '%.64s'",
                         path);
    if (len >= sizeof n->addr.sun_path)
        return error_set(err, 400, "NOTIFY_SOCKET: longer than %zu bytes",
                         sizeof n->addr.sun_path - 1);
    if (read_watchdog(n, err) != 0)
        return ST_ERROR;
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@') {
        /* Abstract namespace: a leading NUL, and the length counts exactly
         * the name's bytes (no terminating NUL). */
        n->addr.sun_path[0] = '\0';
        n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    } else {
        n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    }
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0)
        return error_set(err, 500, "NOTIFY_SOCKET: cannot create a socket: %s", strerror(errno));
    return 0;
}

void sdnotify_close(struct sdnotify *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

static int send_text(struct sdnotify *n, const char *text, size_t len)
{
    if (n->fd < 0)
        return -ENOTCONN;
    ssize_t w = sendto(n->fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL,
                       (const struct sockaddr *)&n->addr, n->addr_len);
    if (w == (ssize_t)len)
        return 0;
    int e = w < 0 ? errno : EMSGSIZE;
    if (!atomic_exchange(&n->send_failed_logged, true))
        log_warn("service manager notification not sent (NOTIFY_SOCKET): %s; further failures "
                 "are not logged",
                 strerror(e));
    return -e;
}

int sdnotify_send(struct sdnotify *n, const char *fmt, ...)
{
    if (n->fd < 0)
        return -ENOTCONN;
    char text[SDNOTIFY_MAX_MESSAGE];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (len < 0)
        return -EINVAL;
    if ((size_t)len >= sizeof text)
        len = (int)sizeof text - 1; /* STATUS= is the last line: cut there */
    return send_text(n, text, (size_t)len);
}

int sdnotify_reloading(struct sdnotify *n)
{
    return sdnotify_send(n, "RELOADING=1\nMONOTONIC_USEC=%llu",
                         (unsigned long long)(clock_now_ns() / 1000u));
}
