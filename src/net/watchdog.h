/*
 * watchdog: the service manager's watchdog (WatchdogSec=, sdnotify.h)
 * fed only while the event loops are alive.
 *
 * A thread of its own wakes every WATCHDOG_USEC/2. Each time, it checks
 * that every loop ran the heartbeat task posted to it at the previous
 * wake-up; if all did, it sends WATCHDOG=1, and posts a new heartbeat to
 * each loop. A loop that has not run its heartbeat (blocked in a callback,
 * spinning, deadlocked) gets no new one (a task is never posted twice) and
 * the ping is skipped, so the manager restarts a process whose I/O stopped
 * after WatchdogSec, while a merely slow tick costs nothing. A stuck loop
 * is logged once per episode; its recovery too.
 *
 * Once the drain starts (watchdog_draining()), loops stop one by one as
 * their requests finish: a stopped loop is not a stuck one, so from then on
 * the pings go on without the check, and the drain's own deadline
 * (--exit-timeout-secs, enforced by the main thread) bounds the rest.
 *
 * Lifecycle: watchdog_start() once the loops run and READY=1 was sent;
 * watchdog_stop() (joins the thread, frees the heartbeats) once every
 * loop_run() has returned: a heartbeat still queued on a stopped loop is
 * never run, while one queued on a running loop would outlive the free. Without a watchdog interval
 * (sdnotify's watchdog_usec 0) watchdog_start() starts nothing and
 * returns NULL with 0.
 *
 * Thread: start and stop from one thread (the main thread); the heartbeat
 * task runs on each loop's thread and only stores an atomic.
 */
#ifndef INFERD_NET_WATCHDOG_H
#define INFERD_NET_WATCHDOG_H

#include "net/loop.h"
#include "net/sdnotify.h"

/* At most this many loops are watched. */
#define WATCHDOG_MAX_LOOPS 256

struct watchdog;

/* loops[0..nloops): the loops to watch (nloops <= WATCHDOG_MAX_LOOPS).
 * Returns 0 with *out (NULL when n has no watchdog interval), or -errno. */
int watchdog_start(struct sdnotify *n, struct loop *const *loops, int nloops,
                   struct watchdog **out);
/* The drain started: ping without checking the loops. NULL is a no-op. */
void watchdog_draining(struct watchdog *w);
/* Stops and joins the thread and frees w; NULL is a no-op. Only once
 * every watched loop_run() has returned (see Lifecycle). */
void watchdog_stop(struct watchdog *w);

#endif
