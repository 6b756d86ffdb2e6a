#include "net/loop.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/clock.h"

#define LOOP_MAX_EVENTS 128
#define LOOP_TICK_MS 1000

static _Thread_local struct loop *current;

struct loop *loop_current(void)
{
    return current;
}

int loop_init(struct loop *l)
{
    l->stop = false;
    atomic_init(&l->posted, NULL);
    l->deferred = NULL;
    l->on_tick = NULL;
    l->tick_arg = NULL;
    l->last_tick_ms = clock_now_ms();
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0)
        return -errno;
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->wakefd < 0) {
        int rc = -errno;
        close(l->epfd);
        return rc;
    }
    /* The wake fd is recognised by its data pointer being NULL. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0) {
        int rc = -errno;
        loop_close(l);
        return rc;
    }
    return 0;
}

void loop_close(struct loop *l)
{
    if (l->wakefd >= 0)
        close(l->wakefd);
    if (l->epfd >= 0)
        close(l->epfd);
    l->wakefd = l->epfd = -1;
}

int loop_add(struct loop *l, struct loop_watch *w, uint32_t events)
{
    struct epoll_event ev = {.events = events | EPOLLET, .data.ptr = w};
    w->_deferred = false;
    w->_next_deferred = NULL;
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) == 0 ? 0 : -errno;
}

void loop_del(struct loop *l, struct loop_watch *w)
{
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    if (!w->_deferred)
        return;
    for (struct loop_watch **pp = &l->deferred; *pp; pp = &(*pp)->_next_deferred) {
        if (*pp == w) {
            *pp = w->_next_deferred;
            break;
        }
    }
    w->_deferred = false;
}

void loop_defer_at(struct loop *l, struct loop_watch *w, uint64_t due_ns)
{
    if (w->_deferred) {
        if (due_ns < w->_due_ns)
            w->_due_ns = due_ns;
        return;
    }
    w->_deferred = true;
    w->_due_ns = due_ns;
    w->_next_deferred = l->deferred;
    l->deferred = w;
}

void loop_defer(struct loop *l, struct loop_watch *w)
{
    loop_defer_at(l, w, 0);
}

void loop_post(struct loop *l, struct loop_task *t)
{
    struct loop_task *old = atomic_load_explicit(&l->posted, memory_order_relaxed);
    do {
        t->_next = old;
    } while (!atomic_compare_exchange_weak_explicit(&l->posted, &old, t, memory_order_release,
                                                    memory_order_relaxed));
    /* Only the push onto an empty stack wakes the loop: the loop reads the
     * eventfd before it takes the stack, so a push that finds the stack
     * non-empty is always seen by a take that has not happened yet. */
    if (old == NULL) {
        uint64_t one = 1;
        ssize_t ignored = write(l->wakefd, &one, sizeof one);
        (void)ignored;
    }
}

static void drain_posted(struct loop *l)
{
    uint64_t count;
    ssize_t ignored = read(l->wakefd, &count, sizeof count);
    (void)ignored;
    struct loop_task *t = atomic_exchange_explicit(&l->posted, NULL, memory_order_acquire);
    /* Reverse into posting order. */
    struct loop_task *ordered = NULL;
    while (t) {
        struct loop_task *next = t->_next;
        t->_next = ordered;
        ordered = t;
        t = next;
    }
    while (ordered) {
        struct loop_task *next = ordered->_next;
        ordered->run(ordered);
        ordered = next;
    }
}

static void run_deferred(struct loop *l)
{
    /* Take the due watchers first: callbacks may defer again for the next
     * round. The others stay on the list. */
    uint64_t now = 0;
    struct loop_watch *due = NULL, **keep = &l->deferred;
    for (struct loop_watch *w = l->deferred, *next; w; w = next) {
        next = w->_next_deferred;
        if (w->_due_ns && !now)
            now = clock_now_ns();
        if (w->_due_ns && w->_due_ns > now) {
            *keep = w;
            keep = &w->_next_deferred;
            continue;
        }
        w->_next_deferred = due;
        due = w;
    }
    *keep = NULL;
    while (due) {
        struct loop_watch *next = due->_next_deferred;
        due->_deferred = false;
        due->_next_deferred = NULL;
        due->on_events(due, 0);
        due = next;
    }
}

/* How long epoll may wait: until the first deferred watcher is due, at
 * most a tick. */
static struct timespec wait_time(const struct loop *l)
{
    uint64_t wait_ns = (uint64_t)LOOP_TICK_MS * 1000000u;
    uint64_t now = 0;
    for (const struct loop_watch *w = l->deferred; w; w = w->_next_deferred) {
        if (!w->_due_ns)
            return (struct timespec){0, 0};
        if (!now)
            now = clock_now_ns();
        uint64_t left = w->_due_ns > now ? w->_due_ns - now : 0;
        if (left < wait_ns)
            wait_ns = left;
    }
    return (struct timespec){.tv_sec = (time_t)(wait_ns / 1000000000u),
                             .tv_nsec = (long)(wait_ns % 1000000000u)};
}

/* epoll_pwait2 (Linux 5.11) waits to the nanosecond, which deferred
 * watchers due in microseconds need; where the kernel (or a tool such as
 * valgrind) lacks it, epoll_wait with the timeout rounded up to a
 * millisecond. */
static int wait_events(int epfd, struct epoll_event *events, const struct timespec *timeout)
{
    static atomic_bool no_pwait2;
    if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        int n = epoll_pwait2(epfd, events, LOOP_MAX_EVENTS, timeout, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
    }
    long ms = (long)timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000;
    return epoll_wait(epfd, events, LOOP_MAX_EVENTS, (int)ms);
}

int loop_run(struct loop *l)
{
    struct epoll_event events[LOOP_MAX_EVENTS];
    current = l;
    while (!l->stop) {
        struct timespec timeout = wait_time(l);
        int n = wait_events(l->epfd, events, &timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int rc = -errno;
            current = NULL;
            return rc;
        }
        for (int i = 0; i < n; i++) {
            struct loop_watch *w = events[i].data.ptr;
            if (!w)
                drain_posted(l);
            else
                w->on_events(w, events[i].events);
        }
        run_deferred(l);
        uint64_t now = clock_now_ms();
        if (l->on_tick && now - l->last_tick_ms >= LOOP_TICK_MS) {
            l->last_tick_ms = now;
            l->on_tick(l, l->tick_arg);
        }
    }
    current = NULL;
    return 0;
}

void loop_stop(struct loop *l)
{
    l->stop = true;
}
