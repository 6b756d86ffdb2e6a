/* watchdog: see watchdog.h. */
#include "net/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/thread.h"

/* One watched loop: the heartbeat posted to it and what it answered. */
struct heartbeat {
    struct loop_task task; /* first: the task's address is the heartbeat's */
    struct loop *loop;
    atomic_uint_least64_t posted; /* sequence of the last heartbeat posted */
    atomic_uint_least64_t seen;   /* sequence the loop last ran */
    bool stuck_logged;
};

struct watchdog {
    struct sdnotify *notify;
    uint64_t interval_ns;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* under mu */
    atomic_bool draining;
    int nloops;
    struct heartbeat beats[];
};

/* On the loop's thread. */
static void heartbeat_run(struct loop_task *t)
{
    struct heartbeat *h = (struct heartbeat *)t;
    atomic_store_explicit(&h->seen, atomic_load_explicit(&h->posted, memory_order_relaxed),
                          memory_order_release);
}

/* Posts a new heartbeat to every loop that ran its last one. Returns true
 * when all had (the ping may be sent). */
static bool check_and_post(struct watchdog *w, uint64_t seq)
{
    bool alive = true;
    for (int i = 0; i < w->nloops; i++) {
        struct heartbeat *h = &w->beats[i];
        uint64_t posted = atomic_load_explicit(&h->posted, memory_order_relaxed);
        if (atomic_load_explicit(&h->seen, memory_order_acquire) != posted) {
            alive = false;
            if (!h->stuck_logged)
                log_error("watchdog: I/O thread io-%d has not run for %llu ms: service manager "
                          "watchdog not fed",
                          i, (unsigned long long)(w->interval_ns / 1000000u));
            h->stuck_logged = true;
            continue; /* still queued: never post a task twice */
        }
        if (h->stuck_logged)
            log_info("watchdog: I/O thread io-%d runs again", i);
        h->stuck_logged = false;
        atomic_store_explicit(&h->posted, seq, memory_order_relaxed);
        loop_post(h->loop, &h->task);
    }
    return alive;
}

static void *watchdog_main(void *arg)
{
    struct watchdog *w = arg;
    uint64_t seq = 1;
    check_and_post(w, seq); /* the first heartbeats; READY=1 counted as alive */
    sdnotify_send(w->notify, "WATCHDOG=1");
    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        uint64_t ns = (uint64_t)due.tv_nsec + w->interval_ns;
        due.tv_sec += (time_t)(ns / 1000000000u);
        due.tv_nsec = (long)(ns % 1000000000u);
        while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &due) != ETIMEDOUT) {
        }
        if (w->stop)
            break;
        pthread_mutex_unlock(&w->mu);
        bool alive = check_and_post(w, ++seq);
        if (alive || atomic_load(&w->draining))
            sdnotify_send(w->notify, "WATCHDOG=1");
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int watchdog_start(struct sdnotify *n, struct loop *const *loops, int nloops, struct watchdog **out)
{
    *out = NULL;
    if (!sdnotify_enabled(n) || n->watchdog_usec == 0)
        return 0;
    if (nloops < 0 || nloops > WATCHDOG_MAX_LOOPS)
        return -EINVAL;
    struct watchdog *w = mem_calloc(1, sizeof *w + (size_t)nloops * sizeof w->beats[0]);
    if (!w)
        return -ENOMEM;
    w->notify = n;
    /* Twice per interval, as sd_watchdog_enabled(3) advises; at least 1 ms. */
    w->interval_ns = n->watchdog_usec * 1000u / 2u;
    if (w->interval_ns < 1000000u)
        w->interval_ns = 1000000u;
    w->nloops = nloops;
    atomic_init(&w->draining, false);
    for (int i = 0; i < nloops; i++) {
        w->beats[i].task.run = heartbeat_run;
        w->beats[i].loop = loops[i];
        atomic_init(&w->beats[i].posted, 0);
        atomic_init(&w->beats[i].seen, 0);
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    int rc = thread_start(&w->tid, "watchdog", watchdog_main, w);
    if (rc) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        mem_free(w);
        return -rc;
    }
    *out = w;
    return 0;
}

void watchdog_draining(struct watchdog *w)
{
    if (w)
        atomic_store(&w->draining, true);
}

void watchdog_stop(struct watchdog *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->tid, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    mem_free(w);
}
